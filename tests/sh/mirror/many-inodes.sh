#!/usr/bin/env bash
# More inodes than the daemon may hold fds: with the open file limit at 512,
# 3000 block files in 2-level hash directories (~5000 inodes with the
# directories) are probed, stat'ed and read through the mount. The kernel
# keeps them all cached, so the daemon must close the fds of cold ones and
# reopen them by file handle: every probe is right, no EMFILE, every byte
# is right, and the daemon never holds more fds than its limit.
. "$(dirname "$0")/../lib.sh"

[ "$(id -u)" = 0 ] || skip "file handles (open_by_handle_at) need root"
KV="$PY $BFS_REPO/scripts/bench/kvbench.py"
$KV mkfiles "$BACKING/kv" 3000 --seed many >/dev/null || fail "making 3000 files"
ulimit -n 512    # the daemon (and this shell) may hold 512 fds
bfs_mount max_size=1G
out=$($KV probe "$MNT/kv" 3000 --seed many 2>&1 | tail -1)
log "probe: $out"
assert_eq 0 "$(json_get "$out" errors)" "probe errors (each existing file must be found, each missing one not)"
assert_eq 3000 "$(json_get "$out" hits)" "probe hits"
fds=$(ls "/proc/$BFS_DPID/fd" | wc -l)
log "daemon holds $fds fds with $(find "$BACKING/kv" | wc -l) objects looked up"
assert_le "$fds" 512 "daemon fds"
# every file again, now through cold inodes: stat, then read and compare
$PY - "$BACKING/kv" "$MNT/kv" <<'PYEOF' || fail "stat/read through cold inodes"
import os, sys
b, m = sys.argv[1:3]
n = 0
for d, _, files in os.walk(b):
    for f in files:
        rel = os.path.relpath(os.path.join(d, f), b)
        sb, sm = os.stat(os.path.join(b, rel)), os.stat(os.path.join(m, rel))
        assert (sb.st_size, sb.st_mtime_ns) == (sm.st_size, sm.st_mtime_ns), rel
        with open(os.path.join(m, rel), "rb") as fh:
            assert fh.read() == b"", rel
        n += 1
assert n == 3000, n
PYEOF
echo data > "$MNT/kv/late.bin"
assert_eq data "$(cat "$MNT/kv/late.bin")" "a new file after the probe storm"
bfs_unmount
log PASS
