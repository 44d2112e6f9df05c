#!/usr/bin/env bash
# Hard links through the mount: a block with a second name is not evicted
# while both exist (eviction would only remove one name); once the second
# name is removed the block is evictable again at once, under the name
# eviction knew (the fresh-user check found it nameless, so writes got ENOSPC
# until the next reconcile pass).
. "$(dirname "$0")/../lib.sh"

MAX=$((16 * MiB))
bfs_mount max_size=16M,reconcile_interval=0
mkblock "$MNT/big.bin" 12M
ln "$MNT/big.bin" "$MNT/second.bin" || fail "link through the mount"
assert_errno ENOSPC writefile "$MNT/x.bin" 6M      # the linked block is not evicted
rm -f "$MNT/x.bin"
assert_exists "$BACKING/big.bin" "a block with two names was evicted"
rm "$MNT/second.bin" || fail "unlink of the second name"
assert_errno OK writefile "$MNT/x.bin" 6M          # evicts big.bin at once
assert_missing "$BACKING/big.bin" "the block under its first name after the second went"
assert_le "$(du_backing)" $((MAX + MiB)) "du of BACKING"
bfs_unmount
log PASS
