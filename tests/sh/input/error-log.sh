#!/usr/bin/env bash
# Errors with context: a failed request's log line names the FUSE operation,
# the path (relative to the mountpoint) or handle, and the errno by name and
# number; real failures are logged at warn level, once a minute per operation;
# the ordinary answers (ENOENT on LOOKUP, EEXIST on MKDIR) are not. ENOSPC
# says whether the budget or BACKING's filesystem had no room.
. "$(dirname "$0")/../lib.sh"

bfs_mount max_size=8M
mkdir -p "$MNT/kv/ab"
for i in 0 1 2; do mkblock "$MNT/kv/ab/held$i.bin" 2M; done

# every block held open: nothing is evictable, so a write past max_size fails
$BLOCKS hold --ready "$BFS_TMP/ready" --go "$BFS_TMP/go" --timeout 60 --size 2M \
    "$MNT"/kv/ab/held{0,1,2}.bin > "$BFS_TMP/hold.out" 2>&1 &
HOLD=$!; bfs_bg "$HOLD"
poll_until 10 "reader holds all three blocks open" test -e "$BFS_TMP/ready"

assert_errno ENOSPC writefile "$MNT/kv/ab/cd.bin" 4M
assert_errno ENOSPC writefile "$MNT/kv/ab/ef.bin" 4M
# ordinary answers: a missing name, an existing directory
assert_errno ENOENT stat "$MNT/kv/ab/missing.bin"
assert_errno EEXIST mkdir "$MNT/kv/ab"

line=$(grep -E 'WARN.* WRITE fh=[0-9]+ kv/ab/cd\.bin: ENOSPC \(28\) budget 8\.0 MiB has no room' "$BFS_LOG") ||
    fail "no WRITE line naming the handle, the path and ENOSPC (28)"
case "$line" in
    *' open handles pin the rest'*) ;;
    *) fail "the ENOSPC line does not say what pins the budget: $line" ;;
esac
log "logged: ${line#*] }"
# rate-limited: the second refused write within the minute is held back
assert_eq 1 "$(grep -c ' WRITE .*ENOSPC' "$BFS_LOG")" "WRITE ENOSPC lines within one minute"
! grep -q 'ENOENT\|EEXIST' "$BFS_LOG" || fail "an ordinary ENOENT or EEXIST was logged: $(grep 'ENOENT\|EEXIST' "$BFS_LOG")"

touch "$BFS_TMP/go"
bfs_wait_exit "$HOLD" 20 || fail "holder did not finish"
rm -f "$MNT/kv/ab/cd.bin" "$MNT/kv/ab/ef.bin"
bfs_unmount

# ENOSPC from BACKING's own filesystem (an 8 MiB tmpfs under max_size=64M,
# nothing evictable): the line names that filesystem, not the budget.
mount -t tmpfs -o size=8M,mode=0755 boundfs-41 "$BACKING" || fail "cannot mount an 8 MiB tmpfs as BACKING"
bfs_mount max_size=64M
assert_errno ENOSPC writefile "$MNT/engine.log" 12M
line=$(grep -E "WARN.* WRITE fh=[0-9]+ engine\.log: ENOSPC \(28\) BACKING's filesystem is full" "$BFS_LOG") ||
    fail "the ENOSPC line does not name BACKING's filesystem: $(grep ENOSPC "$BFS_LOG" | tail -n 1)"
log "logged: ${line#*] }"
rm -f "$MNT/engine.log"
bfs_unmount
umount "$BACKING" || fail "umount tmpfs"
log PASS
