#!/usr/bin/env bash
# Modes of new objects follow POSIX with default ACLs: under a directory with
# a default ACL the creator's umask is ignored (the ACL masks the mode),
# elsewhere it is applied; files (creat), directories (mkdir) and FIFOs
# (mknod) alike, the same on the mount as on a plain directory.
. "$(dirname "$0")/../lib.sh"
command -v setfacl >/dev/null || skip "setfacl is missing (Debian package acl; scripts/install-deps.sh installs it)"

PLAIN="$BFS_TMP/plain"
mkdir -p "$PLAIN"
setfacl -d -m u::rwx "$PLAIN" 2>/dev/null || skip "the backing filesystem has no POSIX ACLs"
setfacl -k "$PLAIN"
bfs_mount max_size=16M

# modes_in DIR: the modes of a file, a directory and a FIFO made in DIR/d with
# umask 077 (DIR/d gets a default ACL if $1 is "acl"), and DIR/u without one
modes_in() {
    local acl=$1 d=$2
    mkdir "$d/d" "$d/u"
    if [ "$acl" = acl ]; then setfacl -d -m u::rwx,g::rwx,o::rwx "$d/d" || return 1; fi
    (umask 077; touch "$d/d/f" "$d/u/f"; mkdir "$d/d/s" "$d/u/s"; mkfifo "$d/d/p" "$d/u/p")
    stat -c %a "$d/d/f" "$d/d/s" "$d/d/p" "$d/u/f" "$d/u/s" "$d/u/p" | tr '\n' ' '
}
want=$(modes_in acl "$PLAIN")
assert_eq "666 777 666 600 700 600 " "$want" "modes on a plain directory (the rule itself)"
assert_eq "$want" "$(modes_in acl "$MNT")" "modes on the mount, default ACL on d, none on u"
assert_eq "666 777 666 " "$(stat -c %a "$BACKING/d/f" "$BACKING/d/s" "$BACKING/d/p" | tr '\n' ' ')" "modes in BACKING"
# a narrower default ACL still masks the mode; the new directory inherits it
mkdir "$MNT/n"; setfacl -d -m u::rwx,g::r-x,o::- "$MNT/n"
(umask 000; touch "$MNT/n/f"; mkdir "$MNT/n/s")
assert_eq "640 750 " "$(stat -c %a "$MNT/n/f" "$MNT/n/s" | tr '\n' ' ')" "default ACL u::rwx,g::r-x,o::- with umask 000"
getfacl -d "$MNT/n/s" 2>/dev/null | grep -q '^other::---' || fail "the new directory did not inherit the default ACL"
bfs_unmount
bfs_done
