#!/usr/bin/env bash
# Shared tier, clock skew, quick form: two mounts over one local directory,
# node 2's clock for recency stamps 5 minutes behind
# (BOUNDFS_TEST_CLOCK_SKEW_SECS=-300, a test-only knob). Node 1 (the
# sweeper) stores 4 "hot" blocks, then 6 "cold" ones; node 2 reads the hot
# ones (its recency stamps); node 1 stores past max_size. The hot blocks
# must survive and the cold ones go first: node 2 stamps in node 1's time
# (docs/design/shared-tier.md, "Clock skew"). By node 2's own clock its stamps would be
# 5 minutes older than node 1's stores, and the hot blocks would go first.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

OPTS="max_size=32M,stamp_interval=1,reconcile_interval=2"
shared_local 2
shared_nodes_up 1 "$OPTS"
BOUNDFS_TEST_CLOCK_SKEW_SECS=-300 node_mount 2 "$OPTS"
poll_until 20 "node 2's start-up index" _node_indexed 2
_offset_measured() { [ "$(node_stat 2 clock_offset_ms)" -gt 290000 ]; }
poll_until 20 "node 2 measuring its offset to node 1's clock (~ +300 s)" _offset_measured
log "node 2's offset to node 1's clock: $(node_stat 2 clock_offset_ms) ms"

mkblocks "$MNT1" hot 1 4
sleep 1.1
mkblocks "$MNT1" cold 1 6
sleep 1.1
for i in 1 2 3 4; do
    cat "$MNT2/hot$i.bin" >/dev/null || fail "node 2 reading hot$i"
done
_stamped() { [ "$(node_stat 2 stamps)" -ge 4 ]; }
poll_until 10 "node 2's stamps of the 4 hot blocks" _stamped
sleep 3 # node 1's reconcile pass (2 s) reads them
mkblocks "$MNT1" new 1 8
poll_until 20 "node 1's sweep below max_size" usage_at_most $((32 << 20))
hot=0 cold=0
for i in 1 2 3 4; do [ -e "$BACKING/shared/hot$i.bin" ] && hot=$((hot + 1)); done
for i in 1 2 3 4 5 6; do [ -e "$BACKING/shared/cold$i.bin" ] && cold=$((cold + 1)); done
log "hot blocks left $hot/4, cold left $cold/6, node 1 evicted $(node_stat 1 evictions); node 2's offset now $(node_stat 2 clock_offset_ms) ms"
assert_eq 4 "$hot" "blocks node 2 (clock 5 minutes behind) read survive node 1's eviction"
[ "$cold" -lt 6 ] || fail "no cold block was evicted (the tier did not turn over)"
node_unmount 1
node_unmount 2
bfs_done
