#!/usr/bin/env bash
# -o supervise: a request the daemon had carried out when it was killed,
# and not yet answered, comes back to the next daemon (FUSE_NOTIFY_RESEND),
# which answers it as done. The daemon SIGKILLs itself right after each of
# nine requests is done and before its reply (BOUNDFS_TEST_CRASH_AFTER,
# tests only): mkdir, mkfifo (MKNOD), ln -s, ln, rm, rmdir, mv, an
# exclusive create (O_CREAT|O_EXCL) and a RENAME_EXCHANGE must each
# succeed and leave what they leave on a plain directory, which runs the
# same commands beside it. Without the journal of requests in flight
# (src/fs/inflight.rs) the makers fail with EEXIST, the removals and mv
# with ENOENT, the create's first handle stays open for good (open_handles
# 1 after the close: its file pinned, never evicted), and the exchange,
# run again, undoes itself.
. "$(dirname "$0")/../lib.sh"

export BOUNDFS_TEST_CRASH_AFTER=made-dir,made-fifo,made-sym,made-link,gone-file,gone-dir,moved,excl,swap-a
PLAIN=$BFS_TMP/plain
mkdir -p "$PLAIN"
for d in "$BACKING" "$PLAIN"; do
    echo source >"$d/src"
    echo gone >"$d/gone-file"
    mkdir "$d/gone-dir"
    echo moved >"$d/moved"
    echo A >"$d/swap-a"
    echo B >"$d/swap-b"
done
bfs_mount "max_size=64M,supervise"
SUP=$BFS_DPID
ls "$MNT" >/dev/null || fail "the mount does not serve"

create_excl='import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
os.write(fd, b"made once")
os.close(fd)'
exchange='import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:  # RENAME_EXCHANGE
    sys.exit(os.strerror(ctypes.get_errno()))'

n=0
for d in "$PLAIN" "$MNT"; do
    for step in "mkdir $d/made-dir" "mkfifo $d/made-fifo" "ln -s src $d/made-sym" "ln $d/src $d/made-link" \
        "rm $d/gone-file" "rmdir $d/gone-dir" "mv $d/moved $d/moved.done" "$PY -c create_excl $d/excl" \
        "$PY -c exchange $d/swap-a $d/swap-b"; do
        read -r -a cmd <<<"$step"
        [ "${cmd[1]:-}" = "-c" ] && cmd[2]=${!cmd[2]}
        out=$(timeout 20 "${cmd[@]}" 2>&1)
        rc=$?
        [ "$rc" -ne 124 ] || fail "$step: no answer within 20 s"
        [ "$rc" -eq 0 ] || fail "$step failed ($rc): $out"
        [ "$d" = "$PLAIN" ] && continue
        n=$((n + 1))
        poll_until 10 "restart $n (the daemon killed after: $step)" grep -q "(restart $n)" "$BFS_LOG"
    done
    [ -d "$d/made-dir" ] || fail "$d: made-dir is not a directory"
    [ -p "$d/made-fifo" ] || fail "$d: made-fifo is not a fifo"
    assert_eq src "$(readlink "$d/made-sym")" "$d: made-sym's target"
    assert_eq 2 "$(stat -c %h "$d/src")" "$d: links to src"
    [ ! -e "$d/gone-file" ] && [ ! -e "$d/gone-dir" ] || fail "$d: a removed name is still there"
    [ ! -e "$d/moved" ] && [ "$(cat "$d/moved.done")" = moved ] || fail "$d: mv did not move"
    assert_eq "made once" "$(cat "$d/excl")" "$d: excl's bytes"
    assert_eq "B A" "$(cat "$d/swap-a" "$d/swap-b" | xargs)" "$d: the exchanged files"
done
assert_eq "B A" "$(cat "$BACKING/swap-a" "$BACKING/swap-b" | xargs)" "BACKING: the exchanged files"
diff <(cd "$PLAIN" && ls -lA --time-style=+ | awk '{print $1, $2, $NF}') \
    <(cd "$MNT" && ls -lA --time-style=+ | awk '{print $1, $2, $NF}') >"$BFS_TMP/diff" ||
    fail "the mount and the plain directory differ: $(cat "$BFS_TMP/diff")"
poll_until 5 "open_handles back to 0 after the create's close" test "$(stats_field open_handles)" = 0
bfs_process_done "$SUP" && fail "the supervisor exited"
log "9 requests done then the daemon killed before the reply: all answered as done ($(grep -c 'requests it had done and not answered' "$BFS_LOG") restarts logged)"

bfs_unmount
bfs_done
