#!/usr/bin/env bash
# readdir of a big flat directory (SGLang HiCache scans 100k-entry dirs):
# 20000 entries made in BACKING plus 2000 created through the mount, with
# odd names; the listing through the mount must equal BACKING's exactly,
# and scandir types must be right.
. "$(dirname "$0")/../lib.sh"

mkdir "$BACKING/flat"
$PY - "$BACKING/flat" <<'PYEOF'
import os, sys
d = sys.argv[1]
for i in range(20000):
    os.close(os.open(os.path.join(d, "%064x_llama_0_1.bin" % i), os.O_CREAT | os.O_WRONLY, 0o644))
for n in ["with space", "uni-\u00e9\u4e2d", "dash-", "x" * 255, ".hidden", "new\nline", "tab\tname"]:
    open(os.path.join(d, n), "w").close()
os.mkdir(os.path.join(d, "subdir"))
os.symlink("subdir", os.path.join(d, "link"))
PYEOF
bfs_mount max_size=64M

$PY - "$MNT/flat" <<'PYEOF' || fail "creating 2000 files through the mount"
import os, sys
d = sys.argv[1]
for i in range(2000):
    os.close(os.open(os.path.join(d, "m%05d.tmp" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
PYEOF

listing() { # DIR -> sorted "name type" lines (NUL-safe via python)
    $PY - "$1" <<'PYEOF'
import os, sys
out = []
with os.scandir(sys.argv[1]) as it:
    for e in it:
        t = "d" if e.is_dir(follow_symlinks=False) else "l" if e.is_symlink() else "f"
        out.append("%r %s" % (e.name, t))
print("\n".join(sorted(out)))
PYEOF
}
listing "$BACKING/flat" > "$BFS_TMP/backing.ls"
listing "$MNT/flat" > "$BFS_TMP/mnt.ls" || fail "scandir through the mount failed"
assert_eq 22009 "$(wc -l < "$BFS_TMP/backing.ls")" "entries in backing"
diff -u "$BFS_TMP/backing.ls" "$BFS_TMP/mnt.ls" > "$BFS_TMP/ls.diff" || {
    head -n 40 "$BFS_TMP/ls.diff"
    fail "listing through the mount differs from BACKING ($(grep -c '^[-+][^-+]' "$BFS_TMP/ls.diff") lines)"
}
# a second pass (kernel readdir cache / offsets) gives the same answer
listing "$MNT/flat" | cmp -s - "$BFS_TMP/mnt.ls" || fail "second listing differs"
# delete half through the mount while listing stays consistent
find "$MNT/flat" -maxdepth 1 -name 'm00*.tmp' -delete || fail "find -delete through mount"
listing "$BACKING/flat" > "$BFS_TMP/backing2.ls"
listing "$MNT/flat" > "$BFS_TMP/mnt2.ls"
diff -q "$BFS_TMP/backing2.ls" "$BFS_TMP/mnt2.ls" >/dev/null || fail "listing after deletions differs"
assert_eq 21009 "$(wc -l < "$BFS_TMP/mnt2.ls")" "entries after deleting the m00*.tmp files"
bfs_unmount
log PASS
