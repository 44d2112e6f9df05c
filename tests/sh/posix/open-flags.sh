#!/usr/bin/env bash
# Open flags: every combination of O_RDONLY/O_WRONLY/O_RDWR with O_NOFOLLOW,
# O_NOATIME, O_APPEND, O_DIRECT, O_TRUNC, O_SYNC, O_CLOEXEC and O_NOCTTY gives
# on the mount what it gives on a plain directory of the same filesystem
# (open errno or success, F_GETFL, FD_CLOEXEC, read, write, resulting size and
# content; see helpers/open_flags.py), with kernel passthrough on and off.
# O_NOFOLLOW opens a regular file (sqlite3, tar, cp -a and git depend on it)
# and gives ELOOP on a symlink, as native.
. "$(dirname "$0")/../lib.sh"

PLAIN="$BFS_TMP/plain"
mkdir -p "$PLAIN" "$BACKING/t"
for pt in auto off; do
    bfs_mount max_size=64M,passthrough=$pt
    printf hi > "$MNT/t/n.txt"; ln -sfn n.txt "$MNT/t/s"
    assert_eq OK "$(errno_of open "$MNT/t/n.txt" nofollow)" "O_NOFOLLOW on a regular file (passthrough=$pt)"
    assert_eq ELOOP "$(errno_of open "$MNT/t/s" nofollow)" "O_NOFOLLOW on a symlink (passthrough=$pt)"
    out=$($PY "$BFS_HELPERS/open_flags.py" "$MNT/t" "$PLAIN") ||
        fail "open flags differ from a plain directory (passthrough=$pt):
$(printf '%s\n' "$out" | head -n 20)"
    log "passthrough=$pt: $(printf '%s\n' "$out" | tail -n 1)"
    bfs_unmount
done
bfs_done
