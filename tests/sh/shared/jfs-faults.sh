#!/usr/bin/env bash
# Shared tier over JuiceFS, faults:
# 1. node 2's boundfs SIGKILLed while it holds four blocks open (LOCK_SH):
#    its locks die with it (the kernel closes its backing fds), so node 1
#    evicts those blocks and keeps storing; node 2 mounts again and serves.
# 2. node 2's JuiceFS client SIGKILLed while its boundfs holds blocks open:
#    node 1 keeps storing and reading; node 2's mount answers errors at once
#    (no hang); once its client is mounted again, node 2's boundfs must be
#    mounted again too (it holds fds of the dead client's mount) and serves.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"
# Node 1 is under pressure (16M budget); node 2 only reads (a budget it never
# reaches, so that its own evictor stays out of this: one shared budget is
# for a later change).

shared_juicefs 2
node_mount 1 "max_size=16M,reconcile_interval=0"
node_mount 2 "max_size=1G,reconcile_interval=0"

# hold_on_2 PREFIX: blocks PREFIX0..5 stored through node 1, the first four
# held open through node 2 (the holder is left waiting)
hold_on_2() {
    local i
    mkblocks "$MNT1" "$1" 0 5
    rm -f "$BFS_TMP/ready"
    $BLOCKS hold --ready "$BFS_TMP/ready" --go "$BFS_TMP/never" --timeout 300 --size 2M \
        "$MNT2/${1}0.bin" "$MNT2/${1}1.bin" "$MNT2/${1}2.bin" "$MNT2/${1}3.bin" >/dev/null 2>&1 &
    HOLDER=$!
    bfs_bg "$HOLDER"
    poll_until 60 "node 2 holding ${1}0..3 open" test -e "$BFS_TMP/ready"
}
# store_on_1 PREFIX N: N blocks through node 1, every one must be stored
store_on_1() { mkblocks "$MNT1" "$1" 1 "$2"; }

# -- 1. boundfs SIGKILLed holding locks
hold_on_2 a
node_kill 2
kill -KILL "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
store_on_1 x 12
gone=0
for i in 0 1 2 3; do [ -e "$BACKING1/a$i.bin" ] || gone=$((gone + 1)); done
log "after node 2's boundfs was killed: $gone of 4 blocks it held evicted by node 1"
assert_eq 4 "$gone" "blocks whose holder's daemon was SIGKILLed are evictable again (locks die with the process)"
node_mount 2 "max_size=1G,reconcile_interval=0"
assert_eq OK "$(checkblock "$MNT2/x12.bin" 2M)" "node 2 mounted again reads node 1's latest block"

# -- 2. node 2's JuiceFS client SIGKILLed while its boundfs holds blocks open
hold_on_2 b
jfs_kill 2
kill -KILL "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
store_on_1 y 12
assert_eq OK "$(checkblock "$MNT1/y12.bin" 2M)" "node 1 serves while node 2's JuiceFS client is dead"
kept=0
for i in 0 1 2 3; do [ -e "$BACKING1/b$i.bin" ] && kept=$((kept + 1)); done
log "after node 2's JuiceFS client was killed: $kept of 4 blocks it held still locked (kept) on node 1"
e=$(timeout 10 $OP stat "$MNT2/y12.bin" 2>&1 | head -n 1 | cut -d' ' -f1)
[ "$e" != OK ] || fail "node 2 over a dead JuiceFS client still answered stat"
log "node 2's boundfs over its dead client answers $e"
node_unmount 2
umount -l "$BFS_TMP/jfs2"
jfs_mount 2
node_mount 2 "max_size=1G,reconcile_interval=0"
assert_eq OK "$(checkblock "$MNT2/y12.bin" 2M)" "node 2 serves again after its client and its boundfs are mounted again"
store_on_1 z 4
node_unmount 1
node_unmount 2
bfs_done
