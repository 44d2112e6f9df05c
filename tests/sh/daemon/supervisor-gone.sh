#!/usr/bin/env bash
# `boundfs status` names a supervisor only while one lives. Its daemon
# serves on after the supervisor is killed (SIGKILL: no unmount), but no one
# would restart it after a crash; status used to go on showing
# `supervisor S` from the environment the supervisor gave. Now the field is
# the supervisor's pid only while it is the daemon's parent: 0 once it died.
. "$(dirname "$0")/../lib.sh"

bfs_mount "max_size=16M,supervise"
SUP=$BFS_DPID
daemon_of() { cat "/proc/$SUP/task/$SUP/children" 2>/dev/null | tr -d ' '; }
has_daemon() { [ -n "$(daemon_of)" ]; }
poll_until 10 "the first daemon" has_daemon
D=$(daemon_of); bfs_bg "$D"
sup_field() { json_get "$("$BOUNDFS" status "$MNT" --json)" supervisor; }
assert_eq "$SUP" "$(sup_field)" "status supervisor while it lives"
kill -KILL "$SUP"
poll_until 10 "the supervisor's end" bfs_process_done "$SUP"
BFS_DPID=""
assert_eq 0 "$(sup_field)" "status supervisor after it was killed"
"$BOUNDFS" status "$MNT" | grep -qx "daemon       pid $D" || fail "status table after the supervisor died: $("$BOUNDFS" status "$MNT" | grep ^daemon)"
umount "$MNT" || fail "umount"
poll_until 10 "the daemon's exit after the unmount" bfs_process_done "$D"
bfs_done
