#!/usr/bin/env bash
# The atime mount options do what they say: under noatime a read through
# the mount (by the daemon or by kernel passthrough) and a listing leave
# the access times in BACKING and through the mount as they were; under
# nodiratime a listing leaves a directory's; by default (relatime) a read
# of a file whose atime is older than its mtime updates it, as natively;
# strictatime over a BACKING mounted relatime is refused in one line that
# names the cause and the fix, with nothing left mounted.
. "$(dirname "$0")/../lib.sh"

old="2020-01-01 00:00:00"
mkfile() { # NAME: a file and a directory with an atime older than their mtime
    mkdir -p "$BACKING/$1.d"; echo data >"$BACKING/$1"; echo x >"$BACKING/$1.d/f"
    touch -a -d "$old" "$BACKING/$1" "$BACKING/$1.d"
}
atime() { stat -c %X "$@" | tr '\n' ' '; }
old_s=$(date -d "$old" +%s)

mkfile plain; mkfile noa; mkfile nod
bfs_mount max_size=16M,noatime
cat "$MNT/noa" >/dev/null; ls "$MNT/noa.d" >/dev/null
$PY -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY|os.O_DIRECT); os.close(fd)' "$MNT/noa" 2>/dev/null || true
assert_eq "$old_s $old_s " "$(atime "$BACKING/noa" "$BACKING/noa.d")" "noatime: BACKING's atimes after a read and a listing"
assert_eq "$old_s $old_s " "$(atime "$MNT/noa" "$MNT/noa.d")" "noatime: the atimes seen through the mount"
bfs_unmount

bfs_mount max_size=16M,nodiratime
cat "$MNT/nod" >/dev/null; ls "$MNT/nod.d" >/dev/null
assert_eq "$old_s" "$(stat -c %X "$BACKING/nod.d")" "nodiratime: a listed directory's atime"
[ "$(stat -c %X "$BACKING/nod")" -gt "$old_s" ] || fail "nodiratime: a read file's atime did not move (relatime applies to files)"
bfs_unmount

bfs_mount max_size=16M
cat "$MNT/plain" >/dev/null
[ "$(stat -c %X "$MNT/plain")" -gt "$old_s" ] || fail "relatime: a read of a file with atime < mtime did not update its atime"
bfs_unmount

if findmnt -no OPTIONS -T "$BACKING" | tr ',' '\n' | grep -qx 'relatime\|noatime'; then
    out=$("$BOUNDFS" "$BACKING" "$MNT" -o max_size=16M,strictatime 2>&1); rc=$?
    log "strictatime: rc=$rc: $out"
    [ "$rc" != 0 ] || fail "strictatime over a relatime BACKING was accepted"
    [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "the refusal is not one line: $out"
    printf '%s' "$out" | grep -q 'remount' || fail "the refusal does not say how to fix it: $out"
    mountpoint -q "$MNT" && fail "a mount was left after the refusal"
fi
bfs_done
