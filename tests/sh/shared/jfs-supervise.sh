#!/usr/bin/env bash
# TIMEOUT: 240
# Shared tier over JuiceFS with -o supervise: node 1's daemon is SIGKILLed
# KILLS times (default 5) under a vLLM-style load on both nodes
# (tests/sh/helpers/crash_load.py: 4 threads each, 1 MiB O_DIRECT blocks,
# tmp + rename into hash directories, earlier blocks loaded and checked;
# blocks held open on each node the whole run), while its supervisor keeps
# the mount and starts a new daemon, which joins the budget record again.
# Asserted: node 1's mount never goes away and answers within 10 s of each
# kill, no client call on either node hangs or reads wrong bytes, the held
# blocks of both nodes read back exact, and the tree's usage (the volume's
# Redis usedSpace, sampled after each kill and at the end) stays within
# max_size + the stores in flight (8 x 1 MiB) + 1 MiB: a restarted daemon
# that counted its own bytes from zero would admit up to its whole share
# again. Reported: the clean errors per errno on each node. Known: node 1
# fails a store or two with ENOSPC after a restart (the new daemon is a new
# node in the budget record, with no grant and nothing of its own to evict
# until the dead daemon's line is reclaimed; docs/design/upgrade.md §5).
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

KILLS=${KILLS:-5}
MAX=$((64 * MiB))
BOUND=$((MAX + 9 * MiB))
shared_juicefs 2
shared_tree sup
base=$(shared_used)
shared_nodes_up 2 "max_size=64M,supervise"
SUP=${SHARED_BFS[1]}
LOG1=$(ls "$BFS_TMP"/node1.*.log)
daemon_of() { cat "/proc/$SUP/task/$SUP/children" 2>/dev/null | tr -d ' '; }
has_daemon() { [ -n "$(daemon_of)" ]; }
poll_until 10 "node 1's first daemon" has_daemon
used() { echo $(($(shared_used) - base)); }

STOP=$BFS_TMP/stop
for k in 1 2; do
    $PY "$BFS_HELPERS/crash_load.py" "$BFS_TMP/mnt$k" "$STOP" "$BFS_TMP/load$k.json" --seed "node$k" \
        --held 2 --held-dir "held$k" --bound 10 >"$BFS_TMP/load$k.out" 2>&1 &
    eval "L$k=\$!"
    bfs_bg "$!"
done
stored() { compgen -G "$BACKING1/kv/*/*/*.bin" >/dev/null; }
poll_until 30 "the first stores" stored
full() { [ "$(used)" -ge $((MAX * 3 / 4)) ]; }
poll_until 60 "the loads filling three quarters of max_size" full

peak=0
for k in $(seq 1 "$KILLS"); do
    D=$(daemon_of)
    [ -n "$D" ] || fail "kill $k: no daemon under node 1's supervisor $SUP"
    kill -KILL "$D"
    timeout 10 stat "$BFS_TMP/mnt1/probe-$k" >/dev/null 2>&1
    [ $? -ne 124 ] || fail "kill $k: a stat on node 1 was not answered within 10 s"
    bfs_is_mounted "$BFS_TMP/mnt1" fuse || fail "kill $k: node 1's mount went away"
    poll_until 10 "node 1's restart $k" grep -q "(restart $k)" "$LOG1"
    u=$(used)
    [ "$u" -gt "$peak" ] && peak=$u
    assert_le "$u" "$BOUND" "kill $k: the tree's usage above max_size + stores in flight"
    sleep 1 # stores go on through the new daemon before the next kill
done

touch "$STOP"
for k in 1 2; do
    p=$(eval echo "\$L$k")
    wait "$p" || fail "node $k's load failed: $(cat "$BFS_TMP/load$k.out")"
    R=$(cat "$BFS_TMP/load$k.json")
    log "node $k load: $R"
    grep '^crash_load' "$BFS_TMP/load$k.out" | head -n 5 | while read -r l; do log "node $k: $l"; done
    assert_eq 0 "$(json_get "$R" hangs)" "node $k: client calls longer than 10 s"
    assert_eq 0 "$(json_get "$R" wrong)" "node $k: blocks read back with wrong bytes"
    assert_eq True "$(json_get "$R" held_ok)" "node $k: the blocks held open across node 1's kills"
    assert_eq 2 "$(ls "$BACKING1/held$k" | wc -l)" "node $k: held-open blocks evicted"
done
u=$(used)
[ "$u" -gt "$peak" ] && peak=$u
assert_le "$u" "$BOUND" "the tree's usage at the end above max_size + stores in flight"
log "$KILLS kills of node 1's daemon: usage peak seen $((peak / MiB)) MiB of max_size $((MAX / MiB)) MiB (bound $((BOUND / MiB)) MiB)"
node_unmount 2
node_unmount 1
bfs_done
