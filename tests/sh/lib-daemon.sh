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
    bfs_start_reaped "$@"
    bfs_wait_cmd 60
}

# bfs_start_reaped CMD...: starts CMD under the reaper without waiting;
# BFS_CMD is CMD's pid. bfs_wait_cmd then waits for it.
bfs_start_reaped() {
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
    local what pid
    read -r -t 10 -u "$REAPER_FD" what pid || fail "reaper did not start: $*"
    [ "$what" = started ] || fail "reaper said '$what $pid'"
    BFS_CMD=$pid
}

# bfs_wait_cmd SECONDS: waits (bounded) for the command started by
# bfs_start_reaped to exit; sets BFS_CMD_RC and BFS_DAEMON.
bfs_wait_cmd() {
    local what rc pid
    read -r -t "$1" -u "$REAPER_FD" what rc || fail "the command did not exit within $1s"
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

# bfs_descendants PID: PID's descendants, one per line
bfs_descendants() {
    local c
    for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        echo "$c"
        bfs_descendants "$c"
    done
}
