#!/usr/bin/env bash
# POSIX ACLs are enforced through the mount as on a plain directory: deny
# and grant entries for users and groups, read and write, on files and a
# directory; the mask (a named entry does not leak to the owning group);
# a chmod after setfacl and a setfacl -b take effect at once although the
# kernel caches ACLs; setfacl by an owner outside the file's group drops
# set-group-ID (xfstests generic/375). Then ACLs changed in BACKING, behind
# the mount, take effect through it within attr_timeout.
. "$(dirname "$0")/../lib.sh"
command -v setfacl >/dev/null || skip "setfacl is missing (Debian package acl; scripts/install-deps.sh installs it)"
bfs_user
NOBODY_UID=$(id -u nobody) NOBODY_GID=$(id -g nobody) || skip "no user nobody"
PLAIN="$BFS_TMP/plain"
mkdir -p "$PLAIN" "$BACKING/d"
setfacl -m u::rwx "$PLAIN" 2>/dev/null || skip "the filesystem under $BFS_TMP has no POSIX ACLs"
chmod 755 "$PLAIN" "$BACKING/d"
# u OP ARGS / n OP ARGS: op.py as the test user / as nobody, first word only
u() { as_user "$BFS_USER_PY" "$BFS_HELPERS/op.py" "$@" 2>&1 | head -n 1 | cut -d' ' -f1; }
n() { setpriv --reuid="$NOBODY_UID" --regid="$NOBODY_GID" --init-groups --inh-caps=-all -- \
        "$BFS_USER_PY" "$BFS_HELPERS/op.py" "$@" 2>&1 | head -n 1 | cut -d' ' -f1; }
U=$BFS_USER G=$(id -gn "$BFS_USER")

# acl_cases DIR: each case's outcome in DIR, one word each
acl_cases() {
    local d=$1 out=()
    echo s >"$d/deny-read"; chmod 644 "$d/deny-read"; setfacl -m "u:$U:---" "$d/deny-read"
    out+=("deny-read:$(u readall "$d/deny-read")")
    echo s >"$d/deny-write"; chmod 666 "$d/deny-write"; setfacl -m "u:$U:r--" "$d/deny-write"
    out+=("deny-write:$(u pwrite "$d/deny-write" w x)/$(u readall "$d/deny-write")")
    echo s >"$d/grant"; chmod 600 "$d/grant"; setfacl -m "u:$U:rw-" "$d/grant"
    out+=("grant:$(u readall "$d/grant")/$(u pwrite "$d/grant" w x)")
    echo s >"$d/group-grant"; chmod 600 "$d/group-grant"; setfacl -m "g:$G:r--" "$d/group-grant"
    out+=("group-grant:$(u readall "$d/group-grant")/$(u pwrite "$d/group-grant" w x)")
    echo s >"$d/no-leak"; chmod 600 "$d/no-leak"; chgrp "$NOBODY_GID" "$d/no-leak"; setfacl -m "u:$U:rw-" "$d/no-leak"
    out+=("no-leak:$(n readall "$d/no-leak")/$(u readall "$d/no-leak")")
    mkdir "$d/deny-dir"; echo s >"$d/deny-dir/f"; chmod 755 "$d/deny-dir"; setfacl -m "u:$U:---" "$d/deny-dir"
    out+=("deny-dir:$(u listdir "$d/deny-dir")/$(u readall "$d/deny-dir/f")")
    echo s >"$d/chmod-after"; chmod 600 "$d/chmod-after"; setfacl -m "u:$U:rw-" "$d/chmod-after"
    out+=("chmod-after:$(u readall "$d/chmod-after")")
    chmod 600 "$d/chmod-after"     # the mask becomes ---
    out+=("$(u readall "$d/chmod-after")")
    echo s >"$d/remove"; chmod 644 "$d/remove"; setfacl -m "u:$U:---" "$d/remove"
    out+=("remove:$(u readall "$d/remove")")
    setfacl -b "$d/remove"
    out+=("$(u readall "$d/remove")")
    mkdir "$d/sgid"; chown "$U:root" "$d/sgid"; chmod 2777 "$d/sgid"
    as_user setfacl -m u:root:rwx "$d/sgid" || out+=("sgid-setfacl-failed")
    out+=("sgid:$(stat -c %a "$d/sgid")")
    echo "${out[*]}"
}
bfs_mount max_size=16M,allow_other
want=$(acl_cases "$PLAIN")
log "plain: $want"
assert_eq "deny-read:EACCES deny-write:EACCES/OK grant:OK/OK group-grant:OK/EACCES no-leak:EACCES/OK deny-dir:EACCES/EACCES chmod-after:OK EACCES remove:EACCES OK sgid:777" \
    "$want" "ACL outcomes on a plain directory (the rules themselves)"
got=$(acl_cases "$MNT/d")
log "mount: $got"
assert_eq "$want" "$got" "ACL outcomes through the mount"
bfs_unmount

# Behind the mount: an ACL set or removed in BACKING after the kernel cached
# the file's ACLs (a read by a user other than the owner asks for them).
bfs_mount max_size=16M,allow_other,attr_timeout=1s
f=d/behind; echo s >"$BACKING/$f"; chmod 644 "$BACKING/$f"
assert_eq OK "$(u readall "$MNT/$f")" "a read before any ACL"
setfacl -m "u:$U:---" "$BACKING/$f"
denied() { [ "$(u readall "$MNT/$f")" = EACCES ]; }
poll_until 10 "a deny entry set in BACKING enforced through the mount" denied
setfacl -x "u:$U" "$BACKING/$f"
allowed() { [ "$(u readall "$MNT/$f")" = OK ]; }
poll_until 10 "the deny entry removed in BACKING lifted through the mount" allowed
bfs_unmount
bfs_done
