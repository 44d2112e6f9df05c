#!/usr/bin/env bash
# Empty parent directories left by eviction are removed (up to, never
# including, BACKING); directories that still hold something stay; the
# mount does not show the removed directories and they can be re-created.
# An engine's flat store (a directory made once at start-up in which it
# then creates many files: SGLang's HiCacheFile, LMCache's local disk) stays
# when eviction empties it, so the engine's next store in it works.
. "$(dirname "$0")/../lib.sh"

MAX=$((24 * MiB))
m=0
for p in old/aa/bb/1 old/aa/bb/2 old/aa/cc/3 mixed/dd/4 mixed/ee/5 top6; do
    mkblock_old "$BACKING/$p.bin" 2M $m; m=$((m + 1))
done
printf keep > "$BACKING/mixed/dd/keep.txt"
touch -d "$(old_mtime 0)" "$BACKING/mixed/dd/keep.txt"

bfs_mount max_size=24M
res=$(kv_store "$MNT/new" 24 dirs) || fail "writer crashed"   # 48 MiB = 2 x max
assert_eq 0 "$(json_get "$res" errors)" "store errors ($res)"
poll_until 10 "usage <= high watermark" usage_at_most $((MAX * 95 / 100))

for p in old/aa/bb/1 old/aa/bb/2 old/aa/cc/3 mixed/dd/4 mixed/ee/5 top6; do
    assert_missing "$BACKING/$p.bin" "oldest blocks evicted"
done
# Emptied directories go once the kernel has forgotten their inodes (so no
# client that just resolved one loses it): promptly, not necessarily at once.
no_empty_dirs() { [ -z "$(find "$BACKING" -mindepth 1 -type d -empty)" ] && [ ! -e "$BACKING/old" ]; }
if ! poll_until_ok 10 no_empty_dirs; then
    fail "empty directories left after eviction (10 s later): $(find "$BACKING" -mindepth 1 -type d -empty | head -n 5 | tr '\n' ' ')"
fi
assert_missing "$BACKING/old" "directory tree emptied by eviction should be removed"
assert_missing "$BACKING/mixed/ee" "emptied directory should be removed"
assert_exists "$BACKING/mixed/dd/keep.txt" "directory with a non-block file must stay"
[ -d "$BACKING" ] || fail "BACKING itself was removed"

assert_errno ENOENT stat "$MNT/old"
assert_errno ENOENT stat "$MNT/mixed/ee"
assert_eq "dd" "$(ls "$MNT/mixed")" "mount listing of mixed/"
# re-creating a removed directory path works (no stale directory inode)
mkdir -p "$MNT/old/aa/bb" || fail "mkdir -p of a removed path"
mkblock "$MNT/old/aa/bb/again.bin" 2M
checkblock "$BACKING/old/aa/bb/again.bin" 2M >/dev/null || fail "block in re-created dir"

# evicting everything leaves BACKING (and the mount) in place
bfs_unmount
rm -rf "${BACKING:?}"/*
mkblock_old "$BACKING/only/x/a.bin" 2M 0
bfs_mount max_size=4M
assert_errno OK writefile "$MNT/filler.txt" 3M
poll_until 10 "empty dirs removed after evicting the last block" test ! -e "$BACKING/only"
[ -d "$BACKING" ] || fail "BACKING removed"
ls "$MNT" >/dev/null || fail "mount root unusable"
bfs_unmount

# a flat store as SGLang's HiCacheFile keeps it: makedirs once, then each
# store is .<uuid4 hex>.tmp then os.replace to <key>.bin; 20 stores of
# 256 KiB in kv/flat, one block in kv/fan/x (a fan-out leaf), then 24 MiB
# elsewhere evict both. Once the leaf is removed (the reaper has run past
# both), the flat store must still be there and take a store.
rm -rf "${BACKING:?}"/*
bfs_mount max_size=16M
sg_store() { # DIR FIRST LAST
    $PY - "$@" <<'PYEOF'
import os, sys, uuid
d, a, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(a, b + 1):
    tmp = os.path.join(d, ".%s.tmp" % uuid.uuid4().hex)
    with open(tmp, "wb") as f:
        f.write(os.urandom(256 << 10))
    os.replace(tmp, os.path.join(d, "page%03d.bin" % i))
PYEOF
}
# evict_flat SEED WHEN: other stores push out kv/flat's blocks and the fan-out
# leaf kv/fan/x; the leaf is reaped, the flat store's directory stays
evict_flat() {
    local res
    res=$(kv_store "$MNT/other" 12 "$1") || fail "writer crashed"
    assert_eq 0 "$(json_get "$res" errors)" "store errors ($res)"
    poll_until 10 "the flat store's blocks evicted$2" test -z "$(find "$BACKING/kv/flat" -name '*.bin')"
    poll_until 10 "the emptied fan-out leaf removed$2" test ! -e "$BACKING/kv/fan"
    [ -d "$BACKING/kv/flat" ] || fail "the flat store's directory was removed when eviction emptied it$2"
}
mkdir -p "$MNT/kv/flat" "$MNT/kv/fan/x" || fail "mkdir"
sg_store "$MNT/kv/flat" 1 20 || fail "stores into the flat directory"
mkblock "$MNT/kv/fan/x/one.bin" 256K
evict_flat flat ""
sg_store "$MNT/kv/flat" 21 21 || fail "a store into the flat directory after its blocks were evicted"
assert_exists "$BACKING/kv/flat/page021.bin" "the store after eviction"
bfs_unmount

# after a restart: a directory found holding 16 or more blocks is a flat
# store too (the start-up index counts them)
rm -rf "${BACKING:?}"/*
for i in $(seq 1 20); do mkblock_old "$BACKING/kv/flat/page$i.bin" 256K "$i"; done
mkblock_old "$BACKING/kv/fan/x/one.bin" 256K 0
bfs_mount max_size=16M
evict_flat flat2 " (after a restart: indexed at start-up)"
sg_store "$MNT/kv/flat" 22 22 || fail "a store into the flat directory after a restart and its eviction"
bfs_unmount

# umount right after the stores: the directories eviction emptied in the
# last seconds go too, not left in BACKING for good (after a restart nothing
# tells them from a user's empty directories)
rm -rf "${BACKING:?}"/*
bfs_mount max_size=8M
res=$(kv_store "$MNT/last" 16 last 1M) || fail "writer crashed"   # 2 x max_size: evicts inline
assert_eq 0 "$(json_get "$res" errors)" "store errors ($res)"
bfs_unmount
assert_eq "" "$(find "$BACKING" -mindepth 1 -type d -empty | head -n 3 | tr '\n' ' ')" \
    "empty directories left in BACKING after umount"
log PASS
