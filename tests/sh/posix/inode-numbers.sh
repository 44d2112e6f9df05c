#!/usr/bin/env bash
# Inode numbers: readdir's d_ino, stat's and fstat's st_ino agree for every
# kind of object (`find -inum`, fts cycle checks and os.scandir-based tools
# match them), are the backing objects' numbers, and stay the same for a file
# after the kernel forgot it and looked it up again. The same checks run on a
# plain directory first (the checks themselves are right there).
. "$(dirname "$0")/../lib.sh"

PLAIN="$BFS_TMP/plain"
mkdir -p "$PLAIN"
bfs_mount max_size=16M

for d in "$PLAIN" "$MNT"; do
    echo x > "$d/f"
    got=$(find "$d" -inum "$(stat -c %i "$d/f")")
    assert_eq "$d/f" "$got" "find $d -inum \$(stat -c %i $d/f)"
    mkdir -p "$d/sub/deeper"
    echo y > "$d/sub/a.bin"; ln "$d/sub/a.bin" "$d/sub/hard.bin"; ln -s a.bin "$d/sub/link"; mkfifo "$d/sub/fifo"
    for i in $(seq 20); do echo "$i" > "$d/sub/n$i.txt"; done
    # the idea of CPython's test_os.TestScandir.test_attributes, for every kind
    $PY - "$d" <<'PY' || fail "scandir inode() against stat/fstat in $d"
import os, sys
bad = []
for top in (sys.argv[1], os.path.join(sys.argv[1], "sub")):
    for e in os.scandir(top):
        st = os.stat(e.path, follow_symlinks=False)
        es = e.stat(follow_symlinks=False)
        nums = {"d_ino": e.inode(), "lstat": st.st_ino, "entry.stat": es.st_ino}
        if not e.is_symlink() and not e.name == "fifo":
            fd = os.open(e.path, os.O_RDONLY)
            nums["fstat"] = os.fstat(fd).st_ino
            os.close(fd)
        if len(set(nums.values())) != 1 or es.st_dev != st.st_dev:
            bad.append("%s: %s" % (e.path, nums))
same = os.stat(os.path.join(sys.argv[1], "sub/a.bin")).st_ino == os.stat(os.path.join(sys.argv[1], "sub/hard.bin")).st_ino
if not same:
    bad.append("hard links differ")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
done

# the backing objects' numbers, the root's included
for p in "" /f /sub /sub/a.bin /sub/link /sub/deeper; do
    assert_eq "$(stat -c %i "$BACKING$p")" "$(stat -c %i "$MNT$p")" "st_ino of $p on the mount and in BACKING"
done

# stable across lookups: the kernel forgets the inodes (drop_caches 2 sends
# FORGET for every unused one), others are looked up first, then the file
before=$(stat -c %i "$MNT/sub/n20.txt")
sync; echo 2 > /proc/sys/vm/drop_caches
cat "$MNT"/sub/n1*.txt >/dev/null
assert_eq "$before" "$(stat -c %i "$MNT/sub/n20.txt")" "st_ino of a file after the kernel forgot it"
bfs_unmount
bfs_done
