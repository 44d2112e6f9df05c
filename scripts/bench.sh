#!/usr/bin/env bash
# boundfs benchmark: the same KV-offload workloads on a plain directory
# ("native"), through mergerfs (a FUSE passthrough reference) and through
# boundfs, each repeated, on DIR's filesystem ("disk") and on a tmpfs;
# prints two Markdown tables, each cell the median and its spread (min-max):
#   1. unbounded workloads: native, mergerfs and boundfs (with a budget
#      nothing reaches), per backing;
#   2. bounded rows (the trace replay and stores under eviction): boundfs at
#      max_size beside the fair baseline, a native directory kept to the same
#      budget by the load generator's own exact LRU (it unlinks its least
#      recently used blocks itself), per backing; repetitions interleaved,
#      native first in odd ones, boundfs first in even ones; throughput,
#      p50/p99 per operation, CPU seconds per GiB stored (daemon and load
#      generator), page cache grown per GiB loaded, hit ratios beside an
#      ideal LRU's, FUSE requests and daemon syscalls per stored block.
#
# Usage: scripts/bench.sh [--quick] [--n N] [--reps R] [--files N | --full]
#                         [--dir DIR] [--no-build] [--no-install] [--keep]
#                         [--only WL] [--backing disk|tmpfs|both]
#                         [--trace-requests N] [--trace-budget MIB]
#   --quick       smaller sizes, 3 repetitions (smoke run, a few minutes)
#   --n N         2 MiB blocks for store/load (default 512 = 1 GiB; quick 128)
#   --small-n N   128 KiB blocks for the small store/load rows (default 2048
#                 = 256 MiB; quick 512)
#   --reps R      repetitions per measurement (default 5; quick 3); medians reported
#   --files N     files in the restart tree (default 200000; quick 20000)
#   --full        restart tree of 1,000,000 files
#   --dir DIR     where the temp tree goes (default $TMPDIR or /tmp); backing
#                 directories and mountpoints all live on DIR's filesystem
#   --no-build    don't run `cargo build --release` (or set BOUNDFS=path)
#   --no-install  don't try `apt-get install` for missing fio/mergerfs
#   --keep        keep the temp tree (logs, raw JSON) afterwards
#   --only WL     run only workload group WL: store, load, small, stat,
#                 probe, readdir, evict, restart, fio or trace (repeatable)
#   --backing B   disk (DIR's filesystem), tmpfs or both (default): the
#                 main table's workloads run on a tmpfs mounted under DIR
#                 (data sets included), each bounded run on a fresh tmpfs
#                 64 MiB above its budget
#   --trace-requests N  first N requests of the trace (default 1500; quick 200)
#   --trace-budget MIB  max_size of the bounded trace rows (default 300;
#                 quick 100); the trace's blocks are 128 KiB
# Env: BOUNDFS=path (binary to use), MERGERFS_OPTS (override the mergerfs -o),
#   BOUNDFS_SHARED (the shared/ folder with traces/; default: ../shared next
#   to the repository).
#
# Report (versions, command lines, tables, raw samples) goes to stdout;
# progress to stderr. Needs root and /dev/fuse. Exit 0 ok, 1 a failure,
# 77 prerequisites missing.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
KV="$REPO/scripts/bench/kvbench.py"
TRACE="$REPO/scripts/bench/trace.py"
T_START=$EPOCHREALTIME

# ------------------------------------------------------------------ options
QUICK=0 N="" SMALL_N="" REPS="" FILES="" FULL=0 BUILD=1 INSTALL=1 KEEP=${KEEP:-0} ONLY=""
BACKING_OPT=both TRACE_REQ="" TRACE_MAX_M=""
DIR=${TMPDIR:-/tmp}
usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while (($#)); do
    case $1 in
        --quick) QUICK=1 ;;
        --n) N=${2:?--n needs a number}; shift ;;
        --n=*) N=${1#*=} ;;
        --small-n) SMALL_N=${2:?--small-n needs a number}; shift ;;
        --reps) REPS=${2:?--reps needs a number}; shift ;;
        --files) FILES=${2:?--files needs a number}; shift ;;
        --full) FULL=1 ;;
        --dir) DIR=${2:?--dir needs a path}; shift ;;
        --no-build) BUILD=0 ;;
        --no-install) INSTALL=0 ;;
        --keep) KEEP=1 ;;
        --only) ONLY+=" ${2:?--only needs a workload group} "; shift ;;
        --backing) BACKING_OPT=${2:?--backing needs disk, tmpfs or both}; shift ;;
        --trace-requests) TRACE_REQ=${2:?--trace-requests needs a number}; shift ;;
        --trace-budget) TRACE_MAX_M=${2:?--trace-budget needs MiB}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "bench: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done
MiB=$((1 << 20))
if ((QUICK)); then
    : "${N:=128}" "${SMALL_N:=512}" "${REPS:=3}" "${FILES:=20000}"
    PROBE_N=2000 EVICT_MAX_M=64 EVICT_STORE_N=128 FIO_MB=256
    : "${TRACE_REQ:=200}" "${TRACE_MAX_M:=100}"
else
    : "${N:=512}" "${SMALL_N:=2048}" "${REPS:=5}" "${FILES:=200000}"
    PROBE_N=10000 EVICT_MAX_M=256 EVICT_STORE_N=512 FIO_MB=1024
    : "${TRACE_REQ:=1500}" "${TRACE_MAX_M:=300}"
fi
((FULL)) && FILES=1000000
FLAT_N=50000
THREADS=4                              # client threads of store/load
NCPU=$(nproc)
case $BACKING_OPT in
    disk|tmpfs) BACKINGS=("$BACKING_OPT") ;;
    both) BACKINGS=(disk tmpfs) ;;
    *) echo "bench: --backing must be disk, tmpfs or both" >&2; exit 2 ;;
esac
for v in N SMALL_N REPS FILES TRACE_REQ TRACE_MAX_M; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bench: $v must be a positive integer" >&2; exit 2; }
done
DATA_M=$((N * 2))                      # MiB of block data
SMALL_M=$((SMALL_N / 8))               # MiB of the small rows' blocks (128 KiB)
STAT_N=20000                           # stats per sample of the round-trip row
BUDGET_M=$((DATA_M * 4 > 1024 ? DATA_M * 4 : 1024))   # no eviction outside (f)

say()  { printf '%s\n' "$*"; }
want() { [[ -z $ONLY || $ONLY == *" $1 "* ]]; }           # --only filter
now()  { local t=${EPOCHREALTIME/./}; echo "$t"; }          # microseconds
usecs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) / 1e6 }'; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", (b - a) / 1e6 }'; }
note() { printf '[%6.1fs] %s\n' "$(elapsed "${T_START/./}")" "$*" >&2; }
die()  { printf 'bench: %s\n' "$*" >&2; exit 1; }
skip() { printf 'bench: SKIPPED: %s\n' "$*" >&2; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "must run as root (FUSE mounts)"
[[ -c /dev/fuse ]] || skip "/dev/fuse is missing"
command -v "$PY" >/dev/null || skip "python3 not found"
[[ -d $DIR ]] || die "--dir $DIR is not a directory"
DIR=$(realpath "$DIR")   # /proc/self/mounts lists resolved absolute paths

# ------------------------------------------------------------------ tools
if ((INSTALL)) && command -v apt-get >/dev/null; then
    missing=()
    command -v fio >/dev/null || missing+=(fio)
    command -v mergerfs >/dev/null || missing+=(mergerfs)
    if ((${#missing[@]})); then
        note "installing ${missing[*]} (apt-get; --no-install to skip)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
            { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; } ||
            note "could not install ${missing[*]}: those columns/rows will say n/a"
    fi
fi
HAVE_FIO=0 HAVE_MERGERFS=0
command -v fio >/dev/null && HAVE_FIO=1
command -v mergerfs >/dev/null && HAVE_MERGERFS=1

if [[ -n ${BOUNDFS:-} ]]; then
    :
elif ((BUILD)); then
    note "cargo build --release"
    (cd "$REPO" && cargo build --release --quiet) >&2 || die "cargo build --release failed"
    BOUNDFS="$REPO/target/release/boundfs"
else
    BOUNDFS="$REPO/target/release/boundfs"
fi
[[ -x $BOUNDFS ]] || die "boundfs binary not found: $BOUNDFS"
BOUNDFS_SRC=$BOUNDFS
BOUNDFS_BUILT=$(stat -c '%y' "$BOUNDFS" | cut -d. -f1)
git_rev=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -n $(git -C "$REPO" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null) ]] && git_rev+="+dirty(src)"

# ------------------------------------------------------------------ state + cleanup
WORK=$(mktemp -d "$DIR/boundfs-bench.XXXXXX") || die "mktemp in $DIR failed"
LOGS="$WORK/logs"
mkdir -p "$LOGS"
# pin the binary: a concurrent `cargo build` must not swap it mid-run
cp "$BOUNDFS" "$WORK/boundfs" || die "cannot copy $BOUNDFS"
BOUNDFS="$WORK/boundfs"
DPID="" DMNT="" DKIND=""              # the one mounted filesystem under test
RUNS=0

mounted() {   # builtin-only check of /proc/self/mounts (no fork: used in the timing loop)
    local _d m _r
    while read -r _d m _r; do [[ $m == "$1" ]] && return 0; done </proc/self/mounts
    return 1
}
alive() { [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; }

cleanup() {
    local rc=$? m
    set +e
    # every mount under WORK, deepest first
    while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done < <(awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r)
    if alive "$DPID"; then
        kill -TERM "$DPID"
        for _ in $(seq 50); do alive "$DPID" || break; sleep 0.1; done
        alive "$DPID" && kill -KILL "$DPID"
    fi
    wait 2>/dev/null
    cg_leave
    if awk -v w="$WORK/" 'index($2, w) == 1 { f = 1 } END { exit !f }' /proc/self/mounts; then
        echo "bench: something is still mounted under $WORK; not removing it" >&2
    elif ((KEEP)); then
        echo "bench: kept $WORK" >&2
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------------ mounts
MERGERFS_OPTS=${MERGERFS_OPTS:-cache.files=partial,cache.entry=1,cache.attr=1,cache.negative_entry=0,cache.readdir=false,cache.statfs=0,dropcacheonclose=false,func.getattr=newest,category.create=ff,threads=$NCPU,fsname=mergerfs-bench}

# fs_start KIND BACKING MNT [MAX_SIZE]: mounts and waits until it serves.
fs_start() {
    local kind=$1 backing=$2 mnt=$3 max=${4:-${BUDGET_M}M} deadline
    RUNS=$((RUNS + 1))
    local log="$LOGS/$RUNS-$kind.log"
    mkdir -p "$mnt"
    case $kind in
        boundfs)  "$BOUNDFS" -f "$backing" "$mnt" -o "max_size=$max,threads=$NCPU,guard=off${BOUNDFS_EXTRA:+,$BOUNDFS_EXTRA}" 2>"$log" & ;;
        mergerfs) mergerfs -f -o "$MERGERFS_OPTS" "$backing" "$mnt" >"$log" 2>&1 & ;;
        *) die "fs_start: bad kind $kind" ;;
    esac
    DPID=$! DMNT=$mnt DKIND=$kind
    deadline=$(($(now) + 120000000))
    until mounted "$mnt" && [[ -d $mnt/. ]]; do
        alive "$DPID" || { tail -5 "$log" >&2; DPID=""; return 1; }
        (($(now) < deadline)) || { note "$kind: no mount after 120 s"; return 1; }
        sleep 0.005
    done
}

# warmed: waits (at most 60 s) until the boundfs just started logged that it
# warmed the kernel's entries of the most recent block files (warm_entries).
warmed() {
    local log="$LOGS/$RUNS-boundfs.log" deadline=$(($(now) + 60000000))
    until grep -q "warmed the kernel's entries" "$log" 2>/dev/null; do
        (($(now) < deadline)) || { note "boundfs: no warm line after 60 s"; return 1; }
        sleep 0.01
    done
}

# Page-cache growth: the bench shell, and so every daemon and driver it
# starts, runs in its own memory cgroup during the store workload; its
# memory.stat counts the page cache they charge (v2 "file", v1 "cache").
CG="" CG_KEY="" CG_HOME=""
cg_enter() {
    local d key home
    if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
        d=/sys/fs/cgroup/boundfs-bench-$$ key=file home=/sys/fs/cgroup$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
    else
        d=/sys/fs/cgroup/memory/boundfs-bench-$$ key=cache home=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
    fi
    mkdir -p "$d" 2>/dev/null && echo $$ >"$d/cgroup.procs" 2>/dev/null && [[ -r $d/memory.stat ]] ||
        { rmdir "$d" 2>/dev/null; note "no memory cgroup here: page-cache rows say n/a"; return 1; }
    CG=$d CG_KEY=$key CG_HOME=$home
}
cg_leave() {
    [[ -n $CG ]] || return 0
    echo $$ >"$CG_HOME/cgroup.procs" 2>/dev/null
    rmdir "$CG" 2>/dev/null
    CG=""
}
# page cache charged, less tmpfs pages (shmem): a tmpfs backing's blocks are
# its data, not a cache
cg_cache() { awk -v k="$CG_KEY" '$1 == k { c = $2 } $1 == "shmem" { m = $2 } END { print c - m }' "$CG/memory.stat"; }

# fs_stop: unmounts; the daemon must exit (boundfs: with status 0).
fs_stop() {
    [[ -n $DPID ]] || return 0
    local rc=0 i
    umount "$DMNT" 2>/dev/null || { sleep 0.2; umount "$DMNT"; } || { note "umount $DMNT failed; lazy"; umount -l "$DMNT"; }
    for i in $(seq 200); do alive "$DPID" || break; sleep 0.05; done
    if alive "$DPID"; then
        note "$DKIND (pid $DPID) did not exit 10 s after umount; killing"
        kill -KILL "$DPID"; rc=1
    fi
    wait "$DPID" 2>/dev/null || rc=$?
    ((rc == 0)) || note "$DKIND exited with status $rc (log: $(ls -t "$LOGS" | head -1))"
    DPID="" DMNT="" DKIND=""
    return 0
}

# ------------------------------------------------------------------ results
declare -A S           # S[workload,system] = "sample sample ..."
declare -A ERRS        # failed samples per workload,system
declare -A FALLBACK    # store fell back to buffered I/O (O_DIRECT probe failed)
add() { [[ -n $3 ]] && S[$1,$2]+="${S[$1,$2]:+ }$3"; return 0; }
declare -A ERRMSG      # first failure reason per workload,system
bad() {
    ERRS[$1,$2]=$((${ERRS[$1,$2]:-0} + 1))
    [[ -n ${ERRMSG[$1,$2]:-} ]] || ERRMSG[$1,$2]=$3
    note "  $1/$2: FAILED ($3)"
}
median() {
    printf '%s\n' $1 | sort -g | awk 'NF { a[++n] = $1 } END {
        if (!n) print "n/a"; else if (n % 2) print a[(n + 1) / 2]; else print (a[n / 2] + a[n / 2 + 1]) / 2 }'
}
metric() { "$PY" "$KV" metric "$@"; }

# run_driver WL SYS OUTFILE EXPR -- cmd...: runs a driver, records EXPR of its JSON.
run_driver() {
    local wl=$1 sys=$2 out=$3 expr=$4; shift 5
    if ! "$@" >"$out" 2>"$out.err"; then bad "$wl" "$sys" "exit status $?: $(tail -1 "$out.err")"; return 1; fi
    local e; e=$(metric "$out" errors)
    if [[ $e != 0 ]]; then bad "$wl" "$sys" "$e errors: $(head -1 "$out.err")"; return 1; fi
    local v; v=$(metric "$out" "$expr")
    add "$wl" "$sys" "$v"
    note "  $wl/$sys: $v"
}

SYSTEMS=(native)
((HAVE_MERGERFS)) && SYSTEMS+=(mergerfs)
SYSTEMS+=(boundfs)

# target SYS BACKING MNT [MAX]: sets T to where the workload runs: for native
# the backing dir itself, else MNT freshly mounted over BACKING.
T=""
target() {
    T=$2
    [[ $1 == native ]] && return 0
    fs_start "$1" "$2" "$3" "${4:-}" || return 1
    T=$3
}

# ------------------------------------------------------------------ preflight
if ((HAVE_MERGERFS)); then
    mkdir -p "$WORK/pre/b" "$WORK/pre/m"
    if fs_start mergerfs "$WORK/pre/b" "$WORK/pre/m" && [[ -d $WORK/pre/m/. ]]; then
        fs_stop
    else
        note "mergerfs does not mount here: its columns say n/a"; fs_stop; HAVE_MERGERFS=0
        SYSTEMS=(native boundfs)
    fi
fi
mkdir -p "$WORK/pre/b2" "$WORK/pre/m2"
fs_start boundfs "$WORK/pre/b2" "$WORK/pre/m2" 64M || die "boundfs does not mount (log in $LOGS)"
fs_stop

# ------------------------------------------------------------------ bounded rows: helpers
# The bounded rows run each workload twice per backing and repetition, in
# turn: "lru" is the load generator on a plain directory keeping it within
# max_size by its own exact LRU (kvbench.BudgetLRU: --lru-budget), "boundfs"
# the same load generator through a mount with that max_size. Keys of S are
# WL,SYS:BACKING (lru:disk, boundfs:disk, lru:tmpfs, boundfs:tmpfs).
CLK_TCK=$(getconf CLK_TCK)
GiB=$((1 << 30))
# bk_make BACKING D MIB: D ready for a run, with D/b the directory (native)
# or the backing (boundfs): on DIR's filesystem, or on a fresh tmpfs of MIB
# mounted at D.
bk_make() {
    mkdir -p "$2" || return 1
    if [[ $1 == tmpfs ]]; then
        mount -t tmpfs -o "size=$3m,mode=0755" boundfs-bench "$2" || return 1
    fi
    mkdir -p "$2/b"
}
bk_drop() {   # bk_drop D: after fs_stop
    sync
    if mountpoint -q "$1"; then umount "$1" || umount -l "$1"; fi
    rm -rf "$1"
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }   # user + system, all threads
# addm KEY FILE WL=EXPR...: adds each EXPR over FILE's JSON line to WL,KEY
# (one python run for all), unless it is None
addm() {
    local key=$1 file=$2 i; shift 2
    local -a pairs=("$@") exprs=() vals=()
    for i in "${pairs[@]}"; do exprs+=("${i#*=}"); done
    mapfile -t vals < <(metric "$file" "${exprs[@]}" 2>/dev/null)
    for i in "${!pairs[@]}"; do
        [[ -n ${vals[$i]:-} && ${vals[$i]} != None ]] && add "${pairs[$i]%%=*}" "$key" "${vals[$i]}"
    done
    return 0
}
# per_gib TICKS0 TICKS1 BYTES: CPU seconds per GiB
per_gib() { awk -v a="$1" -v b="$2" -v n="$3" -v t="$CLK_TCK" -v g="$GiB" 'BEGIN { if (n > 0) printf "%.4f", (b - a) / t / (n / g) }'; }
# pair_order REP: native first in odd repetitions, boundfs first in even
# ones, so neither always runs right after the other's removal of its tree
# (on ext4 without a journal, inodes freed in the last minute slow the next
# inode allocations: docs/performance.md)
pair_order() { (($1 % 2)) && echo "lru boundfs" || echo "boundfs lru"; }
# du_ok WL KEY DIR MAXBYTES: the directory's du (what it holds) within the budget
du_ok() {
    local du_b; du_b=$(du -s --block-size=1 "$3" | cut -f1)
    ((du_b <= $4 + MiB + 4096)) || bad "$1" "$2" "du of the directory $du_b B > max_size $4 B"
}

# ------------------------------------------------------------------ t. trace replay
# The Mooncake trace replayed vLLM-style (trace.py): probe chain, O_DIRECT load
# of the hit prefix (every byte checked), O_DIRECT tmp+rename store of the rest.
# Unbounded (main table): native and mergerfs as they are, boundfs with a
# budget twice the trace, so none evicts and all do the same work.
# Bounded (second table): boundfs at max_size=TRACE_MAX_M beside the native
# directory kept to the same budget by the replayer's own exact LRU.
TRACE_BS=$((128 << 10)) TRACE_THREADS=4 TRACE_REPS=$((REPS < 3 ? REPS : 3))
trace_run() { "$PY" "$TRACE" --requests "$TRACE_REQ" run "$1" --block-size "$TRACE_BS" --threads "$TRACE_THREADS" "${@:2}"; }

bounded_trace() {   # bounded_trace REP BACKING SYS
    local r=$1 bk=$2 sys=$3 key="$3:$2" d="$WORK/trace-$3-$2-$1" max=$((TRACE_MAX_M << 20)) c0="" c1 p0="" p1 held
    bk_make "$bk" "$d" $((TRACE_MAX_M + 64)) || { bad trace_b "$key" "tmpfs mount"; rm -rf "$d"; return; }
    local lru=()
    if [[ $sys == lru ]]; then
        T=$d/b lru=(--lru-budget "$max")
    elif fs_start boundfs "$d/b" "$d/m" "${TRACE_MAX_M}M"; then
        T=$d/m
        "$PY" "$KV" stats "$T" >"$d/before.json"
        c0=$(cpu_ticks "$DPID")
    else
        bad trace_b "$key" mount; bk_drop "$d"; return
    fi
    [[ -n $CG ]] && p0=$(cg_cache)
    if run_driver trace_b "$key" "$d/out.json" 'requests/seconds' -- trace_run "$T" "${lru[@]}"; then
        [[ -n $CG ]] && p1=$(cg_cache)
        [[ $sys == boundfs ]] && c1=$(cpu_ticks "$DPID")
        local stores loads direct op q lat=()
        read -r stores loads direct < <(metric "$d/out.json" stores loads direct | paste -sd' ')
        [[ $direct == False ]] && FALLBACK[trace_b,$key]=1
        for op in probe load store; do
            for q in p50 p99; do lat+=("trace_b_${op}_$q=lat_us['$op']['$q']"); done
        done
        addm "$key" "$d/out.json" trace_b_secs=seconds trace_b_hit=hits/refs trace_b_stores=stores "${lat[@]}" \
            "trace_b_cpu_client=cpu_s * $GiB / (stores * $TRACE_BS) if stores else None"
        [[ -n $p1 ]] && add trace_b_pcache_mib "$key" "$(awk -v a="$p0" -v b="$p1" 'BEGIN { printf "%.1f", (b - a) / 1048576 }')"
        [[ -n $p1 ]] && add trace_b_pcache "$key" "$(awk -v a="$p0" -v b="$p1" -v n="$loads" \
            -v bs="$TRACE_BS" -v g="$GiB" 'BEGIN { if (n > 0) printf "%.1f", (b - a) / 1048576 / (n * bs / g) }')"
        if [[ $sys == boundfs ]]; then
            add trace_b_cpu_daemon "$key" "$(per_gib "$c0" "$c1" $((stores * TRACE_BS)))"
            "$PY" "$KV" stats "$T" >"$d/after.json"
            if "$PY" "$TRACE" requests "$d/before.json" "$d/after.json" "$d/out.json" "$max" >"$d/req.json" 2>"$d/req.err"; then
                addm "$key" "$d/req.json" trace_b_per_store=per_store trace_b_syscalls_per_store=syscalls_per_store
            else
                bad trace_b_per_store "$key" "$(head -1 "$d/req.err")"
            fi
            # loads of 200 held blocks, twice: entries cold, then cached
            if "$PY" "$TRACE" loadpass "$d/b" "$T" 200 >"$d/loadpass.json" 2>"$d/loadpass.err"; then
                addm "$key" "$d/loadpass.json" trace_b_per_load=per_load_first trace_b_per_load_again=per_load_again
            else bad trace_b_per_load "$key" "$(tail -1 "$d/loadpass.err")"; fi
        else
            local peak; peak=$(metric "$d/out.json" "lru['peak']")
            ((peak <= max)) || bad trace_b "$key" "LRU counted $peak B > max_size"
        fi
    fi
    [[ $sys == boundfs ]] && fs_stop
    du_ok trace_b "$key" "$d/b" "$max"
    held=$(find "$d/b" -name '*.bin' | wc -l)
    add trace_b_held "$key" "$held"
    add trace_b_ideal "$key" "$("$PY" "$TRACE" --requests "$TRACE_REQ" lru "$held" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["hit_ratio"])')"
    for f in "$d"/*.json; do cp "$f" "$LOGS/trace-$sys-$bk-$r-$(basename "$f")"; done
    bk_drop "$d"
}

# ------------------------------------------------------------------ the main table's workloads, per backing
# Run once per backing: on tmpfs first (a tmpfs mounted at $WORK/tmpfs holds
# the data sets and every run's directories; its samples are then relabelled
# SYS@tmpfs), then on DIR's filesystem (disk).
TRACE_D=""
if want trace; then
    TRACE_D=$("$PY" "$TRACE" --requests "$TRACE_REQ" distinct) || die "trace.py: no trace (set BOUNDFS_SHARED)"
    TRACE_UNB_M=$((TRACE_D * (TRACE_BS + 8192) * 2 / MiB + 64))
fi
# tmpfs for the main workloads: the load set, one store run, fio's two files,
# the unbounded trace, plus room for the trees of empty files
MAIN_TMPFS_M=$((DATA_M * 2 + SMALL_M + FIO_MB * 2 + ${TRACE_D:-0} * TRACE_BS / MiB + 1024))
# relabel_tmpfs: the samples of the pass just run (keys WL,SYS) become WL,SYS@tmpfs
relabel_tmpfs() {
    local k arr
    for arr in S ERRS ERRMSG FALLBACK; do
        local -n A=$arr
        for k in "${!A[@]}"; do
            [[ $k == *,native || $k == *,mergerfs || $k == *,boundfs ]] || continue
            A[$k@tmpfs]=${A[$k]}
            unset "A[$k]"
        done
        unset -n A
    done
}
MAIN_BACKINGS=()
[[ " ${BACKINGS[*]} " == *" tmpfs "* ]] && MAIN_BACKINGS+=(tmpfs)
[[ " ${BACKINGS[*]} " == *" disk "* ]] && MAIN_BACKINGS+=(disk)
for BK in "${MAIN_BACKINGS[@]}"; do
    if [[ $BK == tmpfs ]]; then
        BASE=$WORK/tmpfs
        mkdir -p "$BASE" && mount -t tmpfs -o "size=${MAIN_TMPFS_M}m,mode=0755" boundfs-bench "$BASE" ||
            die "cannot mount a tmpfs at $BASE"
    else
        BASE=$WORK
    fi
    note "== the main table's workloads on $BK ($BASE)"
    # ------------------------------------------------------------------ datasets (untimed)
    note "setup: $N x 2 MiB blocks (load set), $PROBE_N probe files, $FLAT_N flat files, $FILES restart files in $BASE"
    LOADSET="$BASE/loadset" PROBESET="$BASE/probeset" FLATSET="$BASE/flatset" MANYSET="$BASE/manyset"
    if want load; then
        "$PY" "$KV" store "$LOADSET" "$N" --seed load --threads "$THREADS" >"$LOGS/$BK-setup-load.json" || die "load set"
    fi
    STATSET="$BASE/statset"
    if want stat; then
        mkdir -p "$STATSET" && : >"$STATSET/statrt.bin" || die "stat set"
    fi
    if want probe; then
        "$PY" "$KV" mkfiles "$PROBESET" "$PROBE_N" --seed probe >"$LOGS/$BK-setup-probe.json" || die "probe set"
    fi
    if want readdir; then
        "$PY" "$KV" mkflat "$FLATSET" "$FLAT_N" >"$LOGS/$BK-setup-flat.json" || die "flat set"
    fi
    if want restart; then
        "$PY" "$KV" mkfiles "$MANYSET" "$FILES" --seed many --layout h3 >"$LOGS/$BK-setup-many.json" || die "restart set"
        MANY_PROBE=$("$PY" "$KV" path "$MANYSET" 0 --seed many --layout h3)
        MANY_PROBE_REL=${MANY_PROBE#"$MANYSET"/}
    fi
    sync
    note "setup done"

    # warm the backing page cache for the load set (buffered read, native)
    warm() { "$PY" "$KV" load "$LOADSET" "$N" --seed load --threads "$THREADS" >/dev/null; }

    # ------------------------------------------------------------------ a. store
    # (and the page cache each store grew: its O_DIRECT writes should add none)
    want store && cg_enter
    # boundfs_nohist: boundfs -o latency_histograms=off (the row beside
    # boundfs shows what the latency histograms cost a store), run right
    # before boundfs in odd repetitions and right after it in even ones.
    want store && for ((r = 1; r <= REPS; r++)); do
        note "a. store, rep $r/$REPS"
        order=("${SYSTEMS[@]}" boundfs_nohist)
        ((r % 2)) && order=("${SYSTEMS[@]/boundfs/boundfs_nohist boundfs}")
        for sys in ${order[*]}; do
            d="$BASE/store-$sys-$r"; mkdir -p "$d/b"
            kind=${sys%_nohist} wl=store extra=""
            [[ $sys == boundfs_nohist ]] && { wl=store_nohist extra=latency_histograms=off; }
            BOUNDFS_EXTRA=$extra target "$kind" "$d/b" "$d/m" || { bad $wl "$kind" mount; continue; }
            c0=$([[ -n $CG ]] && cg_cache)
            run_driver $wl "$kind" "$d/out.json" 'bytes/1048576/seconds' -- \
                "$PY" "$KV" store "$T" "$N" --seed "store$r" --threads "$THREADS" &&
                [[ $(metric "$d/out.json" direct) == False ]] && FALLBACK[$wl,$kind]=1
            if [[ -n $CG && -s $d/out.json && $wl == store ]]; then
                add store_pcache "$sys" "$(awk -v a="$c0" -v b="$(cg_cache)" 'BEGIN { printf "%.1f", (b - a) / 1048576 }')"
            fi
            # the off row's ratio is to the same native samples
            [[ $sys == native && -s $d/out.json ]] && add store_nohist native "$(metric "$d/out.json" 'bytes/1048576/seconds')"
            cp "$d/out.json" "$LOGS/$BK-store-$sys-$r.json" 2>/dev/null
            [[ $sys == native ]] || fs_stop
            sync; rm -rf "$d"
        done
    done

    want store && cg_leave

    # ------------------------------------------------------------------ b./c. load
    want load && warm
    # b./c.: fresh mount, entries cold (warm_entries=0: the load starts at once);
    # b. after a restart: fresh mount, loaded once boundfs has warmed the
    # kernel's entries of its most recent blocks (as an engine restarting
    # reloads them some seconds after the mount).
    want load && for mode in buffered direct restart; do
        wl=load; flag=()
        [[ $mode == direct ]] && { wl=load_direct; flag=(--direct); }
        [[ $mode == restart ]] && wl=load_restart
        for ((r = 1; r <= REPS; r++)); do
            note "$([[ $mode == direct ]] && echo 'c. load O_DIRECT' || echo "b. load ($mode)"), rep $r/$REPS"
            for sys in "${SYSTEMS[@]}"; do
                extra=warm_entries=0; [[ $mode == restart ]] && extra=""
                BOUNDFS_EXTRA=$extra target "$sys" "$LOADSET" "$BASE/mnt-$sys" || { bad $wl "$sys" mount; continue; }
                [[ $mode == restart && $sys == boundfs ]] && { warmed || bad $wl "$sys" "not warmed"; }
                run_driver $wl "$sys" "$LOGS/$BK-$wl-$sys-$r.json" 'bytes/1048576/seconds' -- \
                    "$PY" "$KV" load "$T" "$N" --seed load --threads "$THREADS" "${flag[@]}"
                [[ $sys == native ]] || fs_stop
            done
        done
    done

    # b./c. page cache grown per GiB loaded: the load set's pages dropped
    # first (natively), the bench in its memory cgroup, measured once the
    # mount is gone (a RELEASE is asynchronous to the close); boundfs also
    # with drop_cache=release (workloads *_rel: native there is the same run).
    # Keys: load_pcache (buffered), load_dn_pcache (the reader drops each
    # block: POSIX_FADV_DONTNEED before the close), load_direct_pcache.
    if want load && cg_enter; then
        for ((r = 1; r <= REPS; r++)); do
            note "b./c. page cache grown per GiB loaded, rep $r/$REPS"
            for mode in buffered dontneed direct; do
                wl=load_pcache flag=()
                [[ $mode == dontneed ]] && { wl=load_dn_pcache; flag=(--dontneed); }
                [[ $mode == direct ]] && { wl=load_direct_pcache; flag=(--direct); }
                for sys in "${SYSTEMS[@]}" boundfs_rel; do
                    [[ $sys == boundfs_rel && $mode == direct ]] && continue
                    "$PY" "$KV" uncache "$LOADSET" "$N" --seed load >/dev/null || { bad $wl "$sys" uncache; continue; }
                    c0=$(cg_cache)
                    kind=${sys%_rel} extra=warm_entries=0
                    [[ $sys == boundfs_rel ]] && extra+=,drop_cache=release
                    BOUNDFS_EXTRA=$extra target "$kind" "$LOADSET" "$BASE/mnt-$kind" || { bad $wl "$sys" mount; continue; }
                    "$PY" "$KV" load "$T" "$N" --seed load --threads "$THREADS" "${flag[@]}" >"$LOGS/$BK-$wl-$sys-$r.json" ||
                        { bad $wl "$sys" "load failed"; [[ $kind == native ]] || fs_stop; continue; }
                    [[ $kind == native ]] || fs_stop
                    v=$(awk -v a="$c0" -v b="$(cg_cache)" -v n="$DATA_M" 'BEGIN { printf "%.1f", (b - a) / 1048576 / (n / 1024) }')
                    note "  $wl/$sys: $v MiB per GiB loaded"
                    case $sys in
                        native) add $wl native "$v"; add ${wl}_rel native "$v" ;;
                        boundfs_rel) add ${wl}_rel boundfs "$v" ;;
                        *) add $wl "$sys" "$v" ;;
                    esac
                done
            done
        done
        cg_leave
    fi

    # ------------------------------------------------------------------ s. small blocks, new directories
    # 128 KiB blocks (SGLang's file backend writes ~52 KB ones), each into
    # its own new two-level hash directories: what a store costs in round
    # trips rather than in bytes. Then a fresh mount over the same tree
    # (boundfs: warm_entries=0, entries cold) loads them with O_DIRECT.
    want small && for ((r = 1; r <= REPS; r++)); do
        note "s. 128 KiB store and load, rep $r/$REPS"
        for sys in "${SYSTEMS[@]}"; do
            d="$BASE/small-$sys-$r"; mkdir -p "$d/b"
            if target "$sys" "$d/b" "$d/m"; then
                run_driver small_store "$sys" "$d/store.json" 'ops/seconds' -- \
                    "$PY" "$KV" store "$T" "$SMALL_N" --seed "small$r" --size 128K --threads "$THREADS"
                [[ $sys == native ]] || fs_stop
                if BOUNDFS_EXTRA=warm_entries=0 target "$sys" "$d/b" "$d/m"; then
                    run_driver small_load "$sys" "$d/load.json" 'ops/seconds' -- \
                        "$PY" "$KV" load "$T" "$SMALL_N" --seed "small$r" --size 128K --threads "$THREADS" --direct
                    [[ $sys == native ]] || fs_stop
                else bad small_load "$sys" mount; fi
                cp "$d/store.json" "$LOGS/$BK-small-store-$sys-$r.json" 2>/dev/null
                cp "$d/load.json" "$LOGS/$BK-small-load-$sys-$r.json" 2>/dev/null
            else bad small_store "$sys" mount; fi
            sync; rm -rf "$d"
        done
    done

    # ------------------------------------------------------------------ r. one round trip: stat
    # os.stat of a file in the mount's root, STAT_N times, one thread, with the kernel's
    # attribute and entry caches off (boundfs -o attr_timeout=0; mergerfs
    # cache.attr=0,cache.entry=0): every stat goes to the daemon. boundfs
    # also gives the FUSE requests per stat (its status before and after).
    if want stat; then
        mergerfs_opts=$MERGERFS_OPTS
        MERGERFS_OPTS=${MERGERFS_OPTS//cache.attr=1/cache.attr=0}
        MERGERFS_OPTS=${MERGERFS_OPTS//cache.entry=1/cache.entry=0}
        for ((r = 1; r <= REPS; r++)); do
            note "r. stat round trip, rep $r/$REPS"
            for sys in "${SYSTEMS[@]}"; do
                BOUNDFS_EXTRA=attr_timeout=0 target "$sys" "$STATSET" "$BASE/mnt-$sys" || { bad stat "$sys" mount; continue; }
                o="$LOGS/$BK-stat-$sys-$r"
                [[ $sys == boundfs ]] && "$PY" "$KV" stats "$T" >"$o.before"
                run_driver stat "$sys" "$o.json" 'seconds * 1e6 / ops' -- "$PY" "$KV" statrt "$T" "$STAT_N" &&
                    addm "$sys" "$o.json" "stat_p50=lat_us['stat']['p50']"
                if [[ $sys == boundfs ]]; then
                    "$PY" "$KV" stats "$T" >"$o.after"
                    "$PY" "$KV" reqdiff "$o.before" "$o.after" "$STAT_N" >"$o.req" &&
                        addm "$sys" "$o.req" stat_req=per_op
                fi
                [[ $sys == native ]] || fs_stop
            done
        done
        MERGERFS_OPTS=$mergerfs_opts
    fi

    # ------------------------------------------------------------------ d. probe
    want probe && for ((r = 1; r <= REPS; r++)); do
        note "d. probe, rep $r/$REPS"
        # boundfs_nohist: the first pass only, through -o latency_histograms=off
        # (every access a LOOKUP the daemon answers: the most requests per second)
        order=("${SYSTEMS[@]}" boundfs_nohist)
        ((r % 2)) && order=("${SYSTEMS[@]/boundfs/boundfs_nohist boundfs}")
        for sys in ${order[*]}; do
            kind=${sys%_nohist} wl=probe extra=""
            [[ $sys == boundfs_nohist ]] && { wl=probe_nohist extra=latency_histograms=off; }
            BOUNDFS_EXTRA=$extra target "$kind" "$PROBESET" "$BASE/mnt-$kind" || { bad $wl "$kind" mount; continue; }
            run_driver $wl "$kind" "$LOGS/$BK-$wl-$sys-$r.json" 'ops/seconds' -- \
                "$PY" "$KV" probe "$T" "$PROBE_N" --seed probe
            [[ $sys == native ]] && add probe_nohist native "$(metric "$LOGS/$BK-$wl-$sys-$r.json" 'ops/seconds')"
            [[ $kind == native ]] || fs_stop
            [[ $sys == boundfs_nohist ]] && continue
            target "$sys" "$PROBESET" "$BASE/mnt-$sys" || { bad probe_again "$sys" mount; continue; }
            run_driver probe_again "$sys" "$LOGS/$BK-probe-again-$sys-$r.json" 'ops/seconds' -- \
                "$PY" "$KV" probe "$T" "$PROBE_N" --seed probe --again
            [[ $sys == native ]] || fs_stop
        done
    done

    # ------------------------------------------------------------------ e. readdir
    want readdir && for ((r = 1; r <= REPS; r++)); do
        note "e. readdir, rep $r/$REPS"
        for sys in "${SYSTEMS[@]}"; do
            target "$sys" "$FLATSET" "$BASE/mnt-$sys" || { bad readdir "$sys" mount; continue; }
            run_driver readdir "$sys" "$LOGS/$BK-readdir-$sys-$r.json" 'ops/seconds' -- \
                "$PY" "$KV" readdir "$T" --expect "$FLAT_N"
            [[ $sys == native ]] || fs_stop
        done
    done

    # ------------------------------------------------------------------ g./h. restart with many files, RSS
    rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
    want restart && for ((r = 1; r <= REPS; r++)); do
        note "g. restart ($FILES files), rep $r/$REPS"
        t0=${EPOCHREALTIME/./}
        find "$MANYSET" -printf '%s %T@\n' >/dev/null
        t1=${EPOCHREALTIME/./}
        add restart native "$(usecs "$t0" "$t1")"
        add restart_index native "$(usecs "$t0" "$t1")"
        for sys in "${SYSTEMS[@]}"; do
            [[ $sys == native ]] && continue
            m="$BASE/mnt-$sys"; mkdir -p "$m"
            RUNS=$((RUNS + 1)); log="$LOGS/$BK-$RUNS-restart-$sys.log"
            t0=${EPOCHREALTIME/./}
            if [[ $sys == boundfs ]]; then
                "$BOUNDFS" -f "$MANYSET" "$m" -o "max_size=${BUDGET_M}M,threads=$NCPU,guard=off" 2>"$log" &
            else
                mergerfs -f -o "$MERGERFS_OPTS" "$MANYSET" "$m" >"$log" 2>&1 &
            fi
            DPID=$! DMNT=$m DKIND=$sys
            ok=1
            # serves = mounted (what `mountpoint -q` checks) and a stat of a file works
            until mounted "$m" && [[ -e $m/$MANY_PROBE_REL ]]; do
                alive "$DPID" || { ok=0; break; }
                ((${EPOCHREALTIME/./} - t0 < 600000000)) || { ok=0; break; }
                sleep 0.002
            done
            t1=${EPOCHREALTIME/./}
            if ((ok)) && mountpoint -q "$m"; then
                v=$(usecs "$t0" "$t1"); add restart "$sys" "$v"; note "  restart/$sys: $v s"
                if [[ $sys == boundfs ]]; then
                    # the index is built in the background: wait for it (and
                    # measure RSS only once it holds every file)
                    until getfattr --absolute-names --only-values -n user.boundfs.stats "$m" 2>/dev/null |
                        grep -q '"indexing":false'; do
                        alive "$DPID" || break
                        sleep 0.01
                    done
                    t2=${EPOCHREALTIME/./}
                    v=$(usecs "$t0" "$t2"); add restart_index boundfs "$v"; note "  index complete/boundfs: $v s"
                    full_kb=$(rss_kb "$DPID")
                    fs_stop
                    # baseline: the same daemon over an empty backing
                    e="$BASE/empty-$r"; mkdir -p "$e/b"
                    if fs_start boundfs "$e/b" "$e/m"; then
                        stat "$e/m/." >/dev/null; [[ -e $e/m/none ]]
                        base_kb=$(rss_kb "$DPID"); fs_stop
                        v=$(((full_kb - base_kb) * 1024 / FILES))
                        add rss boundfs "$v"; note "  rss/boundfs: $v B/file (VmRSS $full_kb kB vs $base_kb kB empty)"
                        add rss_total boundfs "$full_kb"
                    fi
                    rm -rf "$e"
                else
                    add rss_total mergerfs "$(rss_kb "$DPID")"
                    fs_stop
                fi
            else
                bad restart "$sys" "did not serve"; tail -3 "$log" >&2; fs_stop
            fi
        done
    done

    # ------------------------------------------------------------------ fio: large files, plain I/O
    if ((HAVE_FIO)) && want fio; then
        FIO_COMMON=(--ioengine=psync --invalidate=0 --output-format=json --group_reporting)
        fio_bw() { "$PY" "$KV" fiobw "$1" "$2"; }
        BIG="$BASE/bigfile"; mkdir -p "$BIG"
        fio --name=lay --filename="$BIG/big" --rw=write --bs=4M --size="${FIO_MB}M" --ioengine=psync \
            --output="$LOGS/$BK-fio-layout.txt" >/dev/null 2>&1 || note "fio layout failed"
        sync; cat "$BIG/big" >/dev/null   # warm the backing page cache
        for ((r = 1; r <= REPS; r++)); do
            note "fio: seq write / seq read, rep $r/$REPS"
            for sys in "${SYSTEMS[@]}"; do
                d="$BASE/fio-$sys-$r"; mkdir -p "$d/b"
                if target "$sys" "$d/b" "$d/m"; then
                    if fio --name=seqw --directory="$T" --rw=write --bs=4M --size="${FIO_MB}M" --nrfiles=4 \
                        "${FIO_COMMON[@]}" >"$LOGS/$BK-fiow-$sys-$r.json" 2>&1; then
                        v=$(fio_bw "$LOGS/$BK-fiow-$sys-$r.json" write); add fio_write "$sys" "$v"; note "  fio_write/$sys: $v"
                    else bad fio_write "$sys" "fio failed"; fi
                    [[ $sys == native ]] || fs_stop
                else bad fio_write "$sys" mount; fi
                sync; rm -rf "$d"
                if target "$sys" "$BIG" "$BASE/mnt-$sys"; then
                    if fio --name=seqr --filename="$T/big" --rw=read --bs=1M --size="${FIO_MB}M" \
                        "${FIO_COMMON[@]}" >"$LOGS/$BK-fior-$sys-$r.json" 2>&1; then
                        v=$(fio_bw "$LOGS/$BK-fior-$sys-$r.json" read); add fio_read "$sys" "$v"; note "  fio_read/$sys: $v"
                    else bad fio_read "$sys" "fio failed"; fi
                    [[ $sys == native ]] || fs_stop
                else bad fio_read "$sys" mount; fi
            done
        done
    fi

    # t. (unbounded rows of the main table)
    if want trace; then
        for ((r = 1; r <= TRACE_REPS; r++)); do
            note "t. trace replay, unbounded ($TRACE_REQ requests, $TRACE_D distinct blocks), rep $r/$TRACE_REPS"
            for sys in "${SYSTEMS[@]}"; do
                d="$BASE/trace-$sys-$r"; mkdir -p "$d/b"
                max=""; [[ $sys == boundfs ]] && max="${TRACE_UNB_M}M"
                if target "$sys" "$d/b" "$d/m" "$max"; then
                    run_driver trace "$sys" "$d/out.json" 'requests/seconds' -- trace_run "$T" &&
                        add trace_hit "$sys" "$(metric "$d/out.json" 'hits/refs')"
                    cp "$d/out.json" "$LOGS/$BK-trace-$sys-$r-unbounded.json" 2>/dev/null
                    [[ $sys == native ]] || fs_stop
                else bad trace "$sys" mount; fi
                sync; rm -rf "$d"
            done
        done
    fi
    if [[ $BK == tmpfs ]]; then
        relabel_tmpfs
        sync; umount "$BASE" || umount -l "$BASE"; rmdir "$BASE"
    fi
done

# ------------------------------------------------------------------ f. stores under eviction
# Fill to max_size (untimed), then time stores of new 2 MiB blocks, each of
# which needs room made: boundfs evicts, the native baseline unlinks its own
# oldest (its LRU adopts the prefill by mtime).
PREFILL_N=$((EVICT_MAX_M / 2))
bounded_evict() {   # bounded_evict REP BACKING SYS
    local r=$1 bk=$2 sys=$3 key="$3:$2" d="$WORK/evict-$3-$2-$1" c0="" c1 ev
    bk_make "$bk" "$d" $((EVICT_MAX_M + 64)) || { bad evict_store "$key" "tmpfs mount"; rm -rf "$d"; return; }
    local lru=()
    if [[ $sys == lru ]]; then
        T=$d/b lru=(--lru-budget "${EVICT_MAX_M}M")
    elif fs_start boundfs "$d/b" "$d/m" "${EVICT_MAX_M}M"; then
        T=$d/m
    else
        bad evict_store "$key" mount; bk_drop "$d"; return
    fi
    "$PY" "$KV" store "$T" "$PREFILL_N" --seed "pre$r" --threads "$THREADS" "${lru[@]}" >"$d/pre.json" 2>"$d/pre.err"
    if [[ $sys == boundfs ]]; then "$PY" "$KV" stats "$T" >"$d/before.json"; c0=$(cpu_ticks "$DPID"); fi
    ((${#lru[@]})) && lru+=(--lru-adopt)
    if run_driver evict_store "$key" "$d/out.json" 'bytes/1048576/seconds' -- \
        "$PY" "$KV" store "$T" "$EVICT_STORE_N" --seed "ev$r" --threads "$THREADS" "${lru[@]}"; then
        [[ $(metric "$d/out.json" direct) == False ]] && FALLBACK[evict_store,$key]=1
        addm "$key" "$d/out.json" "evict_p50=lat_us['store']['p50']" "evict_p99=lat_us['store']['p99']" \
            "evict_cpu_client=cpu_s * $GiB / bytes"
        if [[ $sys == lru ]]; then
            ev=$(metric "$d/out.json" "lru['evictions'] / seconds") && add evict "$key" "$ev"
        else
            c1=$(cpu_ticks "$DPID")
            add evict_cpu_daemon "$key" "$(per_gib "$c0" "$c1" "$(metric "$d/out.json" bytes)")"
            "$PY" "$KV" stats "$T" >"$d/after.json"
            ev=$("$PY" -c '
import json, sys
b, a = (json.load(open(p)) for p in sys.argv[1:3])
run = json.loads(open(sys.argv[3]).read().splitlines()[-1])
print("%.6g" % ((a["evictions"] - b["evictions"]) / run["seconds"]))' "$d/before.json" "$d/after.json" "$d/out.json") &&
                add evict "$key" "$ev" || bad evict "$key" "stats"
        fi
        note "  evict/$key: ${ev:-?} blocks/s"
    fi
    for f in "$d"/*.json; do cp "$f" "$LOGS/evict-$sys-$bk-$r-$(basename "$f")" 2>/dev/null; done
    [[ $sys == boundfs ]] && fs_stop
    du_ok evict "$key" "$d/b" $((EVICT_MAX_M << 20))
    bk_drop "$d"
}
want evict && for ((r = 1; r <= REPS; r++)); do
    note "f. stores under eviction, rep $r/$REPS"
    for bk in "${BACKINGS[@]}"; do
        for sys in $(pair_order "$r"); do bounded_evict "$r" "$bk" "$sys"; done
    done
done

# ------------------------------------------------------------------ t. bounded trace rows
if want trace; then
    want_cg=0; [[ -z $CG ]] && cg_enter && want_cg=1
    for ((r = 1; r <= TRACE_REPS; r++)); do
        note "t. trace replay, bounded (max_size ${TRACE_MAX_M}M), rep $r/$TRACE_REPS"
        for bk in "${BACKINGS[@]}"; do
            for sys in $(pair_order "$r"); do bounded_trace "$r" "$bk" "$sys"; done
        done
    done
    ((want_cg)) && cg_leave
fi

# ------------------------------------------------------------------ report
group() { local s=$1 out=""; while ((${#s} > 3)); do out=",${s: -3}$out"; s=${s:0:${#s}-3}; done; echo "$s$out"; }
fmt() {   # fmt VALUE KIND
    [[ $1 == n/a || -z $1 ]] && { echo "n/a"; return; }
    case $2 in
        int) group "$(printf '%.0f' "$1")" ;;
        sec) printf '%.3f' "$1" ;;
        frac) printf '%.4f' "$1" ;;
        dec) printf '%.1f' "$1" ;;
        *)   printf '%.0f' "$1" ;;
    esac
}
ratio() { [[ $1 == n/a || $2 == n/a || -z $1 || -z $2 ]] && { echo "—"; return; }
          awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "—"; else printf "%.2f", a / b }'; }
# sstat WL KEY: "median min max n" of the samples, or nothing
sstat() {
    local v=${S[$1,$2]:-}
    [[ -n $v ]] || return 0
    printf '%s\n' $v | sort -g | awk '{ a[++n] = $1 } END {
        m = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2; print m, a[1], a[n], n }'
}
# scell WL KEY KIND [NA]: "median (min–max)" with failures and † noted; NA
# (or no samples) gives "n/a", a failure with no sample FAILED
scell() {
    local st; st=$(sstat "$1" "$2")
    if [[ -z $st ]]; then
        if [[ -n ${ERRS[$1,$2]:-} ]]; then echo FAILED; else echo "${4:-n/a}"; fi
        return
    fi
    local m lo hi n out; read -r m lo hi n <<<"$st"
    out=$(fmt "$m" "$3")
    ((n > 1)) && out+=" ($(fmt "$lo" "$3")–$(fmt "$hi" "$3"))"
    [[ -n ${ERRS[$1,$2]:-} ]] && out+=" (${ERRS[$1,$2]} failed)"
    [[ -n ${FALLBACK[$1,$2]:-} ]] && out+=" †"
    echo "$out"
}
smed() { local st; st=$(sstat "$1" "$2"); echo "${st%% *}"; }
# main table: per backing (disk: keys SYS, tmpfs: SYS@tmpfs) native,
# mergerfs, boundfs and the two ratios of medians
SFX_disk="" SFX_tmpfs="@tmpfs"
row() {   # row WL LABEL UNIT KIND [native|mergerfs|both: no such figure there]
    local wl=$1 label=$2 unit=$3 kind=$4 na=${5:-} line bk sfx n m b
    line="| $label | $unit"
    for bk in "${BACKINGS[@]}"; do
        sfx=SFX_$bk; sfx=${!sfx}
        n=$(smed "$wl" "native$sfx") m=$(smed "$wl" "mergerfs$sfx") b=$(smed "$wl" "boundfs$sfx")
        if [[ $na == native || $na == both ]]; then line+=" | —"; n=""; else line+=" | $(scell "$wl" "native$sfx" "$kind")"; fi
        if [[ $na == both || $na == mergerfs ]]; then line+=" | —"; m=""
        elif ((!HAVE_MERGERFS)); then line+=" | n/a"; m=""
        else line+=" | $(scell "$wl" "mergerfs$sfx" "$kind")"; fi
        line+=" | $(scell "$wl" "boundfs$sfx" "$kind") | $(ratio "$b" "$n") | $(ratio "$m" "$n")"
    done
    say "$line |"
}

fstype=$(findmnt -no FSTYPE -T "$WORK" 2>/dev/null || stat -f -c %T "$WORK")

say "## boundfs benchmark"
say ""
say "- date: $(date -u '+%Y-%m-%d %H:%M:%SZ'), $( ((QUICK)) && echo quick || echo default) mode, $REPS repetitions, medians; total $(elapsed "${T_START/./}") s"
say "- machine: $(uname -r), $NCPU CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), load avg now $(cut -d' ' -f1-3 /proc/loadavg)"
say "- temp tree: $WORK on $fstype ($(findmnt -no SOURCE -T "$WORK" 2>/dev/null))"
say "- boundfs: git $git_rev, $BOUNDFS_SRC (built $BOUNDFS_BUILT); daemons get RLIMIT_NOFILE soft/hard $(ulimit -Sn)/$(ulimit -Hn)"
say "- mergerfs: $( ((HAVE_MERGERFS)) && mergerfs --version 2>&1 | head -1 || echo 'n/a (not installed or does not mount)')"
say "- fio: $( ((HAVE_FIO)) && fio --version || echo n/a)"
say "- python: $("$PY" --version 2>&1)"
say ""
say "Command lines:"
say ""
say '```'
say "boundfs  -f BACKING MNT -o max_size=${BUDGET_M}M,threads=$NCPU   (f: max_size=${EVICT_MAX_M}M)"
((HAVE_MERGERFS)) && say "mergerfs -f -o $MERGERFS_OPTS BACKING MNT"
say "a  kvbench.py store DIR $N --threads $THREADS            # also through boundfs -o latency_histograms=off (its own row); 2 MiB blocks, tmp+O_EXCL+O_DIRECT, 1 write, rename; page cache: memory.stat ${CG_KEY:-file/cache} of the bench's memory cgroup, after - before"
say "b  kvbench.py load DIR $N --threads $THREADS             # backing page cache warm, fresh mount (boundfs: warm_entries=0; after a restart: default, once its log says warmed)"
say "c  kvbench.py load DIR $N --threads $THREADS --direct"
say "b/c page cache per GiB loaded: kvbench.py uncache BACKING $N (natively), then load [--dontneed | --direct] on a fresh mount (boundfs: warm_entries=0 [,drop_cache=release]), unmounted; memory.stat ${CG_KEY:-file/cache} after - before, / GiB loaded"
say "s  kvbench.py store DIR $SMALL_N --size 128K --threads $THREADS; then on a fresh mount (boundfs: warm_entries=0) kvbench.py load DIR $SMALL_N --size 128K --threads $THREADS --direct"
say "r  kvbench.py statrt DIR $STAT_N   # os.stat of DIR/statrt.bin, 1 thread; boundfs -o attr_timeout=0, mergerfs cache.attr=0,cache.entry=0; requests: kvbench.py reqdiff of its status before/after"
say "d  kvbench.py probe DIR $PROBE_N [--again]             # (first pass also through boundfs -o latency_histograms=off) access(F_OK) x $((2 * PROBE_N)), half missing, 1 thread, fresh mount; --again: timed second pass"
say "e  kvbench.py readdir DIR --expect $FLAT_N             # scandir of one flat dir, fresh mount"
say "f  kvbench.py store DIR $PREFILL_N (prefill, untimed); kvbench.py store DIR $EVICT_STORE_N   # boundfs: max_size=${EVICT_MAX_M}M, evictions delta of its status / s; native + LRU: both with --lru-budget ${EVICT_MAX_M}M, the second --lru-adopt"
say "g  start daemon on a tree of $FILES empty files (<h[0:3]>/<hash>.bin) until mounted and stat(file) works, then until stats say indexing:false; native = find BACKING -printf '%s %T@\\n'"
say "h  (VmRSS once indexed - VmRSS over an empty backing) / $FILES"
want trace && say "t  trace.py --requests $TRACE_REQ run DIR --block-size $TRACE_BS --threads $TRACE_THREADS   # unbounded: boundfs max_size=${TRACE_UNB_M:-?}M; bounded: boundfs max_size=${TRACE_MAX_M}M, native + LRU: --lru-budget $((TRACE_MAX_M << 20)); ideal = trace.py lru <*.bin left>"
want trace || want evict && say "   bounded backings: ${BACKINGS[*]} (tmpfs: mount -t tmpfs -o size=<max_size + 64 MiB> per run); daemon CPU: utime+stime of /proc/PID/stat around the timed run"
((HAVE_FIO)) && say "fio --rw=write --bs=4M --size=${FIO_MB}M --nrfiles=4 ${FIO_COMMON[*]}   |   fio --rw=read --bs=1M --size=${FIO_MB}M (one file, warm backing) ${FIO_COMMON[*]}"
say '```'
say ""
# table_head FIRST COLUMN...: a table's header and separator, COLUMNs
# repeated per backing ("disk: native", ...), numbers right-aligned
table_head() {
    local hdr="| $1 | unit" sep="|---|---" bk c; shift
    for bk in "${BACKINGS[@]}"; do
        for c in "$@"; do
            case $c in */*) hdr+=" | $c" ;; *) hdr+=" | $bk: $c" ;; esac
            sep+="|--:"
        done
    done
    say "$hdr |"; say "$sep|"
}
table_head workload native mergerfs boundfs boundfs/native mergerfs/native
row store        "a. store $N x 2 MiB (4 thr, O_DIRECT, tmp+rename)" "MiB/s" mib
row store_nohist "a. the same, boundfs -o latency_histograms=off"     "MiB/s" mib mergerfs
row store_pcache "a. page cache grown by that store (lower better)"   "MiB" dec
row load         "b. load, buffered (warm backing), entries cold"     "MiB/s" mib
row load_restart "b. load after a restart (entries warmed)"          "MiB/s" mib
row load_direct  "c. load, O_DIRECT, entries cold"                    "MiB/s" mib
row load_pcache  "b. page cache grown per GiB loaded, buffered, cold (lower better)" "MiB/GiB" dec
row load_pcache_rel "b. the same, boundfs -o drop_cache=release"         "MiB/GiB" dec mergerfs
row load_dn_pcache "b. the same, the reader drops each block (POSIX_FADV_DONTNEED)" "MiB/GiB" dec
row load_dn_pcache_rel "b. the same with DONTNEED, boundfs -o drop_cache=release" "MiB/GiB" dec mergerfs
row load_direct_pcache "c. page cache grown per GiB loaded, O_DIRECT, cold" "MiB/GiB" dec
row small_store  "s. store $SMALL_N x 128 KiB into new hash dirs (4 thr, O_DIRECT, tmp+rename)" "blocks/s" int
row small_load   "s. load them, O_DIRECT, entries cold (4 thr)"       "blocks/s" int
row stat         "r. stat round trip, caches off (boundfs attr_timeout=0), 1 thread (lower better)" "µs" dec
row stat_p50     "r. its p50 (lower better)"                          "µs" dec
row stat_req     "r. FUSE requests per stat"                          "requests" dec both
row probe        "d. probe access(F_OK), 50% miss"                    "ops/s" int
row probe_nohist "d. the same, boundfs -o latency_histograms=off"    "ops/s" int mergerfs
row probe_again  "d. probe again, same names (engine re-checks)"     "ops/s" int
row readdir      "e. readdir $FLAT_N-entry flat dir"                  "entries/s" int
row restart      "g. restart with $FILES files until serving"         "s (lower better)" sec
row restart_index "g. restart: until the index is complete"         "s (lower better)" sec
row rss          "h. daemon RSS per indexed file"                     "bytes" int both
if want trace; then
    row trace        "t. trace replay unbounded, $TRACE_REQ requests, 128 KiB blocks (boundfs: budget twice the trace)" "requests/s" dec
    row trace_hit    "t. hit ratio, unbounded (block refs served)"       "fraction" frac
fi
if ((HAVE_FIO)) && want fio; then
    row fio_write "fio seq write 4M, 4 files, buffered"               "MiB/s" mib
    row fio_read  "fio seq read 1M, one file, warm backing"           "MiB/s" mib
fi

# ------------------------------------------------------------------ report: bounded table
bcell() { scell "$1" "$2" "$3" "—"; }
brow() {   # brow WL LABEL UNIT KIND
    local line="| $2 | $3" bk n b
    for bk in "${BACKINGS[@]}"; do
        n=$(smed "$1" "lru:$bk") b=$(smed "$1" "boundfs:$bk")
        line+=" | $(bcell "$1" "lru:$bk" "$4") | $(bcell "$1" "boundfs:$bk" "$4") | $(ratio "$b" "$n")"
    done
    say "$line |"
}
# per_rep WL BACKING: boundfs/native of each repetition (samples in run order)
per_rep() {
    local -a n=(${S[$1,lru:$2]:-}) b=(${S[$1,boundfs:$2]:-}) out=()
    ((${#n[@]} && ${#n[@]} == ${#b[@]})) || { echo "n/a"; return; }
    local i; for i in "${!n[@]}"; do out+=("$(ratio "${b[$i]}" "${n[$i]}")"); done
    local IFS=,; echo "${out[*]}" | sed 's/,/, /g'
}
BOUNDED_WLS=(trace_b trace_b_secs trace_b_hit trace_b_ideal trace_b_held trace_b_stores
    trace_b_probe_p50 trace_b_probe_p99 trace_b_load_p50 trace_b_load_p99 trace_b_store_p50 trace_b_store_p99
    trace_b_cpu_daemon trace_b_cpu_client trace_b_pcache_mib trace_b_pcache trace_b_per_store trace_b_syscalls_per_store
    trace_b_per_load trace_b_per_load_again evict_store evict evict_p50 evict_p99 evict_cpu_daemon evict_cpu_client)
if want trace || want evict; then
    say ""
    say "Bounded rows: boundfs with max_size beside the fair baseline, a native directory kept to the same budget by the load generator's own exact LRU (a load and a store make a block most recent; before a store it unlinks its least recently used blocks and the directories they emptied until the block fits, counting files and directories as du does). Repetitions interleaved per backing (native then boundfs in odd repetitions, boundfs then native in even ones); each cell the median (min–max); ratios of medians; \"—\" where a system has no such figure."
    say ""
    table_head "bounded row" "native + LRU" boundfs boundfs/native
    if want trace; then
        brow trace_b      "t. trace replay, $TRACE_REQ requests, 128 KiB blocks, max_size ${TRACE_MAX_M} MiB" "requests/s" dec
        brow trace_b_secs "t. its wall time" "s (lower better)" sec
        brow trace_b_hit  "t. hit ratio (block refs served)" "fraction" frac
        brow trace_b_ideal "t. ideal block LRU at the blocks held at the end" "fraction" frac
        brow trace_b_held "t. blocks held at the end" "blocks" int
        brow trace_b_stores "t. blocks stored" "blocks" int
        brow trace_b_probe_p50 "t. probe (exists) p50" "µs" dec
        brow trace_b_probe_p99 "t. probe (exists) p99" "µs" dec
        brow trace_b_load_p50 "t. load (open, readv, close) p50" "µs" dec
        brow trace_b_load_p99 "t. load p99" "µs" dec
        brow trace_b_store_p50 "t. store (exists to rename, with its evictions) p50" "µs" dec
        brow trace_b_store_p99 "t. store p99" "µs" dec
        brow trace_b_cpu_daemon "t. daemon CPU per GiB stored" "s" frac
        brow trace_b_cpu_client "t. replayer CPU per GiB stored" "s" frac
        brow trace_b_pcache_mib "t. page cache grown over the replay (tmpfs pages left out)" "MiB" dec
        brow trace_b_pcache "t. the same per GiB loaded" "MiB" dec
        brow trace_b_per_store "t. FUSE requests per stored block" "requests" dec
        brow trace_b_syscalls_per_store "t. daemon syscalls per stored block" "syscalls" dec
        brow trace_b_per_load "t. FUSE requests per loaded block, entries cold" "requests" dec
        brow trace_b_per_load_again "t. FUSE requests per loaded block, entries cached" "requests" dec
    fi
    if want evict; then
        brow evict_store "f. store $EVICT_STORE_N x 2 MiB past max_size ${EVICT_MAX_M} MiB (4 thr)" "MiB/s" mib
        brow evict "f. blocks evicted" "blocks/s" int
        brow evict_p50 "f. store p50" "µs" dec
        brow evict_p99 "f. store p99" "µs" dec
        brow evict_cpu_daemon "f. daemon CPU per GiB stored" "s" frac
        brow evict_cpu_client "f. load generator CPU per GiB stored" "s" frac
    fi
    say ""
    for bk in "${BACKINGS[@]}"; do
        want trace && say "Per repetition, boundfs/native, $bk: trace requests/s $(per_rep trace_b "$bk")$(want evict && echo "; stores under eviction MiB/s $(per_rep evict_store "$bk")")."
        want trace || say "Per repetition, boundfs/native, $bk: stores under eviction MiB/s $(per_rep evict_store "$bk")."
    done
fi
say ""
[[ -n ${FALLBACK[*]:-} ]] && say "† vLLM's O_DIRECT start-up probe failed there (EINVAL), so that store ran buffered, as vLLM falls back to." && say ""
if want store || want probe; then
    for bk in "${BACKINGS[@]}"; do
        sfx=SFX_$bk; sfx=${!sfx}
        say "Latency histograms' cost, $bk: with them / without (latency_histograms=off), medians: store MiB/s $(ratio "$(smed store "boundfs$sfx")" "$(smed store_nohist "boundfs$sfx")"), probe ops/s $(ratio "$(smed probe "boundfs$sfx")" "$(smed probe_nohist "boundfs$sfx")")."
    done
    say ""
fi
say "Native column of g is \`find\` over the same tree (reference, not a daemon). Ratios use medians; time rows are lower-is-better."
say ""
say "Raw samples (in run order):"
say ""
say '```'
for wl in store store_nohist store_pcache small_store small_load stat stat_p50 stat_req load load_restart load_direct load_pcache load_pcache_rel load_dn_pcache load_dn_pcache_rel load_direct_pcache probe probe_nohist probe_again readdir restart restart_index rss rss_total fio_write fio_read \
    trace trace_hit "${BOUNDED_WLS[@]}"; do
    for sys in native mergerfs boundfs native@tmpfs mergerfs@tmpfs boundfs@tmpfs lru:disk boundfs:disk lru:tmpfs boundfs:tmpfs; do
        [[ -n ${S[$wl,$sys]:-} || -n ${ERRS[$wl,$sys]:-} ]] || continue
        printf '%-26s %-13s %s%s\n' "$wl" "$sys" "${S[$wl,$sys]:-}" "${ERRS[$wl,$sys]:+  [${ERRS[$wl,$sys]} failed]}"
    done
done
say '```'
nfail=0; for k in "${!ERRS[@]}"; do nfail=$((nfail + ERRS[$k])); done
if ((nfail)); then
    say ""
    say "**$nfail measurement(s) failed** (first reason of each; --keep keeps the logs):"
    say ""
    for k in $(printf '%s\n' "${!ERRMSG[@]}" | sort); do say "- ${k/,//}: ${ERRS[$k]} failed: ${ERRMSG[$k]}"; done
    exit 1
fi
exit 0
