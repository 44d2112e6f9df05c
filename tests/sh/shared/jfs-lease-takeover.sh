#!/usr/bin/env bash
# Shared tier over JuiceFS, sweeper lease takeover by heartbeat age: a sweeper whose lock outlives it (its boundfs stopped, or
# its JuiceFS client dead: the flock stays with the client's session in
# Redis) is replaced once its heartbeat has not changed for 15 s, and a
# replaced holder that comes back steps down.
# 1. node 1 sweeps; its boundfs is SIGSTOPped (its JuiceFS client, and so its
#    lock, stay alive): node 2 takes the lease over and sweeps (its budget
#    lowered below its usage: a sweep no store races); node 1 resumed (SIGCONT) steps down, and says
#    node 2 sweeps.
# 2. node 2 sweeps; its JuiceFS client is SIGKILLed (its lock stays in Redis:
#    the fixture's clients run --no-bgjob, so no session is ever cleaned):
#    node 1 takes the lease over and sweeps.
# The base build never hands the lease over: node 2 waits in step 1 for as
# long as node 1 is stopped.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

OPTS="max_size=16M,reconcile_interval=2s"
shared_juicefs 2
_sweeper() { [ "$(node_stat "$1" sweeper)" = "$2" ]; }
_swept() { [ "$(node_stat "$1" eviction_sweeps)" -ge "$2" ]; }
node_mount 1 "$OPTS"
poll_until 20 "node 1 holding the sweeper lease" _sweeper 1 True
node_mount 2 "$OPTS"
poll_until 20 "node 2's start-up index" sh -c "[ \"\$(getfattr --absolute-names --only-values -n user.boundfs.stats $BFS_TMP/mnt2 | $PY -c 'import json,sys; print(json.load(sys.stdin)[\"indexing\"])')\" = False ]"
assert_eq False "$(node_stat 2 sweeper)" "node 2 does not sweep while node 1 holds the lease"

# -- 1. the sweeper's boundfs stopped
p1=${SHARED_BFS[1]}
kill -STOP "$p1"
t0=$SECONDS
poll_until 45 "node 2 taking the sweeper lease over from the stopped node 1" _sweeper 2 True
log "node 2 took the lease over $((SECONDS - t0))s after node 1 stopped"
case "$(node_stat 2 sweeper_holder)" in *"pid ${SHARED_BFS[2]} "*) ;; *) fail "node 2's status names '$(node_stat 2 sweeper_holder)' as the sweeper" ;; esac
# a sweep, without stores racing it: node 2's budget lowered below its usage
mkblocks "$MNT2" s 1 6
setfattr -n user.boundfs.max_size -v 8M "$MNT2"
poll_until 20 "node 2 running a background sweep" _swept 2 1
kill -CONT "$p1"
poll_until 10 "node 1, resumed, stepping down" _sweeper 1 False
assert_eq True "$(node_stat 2 sweeper)" "node 2 still sweeps after node 1 came back"
case "$(node_stat 1 sweeper_holder)" in *"pid ${SHARED_BFS[2]} "*) ;; *) fail "node 1's status names '$(node_stat 1 sweeper_holder)' as the sweeper, not node 2" ;; esac
sweeps1=$(node_stat 1 eviction_sweeps)

# -- 2. the sweeper's JuiceFS client killed
jfs_kill 2
t0=$SECONDS
poll_until 45 "node 1 taking the sweeper lease over from node 2's dead client" _sweeper 1 True
log "node 1 took the lease over $((SECONDS - t0))s after node 2's JuiceFS client was killed"
mkblocks "$MNT1" t 1 2
setfattr -n user.boundfs.max_size -v 4M "$MNT1"
poll_until 20 "node 1 running a background sweep" _swept 1 $((sweeps1 + 1))
assert_le "$(node_stat 1 usage)" $((4 << 20)) "node 1's usage after its sweep"
node_unmount 1
umount -l "$BFS_TMP/mnt2"
bfs_done
