#!/usr/bin/env bash
# TIMEOUT: 240
# A directory a client has seen never vanishes under it (issue 32, item 2).
# The vLLM-like mix of the issue's measurement (helpers/crash_load.py --flat
# 64: 4 threads store 1 MiB blocks with O_DIRECT, temporary + rename, into 64
# one-level hash directories made by os.makedirs(exist_ok=True), load recent
# ones back, one block held open) runs DIRS_SECONDS (default 60) s on a
# tmpfs BACKING under max_size=64M: eviction empties hash directories all the
# time and the reaper removes them. Asserted: 0 client errors. A plain
# directory never gives makedirs' EEXIST-then-not-a-directory (mkdir(2) saw
# the directory, then stat(2) did not) nor ENOENT from an open in a
# directory just made; the same mix on a plain tmpfs directory beside it,
# whose writer unlinks its own blocks beyond 64 (a budget of its own), runs
# 15 s and must give 0 errors too. Before the fix (3110038) each minute gave
# 2 or 3 such errors.
. "$(dirname "$0")/../lib.sh"

SECS=${DIRS_SECONDS:-60}
mount -t tmpfs -o size=512M,mode=0755 boundfs-dirs "$BACKING" || fail "cannot mount a tmpfs as BACKING"
bfs_mount max_size=64M

run_mix() { # DIR SECONDS TAG [crash_load options]: the result JSON on stdout
    local dir=$1 secs=$2 tag=$3; shift 3
    local stop="$BFS_TMP/$tag.stop"
    $PY "$BFS_HELPERS/crash_load.py" "$dir" "$stop" "$BFS_TMP/$tag.json" --flat 64 --held 1 --recent 64 \
        --bound 30 --seed "$tag" "$@" >"$BFS_TMP/$tag.out" 2>&1 &
    local pid=$!; bfs_bg "$pid"
    sleep "$secs"   # the length of the run, not a wait for a race
    touch "$stop"
    wait "$pid" || fail "$tag: the load failed: $(cat "$BFS_TMP/$tag.out")"
    cat "$BFS_TMP/$tag.json"
}
errors() { json_get "$1" errors | $PY -c 'import ast,sys; print(sum(ast.literal_eval(sys.stdin.read()).values()))'; }

R=$(run_mix "$MNT" "$SECS" mount)
log "mount, ${SECS}s: $R"
grep '^crash_load' "$BFS_TMP/mount.out" | head -n 5 | while read -r l; do log "mount: $l"; done
EV=$(stats_field evictions)
log "evictions: $EV"
assert_ge "$EV" 100 "evictions (the hash directories must empty)"

PLAIN=$BFS_TMP/plain
mkdir -p "$PLAIN" && mount -t tmpfs -o size=256M,mode=0755 boundfs-plain "$PLAIN" || fail "cannot mount the plain tmpfs"
P=$(run_mix "$PLAIN" 15 plain --keep 64)
log "plain directory, 15s: $P"
umount "$PLAIN" || fail "umount the plain tmpfs"

assert_eq 0 "$(errors "$P")" "client errors on a plain directory"
assert_eq 0 "$(json_get "$P" wrong)" "wrong bytes on a plain directory"
assert_eq 0 "$(errors "$R")" "client errors on the mount: $(json_get "$R" errors)"
assert_eq 0 "$(json_get "$R" wrong)" "wrong bytes on the mount"
assert_eq True "$(json_get "$R" held_ok)" "the block held open"
assert_ge "$(json_get "$R" stored)" 200 "stores through the mount"
bfs_unmount
umount "$BACKING" || fail "umount tmpfs backing"
log PASS
