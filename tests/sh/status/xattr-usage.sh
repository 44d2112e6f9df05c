#!/usr/bin/env bash
# Extended attributes count toward usage: a value too big for the inode takes
# blocks of its own on BACKING (ext4: an external block), which `du` counts,
# so usage follows setxattr and removexattr at once (status usage == du), and
# a setxattr the budget has no room for fails with ENOSPC and leaves nothing.
. "$(dirname "$0")/../lib.sh"

bfs_mount max_size=4M,reconcile_interval=0
mkdir "$MNT/x" || fail "mkdir"
for i in $(seq 1 40); do : >"$MNT/x/f$i" || fail "create f$i"; done
base=$(du_backing)
for i in $(seq 1 40); do setfattr -n user.big -v "0s$(head -c 3000 /dev/zero | base64 -w0)" "$MNT/x/f$i" || fail "setxattr f$i"; done
grown=$(du_backing)
[ "$grown" -gt "$base" ] || skip "BACKING's filesystem stores a 3000-byte xattr in the inode (du $base -> $grown)"
log "40 xattrs of 3000 bytes: du $base -> $grown"
assert_eq "$grown" "$(stats_field usage)" "usage after setxattr (du of BACKING)"
for i in $(seq 1 40); do setfattr -x user.big "$MNT/x/f$i" || fail "removexattr f$i"; done
assert_eq "$(du_backing)" "$(stats_field usage)" "usage after removexattr (du of BACKING)"

# a full budget of files nobody can evict: the values that find no room fail
# with ENOSPC, and BACKING stays within max_size
dd if=/dev/zero of="$MNT/x/fill" bs=4K count=1024 2>/dev/null || true
log "full: du $(du_backing), usage $(stats_field usage), max_size 4194304"
got=$($PY -c 'import errno, os, sys
r = {}
for i in range(1, 41):
    try:
        os.setxattr("%s/f%d" % (sys.argv[1], i), "user.big", b"v" * 3000); k = "OK"
    except OSError as e:
        k = errno.errorcode[e.errno]
    r[k] = r.get(k, 0) + 1
print(" ".join("%s=%d" % kv for kv in sorted(r.items())))' "$MNT/x")
log "40 setxattr of 3000 bytes on a full budget: $got"
case " $got " in *" ENOSPC="*) ;; *) fail "no setxattr on a full budget failed with ENOSPC: $got" ;; esac
assert_le "$(du_backing)" 4194304 "du of BACKING within max_size after setxattr on a full budget"
assert_eq "$(du_backing)" "$(stats_field usage)" "usage == du after setxattr on a full budget"
bfs_unmount
bfs_done
