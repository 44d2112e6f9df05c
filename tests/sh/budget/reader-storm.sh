#!/usr/bin/env bash
# A reader holding fds on the oldest blocks across an eviction storm
# (3 x max_size of stores) reads every right byte; held blocks are never
# evicted while older-than-everything unheld ones are; a concurrent loader
# sees hits or clean misses, never corrupt data or errors.  After release,
# the held blocks become evictable again.
. "$(dirname "$0")/../lib.sh"

MAX=$((32 * MiB))
for i in 0 1 2 3 4 5; do mkblock_old "$BACKING/h/h$i.bin" 2M "$i"; done
bfs_mount max_size=32M

# hold h2..h5 open (h0/h1 stay unheld and are the oldest)
$BLOCKS hold --ready "$BFS_TMP/ready" --go "$BFS_TMP/go" --timeout 90 --size 2M \
    "$MNT"/h/h{2,3,4,5}.bin > "$BFS_TMP/hold.out" 2>&1 &
HOLD=$!; bfs_bg "$HOLD"
poll_until 10 "reader holds four blocks" test -e "$BFS_TMP/ready"

# a concurrent loader re-reading what the writer stores
(
    end=$((SECONDS + 60)); i=0
    while [ ! -e "$BFS_TMP/stop-loader" ] && [ "$SECONDS" -lt "$end" ]; do
        kv_load "$MNT/kv" 48 storm >> "$BFS_TMP/loader.out" 2>>"$BFS_TMP/loader.err"
        i=$((i + 1))
    done
) &
LOADER=$!; bfs_bg "$LOADER"

res=$(kv_store "$MNT/kv" 48 storm) || fail "writer crashed"
touch "$BFS_TMP/stop-loader"; wait "$LOADER"
log "writer: $res; loader passes: $(wc -l < "$BFS_TMP/loader.out")"
assert_eq 0 "$(json_get "$res" errors)" "store errors"
assert_eq 0 "$(json_get "$res" enospc)" "ENOSPC although unheld blocks were evictable"
bad=$($PY -c '
import json, sys
bad = [l for l in open(sys.argv[1]) if json.loads(l)["corrupt"] or json.loads(l)["errors"]]
print(len(bad), bad[:2])' "$BFS_TMP/loader.out")
[ "${bad%% *}" = 0 ] || fail "concurrent loader saw corrupt data or errors: $bad $(head -c 600 "$BFS_TMP/loader.err")"

assert_missing "$BACKING/h/h0.bin" "unheld oldest block h0 should be evicted"
assert_missing "$BACKING/h/h1.bin" "unheld oldest block h1 should be evicted"
for i in 2 3 4 5; do assert_exists "$BACKING/h/h$i.bin" "block held open was evicted"; done
assert_le "$(du_backing)" $((MAX + MiB)) "du after the storm"

touch "$BFS_TMP/go"
bfs_wait_exit "$HOLD" 20 || fail "holder did not finish"; rc=$BFS_RC
log "holder: $(cat "$BFS_TMP/hold.out")"
assert_eq 0 "$rc" "holder read wrong bytes: $(cat "$BFS_TMP/hold.out")"
poll_until 5 "open_handles back to 0" test "$(stats_field open_handles)" = 0

# released blocks are the least recent now: the next storm evicts them
res=$(kv_store "$MNT/kv2" 16 storm2) || fail "second writer crashed"
assert_eq 0 "$(json_get "$res" errors)" "second store errors"
poll_until 10 "released blocks evicted" test ! -e "$BACKING/h/h2.bin" -a ! -e "$BACKING/h/h5.bin"
bfs_unmount
log PASS
