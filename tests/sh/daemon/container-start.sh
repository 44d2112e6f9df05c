#!/usr/bin/env bash
# TIMEOUT: 900
# Recovery in the container form. No Docker engine runs
# here, so the image is checked piece by piece: the Dockerfile's build stage
# `cargo build` line is run as it is written (in the repository), its COPY
# lines lay the files out in a scratch image root, and the boundfs
# container of mount/boundfs-daemonset.yaml is started as the manifest gives
# it (command + args, the image's paths under the scratch root, the
# manifest's BACKING and MOUNTPOINT mapped to this test's): it mounts; after
# a SIGKILL of the container's processes (a crash of the container: its
# main process, the supervisor of `supervise`, and the daemon it runs; the
# dead mount stays, ENOTCONN) the same
# start command mounts again (it detaches the dead mount first, as
# boundfs@.service does); a third start beside the live mount is refused
# with exit 3 and leaves it alone; SIGTERM ends it with exit 0.
. "$(dirname "$0")/../lib.sh"

DF="$BFS_REPO/Dockerfile"
MANIFEST="$BFS_REPO/mount/boundfs-daemonset.yaml"
[ -f "$DF" ] || fail "no Dockerfile builds the image the manifest names ($(grep -m1 'image: .*boundfs' "$MANIFEST"))"

# ---- the image's build: the Dockerfile's cargo line, run as written
build=$(sed -n 's/^RUN \(cargo build .*\)$/\1/p' "$DF" | head -n 1)
[ -n "$build" ] || fail "the Dockerfile has no 'RUN cargo build' line"
if command -v cargo >/dev/null; then
    log "building as the image does: $build"
    (cd "$BFS_REPO" && timeout 850 $build) >"$BFS_TMP/build.log" 2>&1 ||
        fail "the image's build line failed: $build: $(tail -n 5 "$BFS_TMP/build.log")"
else
    log "cargo is not installed: the image's build line ($build) is not run"
fi

# ---- the image's files: COPY [--from=build] SRC DST, SRC relative to the
# build stage's WORKDIR (or the build context, the repository)
ROOT="$BFS_TMP/image"
workdir=$(sed -n 's/^WORKDIR \(.*\)$/\1/p' "$DF" | head -n 1)
while read -r _ a b c; do
    if [ "${a#--from=}" != "$a" ]; then src=${b#"$workdir"/}; dst=$c; else src=$a; dst=$b; fi
    [ "$src" != . ] || continue
    [ -e "$BFS_REPO/$src" ] || fail "the Dockerfile copies $src, which the build does not make"
    mkdir -p "$ROOT$(dirname "$dst")"
    cp -p "$BFS_REPO/$src" "$ROOT$dst"
done < <(grep '^COPY ' "$DF")

# ---- the boundfs container's start command, from the manifest
mapfile -t START < <($PY - "$MANIFEST" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
try:
    import yaml
    docs = {d["kind"]: d for d in yaml.safe_load_all(text) if d}
    c = [c for c in docs["DaemonSet"]["spec"]["template"]["spec"]["containers"] if c["name"] == "boundfs"][0]
    cmd, args = c["command"], c.get("args", [])
except ImportError:  # the manifest writes both as one-line JSON lists
    part = text[text.index("- name: boundfs"):]
    cmd = json.loads(re.search(r"^\s*command: (\[.*\])$", part, re.M).group(1))
    args = json.loads(re.search(r"^\s*args: (\[.*\])$", part, re.M).group(1))
print("\n".join(cmd + args))
PY
)
[ "${#START[@]}" -ge 3 ] || fail "cannot read the boundfs container's command from $MANIFEST"
log "the container's start command: ${START[*]}"
[ -x "$ROOT${START[0]}" ] || fail "the container runs ${START[0]}, which the image does not hold"
# BACKING and MOUNTPOINT: the first two operands (words not options, nor an option's value)
IMG_BACKING=""; IMG_MNT=""; prev=""
for a in "${START[@]:1}"; do
    case "$prev" in -o) prev=$a; continue ;; esac
    case "$a" in
        -*) ;;
        *) if [ -z "$IMG_BACKING" ]; then IMG_BACKING=$a; elif [ -z "$IMG_MNT" ]; then IMG_MNT=$a; fi ;;
    esac
    prev=$a
done
[ -n "$IMG_MNT" ] || fail "no BACKING and MOUNTPOINT in the container's command: ${START[*]}"
CMD=("$ROOT${START[0]}")
for a in "${START[@]:1}"; do
    case "$a" in
        "$IMG_BACKING") CMD+=("$BACKING") ;;
        "$IMG_MNT") CMD+=("$MNT") ;;
        *) CMD+=("$a") ;;
    esac
done

# start_container N: runs the start command in the background (as the
# container's main process) and waits until its mount answers
start_container() {
    BFS_LOG="$BFS_TMP/container.$1.log"
    "${CMD[@]}" </dev/null >"$BFS_LOG" 2>&1 &
    BFS_DPID=$!
    alive() { bfs_is_mounted "$MNT" fuse.boundfs && stat "$MNT/." >/dev/null 2>&1; }
    local deadline=$((SECONDS + 10))
    until alive; do
        if bfs_process_done "$BFS_DPID"; then
            wait "$BFS_DPID"; local rc=$?; BFS_DPID=""
            fail "start $1: the container's command exited $rc before its mount was live: $(tail -n 3 "$BFS_LOG")"
        fi
        [ "$SECONDS" -lt "$deadline" ] || fail "start $1: no live mount within 10 s"
        sleep 0.05
    done
}

start_container 1
echo one >"$MNT/a.bin" || fail "write through the first container's mount"
# the container dies whole: its main process first (a supervisor would
# otherwise restart its daemon), then the processes under it
kids=$(cat "/proc/$BFS_DPID/task/$BFS_DPID/children" 2>/dev/null)
kill -KILL "$BFS_DPID" $kids
bfs_wait_exit "$BFS_DPID" 5 || fail "the killed daemon did not exit"; BFS_DPID=""
for k in $kids; do bfs_wait_exit "$k" 5 || fail "the container's process $k did not exit"; done
assert_errno ENOTCONN stat "$MNT"
log "SIGKILL: the dead mount stays at $MNT (ENOTCONN)"

start_container 2
assert_eq one "$(cat "$MNT/a.bin")" "a file written before the crash, through the restarted container"
grep -q "dead boundfs mount" "$BFS_LOG" || fail "the restart does not say it detached the dead mount: $(cat "$BFS_LOG")"
assert_eq 1 "$(bfs_count_mounts)" "FUSE mounts after the restart (the dead one detached, not stacked)"
log "restart: $(head -n 1 "$BFS_LOG")"

# a third start beside the live mount: refused (already served), the live mount kept
"${CMD[@]}" </dev/null >"$BFS_TMP/third.log" 2>&1; rc=$?
assert_eq 3 "$rc" "a start beside a live mount ($(cat "$BFS_TMP/third.log"))"
stat "$MNT/a.bin" >/dev/null || fail "the live mount was disturbed by a refused start"

kill -TERM "$BFS_DPID"
bfs_expect_exit 0 "after SIGTERM"
bfs_done
