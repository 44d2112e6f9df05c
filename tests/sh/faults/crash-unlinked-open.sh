#!/usr/bin/env bash
# -o supervise: a file held open and unlinked through the mount does not
# survive a daemon crash (the dead daemon's fd was the backing file's last
# link to it, so the file is gone), and its handle must then fail cleanly,
# never reach another file. BACKING's filesystem (ext4 here) gives the
# freed inode number to the next file made ("victim"); after a second
# kill the old fd must still fail (EBADF or ESTALE) and victim's bytes
# stay its own.
# Before the open handle table recorded each handle's identity
# (src/fs/held.rs), the daemon after the second kill bound the old fh to
# victim by inode number: the old fd read victim's bytes and its writes
# landed in victim. A plain directory runs the same steps beside it (there
# the fd keeps the unlinked file, which the mount cannot after a crash).
. "$(dirname "$0")/../lib.sh"

export BOUNDFS_TEST_CRASH_AFTER=boom1,boom2
PLAIN=$BFS_TMP/plain
mkdir -p "$PLAIN"
for d in "$BACKING" "$PLAIN"; do echo original >"$d/held"; done
bfs_mount "max_size=64M,supervise"
prog='import errno, os, subprocess, sys, time
d, log = sys.argv[1], sys.argv[2]
def restarted(n):
    # the supervisor logs this once the new daemon has handed it its
    # /dev/fuse clones: a kill before that can end a request with
    # ECONNABORTED (README), which is not what this checks
    deadline = time.monotonic() + 10
    while log and "(restart %d)" % n not in open(log).read():
        if time.monotonic() > deadline:
            sys.exit("no restart %d logged" % n)
        time.sleep(0.02)
def run(*c):
    if subprocess.run(["timeout", "20"] + list(c)).returncode:
        sys.exit("%s failed" % (c,))
def io(fd):
    try:
        got = os.pread(fd, 100, 0).decode().strip()
    except OSError as e:
        got = errno.errorcode[e.errno]
    try:
        os.pwrite(fd, b"OVERWRITE", 0)
    except OSError:
        pass
    return got
fd = os.open(os.path.join(d, "held"), os.O_RDWR)
os.write(fd, b"HELD-DATA ")
ino = os.fstat(fd).st_ino
run("rm", os.path.join(d, "held"))
run("mkdir", os.path.join(d, "boom1"))
restarted(1)
first = io(fd)
victim = None
for i in range(50):
    v = os.path.join(d, "victim%d" % i)
    with open(v, "w") as f:
        f.write("VICTIM-CONTENT\n")
    if os.stat(v).st_ino == ino:
        victim = v
        break
run("mkdir", os.path.join(d, "boom2"))
restarted(2)
second = io(fd)
try:
    os.close(fd)
except OSError:
    pass
print("%s|%s|%s|%s" % (first, second, victim is not None, open(victim or v).read().strip()))'
want=$(timeout 60 "$PY" -c "$prog" "$PLAIN" "" 2>&1) || fail "plain run failed: $want"
got=$(timeout 60 "$PY" -c "$prog" "$MNT" "$BFS_LOG" 2>&1) || fail "mount run failed: $got"
log "plain: $want"
log "mount: $got"
IFS='|' read -r first second reused victim <<<"$got"
# a clean error: EBADF (the READ's fh is unknown) or ESTALE (the kernel
# asked for the node id first, and it is gone)
for r in "first:$first" "second:$second"; do
    case "${r#*:}" in EBADF | ESTALE) ;; *) fail "the unlinked file's fd after the ${r%%:*} kill: ${r#*:}, not EBADF or ESTALE" ;; esac
done
assert_eq "VICTIM-CONTENT" "$victim" "the file given the freed inode number"
[ "$reused" = True ] || log "the freed inode number was not reused (BACKING's filesystem): only the first part shows"
poll_until 5 "open_handles back to 0" test "$(stats_field open_handles)" = 0
bfs_unmount
bfs_done
