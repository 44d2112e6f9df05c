#!/usr/bin/env bash
# usage + budget: a 4-thread vLLM-style writer stores 3 x max_size of 2 MiB
# blocks while the usage of BACKING is sampled in the background.  Usage must
# never exceed max_size + 1 MiB; every store succeeds (old blocks are
# evictable, so no ENOSPC); what remains reads back correctly; usage ends at
# or below the high watermark.
#
# BACKING is a tmpfs of its own, so that usage can be read atomically from
# statfs (used blocks, every 2 ms): a du walk is not atomic and, with a writer
# at several hundred MB/s, can read high by about write rate x walk time.  A
# plain du every ~50 ms runs too; its peak is reported and must agree with the
# atomic one to within that walk error (1 MiB).
. "$(dirname "$0")/../lib.sh"

MAX=$((64 * MiB)); SLACK=$MiB
mount -t tmpfs -o size=256M,mode=0755 boundfs-test "$BACKING" || fail "cannot mount a tmpfs as BACKING"
bfs_mount max_size=64M,threads=2

STOP="$BFS_TMP/sampler.stop"
$PY "$BFS_HELPERS/du_sampler.py" "$BACKING" "$STOP" 0.002 --statfs > "$BFS_TMP/statfs.out" &
SAMPLER=$!; bfs_bg "$SAMPLER"
(
    end=$((SECONDS + 120)); peak=0; n=0
    while [ ! -e "$STOP" ] && [ "$SECONDS" -lt "$end" ]; do
        u=$(du -s --block-size=1 "$BACKING" 2>/dev/null | cut -f1)
        n=$((n + 1)); [ -n "$u" ] && [ "$u" -gt "$peak" ] && peak=$u
        echo "$peak $n" > "$BFS_TMP/du.peak"
        sleep 0.05
    done
) &
DUSAMPLER=$!; bfs_bg "$DUSAMPLER"

t0=$(date +%s.%N)
res=$(kv_store "$MNT" 96 budget 2M 4) || fail "writer crashed: $res"
t1=$(date +%s.%N)
touch "$STOP"; wait "$SAMPLER" "$DUSAMPLER"
sj=$(cat "$BFS_TMP/statfs.out")
peak=$(json_get "$sj" peak); samples=$(json_get "$sj" samples)
read -r dupeak dun < "$BFS_TMP/du.peak"
log "writer: $res"
log "writer took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')s"
log "usage peak $peak bytes ($((peak / 1024)) KiB) over $samples statfs samples; du peak $dupeak over $dun du samples; cap $MAX + $SLACK"
assert_le "$peak" $((MAX + SLACK)) "usage of BACKING (statfs, atomic) went above max_size + 1 MiB"
assert_le "$dupeak" $((MAX + SLACK + MiB)) "du of BACKING went above max_size + 1 MiB (+ 1 MiB walk error)"
assert_ge "$samples" 10 "too few usage samples to mean anything"
statfs_used() { $PY "$BFS_HELPERS/du_sampler.py" "$BACKING" --statfs --once; }
poll_until 5 "statfs used == du at rest (nothing left open)" test "$(statfs_used)" = "$(du_backing)"
assert_eq 96 "$(json_get "$res" stored)" "blocks stored"
assert_eq 0 "$(json_get "$res" enospc)" "ENOSPC while evictable blocks existed"
assert_eq 0 "$(json_get "$res" errors)" "store errors"

assert_le "$(du_backing)" $((MAX + SLACK)) "du after the writer"
# the background evictor brings usage down to <= low watermark once above high
poll_until 10 "usage <= high watermark (0.95 x max) after the storm" usage_at_most $((MAX * 95 / 100))
tmps=$(find "$BACKING" -name '*.tmp' | wc -l)
assert_eq 0 "$tmps" "leftover .tmp files in BACKING"

# the newest blocks are there and intact; nothing anywhere is corrupt
last=$(kv_load "$MNT" 96 budget 8) || fail "loader crashed"
assert_eq 8 "$(json_get "$last" loaded)" "newest 8 blocks loadable ($last)"
all=$(kv_load "$MNT" 96 budget) || fail "loader crashed"
log "load all: $all"
assert_eq 0 "$(json_get "$all" corrupt)" "corrupt blocks"
assert_eq 0 "$(json_get "$all" errors)" "load errors"
kept=$(find "$BACKING" -name '*.bin' | wc -l)
assert_eq "$kept" "$(json_get "$all" loaded)" "loaded blocks == block files in BACKING"
assert_le $((kept * 2 * MiB)) "$MAX" "kept blocks fit the budget"
bfs_unmount
umount "$BACKING" || fail "umount tmpfs backing"
log PASS
