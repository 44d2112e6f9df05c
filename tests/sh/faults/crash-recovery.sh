#!/usr/bin/env bash
# -o supervise: the mount survives the daemon's death. A vLLM-style load
# (tests/sh/helpers/crash_load.py: 4 threads storing 1 MiB blocks into new
# hash directories with O_DIRECT, temporary + rename, loading and checking
# earlier ones; 4 blocks held open read-only for the whole run) runs over a
# 24 MiB budget (eviction reaps emptied hash directories, so entry
# invalidations race the clients' MKDIRs: the wedge conditions) while the
# daemon, not the supervisor, is SIGKILLed KILLS times (default 20) at
# random moments. Asserted: the mount never goes away, every client call
# returns within 10 s (0 hangs), 0 wrong bytes, the held-open blocks read
# back exact through their fds to the end, usage (du of BACKING) never
# above max_size, a new daemon after every kill. Reported: the clean errors
# per errno, and kill -> serving (a LOOKUP of a new name answered) p50/p99.
# The metrics_listen port, bound by the supervisor, is served by each new
# daemon: /metrics answers after the kills.
. "$(dirname "$0")/../lib.sh"

KILLS=${KILLS:-20}
SEED=${BFS_CRASH_SEED:-$$}
RANDOM=$SEED
MAX=$((24 * MiB))
log "$KILLS kills, random seed $SEED (BFS_CRASH_SEED=$SEED replays the kill moments)"

PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
bfs_mount "max_size=24M,supervise,metrics_listen=127.0.0.1:$PORT"
scrape() { $PY -c 'import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "http://127.0.0.1:$PORT/metrics"; }
SUP=$BFS_DPID
daemon_of() { cat "/proc/$SUP/task/$SUP/children" 2>/dev/null | tr -d ' '; }
has_daemon() { [ -n "$(daemon_of)" ]; }
poll_until 10 "the first daemon" has_daemon
ls "$MNT" >/dev/null || fail "the mount does not serve"
# `boundfs upgrade` of a supervised daemon is refused, saying why, and changes nothing
D0=$(daemon_of)
$BOUNDFS upgrade "$MNT" > "$BFS_TMP/upgrade.out" 2>&1 && fail "upgrade of a supervised daemon succeeded"
grep -q "supervise" "$BFS_TMP/upgrade.out" || fail "upgrade refused without naming supervise: $(cat "$BFS_TMP/upgrade.out")"
assert_eq "$D0" "$(daemon_of)" "the daemon after a refused upgrade"

STOP=$BFS_TMP/stop
$PY "$BFS_HELPERS/crash_load.py" "$MNT" "$STOP" "$BFS_TMP/load.json" --seed "$SEED" --bound 10 \
    >"$BFS_TMP/load.out" 2>&1 &
L=$!; bfs_bg "$L"
stored() { compgen -G "$BACKING/kv/*/*/*.bin" >/dev/null; }
poll_until 30 "the first stores" stored

ms=()
for k in $(seq 1 "$KILLS"); do
    sleep "$(printf '0.%03d' $((RANDOM % 700)))"
    D=$(daemon_of)
    [ -n "$D" ] || fail "kill $k: no daemon under supervisor $SUP"
    kill -KILL "$D"
    t0=$(date +%s%N)
    # a new name: its LOOKUP reaches a daemon (answered ENOENT) once one serves
    timeout 10 stat "$MNT/probe-$k" >/dev/null 2>&1
    [ $? -ne 124 ] || fail "kill $k: a stat was not answered within 10 s"
    ms+=($(( ($(date +%s%N) - t0) / 1000000 )))
    bfs_is_mounted "$MNT" fuse || fail "kill $k: the mount went away"
    bfs_process_done "$SUP" && fail "kill $k: the supervisor exited"
    used=$(du_backing)
    # max_size + the contract's 1 MiB of slack for filesystem metadata
    # (DESIGN.md, budget): the reaper waits a quiet second before removing an
    # emptied directory, and a kill loses its queue, so about a hundred
    # directories stay per kill here (the crash edge of issue 32 item 7);
    # du then passed max_size by 300-752 KiB in 6 of 23 runs, never by 1 MiB
    assert_le "$used" $((MAX + MiB)) "kill $k: usage (du of BACKING) above max_size + 1 MiB"
    [ -z "${VERBOSE_ROUNDS:-}" ] || log "kill $k: daemon $D, serving again after ${ms[-1]} ms, usage $used"
done
poll_until 10 "restart $KILLS in the supervisor's log" grep -q "(restart $KILLS)" "$BFS_LOG"
scrape | grep -q '^boundfs_usage_bytes' || fail "/metrics did not answer after the kills"

touch "$STOP"
deadline=$((SECONDS + 30))
while ! bfs_process_done "$L"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "the load did not finish within 30 s of the stop: $(cat "$BFS_TMP/load.out")"
    sleep 0.1
done
wait "$L" || fail "the load failed: $(cat "$BFS_TMP/load.out")"
R=$(cat "$BFS_TMP/load.json")
log "load: $R"
grep -v '^$' "$BFS_TMP/load.out" | head -n 5 | while read -r l; do log "$l"; done
assert_eq 0 "$(json_get "$R" hangs)" "client calls longer than 10 s"
assert_eq 0 "$(json_get "$R" wrong)" "blocks read back with wrong bytes"
assert_eq True "$(json_get "$R" held_ok)" "the blocks held open across the kills"
assert_le "$(du_backing)" $((MAX + MiB)) "usage (du of BACKING) above max_size + 1 MiB"
assert_eq 4 "$(ls "$BACKING/held" | wc -l)" "held-open blocks evicted"

sorted=$(printf '%s\n' "${ms[@]}" | sort -n)
p50=$(printf '%s\n' "$sorted" | awk -v n=${#ms[@]} 'NR == int((n + 1) / 2)')
p99=$(printf '%s\n' "$sorted" | awk -v n=${#ms[@]} 'NR == n - int(n / 100)')
log "kill -> serving (a LOOKUP answered): p50 ${p50} ms, p99 ${p99} ms, max $(printf '%s\n' "$sorted" | tail -n1) ms over ${#ms[@]} kills"
log "deaths seen on the main thread before the process had finished exiting (as in the wedge; waitpid would have waited): $(grep -c 'its main thread is gone' "$BFS_LOG") of $KILLS"
log "supervisor side (death seen -> new daemon serving): $(grep -o 'again [0-9.]* ms later' "$BFS_LOG" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print "p50", a[int((NR+1)/2)], "ms, max", a[NR], "ms"}')"

bfs_unmount
bfs_done
