#!/usr/bin/env bash
# What a non-root user makes and sees through a root daemon, as on a plain
# directory. Owner, group and mode of the objects it creates: in a set-group-ID directory the new file, directory and FIFO take
# the directory's group (a new directory keeps S_ISGID); the set-user-ID and
# set-group-ID bits asked for in the create mode stay (open(O_CREAT, 04755),
# mkfifo 06777), except S_ISGID on a group-executable file whose inherited
# group is not the creator's (inode_init_owner(), mode_strip_sgid() in
# fs/inode.c; the user is in a group also through its supplementary groups,
# which the FUSE request does not carry). The same creations run as the test user on a plain directory
# and through the mount; every name's mode, owner and group must agree.
# listxattr does not show the user trusted.* names (only CAP_SYS_ADMIN sees
# them), and the size it answers first is the size of that list.
. "$(dirname "$0")/../lib.sh"
bfs_user

PLAIN="$BFS_TMP/plain"
SUP=boundfs-sup     # a supplementary group of the test user
getent group "$SUP" >/dev/null || groupadd --system "$SUP" || skip "cannot create the group $SUP (groupadd)"
id -nG "$BFS_USER" | tr ' ' '\n' | grep -qx "$SUP" || usermod -aG "$SUP" "$BFS_USER" || skip "usermod -aG $SUP"
bfs_mount max_size=16M,allow_other

# make DIR: DIR/sg is set-group-ID with a group the test user is not in,
# DIR/sgm set-group-ID with the user's own group, DIR/sgs with its
# supplementary group; the user creates files, directories, FIFOs and a
# symlink with special bits in each
make() {
    local d=$1
    mkdir -p "$d/sg" "$d/sgm" "$d/sgs" && chmod 777 "$d" && chmod 2777 "$d/sg" "$d/sgm" "$d/sgs" &&
        chgrp daemon "$d/sg" && chgrp "$BFS_GID" "$d/sgm" && chgrp "$SUP" "$d/sgs" || return 1
    as_user "$BFS_USER_PY" - "$d" <<'PYEOF' || return 1
import os, sys
os.chdir(sys.argv[1]); os.umask(0)
for n, m in [("suid", 0o4755), ("sgid", 0o2755), ("sgidnx", 0o2745), ("both", 0o6777)]:
    for d in (".", "sg", "sgm", "sgs"):
        os.close(os.open(f"{d}/{n}", os.O_CREAT | os.O_WRONLY, m))
        os.mkdir(f"{d}/{n}.d", m)
        os.mkfifo(f"{d}/{n}.p", m)
os.symlink("suid", "sg/link")
PYEOF
    (cd "$d" && stat -c '%n %a %U:%G' sg sgm sgs * sg/* sgm/* sgs/*)
}

want=$(make "$PLAIN") || fail "creations on a plain directory"
# the rule itself, as the kernel applies it on the plain directory
grep -qx 'sg/sgid.d 2755 boundfs-test:daemon' <<<"$want" || fail "plain: mkdir in a setgid dir: $(grep sg/sgid.d <<<"$want")"
grep -qx 'sg/both 4777 boundfs-test:daemon' <<<"$want" || fail "plain: S_ISGID stripped, S_ISUID kept: $(grep 'sg/both ' <<<"$want")"
grep -qx 'suid 4755 boundfs-test:boundfs-test' <<<"$want" || fail "plain: open(O_CREAT, 04755): $(grep '^suid ' <<<"$want")"
grep -qx "sgs/both 6777 boundfs-test:$SUP" <<<"$want" || fail "plain: S_ISGID kept for a supplementary group: $(grep 'sgs/both ' <<<"$want")"
got=$(make "$MNT") || fail "creations through the mount"
diff <(echo "$want") <(echo "$got") >&2 || fail "modes, owners or groups of new objects differ (- plain, + mount)"
# what the mount shows is what BACKING holds
diff <(echo "$got") <(cd "$BACKING" && stat -c '%n %a %U:%G' sg sgm sgs * sg/* sgm/* sgs/*) >&2 ||
    fail "the mount and BACKING disagree"

# listxattr as the user: a file with a user.* and a trusted.* attribute
lsx() {
    local f=$1/x.bin
    echo data >"$f" && setfattr -n user.a -v 1 "$f" && setfattr -n trusted.t -v 2 "$f" || return 1
    as_user "$BFS_USER_PY" -c 'import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
n = libc.listxattr(sys.argv[1].encode(), None, 0)
print(n, sorted(os.listxattr(sys.argv[1])))' "$f"
}
want=$(lsx "$PLAIN") || fail "listxattr on a plain directory"
assert_eq "7 ['user.a']" "$want" "listxattr as the user on a plain directory (the rule itself)"
assert_eq "$want" "$(lsx "$MNT")" "listxattr as the user through the mount"
assert_eq "['trusted.t', 'user.a']" "$($PY -c 'import os,sys; print(sorted(os.listxattr(sys.argv[1])))' "$MNT/x.bin")" \
    "listxattr as root through the mount"
bfs_unmount
bfs_done
