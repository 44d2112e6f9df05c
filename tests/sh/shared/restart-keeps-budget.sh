#!/usr/bin/env bash
# TIMEOUT: 120
# Shared tier, quick form (two mounts over one local directory, the budget
# record on): a node that unmounts and comes back does not shrink the
# budget the nodes share. Unmounting moves the node's net into the
# record's drift (bytes no node counts) and lists its objects in
# BACKING/.boundfs/orphans; the sweeper (node 1) adopts them at its next
# beat (or after its next reconcile pass, for blocks it did not know yet)
# and takes their bytes off the drift (src/fs/shared/orphans.rs).
# Without the adoption the drift keeps the left node's bytes after its
# blocks are evicted, and usage settles at max_size minus what it held.
# Checked from outside: the drift falls back under one block within 10 s
# and node 1's net (its status) grows by node 2's 8 blocks,
# and after 3 x max_size more stores through the node that came back,
# usage is at or above the low watermark minus two blocks.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

MAX=$((32 << 20)); BLOCK=$((2 << 20))
shared_local 2
shared_nodes_up 2 "max_size=32M,reconcile_interval=1s"
record="$BACKING1/.boundfs/budget"
drift() { head -n 1 "$record" | cut -d' ' -f3; }
used() { du -sB1 --exclude=.boundfs "$BACKING1" | cut -f1; }

mkblocks "$MNT1" a 0 3
mkblocks "$MNT2" b 0 7
net1=$(node_stat 1 shared_net)
node_unmount 2
_adopted() { [ "$(drift)" -lt "$BLOCK" ]; }
poll_until 10 "node 1 adopting node 2's blocks (drift under one block)" _adopted
log "node 2 unmounted holding 8 blocks: drift now $(drift) B, node 1's net $net1 -> $(node_stat 1 shared_net) B"
assert_ge "$(node_stat 1 shared_net)" $((net1 + 8 * BLOCK)) "node 2's blocks are node 1's now"
node_mount 2 "max_size=32M,reconcile_interval=1s"
poll_until 20 "node 2's start-up index" _node_indexed 2
mkblocks "$MNT2" c 0 47
low=$((MAX * 9 / 10 - 2 * BLOCK))
log "after 96 MiB of stores through node 2: usage $(used) B, drift $(drift) B"
assert_ge "$(used)" "$low" "usage (du, without .boundfs) after the restart and 3 x max_size of stores"
assert_le "$(used)" "$MAX" "usage within max_size"
node_unmount 1
node_unmount 2
bfs_done
