#!/usr/bin/env bash
# TIMEOUT: 180
# Shared tier over JuiceFS: a node that dies holding part of the shared
# budget gives it back (src/fs/shared/grants.rs, "Dead nodes"), and no other
# node waits for it meanwhile.
# 1. node 2 (of two, max_size=32M each) stores 12 MiB of its own blocks:
#    the budget record (BACKING/.boundfs/budget) has a line for it whose
#    grant covers them;
# 2. node 2's boundfs is SIGKILLed: its line stays (nothing unregistered
#    it), and node 1 keeps storing with no error, evicting its own blocks
#    when the record has nothing free;
# 3. within 15 s of silence (the reclaim time; 15 s more when node 2 held
#    the sweeper lease, which node 1 must take over first) + 10 s of slack,
#    the sweeper (node 1) removes node 2's line: its net moves to the drift, its grant is freed,
#    and node 1's stores may then use it (node 1's grant grows past what was
#    free while node 2's line held it).
# Without the record (one budget kept against views) there is no line to
# check; without the reclaim the line stays for ever.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

shared_juicefs 2
node_mount 1 "max_size=32M,reconcile_interval=0,shared_budget=record"
node_mount 2 "max_size=32M,reconcile_interval=0,shared_budget=record"
record="$BACKING1/.boundfs/budget"
# node_lines: the record's node lines (id grant net beat)
node_lines() { grep -v '^boundfs-budget' "$record" | grep -c .; }
lines_are() { test "$(node_lines)" = "$1"; }

mkblocks "$MNT2" two 0 5
poll_until 10 "both nodes in the budget record" lines_are 2
granted2=$(node_stat 2 shared_granted)
sweeper2=$(node_stat 2 sweeper)
assert_ge "$granted2" $((12 * MiB)) "node 2's grant covers its 12 MiB"
mkblocks "$MNT1" one 0 3
g1_before=$(node_stat 1 shared_granted)

# node 2's beat has published all it holds (ids are host-PID-start-N): a
# node killed between a store and its next beat leaves that store out of
# the net the reclaim moves (at most one beat of its stores)
pid2=${SHARED_BFS[2]}
_published2() { [ "$(grep -- "-$pid2-" "$record" | cut -d' ' -f3)" = "$(node_stat 2 shared_net)" ]; }
poll_until 10 "node 2's beat publishing its whole net" _published2
node_kill 2
# Node 1 stores past what is free while node 2's line holds its grant.
mkblocks "$MNT1" one 4 13
assert_eq 0 "$(node_stat 1 enospc)" "ENOSPC answers on node 1 while node 2's line holds its grant"
assert_eq 2 "$(node_lines)" "node 2's line is still in the record right after its death"
t0=$SECONDS
log "record after node 2's death: $(grep . "$record" | tr "\n" "|")"
if [ "$sweeper2" = True ]; then limit=40; else limit=25; fi
poll_until "$limit" "node 2's line reclaimed by the sweeper" lines_are 1
log "node 2's line reclaimed $((SECONDS - t0)) s after node 1's stores (node 2 was the sweeper: $sweeper2)"
drift=$(head -n 1 "$record" | cut -d' ' -f3)
# Node 2's net went to the drift: the record still counts the whole tree
# (drift + node 1's net >= what du counts, but for the root directory).
net1=$(grep -v '^boundfs-budget' "$record" | grep . | cut -d' ' -f3)
used=$(du -sB1 --exclude=.boundfs "$BACKING1" | cut -f1)
assert_ge $((drift + net1 + 65536)) "$used" "the record's drift ($drift B) + node 1's net ($net1 B) against the tree's $used B"
mkblocks "$MNT1" more 0 5
g1_after=$(node_stat 1 shared_granted)
log "node 1's grant: $g1_before before, $g1_after after the reclaim; drift $drift"
assert_eq 0 "$(node_stat 1 enospc)" "ENOSPC answers on node 1"
for i in 0 1 2 3 4 5; do
    assert_eq OK "$(checkblock "$BACKING1/more$i.bin" 2M)" "more$i.bin stored after the reclaim"
done
node_unmount 1
bfs_done
