#!/usr/bin/env bash
# usage + budget: a 4-thread vLLM-style writer stores 3 x max_size of 2 MiB
# blocks while du of BACKING is sampled every ~50 ms in the background.
# du must never exceed max_size + 1 MiB; every store succeeds (old blocks
# are evictable, so no ENOSPC); what remains reads back correctly; usage
# ends at or below the high watermark.
. "$(dirname "$0")/lib.sh"

MAX=$((64 * MiB)); SLACK=$MiB
bfs_mount max_size=64M,threads=2

# the sampler counts exactly what du -s --block-size=1 counts (checked below);
# it samples every 10 ms since the writer may take well under a second
STOP="$BFS_TMP/sampler.stop"
$PY "$BFS_HELPERS/du_sampler.py" "$BACKING" "$STOP" 0.01 > "$BFS_TMP/sampler.out" &
SAMPLER=$!; bfs_bg "$SAMPLER"
# and a plain du every ~50 ms as well
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
sj=$(cat "$BFS_TMP/sampler.out")
peak=$(json_get "$sj" peak); samples=$(json_get "$sj" samples)
read -r dupeak dun < "$BFS_TMP/du.peak"
log "writer: $res"
log "writer took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')s"
log "usage peak $peak bytes ($((peak / 1024)) KiB) over $samples samples at 10 ms; du peak $dupeak over $dun samples at 50 ms; cap $MAX + $SLACK"
assert_le "$peak" $((MAX + SLACK)) "usage of BACKING went above max_size + 1 MiB"
assert_le "$dupeak" $((MAX + SLACK)) "du of BACKING went above max_size + 1 MiB"
assert_ge "$samples" 5 "too few usage samples to mean anything"
assert_eq "$(du_backing)" "$($PY "$BFS_HELPERS/du_sampler.py" "$BACKING" x 0 --once)" "sampler counts what du counts"
assert_eq 96 "$(json_get "$res" stored)" "blocks stored"
assert_eq 0 "$(json_get "$res" enospc)" "ENOSPC while evictable blocks existed"
assert_eq 0 "$(json_get "$res" errors)" "store errors"

u=$(du_backing)
assert_le "$u" $((MAX + SLACK)) "du after the writer"
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
log PASS
