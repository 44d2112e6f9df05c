#!/usr/bin/env bash
# BACKING smaller than max_size: a 32 MiB tmpfs under max_size=64M.  The
# backing file system answers ENOSPC long before the budget does; stores must
# keep succeeding by evicting (no EIO, no failed store), and what is kept
# reads back correctly.
. "$(dirname "$0")/../lib.sh"

mount -t tmpfs -o size=32M,mode=0755 boundfs-small "$BACKING" || fail "cannot mount a 32 MiB tmpfs as BACKING"
bfs_mount max_size=64M
grep -q "warning: max_size 64.0 MiB is larger than the filesystem of $BACKING (32.0 MiB in all)" "$BFS_LOG" ||
    fail "no warning that max_size exceeds BACKING's filesystem: $(head -c 400 "$BFS_LOG")"
res=$(kv_store "$MNT" 48 small 2M 4 2>"$BFS_TMP/w.err") || { cat "$BFS_TMP/w.err"; fail "writer crashed: $res"; }
log "store 48 x 2 MiB (3 x the tmpfs) with 4 threads: $res; evictions $(stats_field evictions)"
[ -s "$BFS_TMP/w.err" ] && sed 's/^/    /' "$BFS_TMP/w.err" | head -5
assert_eq 0 "$(json_get "$res" errors)" "store errors (EIO, short writes)"
assert_eq 0 "$(json_get "$res" enospc)" "ENOSPC while old blocks could be evicted"
assert_eq 48 "$(json_get "$res" stored)" "blocks stored"
last=$(kv_load "$MNT" 48 small 4) || fail "loader crashed"
assert_eq 4 "$(json_get "$last" loaded)" "the newest 4 blocks load ($last)"
all=$(kv_load "$MNT" 48 small)
assert_eq 0 "$(json_get "$all" corrupt)" "corrupt blocks ($all)"
assert_eq 0 "$(json_get "$all" errors)" "load errors ($all)"
bfs_unmount
umount "$BACKING" || fail "umount tmpfs"
log PASS
