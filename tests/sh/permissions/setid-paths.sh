#!/usr/bin/env bash
# Set-user-ID and set-group-ID after a change by an unprivileged user, on
# every path a change takes (write-only, append, read-write, O_DIRECT,
# O_TRUNC, ftruncate, truncate, fallocate, copy_file_range, mmap) and after
# a chown, seen
# through the path right after the change, as a user sees it: the mount
# must show what a plain directory shows (the kernel's rule: set-user-ID
# goes; set-group-ID goes when the file is group-executable or the user is
# outside the file's group; root keeps both), and BACKING must hold it.
. "$(dirname "$0")/../lib.sh"
bfs_user

PLAIN="$BFS_TMP/plain"
mkdir -p "$PLAIN" "$BACKING/d"
chmod 1777 "$PLAIN" "$BACKING/d"
CHANGE="$BFS_HELPERS/change_paths.py"
bfs_mount max_size=64M,allow_other

# case DIR WAY NAME OWNER MODE WHO: a 4 KiB file DIR/WAY-NAME owned by OWNER
# (user, or root) with MODE; WHO (user or root) changes it WAY; prints its
# mode as stat through DIR shows it right after.
case_() {
    local dir=$1 way=$2 name=$3 owner=$4 mode=$5 who=$6 f r
    f="$dir/$way-$name"
    head -c 4096 /dev/zero >"$f" || fail "create $f"
    [ "$owner" = user ] && chown "$BFS_UID:$BFS_GID" "$f"
    chmod "$mode" "$f"
    stat -c %a "$f" >/dev/null
    if [ "$who" = user ]; then r=$(as_user "$BFS_USER_PY" "$CHANGE" "$way" "$f"); else r=$($PY "$CHANGE" "$way" "$f"); fi
    [ "$r" = OK ] || fail "$who $way on $f: $r"
    stat -c %a "$f"
}

WAYS="wronly append rdwr direct otrunc ftruncate truncate fallocate copy mmap"
# NAME OWNER MODE WHO EXPECTED(by the kernel's rule, for a change of content)
CASES="suid:user:4755:user:755 sgid-gx:user:2775:user:775 sgid-own-group:user:2664:user:2664
sgid-other-group:root:2666:user:666 both:user:6775:user:775 root-keeps:root:6777:root:6777"
bad=0; n=0
for way in $WAYS; do
    for c in $CASES; do
        IFS=: read -r name owner mode who want <<<"$c"
        plain=$(case_ "$PLAIN" "$way" "$name" "$owner" "$mode" "$who")
        mounted=$(case_ "$MNT/d" "$way" "$name" "$owner" "$mode" "$who")
        backing=$(stat -c %a "$BACKING/d/$way-$name")
        n=$((n + 1))
        if [ "$plain" != "$mounted" ] || [ "$backing" != "$mounted" ]; then
            log "DIFFERS $way $name ($mode, changed by $who): plain $plain, mount $mounted, BACKING $backing"
            bad=$((bad + 1))
        fi
        # mmap writes keep the bits natively (no file_remove_privs on a page fault)
        if [ "$way" != mmap ] && [ "$plain" != "$want" ]; then
            log "note: $way $name on a plain directory gave $plain (rule: $want)"
        fi
    done
done
# chown: by someone else, chown(f, -1, -1) on a set-user-ID file is refused
# and changes nothing (it reaches the daemon as the same empty SETATTR as an
# fallocate's); by the owner outside the file's group, set-group-ID goes
chown_case() { # DIR: "errno mode" after nobody's chown(-1,-1) of root's 4755, then the owner's chown of a 2767 file
    local d=$1 r1 r2
    head -c 16 /dev/zero >"$d/chown-other"; chmod 4755 "$d/chown-other"
    r1=$(as_user "$BFS_USER_PY" "$BFS_HELPERS/op.py" lchown "$d/chown-other" -1 -1 | cut -d' ' -f1)
    head -c 16 /dev/zero >"$d/chown-own"; chown "$BFS_UID:root" "$d/chown-own"; chmod 2767 "$d/chown-own"
    r2=$(as_user "$BFS_USER_PY" "$BFS_HELPERS/op.py" lchown "$d/chown-own" "$BFS_UID" -1 | cut -d' ' -f1)
    echo "$r1 $(stat -c %a "$d/chown-other") $r2 $(stat -c %a "$d/chown-own")"
}
want=$(chown_case "$PLAIN")
assert_eq "EPERM 4755 OK 767" "$want" "chown on a plain directory (the rule itself)"
assert_eq "$want" "$(chown_case "$MNT/d")" "chown through the mount"
# an mmap write keeps security.capability natively (no file_remove_privs on
# a page fault); through the mount its pages come back as a WRITE
caps_case() { # DIR: "yes|no" the capability is there after a user's mmap write
    local f=$1/caps
    head -c 8192 /dev/zero >"$f"; chmod 666 "$f"
    $PY -c 'import os,struct,sys; os.setxattr(sys.argv[1], "security.capability", struct.pack("<5I", 0x02000001, 1 << 13, 0, 0, 0))' "$f"
    [ "$(as_user "$BFS_USER_PY" "$CHANGE" mmap "$f")" = OK ] || fail "mmap write of $f"
    getfattr --absolute-names -n security.capability "$f" >/dev/null 2>&1 && echo yes || echo no
}
assert_eq yes "$(caps_case "$PLAIN")" "security.capability after an mmap write on a plain directory (the rule itself)"
assert_eq yes "$(caps_case "$MNT/d")" "security.capability after an mmap write through the mount"
log "$n cases, $bad differ from a plain directory"
assert_eq 0 "$bad" "set-ID bits after a change agree with a plain directory"
bfs_unmount
bfs_done
