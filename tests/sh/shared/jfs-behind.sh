#!/usr/bin/env bash
# Shared tier over JuiceFS: what one node removes is a change behind the
# other node's mount, forced step by step:
# 1. a directory node 2 just made (and its kernel resolved) is removed
#    through node 1; node 2's store into it recreates it and succeeds;
# 2. node 2's tier is full of its own blocks; node 1 removes half of them;
#    node 2 stores more: its eviction meets the removed ones first, they stop
#    counting at once and pay for the stores, so none of the blocks still
#    there is evicted (node 2 runs no reconcile pass: only eviction can see it).
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

shared_juicefs 2
node_mount 1 "max_size=64M"
node_mount 2 "max_size=16M,reconcile_interval=0"

mkdir -p "$MNT2/aa/bb" || fail "mkdir on node 2"
stat "$MNT2/aa/bb" >/dev/null || fail "stat on node 2"
rm -r "$MNT1/aa" || fail "rm -r on node 1"
mkblocks "$MNT2/aa/bb" x 0 0
assert_eq OK "$(checkblock "$BACKING1/aa/bb/x0.bin" 2M)" "node 2's store under the directory node 1 removed, seen on node 1's client"
rm -r "$MNT2/aa" || fail "rm -r on node 2"

mkblocks "$MNT2" b 0 6
for i in 0 1 2 3; do rm "$MNT1/b$i.bin" || fail "rm b$i.bin on node 1"; done
mkblocks "$MNT2" c 0 2
for i in 4 5 6; do
    assert_eq OK "$(checkblock "$BACKING1/b$i.bin" 2M)" "b$i.bin, never removed, survives node 2's stores"
done
for i in 0 1 2; do
    assert_eq OK "$(checkblock "$BACKING1/c$i.bin" 2M)" "c$i.bin stored"
done
assert_eq 0 "$(node_stat 2 enospc)" "ENOSPC answers on node 2"
node_unmount 1
node_unmount 2
bfs_done
