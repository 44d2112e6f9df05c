#!/usr/bin/env bash
# TIMEOUT: 180
# Shared tier (two mounts over one local tmpfs directory, the budget record
# on): node 1 is upgraded N times (BFS_UPGRADES, default 6) while both
# nodes store (helpers/shared_load.py: RATE blocks/s each, 2 MiB, blocks
# held open, hot and cold loads, statfs sampled). The old daemon leaves the
# budget record only once the new one serves (daemon/handoff.rs): it used
# to leave at its threads' stop, while its requests still flowed, and a
# store in that window put its line back ("reclaimed; it takes its count
# back"), so the line of an exited daemon held its grant (up to 72 % of
# max_size) until the sweeper reclaimed it 15 s later, and the record
# ended up counting less than the tree holds (found by a helper).
# Checked from outside, after each upgrade once the old daemon has exited:
# the record has exactly one line per live node, and no old daemon logged
# re-entering it; at the end: no store error or ENOSPC, and after
# 3 x max_size more stores usage at or above the low watermark minus two
# blocks (the budget did not shrink), and peak usage within max_size +
# 1 MiB: a store in flight at the hand-over is finished by the new daemon,
# which counts the file as its own from then on (fs/handed.rs), the old one
# leaving it out of its net and list; before, what the new daemon wrote to
# it was in no node's net (peak 6.3 MiB over max_size in one of three
# runs).
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"
[ "$(uname -r | awk -F. '{ print ($1 > 6 || ($1 == 6 && $2 >= 9)) }')" = 1 ] || skip "Linux >= 6.9 needed (FUSE_NOTIFY_RESEND)"
MAX=$((32 << 20)); BLOCK=$((2 << 20))
N=${BFS_UPGRADES:-6}; RATE=${RATE:-8}; SECS=${SECS:-12}
mkdir -p "$BACKING/shared"
mount -t tmpfs -o size=512M,mode=0755 boundfs-upshared "$BACKING/shared" || fail "cannot mount a tmpfs as BACKING"
shared_local 2
shared_nodes_up 2 "max_size=32M,reconcile_interval=1s"
record="$BACKING1/.boundfs/budget"
used() { du -sB1 --exclude=.boundfs "$BACKING1" | cut -f1; }
node_lines() { sed -n '2,$p' "$record" | grep -c .; }
# CREATE requests node 1's daemon (the one serving now) has answered
creates1() {
    getfattr --absolute-names --only-values -n user.boundfs.stats "$MNT1" |
        $PY -c 'import json,sys; print(json.load(sys.stdin)["requests"].get("CREATE", 0))'
}
stored_since_upgrade() { [ "$(creates1)" -ge 2 ]; }

$PY "$BFS_HELPERS/shared_load.py" --mnt "$MNT1" --mnt "$MNT2" --sample "$BACKING1" --statfs "$BACKING1" \
    --max "$MAX" --seconds "$SECS" --rate "$RATE" --held 2 --hot 2 --cold 2 > "$BFS_TMP/load.out" 2>&1 &
LOAD=$!; bfs_bg "$LOAD"
poll_until 20 "node 1's first stores" stored_since_upgrade
for i in $(seq 1 "$N"); do
    old=${SHARED_BFS[1]}
    out=$($BOUNDFS upgrade "$MNT1" 2>&1) || fail "upgrade $i failed: $out"
    new=$(printf '%s' "$out" | sed -n 's/.* -> \([0-9]*\) .*/\1/p')
    [ -n "$new" ] || fail "upgrade $i: no new pid in: $out"
    bfs_bg "$new"; SHARED_BFS[1]=$new
    poll_until 10 "the old daemon's exit (upgrade $i)" bfs_process_done "$old"
    assert_eq 2 "$(node_lines)" "node lines in the budget record after upgrade $i ($(head -n 4 "$record" | tr '\n' '|'))"
    log "upgrade $i: ${out##*pause }"
    bfs_process_done "$LOAD" && break
    poll_until 10 "stores through the new daemon (upgrade $i)" stored_since_upgrade
done
wait "$LOAD" || fail "the load helper failed: $(tail -n 3 "$BFS_TMP/load.out")"
res=$(tail -n 1 "$BFS_TMP/load.out")
log "load: $res"
n=$(cat "$BFS_TMP"/node1.*.log | grep -c "line in the shared budget record was reclaimed")
assert_eq 0 "$n" "old daemons that re-entered the record after leaving it"
g() { json_get "$res" "$1"; }
assert_eq 0 "$(g store_errors)" "store errors"
assert_eq 0 "$(g enospc)" "ENOSPC"
assert_le "$(g peak)" $((MAX + (1 << 20))) "peak usage (statfs)"
mkblocks "$MNT2" c 0 47
log "after 96 MiB more through node 2: usage $(used); record: $(head -n 3 "$record" | tr '\n' '|')"
assert_ge "$(used)" $((MAX * 9 / 10 - 2 * BLOCK)) "usage after 3 x max_size of stores (the budget did not shrink)"
assert_le "$(used)" "$MAX" "usage within max_size"
# node 1's daemon is not this shell's child after the upgrades
last=${SHARED_BFS[1]}; SHARED_BFS[1]=""
umount "$MNT1" || fail "umount node 1"
poll_until 10 "node 1's last daemon's exit" bfs_process_done "$last"
node_unmount 2
umount "$BACKING/shared" || fail "umount the tmpfs"
bfs_done
