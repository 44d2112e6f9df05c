#!/usr/bin/env bash
# A detached daemon with no log_file logs to syslog (/dev/log). In a
# container there is no such socket, and every line, the errors included,
# went nowhere without a word. Now the mount command says once, on its
# stderr, that the daemon logs to $TMPDIR/boundfs-MOUNTPOINT.log instead,
# and the daemon's lines (its start, a SIGUSR1 status, its stop) are there.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../lib-daemon.sh"

[ -e /dev/log ] && skip "this machine has a syslog socket at /dev/log (the case checked is a machine without one)"
export TMPDIR=$BFS_TMP
FILE="$BFS_TMP/boundfs-$(printf '%s' "${MNT#/}" | tr / -).log"
bfs_run_reaped "$BOUNDFS" "$BACKING" "$MNT" -o max_size=16M
assert_eq 0 "$BFS_CMD_RC" "daemon-mode exit status"
[ -n "$BFS_DAEMON" ] || fail "no daemon left serving the mount"
assert_eq 1 "$(grep -c "no syslog socket at /dev/log.*logs to $FILE" "$BFS_LOG")" \
    "lines of the mount command's stderr naming the fallback log ($(cat "$BFS_LOG"))"
poll_until 5 "the daemon's start in $FILE" grep -q "mounted $BACKING at $MNT" "$FILE"
kill -USR1 "$BFS_DAEMON"
poll_until 5 "the SIGUSR1 status line in $FILE" grep -q 'status {"version"' "$FILE"
kill -TERM "$BFS_DAEMON"
bfs_expect_daemon_exit 0 "after SIGTERM"
grep -q "signal 15: unmounting" "$FILE" || fail "no line for SIGTERM in $FILE"
bfs_done
