#!/usr/bin/env bash
# The hard cap across `boundfs upgrade` with passthrough writers:
# BACKING is a tmpfs of its own (statfs is atomic there), sampled
# every 2 ms by helpers/du_sampler.py --statfs; max_size=64M,threads=4;
# helpers/thread_stores.py's 4 threads store 2 MiB blocks O_DIRECT into
# `<hash>.bin_<tid>.tmp` (kernel passthrough writers once the block size is
# learned), rename them into two-level hash directories and read each back;
# meanwhile the mount is handed to a new process 20 times (BFS_UPGRADES),
# 0.3 s apart. Asserted: usage never above max_size + 1 MiB (DESIGN.md,
# budget: "at every moment: ... an upgrade"), 0 client errors. A new
# daemon serves before its start-up index is complete: before the fix its
# CREATEs were admitted as passthrough writers against the usage indexed
# so far, and usage peaked 69-77 MiB (3110038; 62 MiB without upgrades).
. "$(dirname "$0")/../lib.sh"

N=${BFS_UPGRADES:-20}
MAX=$((64 * MiB))
[ "$(uname -r | awk -F. '{ print ($1 > 6 || ($1 == 6 && $2 >= 9)) }')" = 1 ] || skip "Linux >= 6.9 needed (FUSE_NOTIFY_RESEND)"
mount -t tmpfs -o size=512M,mode=0755 boundfs-upcap "$BACKING" || fail "cannot mount a tmpfs as BACKING"
DLOG="$BFS_TMP/daemons.log"
bfs_mount "max_size=64M,threads=4,log_file=$DLOG"
grep -q "kernel passthrough on" "$DLOG" "$BFS_LOG" 2>/dev/null || skip "this kernel offers no FUSE passthrough: $(uname -r)"
FIRST=$BFS_DPID

$PY "$BFS_HELPERS/du_sampler.py" "$BACKING" "$BFS_TMP/sampler.stop" 0.002 --statfs --seconds 0 > "$BFS_TMP/sampler.out" &
SAMPLER=$!; bfs_bg "$SAMPLER"
$PY "$BFS_HELPERS/thread_stores.py" "$MNT" "$BFS_TMP/load.stop" --threads 4 --block 2M \
    --min-bytes $((3 * MAX)) > "$BFS_TMP/load.out" &
LOAD=$!; bfs_bg "$LOAD"
writers_at_least() { [ "$(stats_json | $PY -c 'import json,sys; print(json.load(sys.stdin)["passthrough_writers"])')" -ge "$1" ]; }
poll_until 30 "the load's first passthrough writers" writers_at_least 4

for i in $(seq 1 "$N"); do
    before=$(bfs_serving_pid)
    out=$($BOUNDFS upgrade "$MNT" 2>>"$BFS_TMP/upgrade.err") || fail "upgrade $i failed: $(tail -n 3 "$BFS_TMP/upgrade.err")"
    new=$(printf '%s' "$out" | sed -n 's/.* -> \([0-9]*\) .*/\1/p')
    [ -n "$new" ] && [ "$new" != "$before" ] || fail "upgrade $i: no new pid in: $out"
    bfs_bg "$new"
    bfs_process_done "$LOAD" && fail "the load ended before upgrade $i"
    sleep 0.3   # paces the upgrades, as the issue's run did
done
log "$N upgrades done; passthrough writers of the last daemon: $(stats_field passthrough_writers)"
touch "$BFS_TMP/load.stop"
wait "$LOAD" || fail "load helper crashed"
touch "$BFS_TMP/sampler.stop"; wait "$SAMPLER"
res=$(cat "$BFS_TMP/load.out"); smp=$(cat "$BFS_TMP/sampler.out")
log "load: $res"
log "sampler (statfs every 2 ms): $smp"
[ "$(json_get "$res" violations)" = 0 ] || fail "$(json_get "$res" violations) client errors: $(json_get "$res" first_violations)"
assert_le "$(json_get "$smp" peak)" $((MAX + MiB)) "usage of BACKING (statfs, every 2 ms) across $N upgrades"

bfs_unmount_upgraded "$FIRST"
umount "$BACKING" || fail "umount tmpfs backing"
log PASS
