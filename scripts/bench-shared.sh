#!/usr/bin/env bash
# Full-speed benchmark of the shared tier: N boundfs nodes (-o shared) over
# one JuiceFS volume (Redis metadata; each node's JuiceFS client in its own
# network namespace where `ip netns` works), every node storing 2 MiB blocks
# as fast as it can, measured from outside the mounts.
#
#   scripts/bench-shared.sh [--nodes N] [--seconds S] [--max-size SIZE]
#                           [--reconcile DURATION] [--writers W]
#                           [--mode shared|plain|none|idle] [--probe]
#                           [--out FILE] [--trace FILE]
#
#   --nodes N        nodes (default 3)
#   --seconds S      length of the measured load (default 300: the long form)
#   --max-size SIZE  the shared budget, each node's max_size (default 128M)
#   --reconcile D    each node's reconcile_interval (default 5s)
#   --writers W      writer threads per node (default 2)
#   --mode M         shared: N boundfs nodes with -o shared (default);
#                    plain: one boundfs without -o shared over one JuiceFS
#                    client (--nodes 1 only); none: no boundfs, the writers
#                    store into their JuiceFS clients and unlink their own
#                    oldest blocks past max_size / N (the cost reference);
#                    idle: no load and no boundfs, only --probe
#   --probe          during the load, time the filesystem's primitives a
#                    cross-node budget would use (flock, a flock'd ledger
#                    transaction, an O_APPEND line, reading N-1 peers' files)
#                    through node 1's JuiceFS client, outside the shared
#                    directory (tests/sh/helpers/jfs_primitives.py); "probe"
#                    in the JSON
#   --out FILE       append the result (one JSON line, with the mode, the
#                    options and the git revision) to FILE
#   --trace FILE     every usage sample (Redis usedSpace and statvfs), one
#                    JSON line each
#
# Per node: W writer threads storing back to back (tmp + rename, O_DIRECT,
# like the engines), a loader reading the next node's blocks stored more
# than 1 s ago every 0.2 s, and 2 blocks stored by node 1 held open by the
# last node. The usage is the volume's Redis `usedSpace` counter, sampled
# every 0.1 s (and statvfs through node 1's JuiceFS client, not a boundfs
# mount). Prints the figures (tests/sh/helpers/shared_bench.py) as one JSON
# line, and a summary. Needs root, JuiceFS and redis-server
# (scripts/install-deps.sh --tests), and target/release/boundfs.
# BFS_SHARED_BUDGET=views runs the nodes with -o shared_budget=views (the default is record).
# docs/design/shared-tier.md ("Full speed") has the figures.
set -u
NODES=3 SECS=300 MAXS=128M RI=5s WRITERS=2 MODE=shared OUT="" TRACE="" PROBE=0
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) NODES=$2; shift ;;
        --seconds) SECS=$2; shift ;;
        --max-size) MAXS=$2; shift ;;
        --reconcile) RI=$2; shift ;;
        --writers) WRITERS=$2; shift ;;
        --mode) MODE=$2; shift ;;
        --out) OUT=$(realpath -m "$2"); shift ;;
        --trace) TRACE=$(realpath -m "$2"); shift ;;
        --probe) PROBE=1 ;;
        -h | --help) sed -n '2,35p' "$0"; exit 0 ;;
        *) echo "bench-shared.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case "$MODE" in
    shared) ;;
    plain) [ "$NODES" = 1 ] || { echo "bench-shared.sh: --mode plain is one node" >&2; exit 2; } ;;
    none) ;;
    idle) PROBE=1 ;;
    *) echo "bench-shared.sh: --mode is shared, plain, none or idle" >&2; exit 2 ;;
esac
MAX=$(numfmt --from=iec "$MAXS") || exit 2

REPO=$(cd "$(dirname "$0")/.." && pwd)
. "$REPO/tests/sh/lib.sh"
. "$REPO/tests/sh/lib-shared.sh"

# plain_mount: node 1's boundfs without -o shared (node_mount always adds it)
plain_mount() {
    local m="$BFS_TMP/mnt1" log="$BFS_TMP/node1.plain.log"
    mkdir -p "$m"
    "$BOUNDFS" -f "$BACKING1" "$m" -o "max_size=$MAXS,reconcile_interval=$RI" 2>"$log" </dev/null >>"$log" &
    SHARED_BFS[1]=$!
    BFS_LOG=$log
    poll_until 15 "node 1 (plain) mounted" bfs_is_mounted "$m" fuse
}

shared_juicefs "$NODES"
mnts=()
case "$MODE" in
    shared)
        shared_nodes_up "$NODES" "max_size=$MAXS,reconcile_interval=$RI${BFS_SHARED_BUDGET:+,shared_budget=$BFS_SHARED_BUDGET}"
        for ((k = 1; k <= NODES; k++)); do mnts+=(--mnt "$BFS_TMP/mnt$k"); done
        ;;
    plain)
        plain_mount
        mnts+=(--mnt "$BFS_TMP/mnt1")
        ;;
    none)
        for ((k = 1; k <= NODES; k++)); do mnts+=(--mnt "$(eval echo "\$BACKING$k")"); done
        mnts+=(--self-evict)
        ;;
esac
probe_pid=""
if ((PROBE)); then
    $PY "$BFS_HELPERS/jfs_primitives.py" "$BFS_TMP/jfs1/probe" --seconds "$SECS" --peers $((NODES > 1 ? NODES - 1 : 1)) \
        >"$BFS_TMP/probe.json" 2>"$BFS_TMP/probe.err" &
    probe_pid=$!
    bfs_bg "$probe_pid"
fi
if [ "$MODE" = idle ]; then
    wait "$probe_pid" || fail "probe failed: $(cat "$BFS_TMP/probe.err")"
    out=$($PY -c 'import json, sys; print(json.dumps({"mode": "idle", "nodes": int(sys.argv[2]), "probe": json.load(open(sys.argv[1]))}))' \
        "$BFS_TMP/probe.json" "$NODES")
    printf '%s\n' "$out"
    [ -n "$OUT" ] && printf '%s\n' "$out" >>"$OUT"
    exit 0
fi
log "$MODE, $NODES node(s), max_size $MAXS, reconcile_interval $RI, $WRITERS writers per node, ${SECS}s ($SHARED_MODE)"
out=$(shared_bench "${mnts[@]}" --max "$MAX" --seconds "$SECS" --writers "$WRITERS" \
    ${TRACE:+--trace "$TRACE"}) || fail "load failed: $out"
probe="{}"
if [ -n "$probe_pid" ]; then
    wait "$probe_pid" || fail "probe failed: $(cat "$BFS_TMP/probe.err")"
    probe=$(cat "$BFS_TMP/probe.json")
fi
# the longest reconcile pass of any node (from their logs), seconds
pass=$(cat "$BFS_TMP"/node*.log 2>/dev/null | sed -n 's/.*reconcile: [0-9]* objects in \([0-9.]*\)s.*/\1/p' |
    sort -g | tail -n 1)
out=$($PY -c 'import json, sys
d = json.loads(sys.argv[1])
d.update(mode=sys.argv[2], reconcile_interval=sys.argv[3], longest_pass_s=float(sys.argv[4] or 0),
         git=sys.argv[5], date=sys.argv[6], netns=sys.argv[7])
if sys.argv[8] != "{}":
    d["probe"] = json.loads(sys.argv[8])
print(json.dumps(d))' "$out" "$MODE" "$RI" "${pass:-}" "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)" \
    "$(date -u +%FT%TZ)" "$SHARED_MODE" "$probe")
printf '%s\n' "$out"
[ -n "$OUT" ] && printf '%s\n' "$out" >>"$OUT"
g() { json_get "$out" "$1"; }
log "peak $(g peak) B = $(g peak_pct) % of max_size (over by $(g peak_over) B); longest over $(g longest_over_s) s," \
    "$(g time_over_s) s in all; after the first fill floor $(g floor_pct) %, mean $(g mean_pct) %;" \
    "held $(g held_ok)/$(g held); cross-node hits $(g cross_hits)/$(g cross_tries); stores/s per node $(g stores_per_s)" \
    "($(g mib_per_s) MiB/s in all); store p50 $(g lat_p50_ms) ms p99 $(g lat_p99_ms) ms; errors $(g store_errors)," \
    "ENOSPC $(g enospc); load average $(g loadavg_start_end)"
if [ "$MODE" != none ]; then
    for ((k = 1; k <= NODES; k++)); do node_unmount "$k"; done
fi
