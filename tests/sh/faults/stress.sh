#!/usr/bin/env bash
# Stress with invariants: 4 vLLM-style writers store 2 MiB blocks past
# 3 x max_size, 4 readers load random stored blocks and check every byte,
# 2 probers access(F_OK) stored and never-stored keys, one process holds fds
# on 6 blocks the whole run; BACKING's usage is sampled every 10 ms (statfs of
# its own tmpfs: atomic) and with a du walk every 50 ms.  At the end: usage
# never above max_size + 1 MiB; no wrong byte, no short read; no EIO, EBADF,
# ENOSPC or any errno but ENOENT; every ENOENT is for a block evicted or not
# yet stored; every held block reads to EOF.  10 s in CI, 60 s with --long
# (BOUNDFS_LONG=1); BFS_STRESS_SECONDS overrides.  See helpers/stress.py.
. "$(dirname "$0")/../lib.sh"

SECS=${BFS_STRESS_SECONDS:-$([ -n "${BOUNDFS_LONG:-}" ] && echo 60 || echo 10)}
MAX=$((64 * MiB)); SLACK=$MiB
mount -t tmpfs -o size=512M,mode=0755 boundfs-stress "$BACKING" || fail "cannot mount a tmpfs as BACKING"
bfs_mount max_size=64M,reconcile_interval=2s

STOP="$BFS_TMP/du.stop"
$PY "$BFS_HELPERS/du_sampler.py" "$BACKING" "$STOP" 0.05 > "$BFS_TMP/du.out" &
DU=$!; bfs_bg "$DU"
log "running ${SECS}s: 4 writers, 4 readers, 2 probers, 1 holder (6 blocks) on max_size=64M"
res=$($PY "$BFS_HELPERS/stress.py" "$MNT" "$BACKING" --seconds "$SECS" --max-size $MAX) || fail "stress helper crashed"
touch "$STOP"; wait "$DU"
dj=$(cat "$BFS_TMP/du.out")
log "result: $res"
log "du walk every 50 ms: $dj"
v() { json_get "$res" "$1"; }
log "$(printf 'counts: %ss, stores %s (rewrites %s, %s MiB), loads %s (hits %s), probes %s (hits %s), ENOENTs %s, evictions %s, usage peak %s of %s (+1 MiB) over %s samples, held %s/%s, violations %s' \
    "$(v seconds)" "$(v stores)" "$(v rewrites)" $(( $(v stored_bytes) / MiB )) "$(v loads)" "$(v load_hits)" \
    "$(v probes)" "$(v probe_hits)" "$(v enoent)" "$(v evictions)" "$(v usage_peak)" $MAX "$(v usage_samples)" \
    "$(v held_ok)" "$(v held)" "$(v violations)")"
[ "$(v violations)" = 0 ] || fail "$(v violations) violations: $(v first_violations)"
assert_ge "$(v stored_bytes)" $((3 * MAX)) "stored bytes (must pass 3 x max_size)"
assert_le "$(v usage_peak)" $((MAX + SLACK)) "usage of BACKING (statfs, atomic)"
assert_le "$(json_get "$dj" peak)" $((MAX + SLACK + 2 * MiB)) "du walk of BACKING (+ one block of walk error)"
assert_ge "$(v usage_samples)" $((SECS * 20)) "usage samples"
assert_eq 6 "$(v held_ok)" "held blocks read to EOF and correct"
assert_ge "$(v evictions)" 1 "evictions"
assert_ge "$(v load_hits)" 1 "loads that hit"
assert_ge "$(v probe_enoent)" 1 "probes of never-stored keys"
assert_eq 0 "$(v enospc)" "ENOSPC answered (evictable blocks existed)"
assert_le "$(du_backing)" $((MAX + SLACK)) "du of BACKING at the end"
bfs_unmount
umount "$BACKING" || fail "umount tmpfs backing"
log PASS
