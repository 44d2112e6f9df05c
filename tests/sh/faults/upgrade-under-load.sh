#!/usr/bin/env bash
# TIMEOUT: 180
# `boundfs upgrade` under a vLLM-style load: helpers/stress.py (4 writers
# storing 2 MiB blocks O_DIRECT + tmp + rename past 3 x max_size, 4 readers
# checking every byte, 2 probers, a holder with 6 blocks open the whole run,
# BACKING's usage sampled every 10 ms from its own tmpfs) runs while the
# mount is handed to a new process N times (BFS_UPGRADES, default 20),
# alternately the built binary and a copy of it at another path (a new
# binary). Three failed upgrades come first, under the same load: a binary
# that cannot take over (/bin/false), a new process that reads hand-over
# states only up to version 1, so it refuses this daemon's newer one at the
# hello with one line naming both versions (BOUNDFS_TEST_TAKEOVER_FAIL=version,
# as an older release would), and a new process that dies once the old
# daemon's readers stopped (BOUNDFS_TEST_TAKEOVER_FAIL=state): the old
# daemon must keep serving. Asserted: every upgrade reports a new pid and
# `boundfs status` names it; the mount never goes away; 0 client errors and
# 0 wrong bytes (stress.py's violations: any errno but a legitimate ENOENT,
# any short read or wrong byte); usage never above max_size (+1 MiB, as
# stress.sh); the held blocks read back exact at the end; the first daemon
# exited 0. The pause of each upgrade (the old daemon's last answer to the
# new one's first request, measured by both and printed by `boundfs
# upgrade`) is logged with its p50/p99. The `metrics_listen` port is handed
# over with the connection: a scraper fetching /metrics all along is never
# refused; a scrape the old daemon had read when its server stopped may be
# answered 500 by tiny_http (at most one per upgrade).
. "$(dirname "$0")/../lib.sh"

N=${BFS_UPGRADES:-20}
MAX=$((64 * MiB)); SLACK=$MiB
[ "$(uname -r | awk -F. '{ print ($1 > 6 || ($1 == 6 && $2 >= 9)) }')" = 1 ] || skip "Linux >= 6.9 needed (FUSE_NOTIFY_RESEND)"
mount -t tmpfs -o size=512M,mode=0755 boundfs-upgrade "$BACKING" || fail "cannot mount a tmpfs as BACKING"
DLOG="$BFS_TMP/daemons.log"
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
bfs_mount "max_size=64M,log_file=$DLOG,metrics_listen=127.0.0.1:$PORT"
# scrapes until $BFS_TMP/scrape.stop exists; prints "ok N failed N
# http_errors N first ERR" (failed: refused, reset, timed out, wrong body)
$PY - "$PORT" "$BFS_TMP/scrape.stop" > "$BFS_TMP/scrape.out" 2>&1 <<'PY' &
import os, sys, time, urllib.error, urllib.request
ok, http, bad, first = 0, 0, 0, ""
while not os.path.exists(sys.argv[2]):
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
        if "boundfs_usage_bytes" not in body:
            raise ValueError("no boundfs_usage_bytes in the answer")
        ok += 1
    except urllib.error.HTTPError as e:
        http += 1
        first = first or repr(e)
    except Exception as e:
        bad += 1
        first = first or repr(e)
    time.sleep(0.02)
print(f"ok {ok} failed {bad} http_errors {http} first {first}")
PY
SCRAPER=$!; bfs_bg "$SCRAPER"
FIRST=$BFS_DPID
COPY="$BFS_TMP/bin/boundfs-copy"
mkdir -p "$BFS_TMP/bin" && cp "$BOUNDFS" "$COPY" || fail "cannot copy the binary"

SECS=${BFS_STRESS_SECONDS:-40}
# its own process group: the EXIT trap kills its forked workers too
T0=$(date +%s.%N)   # about when stress.py's usage sampler starts: upgrades are logged from it
setsid $PY "$BFS_HELPERS/stress.py" "$MNT" "$BACKING" --seconds "$SECS" --max-size $MAX > "$BFS_TMP/stress.out" &
LOAD=$!; bfs_bg "-$LOAD"
stored() { [ "$(stats_field block_files 2>/dev/null || echo 0)" -ge "${1:-20}" ]; }
poll_until 30 "the load's first stores" stored 10

# Failed upgrades: the daemon serving keeps serving.
before=$(bfs_serving_pid)
$BOUNDFS upgrade "$MNT" --binary /bin/false > "$BFS_TMP/false.out" 2>&1 && fail "upgrade to /bin/false succeeded"
log "to /bin/false: $(tail -n 1 "$BFS_TMP/false.out")"
BOUNDFS_TEST_TAKEOVER_FAIL=version $BOUNDFS upgrade "$MNT" > "$BFS_TMP/version.out" 2>&1 &&
    fail "upgrade to a process that cannot read the state's version succeeded"
grep -q "hands over state version [0-9]*, this boundfs reads up to version 1" "$BFS_TMP/version.out" ||
    fail "the refusal does not name both state versions: $(cat "$BFS_TMP/version.out")"
# refused at the hello: the old daemon never stopped its readers, so it had nothing to take back
grep -q "taking the connection back" "$DLOG" && fail "the state version was refused after the readers stopped, not at the hello"
log "new process reading state versions up to 1: $(grep -m 1 "state version" "$BFS_TMP/version.out"); $(tail -n 1 "$BFS_TMP/version.out")"
BOUNDFS_TEST_TAKEOVER_FAIL=state $BOUNDFS upgrade "$MNT" > "$BFS_TMP/dies.out" 2>&1 &&
    fail "upgrade whose new process dies after the state succeeded"
log "new process dying after the readers stopped: $(tail -n 1 "$BFS_TMP/dies.out")"
bfs_is_mounted "$MNT" fuse || fail "the mount went away after a failed upgrade"
assert_eq "$before" "$(bfs_serving_pid)" "pid serving after the failed upgrades"
grep -q "taking the connection back" "$DLOG" || fail "the old daemon did not take its connection back (log: $DLOG)"

PAUSES=()
for i in $(seq 1 "$N"); do
    bin=$BOUNDFS; [ $((i % 2)) = 0 ] && bin=$COPY
    before=$(bfs_serving_pid)
    out=$($BOUNDFS upgrade "$MNT" --binary "$bin" 2>>"$BFS_TMP/upgrade.err") || fail "upgrade $i failed: $(tail -n 3 "$BFS_TMP/upgrade.err")"
    new=$(printf '%s' "$out" | sed -n 's/.* -> \([0-9]*\) .*/\1/p')
    [ -n "$new" ] && [ "$new" != "$before" ] || fail "upgrade $i: no new pid in: $out"
    bfs_bg "$new"
    assert_eq "$new" "$(bfs_serving_pid)" "pid in the status after upgrade $i"
    bfs_is_mounted "$MNT" fuse || fail "the mount went away at upgrade $i"
    PAUSES+=("$(printf '%s' "$out" | sed -n 's/.*pause \([0-9.]*\) ms.*/\1/p')")
    log "upgrade $i (ended $(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN { printf "%.2f", a - b }') s into the load): $out"
done
touch "$BFS_TMP/scrape.stop"; wait "$SCRAPER"
scrapes=$(cat "$BFS_TMP/scrape.out"); log "metrics scrapes across the upgrades: $scrapes"
case "$scrapes" in "ok "*" failed 0 "*) ;; *) fail "scrapes of /metrics failed across the upgrades: $scrapes" ;; esac
assert_ge "$(echo "$scrapes" | awk '{ print $2 }')" "$N" "scrapes answered"
assert_le "$(echo "$scrapes" | awk '{ print $6 }')" "$N" "scrapes answered 500 (at most one an upgrade)"
bfs_process_done "$LOAD" && fail "the load ended before the $N upgrades were done (raise BFS_STRESS_SECONDS)"
wait "$LOAD" || fail "stress helper crashed"
res=$(cat "$BFS_TMP/stress.out")
log "load: $res"
v() { json_get "$res" "$1"; }
[ "$(v violations)" = 0 ] || fail "$(v violations) violations: $(v first_violations)"
assert_ge "$(v stored_bytes)" $((3 * MAX)) "stored bytes (must pass 3 x max_size)"
assert_le "$(v usage_peak)" $((MAX + SLACK)) "usage of BACKING (statfs, atomic)"
assert_eq 6 "$(v held_ok)" "held blocks read to EOF and correct after the upgrades"
assert_ge "$(v load_hits)" 1 "loads that hit"
assert_le "$(du_backing)" $((MAX + SLACK)) "du of BACKING at the end"
log "pauses (ms): ${PAUSES[*]}"
log "pause $(printf '%s\n' "${PAUSES[@]}" | $PY -c '
import sys
p = sorted(float(x) for x in sys.stdin.read().split())
q = lambda f: p[min(len(p) - 1, int(round(f * (len(p) - 1))))]
print("p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d upgrades with a request" % (q(.5), q(.99), p[-1], len(p)) if p else "none measured")')"

# The first daemon exited 0 at the first hand-over; the last one unmounts.
bfs_unmount_upgraded "$FIRST"
assert_eq 0 "$BFS_RC" "exit status of the first daemon"
umount "$BACKING" || fail "umount tmpfs backing"
log PASS
