#!/usr/bin/env bash
# One O_DIRECT write larger than max_write (the kernel's WRITE requests
# carry at most 1 MiB) through a read-write open reaches the daemon as WRITE
# requests in flight together (FUSE_ASYNC_DIO), as the disk sees the same
# write natively, instead of one after the other. And the budget stays
# exact although those WRITEs of one file commit in any order.
#
# Forced, not timed: BACKING is itself a FUSE mount (a second boundfs over a
# plain directory) whose daemon is stopped (SIGSTOP) while the store runs,
# so no WRITE can finish; the test waits until two of the outer daemon's
# threads are inside pwrite64 at once (/proc/PID/task/*/syscall), then lets
# the inner daemon go on. One request at a time never gets there (the wait
# fails after 20 s).
. "$(dirname "$0")/../lib.sh"

case $(uname -m) in
    x86_64) PWRITE64=18 ;;
    aarch64) PWRITE64=68 ;;
    *) skip "pwrite64's syscall number on $(uname -m) is not known here" ;;
esac

INNER_B="$BFS_TMP/inner-backing"; mkdir -p "$INNER_B"
"$BOUNDFS" -f "$INNER_B" "$BACKING" -o max_size=64M 2>"$BFS_TMP/inner.log" </dev/null &
INNER=$!; bfs_bg "$INNER"
trap 'rc=$?; kill -CONT "$INNER" 2>/dev/null; (exit $rc); bfs_cleanup' EXIT
poll_until 10 "the inner mount" bfs_is_mounted "$BACKING" fuse
probe="$BACKING/probe.bin"
[ "$($OP writedirect "$probe" 64K | cut -d' ' -f1)" = OK ] || skip "the inner mount refuses O_DIRECT"
rm -f "$probe"

bfs_mount max_size=64M,threads=4

# daemon threads inside pwrite64 now
in_pwrite() {
    local n=0 t s
    for t in /proc/"$BFS_DPID"/task/*/syscall; do
        read -r s _ <"$t" 2>/dev/null || continue
        [ "$s" = "$PWRITE64" ] && n=$((n + 1))
    done
    echo "$n"
}
two_in_pwrite() { [ "$(in_pwrite)" -ge 2 ]; }

# The writer opens a.bin O_RDWR|O_DIRECT (OPEN reaches both daemons) and
# writes its first page (the kernel's GETXATTR security.capability before a
# file's first write reaches both daemons too), says so, and stores 2 MiB in
# one write() once told to. (A write-only open is answered FOPEN_DIRECT_IO,
# whose writes the kernel always sends one at a time.)
coproc WRITER { $PY -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
buf = mmap.mmap(-1, 2 << 20)
buf.write(b"\x5a" * (2 << 20))
os.pwrite(fd, memoryview(buf)[:4096], 0)
print("open", flush=True)
sys.stdin.readline()
n = os.pwrite(fd, buf, 0)
os.close(fd)
print("wrote", n, flush=True)
' "$MNT/a.bin"; }
bfs_bg "$WRITER_PID"
read -r line <&"${WRITER[0]}"; assert_eq open "$line" "writer"
kill -STOP "$INNER"
echo go >&"${WRITER[1]}"
if ! poll_until_ok 20 two_in_pwrite; then
    n=$(in_pwrite); log "daemon threads in syscalls: $(cat /proc/"$BFS_DPID"/task/*/syscall | cut -d" " -f1 | sort | uniq -c | tr "\n" " ")"
    kill -CONT "$INNER"
    fail "one 2 MiB O_DIRECT write: $n WRITE request(s) in the daemon at once while BACKING held them, expected 2"
fi
log "2 MiB O_DIRECT write: $(in_pwrite) WRITE requests in the daemon at once while BACKING held them"
kill -CONT "$INNER"
read -r line <&"${WRITER[0]}"; assert_eq "wrote $((2 << 20))" "$line" "the store"

# the ledger holds exactly what the file allocates
alloc=$(($(stat -c %b "$INNER_B/a.bin") * 512))
assert_ge "$alloc" $((2 << 20)) "a.bin allocated bytes"
before=$(stats_field usage)
rm "$MNT/a.bin"
below_before() { [ "$(stats_field usage)" -lt "$before" ]; }
poll_until 10 "a.bin gone from the ledger" below_before
assert_eq "$alloc" $((before - $(stats_field usage))) "usage the ledger held for a.bin"

bfs_unmount
umount "$BACKING" || fail "umount of the inner mount"
bfs_done
