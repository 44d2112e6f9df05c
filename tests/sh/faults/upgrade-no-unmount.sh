#!/usr/bin/env bash
# TIMEOUT: 90
# `boundfs upgrade` is no unmount: the old daemon's threads stop as at an
# unmount, but what an unmount cleans up goes on in the next daemon.
# 1. Directories eviction emptied while the kernel still holds them. One
#    waits in the reaper's queue until the kernel forgets it; here a
#    process has it as its cwd, so the kernel does not. At an unmount the
#    queue is emptied at once (no client can reach the mount any more); a
#    hand-over used to do the same while clients were still storing: the
#    directory went from BACKING under the process in it, and under load a
#    writer's `os.makedirs` found the name cached (EEXIST) and then no
#    directory (upgrade-under-load saw one such EEXIST in a CI run).
#    Checked from outside: after the upgrade the directory is still in
#    BACKING and reads as empty through the process's cwd (a file made in
#    it would leave a dentry below it that keeps the kernel from forgetting
#    it); the queue went to the new daemon with the mount (fs/handed.rs),
#    which removes the directory once the process has left it.
# 2. The metrics file (`metrics_file`), which an unmount removes: it exists
#    at every moment of the upgrade, watched by a loop of `test -e`.
# 3. The log says ERROR only for errors: each reader of the old daemon ends
#    on a read of 0 bytes (its /dev/fuse fd was replaced by /dev/null, how a
#    hand-over stops them), which fuser logged as `ERROR fuser::request]
#    Short read of FUSE request header (0 < 40)`, once per FUSE thread, at
#    every upgrade (`systemctl reload`). After two upgrades of a 4-thread
#    mount the log (both daemons write to the same stderr) has no ERROR.
. "$(dirname "$0")/../lib.sh"

[ "$(uname -r | awk -F. '{ print ($1 > 6 || ($1 == 6 && $2 >= 9)) }')" = 1 ] || skip "Linux >= 6.9 needed (FUSE_NOTIFY_RESEND)"
PROM="$BFS_TMP/boundfs.prom"
bfs_mount "max_size=16M,metrics_file=$PROM,metrics_interval=1s,threads=4"
mkdir "$MNT/held" || fail "mkdir through the mount"
mkblock "$MNT/held/b0.bin" 2M 1
# a process whose cwd is the directory: the kernel keeps its inode
(cd "$MNT/held" && exec sleep 600) &
HOLDER=$!; bfs_bg "$HOLDER"
in_held() { [ "$(readlink "/proc/$HOLDER/cwd")" = "$MNT/held" ]; }
poll_until 5 "the holder's cwd" in_held
res=$(kv_store "$MNT/other" 24 2) || fail "writer crashed"   # 48 MiB = 3 x max_size
assert_eq 0 "$(json_get "$res" errors)" "store errors ($res)"
poll_until 10 "held/b0.bin evicted" test ! -e "$BACKING/held/b0.bin"
assert_exists "$BACKING/held" "the emptied directory the kernel holds, before the upgrade"
assert_exists "$PROM" "the metrics file before the upgrade"
( while [ ! -e "$BFS_TMP/watch.stop" ]; do [ -e "$PROM" ] || { echo missing; exit; }; done; echo present ) > "$BFS_TMP/watch.out" &
WATCH=$!; bfs_bg "$WATCH"
out=$($BOUNDFS upgrade "$MNT" 2>&1) || fail "upgrade failed: $out"
touch "$BFS_TMP/watch.stop"; wait "$WATCH"
assert_eq present "$(cat "$BFS_TMP/watch.out")" "the metrics file all through the upgrade"
log "upgrade: $out"
new=$(printf '%s' "$out" | sed -n 's/.* -> \([0-9]*\) .*/\1/p')
[ -n "$new" ] && bfs_bg "$new"
assert_exists "$BACKING/held" "the emptied directory the kernel holds, after the upgrade"
listing=$(ls -A "/proc/$HOLDER/cwd/" 2>&1) || fail "listing the directory through the holder's cwd: $listing"
assert_eq "" "$listing" "the directory's entries through the holder's cwd"
kill "$HOLDER"; wait "$HOLDER" 2>/dev/null
poll_until 15 "the new daemon removing the directory once the kernel forgot it" test ! -e "$BACKING/held"
out=$($BOUNDFS upgrade "$MNT" 2>&1) || fail "second upgrade failed: $out"
new2=$(printf '%s' "$out" | sed -n 's/.* -> \([0-9]*\) .*/\1/p')
[ -n "$new2" ] && bfs_bg "$new2"
poll_until 10 "the first new daemon's exit" bfs_process_done "$new"
errors=$(grep -c "ERROR" "$BFS_LOG")
[ "$errors" = 0 ] || fail_later "$errors ERROR lines in the log after two upgrades: $(grep ERROR "$BFS_LOG" | sort | uniq -c | head -n 3)"
BFS_DPID=""
umount "$MNT" || fail "umount"
poll_until 10 "the new daemon's exit" bfs_process_done "$new2"
assert_missing "$PROM" "the metrics file after the unmount"
bfs_done
