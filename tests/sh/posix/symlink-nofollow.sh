#!/usr/bin/env bash
# The daemon never follows a symlink inside BACKING on a client's behalf:
# symlinks show as symlinks; chown -h/touch -h/xattr/rename/unlink act on the
# link, not its target; a directory swapped for a symlink underneath the
# mount does not redirect creates, mkdir, unlink, rename, setxattr or chmod;
# a block directory swapped for a symlink after lookup is not evicted
# through; symlinks named like blocks or temporaries, or pointing at block
# or temporary directories outside BACKING, are neither counted, evicted,
# stamped nor removed by the reconcile pass (reconcile_interval=1s here).
. "$(dirname "$0")/../lib.sh"

OUT="$BFS_TMP/outside"
mkdir -p "$OUT/dir" "$OUT/blocks" "$OUT/evdir" "$OUT/tmps"
printf secret > "$OUT/secret.txt"
touch -d "$(old_mtime 5)" "$OUT/secret.txt"
for i in 0 1 2 3 4 5 6 7; do mkblock_old "$OUT/blocks/o$i.bin" 2M 0; done
# same names inside and outside: what the daemon would hit if it followed a swapped-in link
printf 'outside victim' > "$OUT/dir/victim.txt"; touch -d "$(old_mtime 6)" "$OUT/dir/victim.txt"
for i in 0 1 2 3; do mkblock_old "$OUT/evdir/e$i.bin" 2M 1; mkblock_old "$BACKING/ev/e$i.bin" 2M 1; done
for f in a.bin_1.tmp b.bin.tmp.1.2.3; do mkblock_old "$OUT/tmps/$f" 4K 2; touch -d '3 hours ago' "$OUT/tmps/$f"; done
mkblock "$OUT/dir/stale.bin_9.tmp" 4K; touch -d '3 hours ago' "$OUT/dir/stale.bin_9.tmp"
ln -s "$OUT/tmps" "$BACKING/tmpdir-link"
ln -s "$OUT/tmps/a.bin_1.tmp" "$BACKING/old-link.tmp"; touch -h -d '3 hours ago' "$BACKING/old-link.tmp"
ln -s "$OUT/secret.txt" "$BACKING/abs-link"
ln -s ../outside/secret.txt "$BACKING/rel-link"
ln -s "$OUT/blocks" "$BACKING/blockdir-link"
ln -s "$OUT/blocks/o0.bin" "$BACKING/evil.bin"
mkdir -p "$BACKING/d"
printf 'inside victim' > "$BACKING/d/victim.txt"
# the mount point sits one level deeper than BACKING, so a relative link
# "../outside/dir" leads outside only when resolved inside BACKING (by the
# daemon); resolved by a client from the mount it leads nowhere.
MNT="$BFS_TMP/deep/mnt"; mkdir -p "$MNT"
snapshot_outside() { (cd "$OUT" && find . -printf '%p %y %s %m %U %G %T@\n' | sort; md5sum secret.txt blocks/*.bin evdir/*.bin dir/* tmps/*); }
before=$(snapshot_outside)
# stale_tmp=1s: the old *.tmp files outside (ctime now) would be stale by the
# passes below, were they ever reached through a symlink
bfs_mount max_size=16M,reconcile_interval=1s,stale_tmp=1s

assert_eq "symlink" "$($OP lstat "$MNT/abs-link" | cut -d' ' -f2)" "abs-link type through the mount"
assert_eq "$OUT/secret.txt" "$(readlink "$MNT/abs-link")" "readlink abs-link"
assert_eq "../outside/secret.txt" "$(readlink "$MNT/rel-link")" "readlink rel-link"
assert_eq "symlink" "$($OP lstat "$MNT/evil.bin" | cut -d' ' -f2)" "evil.bin shown as symlink"
assert_eq "symlink" "$($OP lstat "$MNT/blockdir-link" | cut -d' ' -f2)" "blockdir-link shown as symlink"
assert_errno ELOOP open "$MNT/abs-link" r,nofollow
# operations on the link itself must not reach the target
chown -h 777:777 "$MNT/abs-link" || fail "chown -h through mount"
assert_eq "777:777" "$(stat -c %u:%g "$BACKING/abs-link")" "chown -h changed the link in backing"
touch -h -d '2003-03-03 03:03:03' "$MNT/abs-link" || fail "touch -h through mount"
assert_eq "$(date -d '2003-03-03 03:03:03' +%s)" "$(stat -c %Y "$BACKING/abs-link")" "touch -h changed the link"
assert_errno EPERM lsetxattr "$MNT/abs-link" user.x v
mv "$MNT/rel-link" "$MNT/d/rel-moved" || fail "rename a symlink"
assert_eq "../outside/secret.txt" "$(readlink "$BACKING/d/rel-moved")" "renamed link keeps its target"
rm "$MNT/d/rel-moved" || fail "unlink a symlink"
ln -s "$OUT/secret.txt" "$MNT/made-link" || fail "symlink through mount"
ln "$MNT/abs-link" "$MNT/hard-to-link" || fail "hard link of a symlink"
assert_eq symlink "$(stat -c %F "$BACKING/hard-to-link" | sed 's/symbolic link/symlink/')" "hard link of a symlink is a symlink"

# swap directories the kernel knows for symlinks, then create, unlink, rename through them
ls "$MNT/d" "$MNT/ev" >/dev/null; assert_errno OK stat "$MNT/d"; assert_errno OK stat "$MNT/d/victim.txt"
for i in 0 1 2 3; do assert_errno OK stat "$MNT/ev/e$i.bin"; done
mv "$BACKING/d" "$BACKING/d.moved"
ln -s ../outside/dir "$BACKING/d"
mv "$BACKING/ev" "$BACKING/ev.moved"
ln -s ../outside/evdir "$BACKING/ev"
r5=$($OP unlink "$MNT/d/victim.txt")
r6=$($OP rename "$MNT/d/victim.txt" "$MNT/d/renamed.txt")
log "after the swap: unlink=${r5%% *} rename=${r6%% *}"
assert_eq 'outside victim' "$(cat "$OUT/dir/victim.txt")" "unlink/rename through a swapped-in symlink reached outside BACKING"
assert_missing "$OUT/dir/renamed.txt" "rename through a swapped-in symlink created a name outside BACKING"
r1=$($OP writefile "$MNT/d/planted.txt" 1K)
r2=$($OP mkdir "$MNT/d/planted-dir")
r3=$($OP setxattr "$MNT/d" user.planted v)
r4=$($OP chmod "$MNT/d" 700)
log "after swapping d for a symlink: create=${r1%% *} mkdir=${r2%% *} setxattr=${r3%% *} chmod=${r4%% *}"
assert_missing "$OUT/dir/planted.txt" "daemon followed a swapped-in symlink to create a file outside BACKING"
assert_missing "$OUT/dir/planted-dir" "daemon followed a swapped-in symlink to mkdir outside BACKING"
assert_eq "" "$(getfattr --absolute-names -d "$OUT/dir" 2>/dev/null)" "xattr set on the symlink target outside BACKING"
assert_eq 755 "$(stat -c %a "$OUT/dir")" "chmod reached the directory outside BACKING"

# overfill: the oldest blocks are ev/e*.bin (swapped away): eviction must not
# follow the link to the same names outside; nothing outside BACKING is
# counted, evicted or stamped; two reconcile passes walk BACKING meanwhile.
# One writer: the swapped-away ev blocks (8 MiB) stay counted and cannot be
# evicted, so four writers' open temporaries (4 x 2 MiB) could pass max_size
# together and get a correct ENOSPC (a short write in kvblocks).
r0=$(stats_field reconciles)
res=$(kv_store "$MNT/kv" 24 sym 2M 1) || fail "writer crashed"
assert_eq 0 "$(json_get "$res" errors)" "store errors ($res)"
assert_le "$(du_backing)" $((17 * MiB)) "du"
three_passes() { [ "$(stats_field reconciles)" -ge $((r0 + 3)) ]; }
poll_until 10 "three reconcile passes after the swap" three_passes
assert_eq 0 "$(stats_field stale_tmp_removed)" "stale temporaries removed (all are outside BACKING or symlinks)"
after=$(snapshot_outside)
if [ "$before" != "$after" ]; then
    diff <(echo "$before") <(echo "$after")
    fail "files outside BACKING changed (followed a symlink)"
fi
[ -L "$BACKING/evil.bin" ] || fail "symlink evil.bin (not a regular file, so not a block) was removed"
[ -L "$BACKING/blockdir-link" ] || fail "symlink blockdir-link was removed"
[ -L "$BACKING/old-link.tmp" ] || fail "an old symlink named *.tmp was removed as a stale temporary"
bfs_unmount
log PASS
