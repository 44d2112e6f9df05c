#!/usr/bin/env bash
# A use that came too soon after a block's last stamp to be stamped then
# (within stamp_interval, here the default 60s) still reaches the backing
# mtime at a clean unmount, so the LRU order survives a restart. Ten blocks
# are stored through the mount, the two oldest read back at once, the mount
# stopped: the two read blocks must now carry the newest mtimes, and after a
# remount the pressure of new blocks evicts the unread ones first.
. "$(dirname "$0")/../lib.sh"

MAX=$((32 * MiB))
OPTS=max_size=32M          # stamp_interval left at its default (60s)

bfs_mount "$OPTS"
mkdir "$MNT/kv" || fail "mkdir kv"
for i in $(seq 0 9); do mkblock "$MNT/kv/b$i.bin" 2M; done    # 20 MiB
checkblock "$MNT/kv/b0.bin" 2M >/dev/null || fail "read b0"
checkblock "$MNT/kv/b1.bin" 2M >/dev/null || fail "read b1"
bfs_unmount

# From outside: the reads are in the backing mtimes, ahead of every unread
# block (mtimes in whole nanoseconds: they may differ by 1 ns).
mtime_ns() { stat -c %.9Y "$1" | tr -d .; }
newest_unread=0
for i in $(seq 2 9); do
    t=$(mtime_ns "$BACKING/kv/b$i.bin")
    [ "$t" -gt "$newest_unread" ] && newest_unread=$t
done
for b in b0 b1; do
    t=$(mtime_ns "$BACKING/kv/$b.bin")
    [ "$t" -gt "$newest_unread" ] ||
        fail "$b was read after every other block was stored, but its mtime $t ns is not newer than the newest unread block's $newest_unread (the read was not persisted at unmount)"
done
# The two reads keep their order: b0 was read before b1.
t0=$(mtime_ns "$BACKING/kv/b0.bin"); t1=$(mtime_ns "$BACKING/kv/b1.bin")
[ "$t0" -lt "$t1" ] || fail "b0 (read first) should be older than b1: $t0 vs $t1 ns"

bfs_mount "$OPTS"
for i in $(seq 0 5); do mkblock "$MNT/kv/n$i.bin" 2M; done   # 32 MiB stored in all
poll_until 10 "usage <= high watermark after the new blocks" usage_at_most $((MAX * 95 / 100))
assert_missing "$BACKING/kv/b2.bin" "the oldest unread block should be evicted first"
assert_exists "$BACKING/kv/b0.bin" "block read before the unmount was evicted (its recency was lost at unmount)"
assert_exists "$BACKING/kv/b1.bin" "block read before the unmount was evicted (its recency was lost at unmount)"
bfs_unmount
log PASS
