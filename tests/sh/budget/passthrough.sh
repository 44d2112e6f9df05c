#!/usr/bin/env bash
# Kernel passthrough: read-only opens are answered with FOPEN_PASSTHROUGH
# (counted in the stats), read exact bytes; a block file's creator gets it
# once a block size has been learned (the first block goes through the
# daemon; tests/sh/budget/pass-writers.sh tests those writers); a writer opening a file that
# readers hold in passthrough mode still has every byte it writes counted
# against max_size (its writes reach the daemon: FOPEN_DIRECT_IO), so the cap
# holds and the write fails with ENOSPC when nothing can be evicted.
# With -o passthrough=off no open is passthrough and the same reads work.
. "$(dirname "$0")/../lib.sh"

[ "$(id -u)" = 0 ] || skip "passthrough needs CAP_SYS_ADMIN"
MAX=$((8 * MiB))
bfs_mount max_size=8M
grep -q "kernel passthrough on" "$BFS_LOG" || skip "this kernel offers no FUSE passthrough: $(uname -r)"
mkdir -p "$MNT/kv"
mkblock "$MNT/kv/a.bin" 1M
assert_eq 0 "$(stats_field passthrough_writers)" "the first block is written through the daemon (it learns the size)"
mkblock "$MNT/kv/b.bin" 1M
assert_eq 1 "$(stats_field passthrough_writers)" "the second block's creator gets passthrough"

checkblock "$MNT/kv/a.bin" 1M >/dev/null || fail "a.bin bytes through passthrough"
checkblock "$BACKING/kv/b.bin" 1M >/dev/null || fail "b.bin bytes written through passthrough"
assert_eq 2 "$(stats_field passthrough_opens)" "the second block's creator and one read-only open in passthrough"

# Hold a.bin open for reading (passthrough), then append to it through a
# writer until the budget refuses. Nothing else is evictable but b.bin.
$PY - "$MNT/kv/a.bin" > "$BFS_TMP/append.out" 2>&1 <<'EOF'
import errno, os, sys
p = sys.argv[1]
r = os.open(p, os.O_RDONLY)
w = os.open(p, os.O_WRONLY | os.O_APPEND)
chunk = b"x" * (1 << 20)
written, err = 0, "none"
try:
    for _ in range(32):
        os.write(w, chunk)
        written += len(chunk)
except OSError as e:
    err = errno.errorcode[e.errno]
# the reader (passthrough) sees what the writer appended
tail = os.pread(r, 4, (1 << 20) + written - 4) if written else b""
print(written, err, tail.decode())
EOF
read -r written err tail < "$BFS_TMP/append.out" || fail "append helper: $(cat "$BFS_TMP/append.out")"
log "appended $written bytes beside a passthrough reader, then $err"
assert_eq ENOSPC "$err" "appending past max_size beside a passthrough reader"
assert_eq xxxx "$tail" "the passthrough reader sees the appended bytes"
assert_ge "$(stats_field passthrough_opens)" 4 "reader and writer both in passthrough mode"
assert_le "$(du_backing)" $((MAX + MiB)) "du of BACKING within max_size + 1 MiB"
assert_ge "$(stats_field evictions)" 1 "b.bin was evicted to make room first"
assert_le "$(stats_field usage)" "$MAX" "usage within max_size"
bfs_unmount

rm -rf "${BACKING:?}"/kv
bfs_mount max_size=8M,passthrough=off
mkdir -p "$MNT/kv"
mkblock "$MNT/kv/c.bin" 1M
checkblock "$MNT/kv/c.bin" 1M >/dev/null || fail "c.bin bytes with passthrough=off"
assert_eq 0 "$(stats_field passthrough_opens)" "passthrough=off: no passthrough open"
bfs_unmount
log PASS
