#!/usr/bin/env bash
# `-o noacl` (was refused as an unknown option) mounts without POSIX ACLs,
# as ext4 mounted noacl: the kernel is not asked for FUSE_POSIX_ACL, so the
# mode bits alone decide access (a deny entry set in BACKING behind the
# mount is not enforced: the user reads the 0644 file it names), and
# setfacl through the mount fails with EOPNOTSUPP instead of storing an ACL
# that would look set and do nothing. `-o acl` (the default) enforces the
# same deny entry (tests/sh/permissions/acl-enforced.sh covers the rest).
. "$(dirname "$0")/../lib.sh"
bfs_user
command -v setfacl >/dev/null || skip "setfacl (acl) is missing"

echo secret > "$BACKING/f"; chmod 644 "$BACKING/f"; chmod 755 "$BACKING"
setfacl -m "u:$BFS_USER:---" "$BACKING/f" || skip "BACKING's filesystem takes no ACLs"
echo other > "$BACKING/g"; chmod 644 "$BACKING/g"

bfs_mount max_size=16M,allow_other,noacl
got=$(as_user cat "$MNT/f" 2>&1) || fail "noacl: the user cannot read f (mode 644; the ACL's deny must not count): $got"
assert_eq secret "$got" "noacl: f read by the user"
out=$(setfacl -m "u:$BFS_USER:r" "$MNT/g" 2>&1) && fail "noacl: setfacl through the mount succeeded"
grep -q "Operation not supported" <<<"$out" || fail "noacl: setfacl failed otherwise: $out"
getfacl --omit-header "$BACKING/g" 2>/dev/null | grep -q "^user:$BFS_USER" && fail "noacl: an ACL reached BACKING"
bfs_unmount

bfs_mount max_size=16M,allow_other,acl
as_user cat "$MNT/f" >/dev/null 2>&1 && fail "acl: the user read f despite its deny entry"
bfs_unmount
bfs_done
