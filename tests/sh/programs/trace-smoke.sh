#!/usr/bin/env bash
# TIMEOUT: 240
# The bench's trace replay in small: the first 200 requests of the
# Mooncake trace (../shared/traces/, or $BOUNDFS_SHARED) replayed vLLM-style by
# scripts/bench/trace.py through a mount whose budget holds about 10 % of the
# distinct blocks, so eviction runs all along. From outside, as a user sees it:
#   * every loaded byte is right and no store fails (errors 0, ENOSPC 0);
#   * usage ends within max_size, and du of BACKING agrees;
#   * the hit ratio is printed beside an ideal block LRU's at the blocks
#     BACKING holds at the end; it is not asserted: this early in the trace
#     fewer than 2 % of block references repeat, too few to tell LRU from
#     another order (scripts/bench.sh's bounded trace rows compare them);
#   * after a remount, a load whose entries the kernel has cached costs OPEN
#     and RELEASE only (2 FUSE requests per block, counted by the daemon);
#   * the bench's fair baseline (trace.py run --lru-budget: a plain directory
#     kept to the same max_size by the replayer's own exact LRU) replays the
#     same requests with no error, and du of its directory stays within the
#     budget (it counts files and directories as du does).
. "$(dirname "$0")/../lib.sh"

TRACE="$BFS_REPO/scripts/bench/trace.py"
REQ=200 BS=$((64 << 10))
distinct=$($PY "$TRACE" --requests $REQ distinct 2>"$BFS_TMP/trace.err") ||
    skip "no trace: $(tail -n 1 "$BFS_TMP/trace.err") (set BOUNDFS_SHARED to the shared/ folder)"
# 10 % of the blocks with their leaf directories (as bench.sh once sized it,
# before its budget was fixed at 300 MiB for 1,500 requests), plus
# the top-level hash directories (h[0:3]: at most 4096, 4 KiB each), which in
# a run this short are a larger share of usage than in the whole trace
top=$((distinct < 4096 ? distinct : 4096))
max=$(((distinct / 10 * (BS + 8192) + top * 4096 + MiB - 1) / MiB * MiB))
log "$distinct distinct blocks of $BS B; max_size $((max / MiB)) MiB"

bfs_mount "max_size=$((max / MiB))M"
stats_json >"$BFS_TMP/before.json" || fail "status JSON unreadable"
$PY "$TRACE" --requests $REQ run "$MNT" --block-size $BS --threads 2 >"$BFS_TMP/run.json" 2>"$BFS_TMP/run.err" ||
    fail "trace.py run: $(tail -n 3 "$BFS_TMP/run.err")"
stats_json >"$BFS_TMP/after.json"
log "run: $(cat "$BFS_TMP/run.json")"
# FILE KEY: KEY of the JSON line that ends FILE
field() { json_get "$(tail -n 1 "$1")" "$2"; }

assert_eq 0 "$(field "$BFS_TMP/run.json" errors)" "wrong bytes or failed stores in the replay"
assert_eq 0 "$(field "$BFS_TMP/after.json" enospc)" "stores refused with ENOSPC"
[ "$(field "$BFS_TMP/after.json" evictions)" -gt 0 ] || fail "the budget never made eviction run"
$PY "$TRACE" requests "$BFS_TMP/before.json" "$BFS_TMP/after.json" "$BFS_TMP/run.json" "$max" >"$BFS_TMP/req.json" ||
    fail "usage past max_size after the replay"
log "requests: $(cat "$BFS_TMP/req.json")"
du_b=$(du -s --block-size=1 "$BACKING" | cut -f1)
[ "$du_b" -le $((max + MiB)) ] || fail "du of BACKING $du_b B over max_size $max B"

held=$(find "$BACKING" -name '*.bin' | wc -l)
ideal=$($PY "$TRACE" --requests $REQ lru "$held" | $PY -c 'import json,sys; print(json.load(sys.stdin)["hit_ratio"])')
ratio=$($PY -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(r["hits"]/r["refs"])' "$BFS_TMP/run.json")
log "hit ratio $ratio; ideal LRU at the $held blocks held: $ideal"

# Loads on a fresh mount of what the replay kept: no eviction or reaping of
# emptied directories runs beside them (their kernel invalidations make the
# walk GETATTR a hash directory again), and no entry warming.
bfs_remount "max_size=$((max / MiB))M,warm_entries=0"
wait_indexed
$PY "$TRACE" loadpass "$BACKING" "$MNT" 50 >"$BFS_TMP/loadpass.json" 2>"$BFS_TMP/loadpass.err" ||
    fail "loadpass: $(tail -n 1 "$BFS_TMP/loadpass.err")"
log "loads: $(cat "$BFS_TMP/loadpass.json")"
assert_eq "{'OPEN': 50, 'RELEASE': 50}" "$(field "$BFS_TMP/loadpass.json" by_opcode_again)" \
    "FUSE requests of 50 loads with entries cached (OPEN and RELEASE only)"

# the native baseline the bench puts beside the mount: no FUSE, same budget
NATIVE="$BFS_TMP/native"
$PY "$TRACE" --requests $REQ run "$NATIVE" --block-size $BS --threads 2 --lru-budget "$max" \
    >"$BFS_TMP/native.json" 2>"$BFS_TMP/native.err" || fail "trace.py run --lru-budget: $(tail -n 3 "$BFS_TMP/native.err")"
log "native + LRU: $(cat "$BFS_TMP/native.json")"
assert_eq 0 "$(field "$BFS_TMP/native.json" errors)" "wrong bytes or failed stores in the native replay"
peak=$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["lru"]["peak"])' "$BFS_TMP/native.json")
[ "$peak" -le "$max" ] || fail "the native LRU counted $peak B, over its budget $max B"
du_n=$(du -s --block-size=1 "$NATIVE" | cut -f1)
[ "$du_n" -le $((max + 4096)) ] || fail "du of the native directory $du_n B over the budget $max B (+ its own 4 KiB)"
bfs_done
