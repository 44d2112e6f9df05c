#!/usr/bin/env bash
# `boundfs set max_size=` lasts until the unmount (README, "Changing the budget
# live"), across the two ways a mount changes daemons without an unmount:
# 1. `boundfs upgrade`: the new daemon serves with the budget the old one
#    had (handed over, src/fs/handed.rs), not its argv's;
# 2. `-o supervise` and a SIGKILLed daemon: the supervisor's next daemon
#    reads the budget the dead one recorded in the supervisor's memfd
#    (src/fs/held.rs), not its argv's.
# Checked from outside: status shows the set budget after each, and usage
# (statfs of a tmpfs BACKING, sampled every 2 ms from the set on) never goes
# above the new max_size (+1 MiB slack, DESIGN "budget") while 60 MiB more
# are stored after the change of daemon. Before, each new daemon came up
# with argv's 64 MiB: status said 64.0 MiB and usage rose to about 60 MiB.
. "$(dirname "$0")/../lib.sh"

[ "$(uname -r | awk -F. '{ print ($1 > 6 || ($1 == 6 && $2 >= 9)) }')" = 1 ] || skip "Linux >= 6.9 needed (FUSE_NOTIFY_RESEND)"
mount -t tmpfs -o size=256M,mode=0755 boundfs-test "$BACKING" || fail "cannot mount a tmpfs as BACKING"
SET=$((40 * MiB))
BASE=$($PY "$BFS_HELPERS/du_sampler.py" "$BACKING" --statfs --once)

# set_and_sample ROUND: fills past the new budget, sets it, starts the sampler
set_and_sample() {
    res=$(kv_store "$MNT/$1-before" 28 1) || fail "$1: writer crashed"
    assert_eq 0 "$(json_get "$res" errors)" "$1: store errors before the set ($res)"
    out=$("$BOUNDFS" set "$MNT" max_size=40M) || fail "$1: boundfs set failed: $out"
    log "$1: $out"
    rm -f "$BFS_TMP/stop"
    $PY "$BFS_HELPERS/du_sampler.py" "$BACKING" "$BFS_TMP/stop" 0.002 --statfs --base "$BASE" > "$BFS_TMP/$1.peak" &
    SAMPLER=$!; bfs_bg "$SAMPLER"
}
# after_change ROUND: the budget shown, then stores under it; the peak
after_change() {
    got=$(json_get "$("$BOUNDFS" status "$MNT" --json)" max_size)
    [ "$got" = "$SET" ] || fail_later "$1: max_size in status is $got, not the $SET set"
    "$BOUNDFS" status "$MNT" | grep -q "of 40.0 MiB" || fail_later "$1: the status table does not say 40.0 MiB"
    res=$(kv_store "$MNT/$1-after" 30 2) || fail "$1: writer crashed"
    assert_eq 0 "$(json_get "$res" errors)" "$1: store errors after the change ($res)"
    touch "$BFS_TMP/stop"; wait "$SAMPLER"
    peak=$(json_get "$(cat "$BFS_TMP/$1.peak")" peak)
    log "$1: usage peak $peak bytes (statfs, every 2 ms) under max_size $SET"
    [ "$peak" -le $((SET + MiB)) ] || fail_later "$1: usage peak $peak (statfs of BACKING) over the set max_size $SET + 1 MiB"
}

# ---- 1. an upgrade
bfs_mount "max_size=64M"
set_and_sample upgrade
out=$("$BOUNDFS" upgrade "$MNT" 2>&1) || fail "upgrade failed: $out"
new=$(printf '%s' "$out" | sed -n 's/.* -> \([0-9]*\) .*/\1/p')
[ -n "$new" ] || fail "no new daemon pid in: $out"
bfs_bg "$new"
after_change upgrade
BFS_DPID=""
umount "$MNT" || fail "umount after the upgrade"
poll_until 10 "the new daemon's exit" bfs_process_done "$new"
find "$BACKING" -mindepth 1 -delete

# ---- 2. a supervised restart
bfs_mount "max_size=64M,supervise"
SUP=$BFS_DPID
daemon_of() { cat "/proc/$SUP/task/$SUP/children" 2>/dev/null | tr -d ' '; }
has_daemon() { [ -n "$(daemon_of)" ]; }
poll_until 10 "the first daemon" has_daemon
set_and_sample restart
kill -KILL "$(daemon_of)"
poll_until 20 "restart 1 in the supervisor's log" grep -q "(restart 1)" "$BFS_LOG"
after_change restart
grep -q "live budget" "$BFS_LOG" || fail_later "the new daemon does not log that it took the live budget"
bfs_unmount
umount "$BACKING" || fail "umount the tmpfs BACKING"
bfs_done
