#!/usr/bin/env bash
# Two boundfs mounts over one BACKING, each max_size=32M, reconcile_interval=1s,
# each storing 32 blocks (64 MiB) at the same time: each mount adopts the
# other's files at its next reconcile and evicts, so BACKING's total is back
# under max_size within a few intervals of the last store; no store fails.
. "$(dirname "$0")/lib.sh"

MAX=$((32 * MiB)); SLACK=$MiB
OPTS=max_size=32M,reconcile_interval=1s
MNT2="$BFS_TMP/mnt2"; mkdir -p "$MNT2"
bfs_mount "$OPTS"
"$BOUNDFS" -f "$BACKING" "$MNT2" -o "$OPTS" 2>"$BFS_TMP/daemon2.log" &
D2=$!; bfs_bg "$D2"
poll_until 10 "second mount" bfs_is_mounted "$MNT2" fuse

kv_store "$MNT/a" 32 first 2M 2 >"$BFS_TMP/a.out" &
A=$!
kv_store "$MNT2/b" 32 second 2M 2 >"$BFS_TMP/b.out" &
B=$!
bfs_wait_exit "$A" 60 || fail "writer on mount 1 hung"; bfs_wait_exit "$B" 60 || fail "writer on mount 2 hung"
ra=$(cat "$BFS_TMP/a.out"); rb=$(cat "$BFS_TMP/b.out")
log "mount 1: $ra"; log "mount 2: $rb"
for r in "$ra" "$rb"; do
    assert_eq 32 "$(json_get "$r" stored)" "stores"
    assert_eq 0 "$(json_get "$r" errors)" "store errors"
done
log "du of BACKING right after the stores: $(du_backing)"
t0=$SECONDS
poll_until 10 "du of BACKING <= max_size + 1 MiB with two mounts" usage_at_most $((MAX + SLACK))
log "back under max_size within $((SECONDS - t0))s (interval 1s); du $(du_backing)"
la=$(kv_load "$MNT/a" 32 first); lb=$(kv_load "$MNT2/b" 32 second)
assert_eq 0 "$(json_get "$la" corrupt)" "corrupt blocks via mount 1"
assert_eq 0 "$(json_get "$lb" corrupt)" "corrupt blocks via mount 2"
umount "$MNT2" || fail "umount second mount"
if ! bfs_wait_exit "$D2" 10; then
    grep -H . /proc/"$D2"/task/*/stat 2>/dev/null | cut -d' ' -f1-3
    for t in /proc/"$D2"/task/*; do echo "$t: $(cat "$t"/comm) $(cat "$t"/wchan)"; cat "$t"/stack 2>/dev/null | head -5; done
    tail -3 "$BFS_TMP/daemon2.log"
    fail "second daemon did not exit after umount"
fi
assert_eq 0 "$BFS_RC" "second daemon's exit status"
bfs_unmount
log PASS
