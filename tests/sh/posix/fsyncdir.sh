#!/usr/bin/env bash
# fsync on a directory reaches BACKING: a writer that stores tmp + rename and
# then fsyncs the directory (sqlite's journal, git's refs, durable engines)
# must get the backing directory fsynced, not a reply that skipped it.  Seen
# from outside the daemon with strace: FSYNCDIR on the mount becomes an
# fsync of that directory in BACKING, and fdatasync an fdatasync.
. "$(dirname "$0")/../lib.sh"

command -v strace >/dev/null || skip "strace is missing"
bfs_mount max_size=64M
mkdir -p "$MNT/kv/ab"
mkblock "$MNT/kv/ab/x.bin_1.tmp" 64K
mv "$MNT/kv/ab/x.bin_1.tmp" "$MNT/kv/ab/x.bin"

trace="$BFS_TMP/strace.out"
strace -f -y -qq -e trace=fsync,fdatasync -o "$trace" -p "$BFS_DPID" 2>"$BFS_TMP/strace.err" &
ST=$!; bfs_bg "$ST"
# strace is attached once the daemon's status shows a tracer
traced() { [ "$(awk '/^TracerPid:/ { print $2 }' "/proc/$BFS_DPID/status")" = "$ST" ]; }
poll_until 10 "strace attached to the daemon" traced
$PY - "$MNT/kv/ab" <<'PY' || fail "fsync of a directory on the mount"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)
os.fdatasync(fd)
os.close(fd)
PY
kill -INT "$ST"; bfs_wait_exit "$ST" 10 || fail "strace did not detach"
dir=$(realpath "$BACKING/kv/ab")
log "daemon's fsyncs: $(grep -c . "$trace") ($(grep -o 'f[a-z]*sync([0-9]*<[^>]*>)' "$trace" | tr '\n' ' '))"
grep -q "^[0-9]* *fsync([0-9]*<$dir>)" "$trace" || fail "fsync on the mount's kv/ab did not fsync $dir"
grep -q "^[0-9]* *fdatasync([0-9]*<$dir>)" "$trace" || fail "fdatasync on the mount's kv/ab did not fdatasync $dir"
bfs_unmount
bfs_done
