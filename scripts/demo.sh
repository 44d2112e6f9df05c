#!/usr/bin/env bash
# boundfs demo: push 256 MiB of 2 MiB KV blocks (vLLM filesystem-tier style:
# sha256-named *.bin, tmp file + rename, O_DIRECT) through a 64 MiB budget and
# show that usage stays under the cap while the most recent blocks survive and
# read back byte-exact.
#
# Needs: root, /dev/fuse, python3, getfattr (Debian package "attr").
# Env:   BOUNDFS=path   use this binary instead of `cargo build --release`
#        KEEP=1         keep the temp directory (log, samples) afterwards
#        DEMO_TMP=dir   where to create the temp directory (default: $TMPDIR or /tmp)
# Exit:  0 pass, 1 a check failed, 77 prerequisites missing (skipped).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KVBLOCKS="$REPO/scripts/kvblocks.py"
MAX_SIZE=64M
BLOCK_SIZE=2M
BLOCKS=128          # 128 x 2 MiB = 256 MiB, four times the budget
THREADS=4
LOAD_LAST=24        # 48 MiB: fits under the low watermark (0.90 x 64 MiB)
SEED="demo-$$"
MOUNT_TIMEOUT=10    # seconds
EXIT_TIMEOUT=10     # seconds for the daemon to exit after umount

say()  { printf '%s\n' "$*"; }
die()  { printf 'demo: %s\n' "$*" >&2; exit 1; }
skip() { printf 'demo: SKIPPED: %s\n' "$*" >&2; exit 77; }

# ---------------------------------------------------------------- prerequisites
[[ $(id -u) -eq 0 ]] || skip "must run as root (FUSE mount, and the daemon may use FUSE passthrough, which needs CAP_SYS_ADMIN)"
[[ -c /dev/fuse ]]   || skip "/dev/fuse is missing (load the fuse module, or run the container with --device /dev/fuse)"
command -v python3 >/dev/null  || skip "python3 not found"
command -v getfattr >/dev/null || skip "getfattr not found: apt-get install attr"

if [[ -z ${BOUNDFS:-} ]]; then
    say "building: cargo build --release (in $REPO); the first build takes about 2-4 minutes"
    (cd "$REPO" && cargo build --release) || die "cargo build --release failed"
    BOUNDFS="$REPO/target/release/boundfs"
fi
[[ -x $BOUNDFS ]] || die "boundfs binary not found or not executable: $BOUNDFS"

# ---------------------------------------------------------------- state + cleanup
WORK=$(mktemp -d "${DEMO_TMP:-${TMPDIR:-/tmp}}/boundfs-demo.XXXXXX")
BACKING="$WORK/backing"
MNT="$WORK/mnt"
LOG="$WORK/boundfs.log"
SAMPLES="$WORK/usage-samples.txt"
mkdir "$BACKING" "$MNT"
# BACKING on a tmpfs of its own where we can: its statfs is an atomic reading
# of the tree's usage. A du walk is not (a block evicted behind the walk and
# one stored ahead of it are both counted), so it is the fallback.
SAMPLER=du
mount -t tmpfs -o size=256m,mode=0755 boundfs-demo "$BACKING" 2>/dev/null && SAMPLER=statfs
DAEMON_PID=""
SAMPLER_PID=""

is_mounted() { awk -v m="$MNT" '$2 == m { found = 1 } END { exit !found }' /proc/self/mounts; }
alive()      { [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; }

cleanup() {
    local rc=$?
    set +e
    if alive "$SAMPLER_PID"; then kill "$SAMPLER_PID"; wait "$SAMPLER_PID" 2>/dev/null; fi
    if is_mounted; then
        umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null
    fi
    if alive "$DAEMON_PID"; then
        kill -TERM "$DAEMON_PID"
        for _ in $(seq 50); do alive "$DAEMON_PID" || break; sleep 0.1; done
        alive "$DAEMON_PID" && kill -KILL "$DAEMON_PID"
        wait "$DAEMON_PID" 2>/dev/null
    fi
    [[ $SAMPLER == statfs ]] && ! is_mounted && umount "$BACKING" 2>/dev/null
    if is_mounted; then
        say "demo: $MNT is still mounted; leaving $WORK in place" >&2
    elif [[ ${KEEP:-0} == 1 ]]; then
        say "demo: kept $WORK (KEEP=1)"
    else
        # the guard keeps the bare mountpoint immutable after the unmount
        chattr -i "$MNT" 2>/dev/null
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

show_log() {
    say "---- boundfs log ($LOG), last 30 lines ----" >&2
    tail -n 30 "$LOG" >&2 || true
    say "-------------------------------------------" >&2
}

stats() { getfattr --only-values -n user.boundfs.stats "$MNT" 2>/dev/null; }

# ---------------------------------------------------------------- mount
say "mounting: $BOUNDFS -f $BACKING $MNT -o max_size=$MAX_SIZE"
"$BOUNDFS" -f "$BACKING" "$MNT" -o "max_size=$MAX_SIZE" >"$LOG" 2>&1 &
DAEMON_PID=$!

deadline=$((SECONDS + MOUNT_TIMEOUT))
until is_mounted; do
    if ! alive "$DAEMON_PID"; then
        drc=0; wait "$DAEMON_PID" || drc=$?; DAEMON_PID=""
        show_log; die "boundfs exited with status $drc before the mount appeared"
    fi
    (( SECONDS < deadline )) || { show_log; die "no mount at $MNT after ${MOUNT_TIMEOUT}s"; }
    sleep 0.1
done
STATS0=$(stats) || { show_log; die "mounted, but reading xattr user.boundfs.stats on $MNT failed"; }
say "mounted (pid $DAEMON_PID); stats: $STATS0"

# ---------------------------------------------------------------- workload
# A non-block file, written once with a plain write, as vLLM does: must survive.
mkdir -p "$MNT/kv/Llama-3.1-8B_demo"
printf '{"model": "Llama-3.1-8B", "block_size": 16, "dtype": "bfloat16"}\n' \
    >"$MNT/kv/Llama-3.1-8B_demo/config.json"
ROOT="$MNT/kv/Llama-3.1-8B_demo_r0"

# Sample the backing tree's real usage (the budget's own definition) every ~50 ms.
(
    set +e
    t0=${EPOCHREALTIME/./}
    while :; do
        if [[ $SAMPLER == statfs ]]; then
            u=$(stat -f -c '%b %f %S' "$BACKING" | awk '{ print ($1 - $2) * $3 }')
        else
            u=$(du -s --block-size=1 "$BACKING" 2>/dev/null | cut -f1)
        fi
        now=${EPOCHREALTIME/./}
        printf '%d %s\n' $(( (now - t0) / 1000 )) "${u:-0}"
        sleep 0.05
    done
) >"$SAMPLES" &
SAMPLER_PID=$!

say "storing: $BLOCKS blocks x $BLOCK_SIZE with $THREADS threads (O_DIRECT, tmp + rename)"
store_rc=0
STORE=$(python3 "$KVBLOCKS" store "$ROOT" --count "$BLOCKS" --size "$BLOCK_SIZE" \
        --threads "$THREADS" --seed "$SEED") || store_rc=$?
say "  $STORE"

say "loading: the last $LOAD_LAST blocks (O_DIRECT readv, every byte verified)"
load_rc=0
LOAD=$(python3 "$KVBLOCKS" load "$ROOT" --count "$BLOCKS" --last "$LOAD_LAST" \
       --size "$BLOCK_SIZE" --threads "$THREADS" --seed "$SEED") || load_rc=$?
say "  $LOAD"

sleep 0.2   # let the sampler catch the settled state
kill "$SAMPLER_PID"; wait "$SAMPLER_PID" 2>/dev/null || true; SAMPLER_PID=""

# ---------------------------------------------------------------- report
STATS=$(stats) || { show_log; die "reading xattr user.boundfs.stats failed after the workload"; }
DU_NOW=$(du -s --block-size=1 "$BACKING" | cut -f1)
BIN_FILES=$(find "$BACKING" -type f -name '*.bin' | wc -l)
TMP_FILES=$(find "$BACKING" -type f -name '*.tmp' | wc -l)
CONFIG_KEPT=no; [[ -f $BACKING/kv/Llama-3.1-8B_demo/config.json ]] && CONFIG_KEPT=yes

fail=0
STATS="$STATS" STORE="$STORE" LOAD="$LOAD" SAMPLES="$SAMPLES" DU_NOW="$DU_NOW" \
BIN_FILES="$BIN_FILES" TMP_FILES="$TMP_FILES" CONFIG_KEPT="$CONFIG_KEPT" \
SAMPLER="$SAMPLER" STORE_RC="$store_rc" LOAD_RC="$load_rc" LOAD_LAST="$LOAD_LAST" BLOCKS="$BLOCKS" \
python3 - <<'PY' || fail=1
import json, os, sys

MiB = 1 << 20
env = os.environ
def js(name):
    try:
        return json.loads(env[name])
    except (KeyError, ValueError):
        return {}
st, store, load = js("STATS"), js("STORE"), js("LOAD")
mib = lambda b: f"{b / MiB:.1f} MiB"
max_size = int(st.get("max_size") or 64 * MiB)
usage = int(st.get("usage", 0))
samples = []
with open(env["SAMPLES"]) as f:
    for line in f:
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            samples.append((int(parts[0]), int(parts[1])))
peak_ms, peak = max(samples, key=lambda s: s[1]) if samples else (0, 0)
slack = 1 * MiB
problems = []

secs = store.get("seconds") or 0
rate = f", {store.get('bytes', 0) / MiB / secs:.0f} MiB/s" if secs else ""
print()
print("================ boundfs demo report ================")
print(f"store        : stored {store.get('stored')}, skipped {store.get('skipped')}, "
      f"ENOSPC {store.get('enospc')}, errors {store.get('errors')} "
      f"({mib(store.get('bytes', 0))} in {secs} s{rate})")
print(f"load         : last {env['LOAD_LAST']} of {env['BLOCKS']}: loaded {load.get('loaded')}, "
      f"missing {load.get('missing')}, corrupt {load.get('corrupt')}, short {load.get('short')}, "
      f"errors {load.get('errors')}")
print(f"usage        : {mib(usage)} of max_size {mib(max_size)} ({100 * usage / max_size:.1f}%); "
      f"du of BACKING now {mib(int(env['DU_NOW']))}")
print(f"watermarks   : high {st.get('high_watermark')}, low {st.get('low_watermark')}")
print(f"peak sampled : {mib(peak)} at t={peak_ms / 1000:.2f}s = {100 * peak / max_size:.1f}% of max_size "
      f"({len(samples)} {env['SAMPLER']} samples of BACKING, ~50 ms apart; hard limit {mib(max_size + slack)} incl. 1 MiB slack)")
if samples:
    # usage over time, one character per time slice (max within it), scaled to max_size;
    # '!' marks a slice that went above max_size + 1 MiB slack
    bars, width = " ▁▂▃▄▅▆▇█", min(60, len(samples))
    line = ""
    for k in range(width):
        chunk = samples[k * len(samples) // width:(k + 1) * len(samples) // width] or samples[-1:]
        v = max(u for _, u in chunk)
        line += "!" if v > max_size + slack else bars[min(8, round(8 * v / max_size))]
    print(f"usage/time   : |{line}|  (full bar = max_size)")
print(f"block files  : {env['BIN_FILES']} *.bin in BACKING (stats: block_files {st.get('block_files')}, "
      f"files {st.get('files')}); leftover *.tmp: {env['TMP_FILES']}; config.json kept: {env['CONFIG_KEPT']}")
print(f"evictions    : {st.get('evictions')} files, {mib(int(st.get('evicted_bytes', 0)))} evicted; "
      f"ENOSPC replies {st.get('enospc')}; open handles {st.get('open_handles')}")

if not samples:
    problems.append("no usage samples were recorded")
elif peak > max_size + slack:
    problems.append(f"sampled usage {peak} B exceeded max_size + 1 MiB ({max_size + slack} B)")
if usage > max_size + slack:
    problems.append(f"reported usage {usage} B exceeds max_size")
if env["STORE_RC"] != "0" or store.get("errors"):
    problems.append("store reported errors")
if store.get("enospc"):
    problems.append(f"{store.get('enospc')} stores failed with ENOSPC although older blocks were evictable")
if env["LOAD_RC"] != "0" or load.get("corrupt") or load.get("short") or load.get("errors"):
    problems.append("load found corrupt/short blocks or errors")
if load.get("missing"):
    problems.append(f"{load.get('missing')} of the most recent blocks were evicted")
if env["CONFIG_KEPT"] != "yes":
    problems.append("config.json (not a block file) disappeared")
for p in problems:
    print(f"CHECK FAILED : {p}")
sys.exit(1 if problems else 0)
PY

say "df -h $MNT (Avail: what a write can get now, evictable blocks included; Used: what no write can get; the cache's fill is 'usage' above):"
df -h "$MNT" | sed 's/^/  /'

# ---------------------------------------------------------------- unmount
umount "$MNT" || { fail=1; say "umount $MNT failed"; }
drc=""
for _ in $(seq $((EXIT_TIMEOUT * 10))); do alive "$DAEMON_PID" || break; sleep 0.1; done
if alive "$DAEMON_PID"; then
    fail=1; say "unmount      : boundfs (pid $DAEMON_PID) still running ${EXIT_TIMEOUT}s after umount"
else
    drc=0; wait "$DAEMON_PID" || drc=$?; DAEMON_PID=""
    say "unmount      : boundfs exited with status $drc"
    [[ $drc == 0 ]] || fail=1
fi

if (( fail )); then
    show_log
    say "RESULT: FAIL"
    exit 1
fi
say "RESULT: PASS (sampled usage stayed within max_size; the newest blocks read back byte-exact; clean unmount)"
