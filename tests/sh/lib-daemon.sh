# shellcheck shell=bash
# Fixtures for the daemon-mode scenarios (6x-*.sh), sourced after lib.sh.
#
# A daemon-mode boundfs (or mount(8) running the mount helper) returns while
# the daemon it forked serves on; that daemon is not our child, so its exit
# status is read through helpers/reaper.py, a child subreaper: the daemon
# becomes the reaper's child when the command exits.

REAPER_FD=""       # read end of the reaper's report
REAPER_PID=""
BFS_CMD_RC=""      # exit status of the command (boundfs, mount ...)
BFS_DAEMON=""      # pid of the daemon it left behind ("" if none)
BFS_DAEMON_RC=""   # the daemon's exit status, after bfs_daemon_exit

# bfs_run_reaped CMD...: runs CMD under the reaper and waits for CMD to
# exit (bounded); CMD's stdout+stderr (and the daemon's log) go to a new
# $BFS_LOG. Sets BFS_CMD_RC and BFS_DAEMON.
bfs_run_reaped() {
    [ -z "$REAPER_PID" ] || fail "bfs_run_reaped: a reaper is already running"
    BFS_MOUNTS=$((BFS_MOUNTS + 1))
    BFS_LOG="$BFS_TMP/daemon.$BFS_MOUNTS.log"
    : >"$BFS_LOG"
    local fifo="$BFS_TMP/reaper.fifo"
    rm -f "$fifo"; mkfifo "$fifo" || fail "mkfifo"
    $PY "$BFS_HELPERS/reaper.py" "$BFS_LOG" -- "$@" >"$fifo" &
    REAPER_PID=$!
    bfs_bg "$REAPER_PID"
    exec {REAPER_FD}<"$fifo"
    rm -f "$fifo"
    local what rc pid
    read -r -t 60 -u "$REAPER_FD" what rc || fail "no exit from: $* (60s)"
    [ "$what" = cmd ] || fail "reaper said '$what $rc'"
    BFS_CMD_RC=$rc
    read -r -t 10 -u "$REAPER_FD" what pid || fail "reaper gave no daemon line"
    [ "$what" = daemon ] || fail "reaper said '$what $pid'"
    BFS_DAEMON=$pid
    [ "$pid" != none ] || BFS_DAEMON=""
}

# bfs_daemon_exit SECONDS: waits (bounded) for the daemon left behind to
# exit; sets BFS_DAEMON_RC and reaps the reaper.
bfs_daemon_exit() {
    local what pid rc
    [ -n "$REAPER_PID" ] || fail "bfs_daemon_exit: no reaper"
    if [ -n "$BFS_DAEMON" ]; then
        read -r -t "$1" -u "$REAPER_FD" what pid rc || fail "daemon $BFS_DAEMON still running after $1s"
        [ "$what $pid" = "exit $BFS_DAEMON" ] || fail "reaper said '$what $pid $rc'"
        BFS_DAEMON_RC=$rc
    fi
    wait "$REAPER_PID" 2>/dev/null
    exec {REAPER_FD}<&-
    REAPER_PID=""; REAPER_FD=""
}

# bfs_expect_daemon_exit RC WHY: the daemon exits with RC (10 s) and the
# mount is gone.
bfs_expect_daemon_exit() {
    bfs_daemon_exit 10
    [ "$BFS_DAEMON_RC" = "$1" ] || fail "daemon exited with '$BFS_DAEMON_RC' $2, expected $1"
    ! bfs_is_mounted "$MNT" || fail "$MNT still mounted after the daemon exited ($2)"
}

# bfs_slow_scan_backing: puts BACKING on a tmpfs (quick to fill, removed by
# the cleanup) holding 50000 empty block files, so that the start-up scan
# takes a good fraction of a second: a command that returned before its
# mount was live would be caught by a check made right after it returned.
bfs_slow_scan_backing() {
    mount -t tmpfs -o size=256M,mode=0755 tmpfs "$BACKING" || fail "cannot mount a tmpfs on $BACKING"
    bfs_make_files "$BACKING/pre" 50 1000
}

# bfs_make_files DIR DIRS PER_DIR: DIRS directories of PER_DIR empty *.bin
# files under DIR.
bfs_make_files() {
    $PY - "$@" <<'PYEOF' || fail "creating files under $1"
import os, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    os.makedirs(f"{root}/{d}", exist_ok=True)
    for i in range(per):
        os.close(os.open(f"{root}/{d}/{i}.bin", os.O_CREAT | os.O_WRONLY, 0o644))
PYEOF
}
