#!/usr/bin/env bash
# Privileges on write and truncate (FUSE_HANDLE_KILLPRIV_V2): the kernel no
# longer asks GETXATTR security.capability before a file's first write, and
# the daemon clears what the VFS clears on a plain directory: set-user-ID on
# an unprivileged write, truncate or fallocate, set-group-ID too when
# group-execute is set, security.capability on any write; root (CAP_FSETID)
# keeps the bits. chown(f, -1, -1) by a user clears them as a write does
# (chown_common() in fs/open.c; the kernel sends the daemon a SETATTR with
# nothing to set, as for fallocate's file_remove_privs(), so root's
# chown(f, -1, -1) keeps them on the mount: docs/guarantees.md, Known limits).
# Every case runs on a plain directory and through the mount, and must agree.
. "$(dirname "$0")/../lib.sh"
bfs_user

PLAIN="$BFS_TMP/plain"
mkdir -p "$PLAIN" "$BACKING/shared"
chmod 1777 "$PLAIN" "$BACKING/shared"
OP_U="$BFS_USER_PY $BFS_HELPERS/op.py"
user_op() { as_user $OP_U "$@" 2>&1 | head -n 1 | cut -d' ' -f1; }
root_op() { $OP "$@" 2>&1 | head -n 1 | cut -d' ' -f1; }
# a valid security.capability value (VFS_CAP_REVISION_2, CAP_NET_BIND_SERVICE)
setcap_raw() {
    $PY -c 'import os,struct,sys; os.setxattr(sys.argv[1], "security.capability", struct.pack("<5I", 0x02000001, 1 << 10, 0, 0, 0))' "$1"
}
has_cap() { getfattr --absolute-names -n security.capability "$1" >/dev/null 2>&1 && echo yes || echo no; }

bfs_mount max_size=16M,allow_other

# case NAME MODE WHO OP FLAGS: a file owned by the test user with MODE in a
# plain directory and through the mount; WHO (user/root) runs OP on it; prints
# "mode cap" of the result for the plain file, then for the mounted one.
case_() {
    local name=$1 mode=$2 who=$3 op=$4 flags=$5 d out=""
    for d in "$PLAIN" "$MNT/shared"; do
        local f="$d/$name.bin"
        [ "$(user_op writefile "$f" 4K)" = OK ] || fail "user creates $f"
        chmod "$mode" "$f" || fail "chmod $mode $f"
        [ "$d" = "$PLAIN" ] && setcap_raw "$f" || setcap_raw "$BACKING/shared/$name.bin"
        local r
        case $op in
            write) r=$([ "$who" = user ] && user_op pwrite "$f" "$flags" data || root_op pwrite "$f" "$flags" data) ;;
            truncate) r=$([ "$who" = user ] && user_op truncate "$f" 1K || root_op truncate "$f" 1K) ;;
            fallocate) r=$([ "$who" = user ] && user_op fallocate "$f" 0 16K || root_op fallocate "$f" 0 16K) ;;
            chown) r=$([ "$who" = user ] && user_op lchown "$f" -1 -1 || root_op lchown "$f" -1 -1) ;;
        esac
        [ "$r" = OK ] || fail "$who $op $f: $r"
        local real="$f"; [ "$d" = "$PLAIN" ] || real="$BACKING/shared/$name.bin"
        out+="$(stat -c %a "$real") $(has_cap "$real");"
    done
    printf '%s' "$out"
}

check() { # NAME MODE WHO OP FLAGS EXPECTED_MODE
    local got; got=$(case_ "$@")
    local plain=${got%%;*} mounted=${got#*;}; mounted=${mounted%;}
    log "$1: plain [$plain] mount [$mounted]"
    assert_eq "$plain" "$mounted" "$1: the mount clears what a plain directory clears"
    assert_eq "$6" "${plain% *}" "$1: mode on a plain directory"
}

check suid-wronly   4755 user write w         755
check suid-rdwr     4755 user write rw        755
check suid-direct   4755 user write w,direct  755
check sgid-gx       2775 user write w         775
check sgid-nogx     2745 user write w         2745
check suid-trunc    4755 user truncate ""     755
check root-keeps    4755 root write w         4755
check root-trunc    6775 root truncate ""     6775
check suid-falloc   6755 user fallocate ""    755
check root-falloc   6755 root fallocate ""    6755
check chown-none    6755 user chown ""        755
check chown-nogx    6745 user chown ""        2745

# Stores through the daemon cost no GETXATTR: 20 new files (not block
# files, so their writes reach the daemon) written through the mount; the
# only GETXATTRs counted meanwhile are the two of the status read itself.
requests_delta() { $PY -c 'import json,sys; a,b=(json.loads(x)["requests"] for x in sys.argv[2:]); print(b.get(sys.argv[1],0)-a.get(sys.argv[1],0))' "$@"; }
before=$(stats_json)
for i in $(seq 1 20); do
    [ "$(root_op writefile "$MNT/shared/store-$i.dat" 64K)" = OK ] || fail "store $i"
done
after=$(stats_json)
gx=$(requests_delta GETXATTR "$before" "$after")
log "GETXATTR requests over 20 daemon-path stores: $gx (2 are the status read)"
assert_le "$gx" 2 "GETXATTR requests over 20 stores (the kernel asked security.capability)"
# Block files after the first are written through kernel passthrough: no
# WRITE reaches the daemon, and the kernel's file_remove_privs() asks
# security.capability once per write (fs/backing-file.c; docs/guarantees.md, Known limits).
before=$(stats_json)
for i in $(seq 1 21); do
    [ "$(root_op writefile "$MNT/shared/block-$i.bin" 64K)" = OK ] || fail "block $i"
done
after=$(stats_json)
w=$(requests_delta WRITE "$before" "$after"); gx=$(requests_delta GETXATTR "$before" "$after")
log "over 21 block stores: $w WRITE, $gx GETXATTR requests"
assert_le "$w" 2 "WRITE requests over 21 block stores (only the first, which learns the size)"
assert_le "$gx" 23 "GETXATTR requests over 21 block stores (one per passthrough write, 2 the status read)"
bfs_unmount
bfs_done
