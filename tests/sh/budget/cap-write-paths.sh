#!/usr/bin/env bash
# The hard cap holds on every write path engines use, not only the vLLM
# O_DIRECT+rename store: LMCache in-place buffered writes, Dynamo-style
# fallocate, LMCache-GDS ftruncate + MAP_SHARED writes; and a file unlinked
# while open keeps counting toward usage until its last close.
. "$(dirname "$0")/../lib.sh"

MAX=$((16 * MiB)); CAP=$((MAX + MiB))
# a tmpfs of its own as BACKING: usage is read atomically from statfs (it
# also counts unlinked-but-open files, which the budget covers too)
mount -t tmpfs -o size=128M,mode=0755 boundfs-test "$BACKING" || fail "cannot mount a tmpfs as BACKING"
bfs_mount max_size=16M

sample_start() {
    rm -f "$BFS_TMP/stop"
    $PY "$BFS_HELPERS/du_sampler.py" "$BACKING" "$BFS_TMP/stop" 0.002 --statfs > "$BFS_TMP/sampler.out" &
    SAMPLER=$!; bfs_bg "$SAMPLER"
}
sample_stop() { # sets $peak (not in a subshell: wait needs the parent)
    touch "$BFS_TMP/stop"; wait "$SAMPLER"
    peak=$(json_get "$(cat "$BFS_TMP/sampler.out")" peak) || fail "sampler output: $(cat "$BFS_TMP/sampler.out")"
}

# 1. in-place buffered writes of 48 MiB of *.bin (no tmp, no rename)
sample_start
$PY - "$MNT/lm" <<'PYEOF' > "$BFS_TMP/lm.out" 2>&1 || fail "in-place writer: $(cat "$BFS_TMP/lm.out")"
import errno, os, sys
d = sys.argv[1]; os.makedirs(d)
bad = []
for i in range(24):
    try:
        with open(os.path.join(d, "k%02d.bin" % i), "wb") as f:
            for _ in range(8):
                f.write(os.urandom(256 << 10))
    except OSError as e:
        bad.append("k%02d: %s" % (i, errno.errorcode.get(e.errno)))
print("errors:", bad)
sys.exit(1 if bad else 0)
PYEOF
sample_stop
log "in-place writes: peak $peak (cap $CAP)"
assert_le "$peak" "$CAP" "usage peak with in-place buffered writes"
assert_exists "$BACKING/lm/k23.bin" "newest in-place block"

# 2. fallocate: more than the whole budget fails with ENOSPC, a fitting one
#    evicts old blocks and succeeds
sample_start
assert_errno OK open "$MNT/pool.tmp" w,creat
assert_errno ENOSPC fallocate "$MNT/pool.tmp" 0 40M
assert_errno OK open "$MNT/lm/pool.bin" w,creat
assert_errno OK fallocate "$MNT/lm/pool.bin" 0 8M
sample_stop
log "fallocate: peak $peak"
assert_le "$peak" "$CAP" "usage peak with fallocate"
assert_eq $((8 * MiB)) "$(stat -c %s "$BACKING/lm/pool.bin")" "fallocated size"
rm -f "$MNT/pool.tmp" "$MNT/lm/pool.bin"

# 3. ftruncate + MAP_SHARED writes, 3 x 8 MiB
sample_start
$PY - "$MNT/gds" <<'PYEOF' > "$BFS_TMP/mm.out" 2>&1 || fail "mmap writer: $(cat "$BFS_TMP/mm.out")"
import mmap, os, sys
d = sys.argv[1]; os.makedirs(d)
n = 8 << 20
for i in range(3):
    p = os.path.join(d, "g%d.bin" % i)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    os.ftruncate(fd, n)
    m = mmap.mmap(fd, n, flags=mmap.MAP_SHARED)
    for off in range(0, n, 1 << 20):
        m[off:off + (1 << 20)] = os.urandom(1 << 20)
    m.flush(); m.close(); os.close(fd)
PYEOF
sample_stop
log "mmap writes: peak $peak"
assert_le "$peak" "$CAP" "usage peak with MAP_SHARED writes"

# 4. unlinked while open still counts
rm -rf "$MNT/gds" "$MNT/lm"
assert_errno OK writefile "$MNT/ghost.tmp" 10M
exec {g}<"$MNT/ghost.tmp"
rm "$MNT/ghost.tmp"
u=$(stats_field usage)
assert_ge "$u" $((10 * MiB)) "stats usage must include a file unlinked while open"
read -r bsize bavail < <(stat -f -c '%S %a' "$MNT")
assert_le $((bavail * bsize)) $((MAX - 10 * MiB)) "statfs free must exclude a file unlinked while open"
assert_errno ENOSPC writefile "$MNT/more.tmp" 8M
rm -f "$MNT/more.tmp"
exec {g}<&-
# (read again at each try: the RELEASE reaches the daemon after close(2))
usage_below_2m() { [ "$(stats_field usage)" -lt $((2 * MiB)) ]; }
poll_until 5 "usage drops after the last close of the unlinked file" usage_below_2m
assert_errno OK writefile "$MNT/more.tmp" 8M
bfs_unmount
umount "$BACKING" || fail "umount tmpfs backing"
log PASS
