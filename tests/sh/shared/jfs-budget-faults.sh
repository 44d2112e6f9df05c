#!/usr/bin/env bash
# TIMEOUT: 300
# Shared tier over JuiceFS with the shared budget record
# (-o shared_budget=record, src/fs/shared/grants.rs): a node that dies or
# is cut off holding part of the budget gives it back within the reclaim
# time (15 s of an unchanged beat, by the sweeper's clock) + 10 s of slack,
# and the other node never waits for it. Two nodes, max_size=32M each,
# node 1 the sweeper, node 1 storing at full speed (2 threads) throughout,
# each store timed (helpers/timed_stores.py) and the volume's Redis
# usedSpace sampled every 0.1 s.
# 1. node 2's JuiceFS client SIGKILLed while node 2 holds grant (12 MiB of
#    its own blocks) and holds open two blocks node 1 stored (node 1 holds
#    two others): node 2's line is reclaimed within 25 s, node 1 stores on
#    with no error and no store over RECORD_LOCK_WAIT + 4 s, usage stays
#    within max_size + 2 blocks + 1 MiB (.boundfs files, directories), the
#    blocks held open on both nodes survive exact; node 2 (client, then
#    boundfs) mounts again, takes a fresh line and stores.
# 2. node 2's network namespace cut from Redis for 30 s (its veth down)
#    while both nodes store, node 2 outside a transaction on the record (the
#    record's lock is held through node 1's client across the cut): the same
#    bounds on node 1; node 2's line is reclaimed meanwhile; JuiceFS holds
#    node 2's calls while Redis is out of reach (measured, not asserted: that
#    is JuiceFS's behaviour); after the link is back node 2 finds its line
#    gone, takes its count back from the drift (its log says so), stores
#    without error, and no store of its stays stuck. (A cut inside a
#    transaction keeps the record locked until the link is back: case 3's
#    bound on node 1.)
# 3. the record's flock held through node 2's client (a transaction in
#    flight) when that client is SIGKILLed: JuiceFS keeps the lock with the
#    dead session (until a client running background jobs cleans it up, 5
#    heartbeats = 60 s later by default; this fixture runs none), so the
#    record cannot be changed; node 1 still stores with no error and no
#    store over the same bound (it evicts its own blocks within the grant it
#    has). Without the bounded wait for the record's lock (RECORD_LOCK_WAIT)
#    node 1's stores block for as long as the lock is held.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

OPTS="max_size=32M,reconcile_interval=0,shared_budget=record"
MAX=$((32 * MiB))
BOUND=$((MAX + 2 * 2 * MiB + MiB)) # max_size + N x block + .boundfs files
STALL=5                            # RECORD_LOCK_WAIT (1 s) + 4 s of slack
shared_juicefs 2
shared_nodes_up 2 "$OPTS"
record="$BACKING1/.boundfs/budget"
# node_lines: the record's node lines, "id grant net beat" each
node_lines() { grep -v '^boundfs-budget' "$record" | grep . || true; }
lines_are() { test "$(node_lines | grep -c .)" = "$1"; }
line_of() { node_lines | awk -v id="$1" '$1 == id'; }
ids() { node_lines | awk '{ print $1 }' | sort; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
REDIS_NS=${SHARED_NS_OF[1]:+/run/netns/${SHARED_NS_OF[1]}}

# load_start K NAME [THREADS]: timed stores on node K until $BFS_TMP/NAME.stop
load_start() {
    local k=$1 name=$2 m
    m=$(eval echo "\$MNT$k")
    rm -f "$BFS_TMP/$name.stop"
    $PY "$BFS_HELPERS/timed_stores.py" "$m" --stop "$BFS_TMP/$name.stop" --threads "${3:-2}" \
        --seed "$name" --progress "$BFS_TMP/$name.n" --grace 60 --trace "$BFS_TMP/$name.trace" \
        --redis "${SHARED_META[1]}" ${REDIS_NS:+--redis-netns "$REDIS_NS"} \
        >"$BFS_TMP/$name.json" 2>"$BFS_TMP/$name.err" &
    LOAD_PID=$!
    bfs_bg "$LOAD_PID"
}
stored() { cat "$BFS_TMP/$1.n" 2>/dev/null || echo 0; }
stored_past() { [ "$(stored "$1")" -ge "$2" ]; }
# load_stop NAME PID: stop it and wait for its JSON line (in LOAD_JSON)
load_stop() {
    touch "$BFS_TMP/$1.stop"
    wait "$2"
    LOAD_JSON=$(cat "$BFS_TMP/$1.json")
}
jget() { $PY -c 'import json,sys; v=json.loads(sys.argv[1]); print(eval(sys.argv[2], {}, v))' "$1" "$2"; }
# check_load NAME JSON: node 1's load had no error, no store over STALL s,
# and usage within BOUND
check_load() {
    local n=$1 j=$2
    [ -n "$j" ] || fail "$n: the load printed nothing: $(tail -n 3 "$BFS_TMP/$n.err")"
    log "$n: $j"
    assert_eq 0 "$(jget "$j" 'sum(errors.values()) + enospc + stuck')" "$n: node 1's store errors, ENOSPC and stuck stores"
    assert_eq 1 "$(jget "$j" "int(max_s <= $STALL)")" "$n: node 1's longest store ($(jget "$j" max_s) s) within ${STALL} s"
    assert_le "$(jget "$j" peak_used)" "$BOUND" "$n: peak usedSpace (max_size + 2 blocks + 1 MiB)"
    PEAKS+=" $n:$(jget "$j" "round((peak_used - $MAX) / 1048576, 2)")MiB"
}
PEAKS=""

# -- 1. node 2's JuiceFS client SIGKILLed holding grant and open blocks
mkblocks "$MNT1" held 0 3
$BLOCKS hold --ready "$BFS_TMP/ready2" --go "$BFS_TMP/never" --timeout 600 --size 2M \
    "$MNT2/held0.bin" "$MNT2/held1.bin" >/dev/null 2>&1 &
HOLD2=$!
bfs_bg "$HOLD2"
$BLOCKS hold --ready "$BFS_TMP/ready1" --go "$BFS_TMP/go1" --timeout 600 --size 2M \
    "$MNT1/held2.bin" "$MNT1/held3.bin" >"$BFS_TMP/hold1.out" 2>&1 &
HOLD1=$!
bfs_bg "$HOLD1"
poll_until 30 "both nodes holding their blocks open" test -e "$BFS_TMP/ready1" -a -e "$BFS_TMP/ready2"
mkblocks "$MNT2" two 0 5
poll_until 10 "both nodes in the budget record" lines_are 2
granted2=$(node_stat 2 shared_granted)
assert_ge "$granted2" $((12 * MiB)) "node 2's grant covers its 12 MiB"
ids_before=$(ids)
load_start 1 kill
L=$LOAD_PID
poll_until 30 "node 1 storing" stored_past kill 8
t_fault=$(now)
jfs_kill 2
kill -KILL "$HOLD2" 2>/dev/null
poll_until 25 "node 2's line reclaimed by the sweeper (node 1)" lines_are 1
t_reclaim=$(now)
RECLAIM1=$(elapsed "$t_fault" "$t_reclaim")
id1=$(ids)
log "1. node 2's line reclaimed ${RECLAIM1} s after its JuiceFS client was killed; record now: $(node_lines | tr '\n' '|')"
n=$(stored kill)
poll_until 60 "node 1 storing past the reclaim" stored_past kill $((n + 12))
load_stop kill "$L"; J1=$LOAD_JSON
check_load kill "$J1"
touch "$BFS_TMP/go1"
wait "$HOLD1" || fail "a block held open on node 1 was lost: $(cat "$BFS_TMP/hold1.out")"
for i in 0 1; do
    assert_eq OK "$(checkblock "$BACKING1/held$i.bin" 2M)" "held$i.bin, held open through node 2's dead client, intact"
done
# node 2 mounts again, client first (its boundfs holds fds of the dead one)
node_unmount 2
umount -l "$BFS_TMP/jfs2"
jfs_mount 2
node_mount 2 "$OPTS"
# Its start-up index first: until it is done, a CREATE (which may not
# wait for it: it holds a directory lock the index needs) finds nothing to
# evict, and with the record full it fails with ENOSPC (seen in CI once, in
# the 0.4 s the index took; a known limit, docs/design/shared-tier.md).
poll_until 30 "node 2's start-up index" _node_indexed 2
mkblocks "$MNT2" back 0 2
poll_until 10 "node 2 back in the record" lines_are 2
id2=$(ids | grep -vx "$id1")
case " $(echo $ids_before) " in *" $id2 "*) fail "node 2 came back with its old line $id2" ;; esac
log "1. node 2 remounted: fresh line $(line_of "$id2")"

# -- 2. node 2's network namespace cut from Redis for 30 s
dev="bfs$$b2"
ns2=${SHARED_NS_OF[2]:-}
if [ -z "$ns2" ]; then
    log "2. no network namespaces here ($SHARED_MODE): the cut is not tested"
else
    load_start 1 cut
    L=$LOAD_PID
    load_start 2 cut2 1
    L2=$LOAD_PID
    poll_until 30 "both nodes storing" eval 'stored_past cut 4 && stored_past cut2 2'
    # The cut must find node 2 outside a transaction on the record: its
    # lock held through node 1's client across the cut, for a moment.
    flock -x "$BACKING1/.boundfs/budget" -c "touch $BFS_TMP/rec1; while [ ! -e $BFS_TMP/cutdone ]; do sleep 0.02; done" &
    RL=$!
    bfs_bg "$RL"
    poll_until 10 "the record locked through node 1's client" test -e "$BFS_TMP/rec1"
    t_fault=$(now)
    ip -n "$ns2" link set "$dev" down || fail "cutting node 2's link"
    touch "$BFS_TMP/cutdone"
    wait "$RL"
    n2=$(stored cut2)
    # a client call on node 2 during the cut: how long JuiceFS holds it
    ( t0=$(now); r=$(timeout -s KILL 60 $OP stat "$MNT2/back0.bin" 2>&1 | head -n 1 | cut -d' ' -f1)
      echo "${r:-killed} $(elapsed "$t0" "$(now)")" >"$BFS_TMP/probe" ) &
    PROBE=$!
    poll_until 25 "node 2's line reclaimed during the cut" eval '[ -z "$(line_of "$id2")" ]'
    RECLAIM2=$(elapsed "$t_fault" "$(now)")
    log "2. node 2's line reclaimed ${RECLAIM2} s after the cut"
    poll_until 40 "30 s of cut" eval '[ "$(elapsed "$t_fault" "$(now)" | cut -d. -f1)" -ge 30 ]'
    during2=$(( $(stored cut2) - n2 ))
    ip -n "$ns2" link set "$dev" up || fail "restoring node 2's link"
    t_up=$(now)
    log "2. link back after $(elapsed "$t_fault" "$t_up") s; node 2 finished $during2 stores during the cut"
    poll_until 60 "node 2 back in the record" eval '[ -n "$(line_of "$id2")" ]'
    log "2. node 2's line back $(elapsed "$t_up" "$(now)") s after the link: $(line_of "$id2")"
    n2=$(stored cut2)
    poll_until 60 "node 2 storing again" stored_past cut2 $((n2 + 3))
    n=$(stored cut)
    poll_until 60 "node 1 storing on" stored_past cut $((n + 4))
    load_stop cut "$L"; J2=$LOAD_JSON
    check_load cut "$J2"
    load_stop cut2 "$L2"; J2b=$LOAD_JSON
    log "2. node 2's stores: $J2b"
    assert_eq 0 "$(jget "$J2b" 'stuck')" "node 2's stores still stuck 60 s after the link came back"
    assert_eq 0 "$(jget "$J2b" 'sum(errors.values()) + enospc')" "node 2's store errors across the cut"
    wait "$PROBE"
    log "2. stat on node 2 during the cut: $(cat "$BFS_TMP/probe") (answer, seconds)"
    grep -q "line in the shared budget record was reclaimed; it takes its count back" "$BFS_TMP"/node2.*.log ||
        fail "node 2 did not notice its line was reclaimed"
fi

# -- 3. the record's flock held through node 2's client when it dies
flock -x "$BACKING2/.boundfs/budget" -c "touch $BFS_TMP/locked; exec sleep 600" &
LOCKER=$!
bfs_bg "$LOCKER"
poll_until 30 "the record locked through node 2's client" test -e "$BFS_TMP/locked"
load_start 1 locked
L=$LOAD_PID
jfs_kill 2
t_fault=$(now)
n=$(stored locked)
poll_until 60 "node 1 storing 40 blocks with the record locked by a dead client" stored_past locked $((n + 40))
load_stop locked "$L"; J3=$LOAD_JSON
check_load locked "$J3"
log "3. after $(elapsed "$t_fault" "$(now)") s the record still has node 2's line: $(line_of "$id2")"
log "figures: reclaim ${RECLAIM1} s (client killed), ${RECLAIM2:-untested} s (cut); longest store on node 1: $(jget "$J1" max_s) / $(jget "${J2:-$J1}" max_s) / $(jget "$J3" max_s) s; peak over max_size:$PEAKS"
bfs_done
