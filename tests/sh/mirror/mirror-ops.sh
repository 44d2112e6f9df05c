#!/usr/bin/env bash
# Mirror ops (differential): the same scripted sequence of ~180 operations
# (mkdir/rmdir, create O_EXCL, O_TRUNC/O_APPEND/O_DIRECT opens, read/write,
# fsync, truncate, chmod/chown/utimens, access, readdir, unlink incl. while
# open, rename/RENAME_NOREPLACE/RENAME_EXCHANGE, link, symlink/readlink,
# user.* xattrs, fallocate, lseek, mmap, mixed opens) is run on a plain
# directory and through boundfs; every result and errno must match, and the
# backing tree must end up identical to the plain one.
. "$(dirname "$0")/../lib.sh"

REF="$BFS_TMP/ref"          # same file system as BACKING
mkdir -p "$REF"
bfs_mount max_size=256M

$PY "$BFS_HELPERS/mirror_ops.py" "$REF" > "$BFS_TMP/ref.txt" || fail "mirror_ops on plain dir crashed"
$PY "$BFS_HELPERS/mirror_ops.py" "$MNT" > "$BFS_TMP/mnt.txt" || fail "mirror_ops through the mount crashed"
n=$(wc -l < "$BFS_TMP/ref.txt")
if ! diff -u "$BFS_TMP/ref.txt" "$BFS_TMP/mnt.txt" > "$BFS_TMP/ops.diff"; then
    cat "$BFS_TMP/ops.diff"
    fail "operation results through the mount differ from a plain directory (- plain, + boundfs)"
fi
log "$n operations give the same results as on a plain directory"

# what the daemon did landed at the same paths in BACKING
$PY "$BFS_HELPERS/tree.py" "$REF" > "$BFS_TMP/ref.tree"
$PY "$BFS_HELPERS/tree.py" "$BACKING" > "$BFS_TMP/backing.tree"
if ! diff -u "$BFS_TMP/ref.tree" "$BFS_TMP/backing.tree"; then
    fail "BACKING tree differs from the plain directory after the same operations"
fi
# and the mount shows the same tree
$PY "$BFS_HELPERS/tree.py" "$MNT" > "$BFS_TMP/mnt.tree"
diff -u "$BFS_TMP/ref.tree" "$BFS_TMP/mnt.tree" || fail "tree seen through the mount differs"
log "BACKING and the mount hold the same tree as the plain directory"

bfs_unmount
log PASS
