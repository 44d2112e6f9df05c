# shellcheck shell=bash
# Shared fixture library for the boundfs shell scenarios.
#
# Each scenario script sources this file, which:
#   * checks the preconditions (root, /dev/fuse) and exits 77 with a reason if
#     the scenario cannot run here;
#   * creates a fresh temporary tree: $BFS_TMP/{backing,mnt}, exported as
#     $BACKING and $MNT;
#   * installs an EXIT trap that always unmounts (lazily if need be), kills the
#     daemon and any registered helper processes, and removes the tree.
#
# Exit codes of a scenario: 0 pass, 1 fail, 77 skipped.

set -u
set -o pipefail

BFS_SH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BFS_REPO=$(cd "$BFS_SH_DIR/../.." && pwd)
BFS_HELPERS="$BFS_SH_DIR/helpers"
BOUNDFS=${BOUNDFS:-$BFS_REPO/target/release/boundfs}
case "$BOUNDFS" in /*) ;; *) BOUNDFS="$BFS_REPO/$BOUNDFS" ;; esac
PY=${PYTHON:-python3}
OP="$PY $BFS_HELPERS/op.py"
BLOCKS="$PY $BFS_HELPERS/blocks.py"

BFS_NAME=$(basename "$0" .sh)
BFS_DPID=""          # pid of the running daemon (if any)
BFS_LOG=""           # stderr log of the current daemon
BFS_BG_PIDS=()       # helper processes to kill on exit
BFS_MOUNT_OPTS=""    # options of the last bfs_mount
BFS_MOUNTS=0         # how many daemons this test started (log numbering)

MiB=$((1024 * 1024))

log()  { printf '[%s] %s\n' "$BFS_NAME" "$*"; }
fail() {
    printf '[%s] FAIL: %s\n' "$BFS_NAME" "$*" >&2
    bfs_dump_log >&2
    exit 1
}
# check_later: record a failure but carry on, so one contract break does not
# hide the results of the rest of the scenario; bfs_done fails if any.
BFS_LATER=()
fail_later() { printf '[%s] FAIL (continuing): %s\n' "$BFS_NAME" "$*" >&2; BFS_LATER+=("$*"); }
bfs_done() {
    [ "${#BFS_LATER[@]}" -eq 0 ] || fail "${#BFS_LATER[@]} deferred failure(s): ${BFS_LATER[*]}"
    log PASS
}
skip() { printf '[%s] SKIP: %s\n' "$BFS_NAME" "$*"; exit 77; }

bfs_dump_log() {
    if [ -n "$BFS_LOG" ] && [ -s "$BFS_LOG" ]; then
        echo "---- daemon stderr (last 30 lines of $BFS_LOG) ----"
        tail -n 30 "$BFS_LOG"
        echo "----"
    fi
}

# ---------------------------------------------------------------- preconditions
bfs_require_env() {
    [ "$(id -u)" -eq 0 ] || skip "needs root (FUSE mount without fusermount)"
    [ -c /dev/fuse ] || skip "/dev/fuse is absent"
    command -v "$PY" >/dev/null || fail "python3 not found"
    [ -x "$BOUNDFS" ] || fail "daemon binary $BOUNDFS missing (run cargo build --release)"
}

# ---------------------------------------------------------------- temp tree
bfs_setup() {
    BFS_TMP=$(mktemp -d "${TMPDIR:-/tmp}/boundfs-$BFS_NAME.XXXXXX") || fail "mktemp"
    # tests/run sweeps this tree's mounts if the scenario is killed before
    # its EXIT trap can run (a client blocked on a hung mount delays the
    # trap past the runner's timeout, which then kills the shell)
    if [ -n "${BFS_TMP_NOTE:-}" ]; then printf '%s\n' "$BFS_TMP" >>"$BFS_TMP_NOTE"; fi
    BACKING="$BFS_TMP/backing"
    MNT="$BFS_TMP/mnt"
    mkdir -p "$BACKING" "$MNT"
    export BFS_TMP BACKING MNT
    trap bfs_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

bfs_cleanup() {
    local rc=$?
    set +e
    local p
    for p in "${BFS_BG_PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null
    done
    if bfs_is_mounted "$MNT"; then
        umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
    fi
    if [ -n "$BFS_DPID" ] && kill -0 "$BFS_DPID" 2>/dev/null; then
        kill -TERM "$BFS_DPID" 2>/dev/null
        bfs_wait_exit "$BFS_DPID" 5 || kill -KILL "$BFS_DPID" 2>/dev/null
        wait "$BFS_DPID" 2>/dev/null
    fi
    # any mount left below our tree (e.g. a ro bind mount) goes too
    local m
    for m in $(awk -v t="$BFS_TMP/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo 2>/dev/null | sort -r); do
        umount -l "$m" 2>/dev/null
    done
    if [ -n "${BFS_KEEP:-}" ] || { [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "${BFS_KEEP_ON_FAIL:-}" ]; }; then
        echo "[$BFS_NAME] kept $BFS_TMP" >&2
    elif [ -n "${BFS_TMP:-}" ] && [ -d "$BFS_TMP" ]; then
        # the guard leaves each bare mountpoint immutable (chattr +i) after
        # its unmount, as an operator's stays: clear it so the tree can go
        find "$BFS_TMP" -xdev -maxdepth 3 -type d -exec chattr -i {} + 2>/dev/null
        rm -rf --one-file-system "$BFS_TMP"
    fi
    exit "$rc"
}

# register a background helper so the EXIT trap kills it
bfs_bg() { BFS_BG_PIDS+=("$1"); }

# ---------------------------------------------------------------- mount state
# bfs_is_mounted DIR [FSTYPE]: is DIR a mount point (of FSTYPE if given;
# FSTYPE "fuse" matches fuse and fuse.*)
bfs_is_mounted() {
    local dir=$1 want=${2:-}
    awk -v d="$dir" -v want="$want" '
        { for (i = 7; i <= NF; i++) if ($i == "-") break
          t = $(i + 1)
          if ($5 == d && (want == "" || t == want || (want == "fuse" && t ~ /^fuse(\.|$)/))) found = 1 }
        END { exit found ? 0 : 1 }' /proc/self/mountinfo
}

# fstype of the mount at DIR
bfs_fstype() {
    awk -v d="$1" '{ for (i = 7; i <= NF; i++) if ($i == "-") break
                     if ($5 == d) t = $(i + 1) }
                   END { print t }' /proc/self/mountinfo
}

# number of FUSE mounts (fuse, fuse.*) inside this test's temp tree (other
# processes on the machine may mount and unmount FUSE file systems meanwhile)
bfs_count_mounts() {
    awk -v t="$BFS_TMP/" '{ for (i = 7; i <= NF; i++) if ($i == "-") break
           if ($(i + 1) ~ /^fuse(\.|$)/ && index($5, t) == 1) n++ }
         END { print n + 0 }' /proc/self/mountinfo
}

# bfs_process_done PID: true once PID has exited (gone or zombie)
bfs_process_done() {
    local st
    [ -r "/proc/$1/stat" ] || return 0
    st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -z "$st" ] || [ "$st" = Z ] || [ "$st" = X ]
}

# bfs_wait_exit PID SECONDS: wait (bounded) for our child PID to exit and
# reap it; its exit status is left in $BFS_RC.  Returns 1 on timeout.
# (Must not run in a $(...) subshell: only the parent shell can reap.)
BFS_RC=""
bfs_wait_exit() {
    local pid=$1 secs=$2
    local deadline=$((SECONDS + secs))
    BFS_RC=""
    while ! bfs_process_done "$pid"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.02
    done
    wait "$pid" 2>/dev/null
    BFS_RC=$?
}

# ---------------------------------------------------------------- daemon
# bfs_mount OPTS [EXTRA ARGS...]: start the daemon in the background with
# `-o OPTS` (OPTS may be empty to pass no -o), wait until it is mounted.
bfs_mount() {
    local opts=$1; shift
    local args=(-f "$BACKING" "$MNT")
    [ -n "$opts" ] && args+=(-o "$opts")
    args+=("$@")
    bfs_start "${args[@]}"
}

# bfs_start ARGS...: start the daemon with these args in the foreground (-f
# is added when missing), in the background of this shell; wait for mount.
bfs_start() {
    [ -z "$BFS_DPID" ] || fail "bfs_start: a daemon is already running ($BFS_DPID)"
    case " $* " in *" -f "*) ;; *) set -- -f "$@" ;; esac
    BFS_MOUNTS=$((BFS_MOUNTS + 1))
    BFS_LOG="$BFS_TMP/daemon.$BFS_MOUNTS.log"
    BFS_MOUNT_OPTS="$*"
    RUST_BACKTRACE=1 "$BOUNDFS" "$@" 2>"$BFS_LOG" </dev/null >>"$BFS_LOG" &
    BFS_DPID=$!
    local deadline=$((SECONDS + ${BFS_MOUNT_TIMEOUT:-10}))
    until bfs_is_mounted "$MNT" fuse; do
        if bfs_process_done "$BFS_DPID"; then
            local rc
            wait "$BFS_DPID"; rc=$?
            BFS_DPID=""
            fail "daemon exited with $rc before mounting ($BOUNDFS $*)"
        fi
        [ "$SECONDS" -lt "$deadline" ] || fail "not mounted within ${BFS_MOUNT_TIMEOUT:-10}s ($BOUNDFS $*)"
        sleep 0.02
    done
}

# bfs_unmount: umount the mount point, assert the daemon exits 0 (bounded).
bfs_unmount() {
    [ -n "$BFS_DPID" ] || fail "bfs_unmount: no daemon running"
    umount "$MNT" || fail "umount $MNT failed"
    bfs_expect_exit 0 "after umount"
}

# bfs_expect_exit RC WHY: wait for the daemon to exit with RC, not mounted.
bfs_expect_exit() {
    local want=$1 why=$2 rc
    bfs_wait_exit "$BFS_DPID" "${BFS_EXIT_TIMEOUT:-10}" ||
        fail "daemon $BFS_DPID still running 10s $why"
    rc=$BFS_RC
    BFS_DPID=""
    [ "$rc" = "$want" ] || fail "daemon exited with $rc $why, expected $want"
    ! bfs_is_mounted "$MNT" || fail "$MNT still mounted after daemon exit ($why)"
}

# bfs_restart OPTS: unmount then mount again with OPTS
bfs_remount() { bfs_unmount; bfs_mount "$@"; }

# bfs_serving_pid: the pid of the daemon serving $MNT now (its status)
bfs_serving_pid() { $BOUNDFS status "$MNT" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["pid"])'; }

# bfs_unmount_upgraded FIRST: after `boundfs upgrade`s, the first daemon
# (our child, FIRST) has exited (its status left in $BFS_RC); unmount and
# wait (bounded) for the daemon serving last to exit
bfs_unmount_upgraded() {
    local last
    bfs_wait_exit "$1" 10 || fail "the first daemon still runs"
    BFS_DPID=""
    last=$(bfs_serving_pid)
    umount "$MNT" || fail "umount"
    poll_until 10 "the last daemon's exit" bfs_process_done "$last"
}

# ---------------------------------------------------------------- assertions
assert_eq() { # EXPECTED ACTUAL MESSAGE
    [ "$1" = "$2" ] || fail "${3:-assert_eq}: expected '$1', got '$2'"
}
assert_ne() {
    [ "$1" != "$2" ] || fail "${3:-assert_ne}: did not expect '$1'"
}
assert_le() { # A B MESSAGE : A <= B (integers)
    [ "$1" -le "$2" ] || fail "${3:-assert_le}: $1 > $2"
}
assert_ge() {
    [ "$1" -ge "$2" ] || fail "${3:-assert_ge}: $1 < $2"
}
assert_exists()  { [ -e "$1" ] || [ -L "$1" ] || fail "${2:-expected to exist}: $1"; }
assert_missing() { [ ! -e "$1" ] && [ ! -L "$1" ] || fail "${2:-expected to be absent}: $1"; }

# errno_of CMD...: run a helper op (see helpers/op.py) and print "OK" or the
# errno name it failed with, e.g. errno_of stat "$MNT/x" -> ENOENT
errno_of() { $OP "$@" 2>/dev/null | head -n 1 | cut -d' ' -f1; }

# assert_errno EXPECTED OP ARGS...: EXPECTED is an errno name (ENOENT) or OK.
# OP is a helper op (stat, open, mkdir, rename, ...; see helpers/op.py), or
# `sh` followed by a shell command whose failure errno is reported by the
# python wrapper (only for commands that exit with the errno).
assert_errno() {
    local want=$1; shift
    local got
    got=$($OP "$@" 2>&1 | head -n 1)
    got=${got%% *}
    [ "$got" = "$want" ] || fail "$* -> $got, expected $want"
}

# errno name of a number, via python
errno_name() { $PY -c 'import errno,sys; print(errno.errorcode.get(int(sys.argv[1]), sys.argv[1]))' "$1"; }

# ---------------------------------------------------------------- measurements
du_backing() { du -s --block-size=1 "${1:-$BACKING}" | cut -f1; }

# stats_json: the live stats line of the mount
stats_json() { getfattr --absolute-names --only-values -n user.boundfs.stats "$MNT" 2>/dev/null; }

# stats_field NAME: one field of the live stats JSON
stats_field() {
    local j
    j=$(stats_json) || fail "getfattr user.boundfs.stats failed on $MNT"
    printf '%s' "$j" | $PY -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print(v)' "$1" ||
        fail "stats has no field $1: $j"
}

# poll_until SECONDS DESCRIPTION CMD...: poll CMD until it succeeds, bounded.
poll_until() {
    local secs=$1 what=$2; shift 2
    local deadline=$((SECONDS + secs))
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${secs}s waiting for: $what"
        sleep 0.05
    done
}

# poll_until_ok SECONDS CMD...: like poll_until but returns 1 on timeout
poll_until_ok() {
    local secs=$1; shift
    local deadline=$((SECONDS + secs))
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# usage_at_most LIMIT: du of BACKING <= LIMIT
usage_at_most() { [ "$(du_backing)" -le "$1" ]; }

# file_md5 PATH
file_md5() { md5sum < "$1" | cut -d' ' -f1; }

# mkblock PATH SIZE SEED: write a deterministic file (directly, not O_DIRECT)
mkblock() { $BLOCKS mk "$1" "$2" ${3:+"$3"} || fail "mkblock $1"; }

# checkblock PATH SIZE SEED: verify a file written by mkblock
checkblock() { $BLOCKS check "$1" "$2" ${3:+"$3"}; }

# ---------------------------------------------------------------- block stores
# The companion tool scripts/kvblocks.py is used when present, else the
# equivalent helpers/blocks.py (same CLI subset and JSON output).
if [ -f "$BFS_REPO/scripts/kvblocks.py" ] && [ -z "${BFS_NO_KVBLOCKS:-}" ]; then
    KVBLOCKS="$PY $BFS_REPO/scripts/kvblocks.py"
else
    KVBLOCKS="$BLOCKS"
fi

# kv_store ROOT COUNT SEED [SIZE] [THREADS]: prints the tool's JSON line
kv_store() {
    $KVBLOCKS store "$1" --count "$2" --seed "$3" --size "${4:-2M}" --threads "${5:-4}" | tail -n 1
}
# kv_load ROOT COUNT SEED [LAST]: prints the tool's JSON line
kv_load() {
    local extra=()
    [ -n "${4:-}" ] && extra=(--last "$4")
    $KVBLOCKS load "$1" --count "$2" --seed "$3" "${extra[@]}" | tail -n 1
}
# json_get JSON KEY
json_get() { printf '%s' "$1" | $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }

# old_mtime N: a timestamp N minutes after 2020-01-01 (for touch -d)
old_mtime() { date -u -d "2020-01-01 00:00:00 UTC + $1 minutes" '+%Y-%m-%d %H:%M:%S UTC'; }

# mkblock_old PATH SIZE MINUTES: block file in BACKING with an old mtime
mkblock_old() {
    mkdir -p "$(dirname "$1")"
    mkblock "$1" "$2"
    touch -d "$(old_mtime "$3")" "$1"
}

# start the common environment
bfs_require_env
bfs_setup

# ---------------------------------------------------------------- another user
# bfs_user: an unprivileged user for the tests, created if missing (skip if it
# cannot be).  Sets BFS_USER, BFS_UID, BFS_GID and makes $BFS_TMP traversable.
bfs_user() {
    BFS_USER=boundfs-test
    if ! id -u "$BFS_USER" >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin "$BFS_USER" 2>/dev/null ||
            skip "cannot create the test user $BFS_USER (useradd)"
    fi
    BFS_UID=$(id -u "$BFS_USER"); BFS_GID=$(id -g "$BFS_USER")
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is missing"
    chmod 755 "$BFS_TMP"
}
# as_user CMD...: run CMD as $BFS_USER (no capabilities)
as_user() { setpriv --reuid="$BFS_UID" --regid="$BFS_GID" --init-groups --inh-caps=-all -- "$@"; }
# a python the test user can run (root's pyenv is not reachable by others)
BFS_USER_PY=$(command -v /usr/bin/python3 || echo "$PY")

# wait_indexed: wait (bounded) until the mount's start-up index of BACKING is
# complete, so that usage is exact (it is an upper bound while indexing)
wait_indexed() {
    _bfs_indexed() { [ "$(stats_field indexing)" = False ]; }
    poll_until "${1:-10}" "the start-up index of BACKING complete" _bfs_indexed
}

# ---------------------------------------------------------------- real programs
# The 8x-real-*.sh scenarios run real programs (sqlite3, git, tar, cp, rsync,
# CPython's own tests) once in a plain directory and once under the mount,
# with the same expected result.  A check is a shell function CHECK DIR OUT:
# DIR is an empty directory ($BFS_TMP/plain/NAME, or $MNT/NAME), OUT an empty
# plain directory outside both for copies "out of" DIR.  It runs in a child
# bash with `set -e -o pipefail`, cwd DIR and umask 022, bounded by
# RP_TIMEOUT seconds; it fails by exiting non-zero (rp_want prints why).
#   rp_check NAME FUNC   run FUNC on the plain directory, then on the mount
#   rp_report            print the table and the counts; fail if a check
#                        fails on the mount, or on the plain directory
RP_TIMEOUT=${RP_TIMEOUT:-60}
RP_PLAIN="$BFS_TMP/plain"    # same file system as BACKING
RP_NAMES=(); RP_PLAIN_RES=(); RP_MNT_RES=()
export PY BFS_HELPERS BFS_TMP

# rp_want EXPECTED ACTUAL WHAT: inside a check, stop it unless equal
rp_want() {
    [ "$1" = "$2" ] && return 0
    printf 'CHECK FAILED: %s\n  expected: %s\n  got:      %s\n' "$3" "$1" "$2" >&2
    exit 1
}
# rp_same_tree A B WHAT [manifest options]: the two trees' manifests agree
rp_same_tree() {
    local a=$1 b=$2 what=$3 ma mb; shift 3
    ma=$(mktemp "$BFS_TMP/manifest.XXXXXX") && mb=$(mktemp "$BFS_TMP/manifest.XXXXXX") || exit 1
    $PY "$BFS_HELPERS/sample_tree.py" manifest "$a" "$@" > "$ma" || exit 1
    $PY "$BFS_HELPERS/sample_tree.py" manifest "$b" "$@" > "$mb" || exit 1
    diff -u "$ma" "$mb" >&2 || {
        echo "CHECK FAILED: $what: trees differ (- $a, + $b)" >&2
        exit 1
    }
    rm -f "$ma" "$mb"
}
# rp_mktree DIR: the sample tree (modes, owners, nanosecond mtimes, symlinks,
# a hard link, a user xattr, an ACL, a sparse and a 3 MiB file)
rp_mktree() { $PY "$BFS_HELPERS/sample_tree.py" mk "$1"; }
export -f rp_want rp_same_tree rp_mktree

# rp_run SIDE NAME FUNC DIR: one run of a check; prints PASS, FAIL or SKIP
rp_run() {
    local side=$1 name=$2 func=$3 dir=$4 out="$BFS_TMP/out-$1-$2" rc
    local log="$BFS_TMP/rp-$side-$name.log"
    mkdir -p "$out" || { echo FAIL; return; }
    if ! mkdir "$dir" 2>"$log"; then echo FAIL; return; fi
    timeout -k 5 "$RP_TIMEOUT" bash -c 'set -e -o pipefail; umask 022; cd "$2"; "$1" "$2" "$3"' \
        _ "$func" "$dir" "$out" >>"$log" 2>&1 </dev/null
    rc=$?
    [ "$rc" -eq 124 ] && echo "CHECK FAILED: timed out after ${RP_TIMEOUT}s" >>"$log"
    case $rc in 0) echo PASS ;; 77) echo SKIP ;; *) echo FAIL ;; esac
}

# rp_check NAME FUNC: run check FUNC on the plain directory, then the mount
rp_check() {
    local name=$1 func=$2 p m
    export -f "$func"
    mkdir -p "$RP_PLAIN"
    p=$(rp_run plain "$name" "$func" "$RP_PLAIN/$name")
    m=$(rp_run mount "$name" "$func" "$MNT/$name")
    RP_NAMES+=("$name"); RP_PLAIN_RES+=("$p"); RP_MNT_RES+=("$m")
    printf '[%s] %-24s plain %-4s  mount %s\n' "$BFS_NAME" "$name" "$p" "$m"
    local side
    for side in plain mount; do
        [ "$side" = plain ] && [ "$p" = PASS ] && continue
        [ "$side" = mount ] && [ "$m" = PASS ] && continue
        sed "s/^/    $side: /" "$BFS_TMP/rp-$side-$name.log" | tail -n 6
    done
}

# rp_report: the counts line, then fail if any check did not pass
rp_report() {
    local i n=${#RP_NAMES[@]} fm=0 fp=0 sk=0 bad=()
    for ((i = 0; i < n; i++)); do
        [ "${RP_PLAIN_RES[i]}" = FAIL ] && { fp=$((fp + 1)); bad+=("${RP_NAMES[i]}(plain)"); }
        [ "${RP_MNT_RES[i]}" = FAIL ] && { fm=$((fm + 1)); bad+=("${RP_NAMES[i]}"); }
        [ "${RP_MNT_RES[i]}" = SKIP ] && sk=$((sk + 1))
    done
    log "real programs: $fm of $n checks fail on the mount, $fp on the plain directory, $sk skipped"
    [ "${#bad[@]}" -eq 0 ] || fail "failing checks: ${bad[*]}"
}
