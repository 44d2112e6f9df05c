#!/usr/bin/env bash
# The guard on the bare mountpoint (DESIGN.md, "a directory": a stopped
# mount never lets a writer fill the filesystem under the mountpoint).
# An engine does not know its root_dir is a mount: when the daemon stops
# (SIGTERM here, as `systemctl stop` sends), a writer that carries on must
# get an error, never the directory under the mountpoint on the root disk.
#
# Asserts, from outside:
#  (a) a writer storing when the daemon gets SIGTERM goes on storing after
#      the daemon is gone, and every store then fails (EPERM): nothing lands
#      in the bare mountpoint;
#  (b) the guard does not fool the checks an operator or engine makes:
#      `mountpoint` and `findmnt` say nothing is mounted;
#  (c) a new mount over the guarded directory works, and unmounting it
#      leaves the guard;
#  (d) `-o guard=off` clears boundfs' own guard: the bare directory is
#      writable again once unmounted, as the operator asked.
# Without the guard, (a) finds the writer's files in the bare mountpoint.
. "$(dirname "$0")/../lib.sh"

command -v chattr >/dev/null || skip "chattr (e2fsprogs) is needed to inspect the guard"
# the writer: 256 KiB blocks into hash directories, as an engine stores,
# until $BFS_TMP/stop appears; its attempt count goes to $BFS_TMP/progress
writer() {
    $PY - "$MNT" "$BFS_TMP" <<'EOF'
import os, sys
root, tmp = sys.argv[1], sys.argv[2]
ok = err = 0
first = {}
i = 0
data = os.urandom(256 * 1024)
while not os.path.exists(os.path.join(tmp, "stop")):
    d = os.path.join(root, "kv", "%02x" % (i % 16))
    try:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "b%06d.bin" % i), "wb") as f:
            f.write(data)
        ok += 1
    except OSError as e:
        err += 1
        first.setdefault(e.errno, str(e))
    i += 1
    with open(os.path.join(tmp, "progress.tmp"), "w") as p:
        p.write(str(i))
    os.replace(os.path.join(tmp, "progress.tmp"), os.path.join(tmp, "progress"))
print("stored %d failed %d errors %s" % (ok, err, sorted(first)))
for e, msg in first.items():
    print("  %s" % msg)
EOF
}
progress() { cat "$BFS_TMP/progress" 2>/dev/null || echo 0; }

# ---- (a) SIGTERM under a writer
bfs_mount max_size=64M
writer >"$BFS_TMP/w.out" 2>&1 &
W=$!; bfs_bg "$W"
some_stored() { [ "$(find "$BACKING/kv" -name '*.bin' 2>/dev/null | wc -l)" -ge 8 ]; }
poll_until 20 "the writer's first blocks in BACKING" some_stored
kill -TERM "$BFS_DPID"
bfs_wait_exit "$BFS_DPID" 10 || fail "daemon still running 10 s after SIGTERM"
BFS_DPID=""
poll_until 10 "the mount gone after SIGTERM" eval '! bfs_is_mounted "$MNT"'
at_stop=$(progress)
went_on() { [ "$(progress)" -ge $((at_stop + 50)) ]; }
poll_until 20 "the writer to try 50 more stores after the mount went" went_on
touch "$BFS_TMP/stop"
bfs_wait_exit "$W" 10 || fail "the writer hung after the mount went"
log "writer: $(head -n 3 "$BFS_TMP/w.out" | tr '\n' ' ')"
spilled=$(find "$MNT" -mindepth 1 | wc -l)
[ "$spilled" = 0 ] || fail "$spilled entries spilled into the bare mountpoint after the stop (e.g. $(find "$MNT" -mindepth 1 | head -n 2 | tr '\n' ' '))"
grep -q "EPERM\|Operation not permitted" "$BFS_TMP/w.out" || fail "the writer's stores after the stop did not fail with EPERM: $(cat "$BFS_TMP/w.out")"
lsattr -d "$MNT" | cut -d' ' -f1 | grep -q i || fail "the bare mountpoint is not immutable after the stop"

# ---- (b) nothing pretends to be mounted
! mountpoint -q "$MNT" || fail "mountpoint(1) says $MNT is a mount point after the stop"
[ -z "$(findmnt -n "$MNT")" ] || fail "findmnt lists $MNT after the stop: $(findmnt -n "$MNT")"

# ---- (c) a new mount over the guarded directory; its unmount keeps the guard
bfs_mount max_size=64M
echo data >"$MNT/after-remount" || fail "write through a mount over the guarded directory"
assert_exists "$BACKING/after-remount"
bfs_unmount
$OP writefile "$MNT/spill" 1K | grep -q "^EPERM" || fail "the guard did not stay after a clean unmount"

# ---- (d) guard=off clears boundfs' own guard
bfs_mount max_size=64M,guard=off
grep -q "cleared the guard" "$BFS_LOG" || fail "guard=off did not say it cleared the guard: $(cat "$BFS_LOG")"
bfs_unmount
$OP writefile "$MNT/plain" 1K | grep -q "^OK" || fail "the bare directory still refuses writes after guard=off"
rm -f "$MNT/plain"
log "PASS"
