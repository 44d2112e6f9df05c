#!/usr/bin/env bash
# Real programs, file tools: tar c and x, cp -a, cp -r, rsync -a and mv copy
# the sample tree (helpers/sample_tree.py: modes, owners, nanosecond mtimes,
# symlinks, a hard link, xattrs, ACLs) into the directory and out of it;
# sed -i replaces a file keeping its mode and owner; setfacl's mask shows in
# the mode at once; flock(1) excludes a
# second process; find -inum finds a file by the inode number stat gives; a default ACL
# overrides the umask (POSIX.1e, acl(5)).  Each check runs on a plain
# directory and on the mount with the same expected result (lib.sh rp_*).
. "$(dirname "$0")/../lib.sh"
command -v rsync >/dev/null || skip "rsync is missing (run scripts/install-deps.sh)"
command -v setfacl >/dev/null || skip "setfacl (acl) is missing (run scripts/install-deps.sh)"

bfs_mount max_size=1G

# tar: pax format (nanosecond mtimes), xattrs and ACLs, as root (owners, -p)
tar_copy() {
    tar -C "$1" --format=posix --xattrs --acls -cf "$3" .
    tar -C "$2" --xattrs --xattrs-include='*' --acls -xpf "$3"
}
tar_in() {  # archive and tree both outside, extracted into the directory
    rp_mktree "$2/src"; mkdir "$1/copy"
    tar_copy "$2/src" "$1/copy" "$2/src.tar"
    rp_same_tree "$2/src" "$1/copy" "tar x into the directory" --links
}
tar_out() { # tree and archive in the directory, extracted outside
    rp_mktree "$1/src"; mkdir "$2/copy"
    tar_copy "$1/src" "$2/copy" "$1/src.tar"
    rp_same_tree "$1/src" "$2/copy" "tar c out of the directory" --links
}
cp_a_in()  { rp_mktree "$2/src"; cp -a "$2/src" "$1/copy"; rp_same_tree "$2/src" "$1/copy" "cp -a in" --links; }
cp_a_out() { rp_mktree "$1/src"; cp -a "$1/src" "$2/copy"; rp_same_tree "$1/src" "$2/copy" "cp -a out" --links; }
# cp -r keeps modes (umask 0 here), content and symlinks; not owners, times,
# xattrs or hard links
cp_r_in()  { rp_mktree "$2/src"; (umask 0; cp -r "$2/src" "$1/copy"); rp_same_tree "$2/src" "$1/copy" "cp -r in" --mtime none --no-owner --no-xattrs; }
cp_r_out() { rp_mktree "$1/src"; (umask 0; cp -r "$1/src" "$2/copy"); rp_same_tree "$1/src" "$2/copy" "cp -r out" --mtime none --no-owner --no-xattrs; }
# rsync -a: modes, owners, mtimes, symlinks; not hard links, xattrs or ACLs
rsync_in()  { rp_mktree "$2/src"; rsync -a "$2/src/" "$1/copy/"; rp_same_tree "$2/src" "$1/copy" "rsync -a in" --no-xattrs; }
rsync_out() { rp_mktree "$1/src"; rsync -a "$1/src/" "$2/copy/"; rp_same_tree "$1/src" "$2/copy" "rsync -a out" --no-xattrs; }
# rsync again over an identical copy transfers nothing (sizes and mtimes
# agree), and -c finds no content differences
rsync_noop() {
    rp_mktree "$2/src"; rsync -a "$2/src/" "$1/copy/"
    rp_want "" "$(rsync -ai "$2/src/" "$1/copy/")" "second rsync -a into the directory changes nothing"
    rp_want "" "$(rsync -aic "$1/copy/" "$2/src/")" "rsync -ac out finds no content differences"
}
# mv across file systems copies (like cp -a) and removes the source
mv_in()  { rp_mktree "$2/src"; cp -a "$2/src" "$2/ref"; mv "$2/src" "$1/moved"; rp_want "" "$(ls -A "$2" | grep -vx ref)" "mv removed the source"; rp_same_tree "$2/ref" "$1/moved" "mv in" --links; }
mv_out() { rp_mktree "$1/src"; cp -a "$1/src" "$1/ref"; mv "$1/src" "$2/moved"; rp_want "ref" "$(ls -A "$1")" "mv removed the source"; rp_same_tree "$1/ref" "$2/moved" "mv out" --links; }
# sed -i writes a temporary file beside the original and renames it over it,
# keeping the mode and owner
sed_i() {
    printf 'one\ntwo\n' > f; chmod 640 f; chown 4242:4343 f
    sed -i 's/two/2/' f
    rp_want "one|2" "$(tr '\n' '|' < f | sed 's/|$//')" "sed -i content"
    rp_want "640 4242:4343" "$(stat -c '%a %u:%g' f)" "sed -i keeps mode and owner"
    rp_want "f" "$(ls -A)" "sed -i leaves no temporary file"
}
# setfacl sets the mode from the access ACL (its mask is the group bits)
setfacl_mode() {
    touch f; chmod 640 f
    setfacl -m u:4242:rw- f
    rp_want 660 "$(stat -c %a f)" "mode right after setfacl -m u:4242:rw-"
    setfacl -b f
    rp_want 640 "$(stat -c %a f)" "mode right after setfacl -b"
}
# flock(1): a lock held by one process refuses another until released
flock_held() {
    : > lockfile
    coproc HOLDER { flock lockfile -c 'echo held; read -r _'; }
    read -r line <&"${HOLDER[0]}"
    rp_want held "$line" "the first process holds the lock"
    if flock -n lockfile true; then rp_want refused taken "a second flock -n while the lock is held"; fi
    echo release >&"${HOLDER[1]}"
    wait "$HOLDER_PID"
    flock -n lockfile true || rp_want taken refused "flock -n after the release"
}
# find -inum / -samefile match readdir's d_ino against stat's st_ino
find_inum() {
    echo x > f; ln f g; mkdir d; echo y > d/h
    rp_want "./f ./g" "$(find . -inum "$(stat -c %i f)" | sort | tr '\n' ' ' | sed 's/ $//')" "find -inum of f"
    rp_want "./d/h" "$(find . -samefile d/h)" "find -samefile d/h"
    rp_want "$(stat -c %i d)" "$(ls -id d | cut -d' ' -f1)" "ls -i agrees with stat"
}
# POSIX.1e: under a parent with a default ACL the umask is not applied
umask_default_acl() {
    mkdir d; setfacl -d -m u::rwx,g::rwx,o::rwx d
    (umask 077; touch d/f; mkdir d/s)
    rp_want "666 777" "$(stat -c %a d/f d/s | tr '\n' ' ' | sed 's/ $//')" "modes under a default ACL, umask 077"
    (umask 077; touch f; mkdir s)
    rp_want "600 700" "$(stat -c %a f s | tr '\n' ' ' | sed 's/ $//')" "modes without a default ACL, umask 077"
    rp_want "user::rwx" "$(getfacl -cd d/s | head -n 1)" "the new directory inherits the default ACL"
}
export -f tar_copy

rp_check tar-in tar_in
rp_check tar-out tar_out
rp_check cp-a-in cp_a_in
rp_check cp-a-out cp_a_out
rp_check cp-r-in cp_r_in
rp_check cp-r-out cp_r_out
rp_check rsync-a-in rsync_in
rp_check rsync-a-out rsync_out
rp_check rsync-noop rsync_noop
rp_check mv-in mv_in
rp_check mv-out mv_out
rp_check sed-i sed_i
rp_check setfacl-mode setfacl_mode
rp_check flock flock_held
rp_check find-inum find_inum
rp_check umask-default-acl umask_default_acl
rp_report
bfs_unmount
log PASS
