#!/usr/bin/env bash
# Mirror ops with everyday tools: cp/mv/ln/ls/touch/truncate/setfattr/dd
# through the mount land at the same path in BACKING, files put in BACKING
# show through the mount, and assert_errno checks on typical failures.
. "$(dirname "$0")/../lib.sh"

mkdir -p "$BACKING/pre/sub"
printf 'config-v1' > "$BACKING/pre/config.json"
mkblock "$BACKING/pre/sub/aaaa.bin" 1M
bfs_mount max_size=64M

# files placed in BACKING before mounting are visible
assert_eq "config-v1" "$(cat "$MNT/pre/config.json")" "pre-existing file through mount"
checkblock "$MNT/pre/sub/aaaa.bin" 1M >/dev/null || fail "pre-existing block content through mount"
assert_eq "config.json sub" "$(ls "$MNT/pre" | tr '\n' ' ' | sed 's/ $//')" "ls of pre"

# writes through the mount land in BACKING
mkdir -p "$MNT/a/b/c" || fail "mkdir -p"
assert_exists "$BACKING/a/b/c"
cp "$BACKING/pre/sub/aaaa.bin" "$MNT/a/b/c/copy.bin" || fail "cp into mount"
cmp "$BACKING/pre/sub/aaaa.bin" "$BACKING/a/b/c/copy.bin" || fail "cp through mount: backing bytes differ"
dd if=/dev/urandom of="$MNT/a/direct.dat" bs=1M count=3 oflag=direct status=none || fail "dd oflag=direct"
cmp "$MNT/a/direct.dat" "$BACKING/a/direct.dat" || fail "O_DIRECT data differs between mount and backing"
dd if="$MNT/a/direct.dat" of=/dev/null bs=1M iflag=direct status=none || fail "dd iflag=direct"
echo line1 > "$MNT/a/log.txt"; echo line2 >> "$MNT/a/log.txt"
assert_eq "$(printf 'line1\nline2')" "$(cat "$BACKING/a/log.txt")" "append through mount"
mv "$MNT/a/log.txt" "$MNT/a/b/log2.txt" || fail "mv"
assert_missing "$BACKING/a/log.txt"; assert_exists "$BACKING/a/b/log2.txt"
ln "$MNT/a/b/log2.txt" "$MNT/a/hard" || fail "ln"
assert_eq 2 "$(stat -c %h "$BACKING/a/hard")" "link count in backing"
ln -s b/log2.txt "$MNT/a/soft" || fail "ln -s"
assert_eq "b/log2.txt" "$(readlink "$BACKING/a/soft")" "symlink target in backing"
assert_eq "b/log2.txt" "$(readlink "$MNT/a/soft")" "readlink through mount"
assert_eq "line1" "$(head -n1 "$MNT/a/soft")" "read through a relative symlink"
truncate -s 5000000 "$MNT/a/sparse" || fail "truncate -s"
assert_eq 5000000 "$(stat -c %s "$BACKING/a/sparse")" "truncate size in backing"
touch -d '2001-02-03 04:05:06' "$MNT/a/sparse"
assert_eq "$(stat -c %Y "$BACKING/a/sparse")" "$(stat -c %Y "$MNT/a/sparse")" "mtime mount vs backing"
assert_eq "$(date -d '2001-02-03 04:05:06' +%s)" "$(stat -c %Y "$MNT/a/sparse")" "touch -d mtime"
chmod 640 "$MNT/a/sparse"; assert_eq 640 "$(stat -c %a "$BACKING/a/sparse")" "chmod in backing"
chown 4242:4343 "$MNT/a/sparse"; assert_eq "4242:4343" "$(stat -c %u:%g "$BACKING/a/sparse")" "chown in backing"
setfattr -n user.vllm.kv_crc32c -v crc-deadbeef "$MNT/a/b/c/copy.bin" || fail "setfattr"
assert_eq crc-deadbeef "$(getfattr --absolute-names --only-values -n user.vllm.kv_crc32c "$BACKING/a/b/c/copy.bin")" "xattr in backing"
assert_eq crc-deadbeef "$(getfattr --absolute-names --only-values -n user.vllm.kv_crc32c "$MNT/a/b/c/copy.bin")" "xattr through mount"
fallocate -l 2M "$MNT/a/prealloc" || fail "fallocate"
assert_eq 2097152 "$(stat -c %s "$BACKING/a/prealloc")" "fallocate size in backing"

# typical failures give the errno a plain directory gives
assert_errno ENOENT  stat "$MNT/nope"
assert_errno ENOENT  open "$MNT/nope/x" w,creat
assert_errno EEXIST  open "$MNT/a/hard" w,creat,excl
assert_errno EEXIST  mkdir "$MNT/a"
assert_errno ENOTEMPTY rmdir "$MNT/a"
assert_errno ENOTDIR rmdir "$MNT/a/hard"
assert_errno EISDIR  unlink "$MNT/a/b"
assert_errno EISDIR  open "$MNT/a" w
assert_errno EEXIST  renameat2 "$MNT/a/hard" "$MNT/a/sparse" noreplace
assert_errno OK      renameat2 "$MNT/a/hard" "$MNT/a/sparse" exchange
assert_eq 5000000 "$(stat -c %s "$BACKING/a/hard")" "exchange swapped backing files"
assert_errno ENODATA getxattr "$MNT/a/hard" user.nothing
assert_errno ELOOP   open "$MNT/a/soft" r,nofollow
assert_errno EINVAL  readlink "$MNT/a/hard"

# O_DIRECT create + one aligned write + rename (the vLLM store)
assert_errno OK writedirect "$MNT/a/b/k.bin_0001.tmp" 2M kseed
assert_errno OK rename "$MNT/a/b/k.bin_0001.tmp" "$MNT/a/b/k.bin"
checkblock "$BACKING/a/b/k.bin" 2M kseed >/dev/null || fail "O_DIRECT block bytes in backing"
checkblock "$MNT/a/b/k.bin" 2M kseed >/dev/null || fail "O_DIRECT block bytes through mount"

# a file unlinked while open keeps working until the last close
exec {fd}<>"$MNT/a/b/log2.txt"
rm "$MNT/a/b/log2.txt" "$MNT/a/sparse" || fail "rm of both links"
assert_missing "$MNT/a/b/log2.txt"
assert_eq line1 "$(head -n1 <&"$fd")" "read from fd of unlinked file"
exec {fd}>&-

# new files in BACKING show through the mount (never looked up before)
printf 'late' > "$BACKING/a/late.txt"
assert_eq late "$(cat "$MNT/a/late.txt")" "file created in backing while mounted"

# rm -r through the mount empties BACKING
rm -rf "$MNT/a" "$MNT/pre" || fail "rm -rf through mount"
assert_eq "" "$(ls -A "$BACKING")" "BACKING empty after rm -rf"
assert_eq "" "$(ls -A "$MNT")" "mount empty after rm -rf"
bfs_unmount
log PASS
