#!/usr/bin/env bash
# TIMEOUT: 420
# A kill never wedges the mount: ROUNDS times (default 50; 200 with
# BOUNDFS_LONG),
# 4 writer threads store 2 MiB blocks into new hash directories past a small
# budget (eviction reaps emptied directories, so the daemon sends the kernel
# entry invalidations while clients' MKDIRs hold the parents' locks) and the
# daemon is SIGKILLed at a random moment. Within 5 s every client must have
# returned (the writers, a stat and a mkdir started after the kill) and the
# daemon and its watchdog must be gone. A wedged round fails the scenario;
# its connection is aborted through fusectl so that the run itself ends.
# Then the unit's stop path: rounds that kill the watchdog first, until one
# wedges; the ExecStopPost of mount/boundfs@.service must free its clients.
# ROUNDS=N runs N rounds, VERBOSE_ROUNDS=1 logs each.
. "$(dirname "$0")/../lib.sh"

if [ -n "${BOUNDFS_LONG:-}" ]; then ROUNDS=${ROUNDS:-200}; else ROUNDS=${ROUNDS:-50}; fi
SEED=${BFS_WEDGE_SEED:-$$}
RANDOM=$SEED
log "$ROUNDS rounds, random seed $SEED (BFS_WEDGE_SEED=$SEED replays the kill moments)"

# conn_of MNT: the FUSE connection number of the mount at MNT (its device's
# minor), read from mountinfo: a stat of a wedged mount would hang too.
conn_of() {
    awk -v d="$1" '$5 == d { split($3, dev, ":"); n = dev[2] } END { print n }' /proc/self/mountinfo
}
CTL=/sys/fs/fuse/connections
fusectl_up() { awk -v d="$CTL" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo; }
# abort_conn N: what a stop path does with a connection nobody closes
abort_conn() {
    fusectl_up || mount -t fusectl fusectl "$CTL" || return 1
    echo 1 >"$CTL/$1/abort"
}

# wait_all SECONDS PID...: true once every PID has exited, at most SECONDS
wait_all() {
    local deadline=$((SECONDS + $1)) p; shift
    for p in "$@"; do
        while ! bfs_process_done "$p"; do
            [ "$SECONDS" -lt "$deadline" ] || return 1
            sleep 0.02
        done
    done
}

# the kernel stacks of the daemon's threads that are still there
stacks() {
    local t
    for t in /proc/"$1"/task/*; do
        [ -e "$t/stat" ] || continue
        printf '%s %s\n' "$(cat "$t/comm" 2>/dev/null)" "$(cut -d' ' -f3 "$t/stat" 2>/dev/null)"
        sed 's/^/    /' "$t/stack" 2>/dev/null | head -n 8
    done
}

# kill_round R [watchdog]: mount, store, and at a random moment SIGKILL the
# daemon (its watchdog first if asked, as systemd's final SIGKILL of a
# unit's cgroup does), then a stat and a mkdir; sets W S M (the clients), WD
# (the watchdog, none before the fix), n (the connection), t0 (the kill)
storing() { compgen -G "$BACKING/kv/*/*/*" >/dev/null; }
evicted() { [[ $(stats_json) =~ \"evictions\":[1-9] ]]; }
kill_round() {
    rm -rf "$BACKING/kv"
    bfs_mount max_size=16M
    n=$(conn_of "$MNT")
    $KVBLOCKS store "$MNT/kv" --count 1000 --seed "r$1" --size 2M --threads 4 >"$BFS_TMP/w.out" 2>&1 &
    W=$!; bfs_bg "$W"
    # the moment: once stores have begun (a block or temporary in BACKING),
    # in half the rounds once eviction has too, then 0-399 ms later
    delay=$((RANDOM % 400)); after=storing
    if [ $((RANDOM % 2)) -eq 1 ]; then after=evicted; fi
    poll_until 20 "$after (round $1)" $after
    sleep "$(printf '0.%03d' "$delay")"
    WD=$(pgrep -P "$BFS_DPID" -f "^boundfs-watchdog $BFS_DPID ")
    if [ "${2:-}" = watchdog ] && [ -n "$WD" ]; then kill -KILL "$WD"; fi
    kill -KILL "$BFS_DPID"
    t0=$(date +%s%N)
    stat "$MNT/kv" >/dev/null 2>&1 &
    S=$!; bfs_bg "$S"
    mkdir "$MNT/kv/after-kill-$1" 2>/dev/null &
    M=$!; bfs_bg "$M"
}
# end_round: reap the round's processes, detach the dead mount
end_round() {
    wait "$W" "$S" "$M" 2>/dev/null
    bfs_wait_exit "$BFS_DPID" 10; BFS_DPID=""
    BFS_BG_PIDS=()
    if bfs_is_mounted "$MNT"; then umount -l "$MNT" || fail "umount -l of the dead mount"; fi
}

t_start=$SECONDS
late_max=0; aborted=0
for r in $(seq 1 "$ROUNDS"); do
    kill_round "$r"
    if ! wait_all 5 "$W" "$S" "$M" "$BFS_DPID" $WD; then
        log "round $r: a client or the daemon still there 5 s after the SIGKILL (${delay} ms after $after)"
        for p in "$W" "$S" "$M"; do bfs_process_done "$p" || log "  client $p still waiting: $(tr '\0' ' ' <"/proc/$p/cmdline")"; done
        stacks "$BFS_DPID"
        abort_conn "$n" || log "could not abort connection $n"
        wait_all 10 "$W" "$S" "$M" "$BFS_DPID" $WD || log "still there after the abort"
        end_round
        fail "round $r of $ROUNDS wedged: see above"
    fi
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ "$ms" -le "$late_max" ] || late_max=$ms
    if grep -q "aborted its FUSE connection" "$BFS_LOG"; then aborted=$((aborted + 1)); fi
    [ -z "${VERBOSE_ROUNDS:-}" ] || log "round $r: ${delay} ms after $after, all gone ${ms} ms after the kill; $(tail -n1 "$BFS_TMP/w.out")"
    end_round
done
log "$ROUNDS rounds in $((SECONDS - t_start)) s; all clients, the daemon and its watchdog gone at most ${late_max} ms after the SIGKILL; the watchdog aborted the connection in $aborted"

# The unit's stop path, for a daemon killed with its watchdog: the
# ExecStopPost of mount/boundfs@.service, run as systemd would (after the
# kill; $$ is $), aborts the connection nobody closes. Rounds until one
# wedges (one in three or four does; at most 30).
unit=$(sed -n 's/^ExecStopPost=-//p' "$BFS_REPO/mount/boundfs@.service" | sed 's/\$\$/$/g' |
       $PY -c 'import shlex, sys; print("\n".join(a[2] for a in map(shlex.split, sys.stdin) if a[:2] == ["/bin/sh", "-c"]))')
[ -n "$unit" ] || fail "mount/boundfs@.service has no ExecStopPost=-/bin/sh -c '...'"
for r in $(seq 1 30); do
    kill_round "s$r" watchdog
    if wait_all 3 "$W" "$S" "$M" "$BFS_DPID"; then end_round; continue; fi
    t1=$(date +%s%N)
    MOUNTPOINT=$MNT timeout 10 /bin/sh -c "$unit" || fail "the unit's ExecStopPost failed ($?)"
    if ! wait_all 5 "$W" "$S" "$M" "$BFS_DPID"; then
        abort_conn "$n"; wait_all 10 "$W" "$S" "$M" "$BFS_DPID"; end_round
        fail "a client or the daemon still there 5 s after the unit's ExecStopPost (round s$r)"
    fi
    log "stop path: round s$r wedged without the watchdog; the unit's ExecStopPost freed every client in $(( ($(date +%s%N) - t1) / 1000000 )) ms"
    ! bfs_is_mounted "$MNT" || fail "the unit's ExecStopPost left $MNT mounted"
    end_round
    stopped=$r
    break
done
[ -n "${stopped:-}" ] || log "stop path: no round wedged in 30 (the unit's ExecStopPost not exercised)"
bfs_done
