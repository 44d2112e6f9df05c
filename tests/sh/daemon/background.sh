#!/usr/bin/env bash
# Daemon lifecycle: without -f, `boundfs BACKING MNT -o ...` returns once the
# mount is live (exit 0) and the daemon serves on; a mount that fails is a
# non-zero exit with the reason on stderr and no daemon left. SIGUSR1 logs
# the status; SIGTERM unmounts and exits 0 (pending mtime stamps written);
# a busy mount is detached lazily (logged) and served until its last close;
# a second SIGTERM exits at once. Under NOTIFY_SOCKET (systemd Type=notify)
# boundfs stays in the foreground and sends READY=1 once the mount is live,
# STOPPING=1 on shutdown.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../lib-daemon.sh"

# ---- returns only once the mount is live. Forced: the daemon's mountpoint
# is a directory inside another boundfs mount (the "outer" one, in the
# foreground), and a mkdir in that directory holds its inode lock, which
# mount(2) needs, while the outer daemon is stopped. The command must still
# be running while its daemon is blocked in mount(2), and once the outer
# daemon goes on, return with the mount live.
case $(uname -m) in
    x86_64) SYS_MOUNT=165 ;;
    aarch64) SYS_MOUNT=40 ;;
    *) skip "mount(2)'s syscall number on $(uname -m) is not known here" ;;
esac
bfs_mount max_size=64M
OUTER=$BFS_DPID
INNER="$MNT/inner"; IB="$BFS_TMP/inner-backing"
mkdir "$INNER" "$IB" || fail "mkdir"
mkblock_old "$IB/old/a.bin" 4096 5
stat "$MNT" "$INNER" >/dev/null   # cached for attr_timeout: no request to the outer daemon
# (mkdir takes the directory's lock, then asks the daemon about the name)
waiting() { [ "$(cat "/proc/$holder/wchan" 2>/dev/null)" = request_wait_answer ]; }
# The stop is asynchronous: a mkdir that got in before it took effect on a
# busy machine completes (seen in full runs, on 8568065 too); then again.
for try in 1 2 3; do
    kill -STOP "$OUTER"
    mkdir "$INNER/x" &
    holder=$!
    t_end=$((SECONDS + 10))
    until waiting || [ "$SECONDS" -ge "$t_end" ]; do sleep 0.05; done
    waiting && break
    log "try $try: mkdir not waiting on the stopped daemon (wchan: $(cat "/proc/$holder/wchan" 2>/dev/null || echo exited))"
    kill -CONT "$OUTER"; wait "$holder"; rmdir "$INNER/x" 2>/dev/null
    stat "$MNT" "$INNER" >/dev/null
    [ "$try" = 3 ] && fail "mkdir never waited on the stopped daemon, holding $INNER's lock"
done
bfs_bg "$holder"
bfs_start_reaped "$BOUNDFS" "$IB" "$INNER" -o "max_size=64M,log_file=$BFS_TMP/inner.log"
in_mount() {
    local p
    for p in $(bfs_descendants "$BFS_CMD"); do
        [ "$(cut -d' ' -f1 "/proc/$p/syscall" 2>/dev/null)" = "$SYS_MOUNT" ] && return 0
    done
    return 1
}
blocked_or_returned() { in_mount || bfs_process_done "$BFS_CMD"; }
poll_until 10 "the daemon blocked in mount(2)" blocked_or_returned
! bfs_process_done "$BFS_CMD" || fail "the command returned while its daemon's mount(2) was still held up"
kill -CONT "$OUTER"
bfs_wait_cmd 30
bfs_is_mounted "$INNER" fuse.boundfs || fail "not mounted right after boundfs returned (rc $BFS_CMD_RC)"
assert_eq 0 "$BFS_CMD_RC" "daemon-mode exit status"
[ -n "$BFS_DAEMON" ] || fail "no daemon left serving the mount"
wait "$holder" || fail "mkdir in the outer mount"
log "daemon mode: waited while its daemon was blocked in mount(2), returned with the mount live"
MNT=$INNER; BACKING=$IB; BFS_LOG="$BFS_TMP/inner.log"

# ---- SIGUSR1 logs the status once
kill -USR1 "$BFS_DAEMON"
poll_until 5 "status line in the log after SIGUSR1" grep -q 'status {"version"' "$BFS_LOG"

# ---- SIGTERM: pending stamps written, unmounted, exit 0
before=$(stat -c %Y "$BACKING/old/a.bin")
cat "$MNT/old/a.bin" >/dev/null || fail "read a.bin"
kill -TERM "$BFS_DAEMON"
bfs_expect_daemon_exit 0 "after SIGTERM"
after=$(stat -c %Y "$BACKING/old/a.bin")
assert_ge "$after" $(( $(date +%s) - 60 )) "a.bin's mtime stamp (was $before) written by shutdown"
grep -q "signal 15: unmounting" "$BFS_LOG" || fail "no log line for SIGTERM"
log "SIGTERM: unmounted, exit 0, stamp written"
MNT="$BFS_TMP/mnt"; BACKING="$BFS_TMP/backing"
bfs_unmount

# ---- busy mount: lazy detach with a log line, served until the last close
echo data >"$BACKING/f.bin"
bfs_run_reaped "$BOUNDFS" "$BACKING" "$MNT" -o "max_size=64M,log_file=$BFS_TMP/busy.log"
assert_eq 0 "$BFS_CMD_RC" "daemon-mode exit status"
BFS_LOG="$BFS_TMP/busy.log"
exec {held}<"$MNT/f.bin"
kill -TERM "$BFS_DAEMON"
poll_until 5 "lazy-detach log line" grep -q "detaching lazily" "$BFS_LOG"
! bfs_is_mounted "$MNT" || fail "still attached after SIGTERM on a busy mount"
kill -0 "$BFS_DAEMON" 2>/dev/null || fail "daemon exited while a file was still open"
assert_eq data "$(cat <&$held)" "read from a file held open across the lazy detach"
exec {held}<&-
bfs_expect_daemon_exit 0 "after the last close of a lazily detached mount"
log "busy mount: detached lazily, served until the last close, exit 0"

# ---- second signal exits at once
bfs_run_reaped "$BOUNDFS" "$BACKING" "$MNT" -o "max_size=64M,log_file=$BFS_TMP/second.log"
BFS_LOG="$BFS_TMP/second.log"
exec {held}<"$MNT/f.bin"
kill -TERM "$BFS_DAEMON"
poll_until 5 "lazy-detach log line" grep -q "detaching lazily" "$BFS_LOG"
kill -TERM "$BFS_DAEMON"
bfs_daemon_exit 10
assert_eq 1 "$BFS_DAEMON_RC" "exit status after a second SIGTERM"
grep -q "second signal" "$BFS_LOG" || fail "no log line for the second signal"
exec {held}<&-
log "second SIGTERM: exit 1 at once"

# ---- a mount that fails: reason on stderr, non-zero, no daemon left
command -v setpriv >/dev/null || skip "setpriv(1) is absent (the rest passed)"
chmod 755 "$BFS_TMP"
ub="$BFS_TMP/userbacking"; mkdir "$ub"; chmod 777 "$ub"
bfs_run_reaped setpriv --reuid=65534 --regid=65534 --clear-groups "$BOUNDFS" "$ub" "$MNT" -o max_size=64M
assert_ne 0 "$BFS_CMD_RC" "exit status of a refused mount"
[ -z "$BFS_DAEMON" ] || fail "a daemon ($BFS_DAEMON) was left after a failed mount"
grep -q "boundfs: error: mount at $MNT failed" "$BFS_LOG" || fail "no reason on stderr: $(cat "$BFS_LOG")"
! bfs_is_mounted "$MNT" || fail "mounted although the command failed"
bfs_daemon_exit 1
log "refused mount: $(grep 'boundfs: error' "$BFS_LOG" | head -n 1)"

# ---- detached completely: a caller capturing the output gets end-of-file
# once the mount is live. The daemon keeps none of the caller's stdio:
# fds 0-2 on /dev/null, or stderr on log_file. (Before, it kept a piped
# stderr, and out=$(boundfs ...) blocked until unmount.)
gone() { [ ! -e "/proc/$1" ] || bfs_process_done "$1"; }
json_pid() { "$BOUNDFS" status "$MNT" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["pid"])'; }
# (Without /dev/log the one line naming the fallback log file, which
# daemon/log-no-syslog checks, is all there is; TMPDIR keeps that file here.)
( out=$(TMPDIR=$BFS_TMP "$BOUNDFS" "$BACKING" "$MNT" -o max_size=10M 2>&1); rc=$?
  out=$(printf '%s' "$out" | grep -v "^boundfs: warning: no syslog socket"); echo "$rc [$out]" >"$BFS_TMP/captured" ) &
cap=$!; bfs_bg "$cap"
bfs_wait_exit "$cap" 20 || fail "out=\$(boundfs ... 2>&1) did not return while the daemon serves"
assert_eq "0 []" "$(cat "$BFS_TMP/captured")" "exit status and output captured from boundfs"
bfs_is_mounted "$MNT" fuse.boundfs || fail "not mounted after the captured command returned"
dpid=$(json_pid) || fail "boundfs status --json gave no pid"
# stderr: /dev/null, or with no /dev/log the fallback log file
err=/dev/null; [ -e /dev/log ] || err="$BFS_TMP/boundfs-$(printf '%s' "${MNT#/}" | tr / -).log"
for fd in 0 1 2; do
    want=/dev/null; [ "$fd" = 2 ] && want=$err
    assert_eq "$want" "$(readlink "/proc/$dpid/fd/$fd")" "daemon's fd $fd"
done
umount "$MNT" || fail "umount"
poll_until 10 "daemon $dpid to exit after umount" gone "$dpid"
log "out=\$(boundfs ... 2>&1): returned at once with the mount live; daemon fds 0-2 on /dev/null"

cat >"$BFS_TMP/cap.py" <<'PY'
import subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, timeout=20)
print(p.returncode, len(p.stdout), len(p.stderr))
PY
r=$($PY "$BFS_TMP/cap.py" "$BOUNDFS" "$BACKING" "$MNT" -o "max_size=10M,log_file=$BFS_TMP/captured.log") ||
    fail "subprocess.run(capture_output=True) did not return: $r"
assert_eq "0 0 0" "$r" "subprocess.run: exit status, stdout and stderr bytes"
dpid=$(json_pid)
assert_eq "$BFS_TMP/captured.log" "$(readlink "/proc/$dpid/fd/2")" "daemon's stderr with log_file"
grep -q "mounted $BACKING at $MNT" "$BFS_TMP/captured.log" || fail "no 'mounted' line in log_file"
kill -USR1 "$dpid"
poll_until 5 "status line in log_file after SIGUSR1" grep -q 'status {"version"' "$BFS_TMP/captured.log"
umount "$MNT" || fail "umount"
poll_until 10 "daemon $dpid to exit after umount" gone "$dpid"
log "subprocess.run(capture_output=True): returned at once; log lines in log_file"

# ---- NOTIFY_SOCKET: foreground, READY=1 once live, STOPPING=1 on shutdown
sock="@boundfs-test-$$-$RANDOM"
fifo="$BFS_TMP/notify.fifo"; mkfifo "$fifo"
$PY "$BFS_HELPERS/notify_listen.py" "$sock" >"$fifo" &
bfs_bg $!
exec {nfd}<"$fifo"
read -r -t 10 -u "$nfd" line || fail "notify listener did not start"
BFS_LOG="$BFS_TMP/notify.log"
NOTIFY_SOCKET=$sock "$BOUNDFS" "$BACKING" "$MNT" -o max_size=64M 2>"$BFS_LOG" &
BFS_DPID=$!
read -r -t 20 -u "$nfd" line || fail "no notification from the daemon"
case " $line " in *" READY=1 "*) ;; *) fail "first notification is '$line', expected READY=1" ;; esac
bfs_is_mounted "$MNT" fuse.boundfs || fail "READY=1 sent before the mount was live"
kill -0 "$BFS_DPID" 2>/dev/null || fail "under NOTIFY_SOCKET boundfs must stay in the foreground"
kill -TERM "$BFS_DPID"
read -r -t 20 -u "$nfd" line || fail "no STOPPING=1 notification"
assert_eq STOPPING=1 "$line" "notification at shutdown"
bfs_expect_exit 0 "after SIGTERM (NOTIFY_SOCKET)"
log "NOTIFY_SOCKET: READY=1 once live, STOPPING=1, exit 0"

# ---- README's wait-for-exit recipe, in a container whose PID 1 never reaps:
# a PID namespace whose init (python) waits only for its own child, so the
# detached daemon, reparented to it, stays a zombie once it exits. The
# recipe must return once the daemon is gone, and BACKING's own filesystem
# then unmounts (the daemon has closed it).
if unshare --pid --fork --mount-proc true 2>/dev/null; then
    recipe=$($PY -c 'import re,sys; m=re.search(r"`(umount /mnt/kv && [^`]*)`", open(sys.argv[1]).read()); print(m.group(1) if m else "")' "$BFS_REPO/README.md")
    [ -n "$recipe" ] || fail "README has no wait-for-exit recipe (\`umount /mnt/kv && ...\`)"
    log "README's recipe: $recipe"
    out=$(FS="$BFS_TMP/fs" RECIPE="$recipe" BOUNDFS="$BOUNDFS" MNT="$MNT" PY="$PY" \
        timeout 60 unshare --pid --fork --mount-proc "$PY" -c '
import subprocess, sys
script = r"""
set -u
mkdir -p "$FS" && mount -t tmpfs -o size=64m tmpfs "$FS" && mkdir "$FS/kv" || exit 10
"$BOUNDFS" "$FS/kv" "$MNT" -o max_size=8M || exit 11
pid=$("$BOUNDFS" status "$MNT" --json | "$PY" -c "import json,sys; print(json.load(sys.stdin)[\"pid\"])") || exit 12
echo x >"$MNT/a.bin"
cmd=$(printf "%s" "$RECIPE" | sed -e "s|/mnt/kv|$MNT|g" -e "s/PID/$pid/g")
t0=$(date +%s%N)
timeout 10 sh -c "$cmd"; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
state=$(sed -n "s/^State:[[:space:]]*//p" /proc/$pid/status 2>/dev/null)
echo "recipe exit $rc after $ms ms; daemon state now: ${state:-gone}"
[ "$rc" -eq 0 ] || exit 13
umount "$FS" || exit 14
"""
sys.exit(subprocess.run(["bash", "-c", script]).returncode)
' 2>&1); rc=$?
    log "$out"
    case $rc in
        0) ;;
        13) fail "README's wait-for-exit recipe did not return within 10 s under a PID 1 that never reaps: $out" ;;
        14) fail "BACKING's filesystem was still busy when README's recipe returned: $out" ;;
        *) fail "the wait-for-exit check failed to set up (exit $rc): $out" ;;
    esac
else
    log "unshare --pid is not available: README's wait-for-exit recipe is not checked in a container"
fi
bfs_done
