#!/usr/bin/env bash
# Shared tier over JuiceFS at scale: the cost of one
# reconcile pass over a shared tree of many blocks, which is how the sweeper
# learns other nodes' stores and recency stamps (every reconcile_interval,
# 10 s by default in shared mode). The blocks are made by another JuiceFS
# client (as other nodes would), 4 KiB each in 256 directories (h[0:2]/h.bin);
# node 1's boundfs indexes them, then runs passes every 5 s. Logged per pass:
# objects, directories read and skipped, wall time, and the CPU seconds
# boundfs and its JuiceFS client used: for the first (full) pass, for three
# passes with nothing changed, and for the passes that find a few hundred
# blocks stored meanwhile through client 2.
# Checked: a pass takes less than the default shared reconcile_interval
# (10 s; passes run back to back with that sleep between them), the index
# counts every block, a pass with nothing changed reads almost no directory
# (they are skipped as unchanged: workers/dircache.rs), and the passes after
# the new stores read no more directories than the stores touched (plus the
# few boundfs itself changes: BACKING's root, the lease and journal files'),
# and adopt every new block.
# CI: 5,000 blocks; BOUNDFS_LONG=1: 100,000.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

N=5000; [ -n "${BOUNDFS_LONG:-}" ] && N=100000
shared_juicefs 2
t0=$SECONDS
$PY - "$BACKING2" "$N" <<'PY' || fail "making $N blocks"
import hashlib, os, sys
from concurrent.futures import ThreadPoolExecutor
root, n = sys.argv[1], int(sys.argv[2])
for i in range(256):
    os.makedirs(os.path.join(root, "%02x" % i), exist_ok=True)
data = b"k" * 4096
def mk(lo):
    for i in range(lo, min(n, lo + 500)):
        h = hashlib.sha256(b"%d" % i).hexdigest()
        with open(os.path.join(root, h[:2], h + ".bin"), "wb") as f:
            f.write(data)
with ThreadPoolExecutor(8) as ex:
    list(ex.map(mk, range(0, n, 500)))
PY
log "made $N blocks through JuiceFS client 2 in $((SECONDS - t0))s"

cpu() { # utime+stime of a process tree root, in seconds
    awk '{print ($14 + $15) / 100}' "/proc/$1/stat"
}
jfs_child() { pgrep -P "${SHARED_JFS[1]}" | head -n 1; }
RUST_LOG=info,boundfs::workers::reconcile=debug node_mount 1 "max_size=64G,reconcile_interval=5s"
_indexed() { [ "$(node_stat 1 indexing 2>/dev/null)" = False ]; }
poll_until 600 "node 1's start-up index" _indexed
log "start-up index: $(node_stat 1 index_seconds)s for $(node_stat 1 block_files) block files"
assert_ge "$(node_stat 1 block_files)" "$N" "block files indexed"
jc=$(jfs_child); [ -n "$jc" ] || jc=${SHARED_JFS[1]}
passes_since() { # N: the reconcile lines logged after the first N
    grep -o 'reconcile: [0-9]* objects in [0-9.]*s ([0-9]* directories read, [0-9]* unchanged skipped)' "$BFS_LOG" |
        tail -n +$(($1 + 1))
}
# wait_passes K: until K more passes than when measure_start ran
measure_start() {
    b0=$(cpu "${SHARED_BFS[1]}"); j0=$(cpu "$jc"); r0=$(node_stat 1 reconciles)
    l0=$(passes_since 0 | wc -l)
    dr0=$(node_stat 1 reconcile_dirs_read); ds0=$(node_stat 1 reconcile_dirs_skipped)
}
wait_passes() {
    _passes() { local r; r=$(node_stat 1 reconciles 2>/dev/null); [ "${r:-0}" -ge $((r0 + $1)) ]; }
    poll_until 600 "$1 reconcile passes" _passes "$1"
    b1=$(cpu "${SHARED_BFS[1]}"); j1=$(cpu "$jc")
    dr=$(($(node_stat 1 reconcile_dirs_read) - dr0)); ds=$(($(node_stat 1 reconcile_dirs_skipped) - ds0))
    log "$2: $(passes_since "$l0" | tr '\n' ';')"
    log "$2: CPU boundfs $(awk "BEGIN{print $b1 - $b0}")s, JuiceFS client $(awk "BEGIN{print $j1 - $j0}")s; directories read $dr, skipped $ds"
    passes_since "$l0" | sed 's/.* in \([0-9.]*\)s.*/\1/' >>"$BFS_TMP/walls"
}
measure_start
wait_passes 1 "first pass (full)"
measure_start
wait_passes 3 "3 passes, nothing changed"
# Nothing changed: the 257 directories of blocks are skipped; what boundfs
# changes itself (BACKING's root, its lease and journal) is read.
assert_le "$dr" 12 "directories read by 3 passes with nothing changed"
assert_ge "$ds" $((3 * 250)) "directories skipped as unchanged by 3 passes"
M=300
touched=$($PY - "$BACKING2" "$N" "$M" <<'PY' || fail "storing $M more blocks"
import hashlib, os, sys
root, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dirs = set()
for i in range(n, n + m):
    h = hashlib.sha256(b"%d" % i).hexdigest()
    with open(os.path.join(root, h[:2], h + ".bin"), "wb") as f:
        f.write(b"n" * 4096)
    dirs.add(h[:2])
print(len(dirs))
PY
)
log "stored $M more blocks through client 2, in $touched directories"
measure_start
_adopted() { [ "$(node_stat 1 block_files 2>/dev/null)" -ge $((N + M)) ]; }
poll_until 600 "node 1 adopting the $M new blocks" _adopted
# The pass running during the stores, if any, and the one after it.
wait_passes 2 "2 passes after $M new blocks"
assert_le "$dr" $((2 * (touched + 4))) "directories read by the 2 passes after stores into $touched directories"
worst=$(sort -n "$BFS_TMP/walls" | tail -n 1)
$PY -c "import sys; sys.exit(0 if $worst < 10 else 1)" || fail "a reconcile pass over $N blocks took ${worst}s (>= 10 s)"
node_unmount 1
bfs_done
