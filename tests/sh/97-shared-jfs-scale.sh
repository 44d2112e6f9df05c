#!/usr/bin/env bash
# Shared tier over JuiceFS at scale (issue 12 item 8): the cost of one
# reconcile pass over a shared tree of many blocks, which is how the sweeper
# learns other nodes' stores and recency stamps (every reconcile_interval,
# 10 s by default in shared mode). The blocks are made by another JuiceFS
# client (as other nodes would), 4 KiB each in 256 directories (h[0:2]/h.bin);
# node 1's boundfs indexes them, then runs passes every 5 s. Logged per pass:
# objects, wall time, and the CPU seconds boundfs and its JuiceFS client used.
# Checked: a pass takes less than the default shared reconcile_interval
# (10 s; passes run back to back with that sleep between them), and the
# index counts every block.
# CI: 5,000 blocks; BOUNDFS_LONG=1: 100,000.
. "$(dirname "$0")/lib.sh"
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
b0=$(cpu "${SHARED_BFS[1]}"); j0=$(cpu "$jc"); r0=$(node_stat 1 reconciles)
_passes() { local r; r=$(node_stat 1 reconciles 2>/dev/null); [ "${r:-0}" -ge $((r0 + 3)) ]; }
poll_until 600 "three reconcile passes" _passes
b1=$(cpu "${SHARED_BFS[1]}"); j1=$(cpu "$jc")
passes=$(grep -o 'reconcile: [0-9]* objects in [0-9.]*s' "$BFS_LOG" | tail -n 3)
log "last passes: $(echo "$passes" | tr '\n' ';')"
log "CPU over 3 passes: boundfs $(awk "BEGIN{print $b1 - $b0}")s, JuiceFS client $(awk "BEGIN{print $j1 - $j0}")s"
worst=$(echo "$passes" | sed 's/.* in \([0-9.]*\)s/\1/' | sort -n | tail -n 1)
$PY -c "import sys; sys.exit(0 if $worst < 10 else 1)" || fail "a reconcile pass over $N blocks took ${worst}s (>= 10 s)"
node_unmount 1
bfs_done
