#!/usr/bin/env bash
# Coherence: a block stat'ed through the mount (so the kernel caches its
# dentry and attributes) and then evicted answers ENOENT to stat, open and
# access through the mount right away, drops out of readdir, and can be
# stored again under the same name.
. "$(dirname "$0")/../lib.sh"

bfs_mount max_size=8M
mkdir "$MNT/d"
$PY - "$MNT/d" "$BACKING/d" <<'PYEOF' || fail "stale view of an evicted block (see above)"
import errno, mmap, os, sys, time
mnt, back = sys.argv[1], sys.argv[2]

def store(name, size=2 << 20):
    buf = mmap.mmap(-1, size); buf.write(os.urandom(size))
    tmp = os.path.join(mnt, name + "_t.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_DIRECT, 0o644)
    os.write(fd, buf); os.close(fd)
    os.rename(tmp, os.path.join(mnt, name))

store("victim.bin")
os.stat(os.path.join(mnt, "victim.bin"))            # cache dentry + attrs
assert os.path.exists(os.path.join(mnt, "victim.bin"))
gone_at = None
for i in range(12):
    store("n%d.bin" % i)
    if not os.path.exists(os.path.join(back, "victim.bin")):
        gone_at = time.monotonic()
        break
if gone_at is None:
    deadline = time.monotonic() + 5
    while os.path.exists(os.path.join(back, "victim.bin")):
        if time.monotonic() > deadline:
            sys.exit("victim.bin never evicted from BACKING")
        time.sleep(0.01)
    gone_at = time.monotonic()
# the daemon invalidates right after its unlink: allow 100 ms for that step
deadline = gone_at + 0.1
while True:
    try:
        st = os.stat(os.path.join(mnt, "victim.bin"))
        res = "stat succeeded (size %d)" % st.st_size
    except OSError as e:
        res = errno.errorcode[e.errno]
    if res == "ENOENT" or time.monotonic() > deadline:
        break
    time.sleep(0.005)
if res != "ENOENT":
    sys.exit("stat through the mount %.0f ms after eviction: %s, expected ENOENT" % ((time.monotonic() - gone_at) * 1000, res))
for what, fn in (("open", lambda: os.open(os.path.join(mnt, "victim.bin"), os.O_RDONLY)),
                 ("access", lambda: os.access(os.path.join(mnt, "victim.bin"), os.F_OK) or (_ for _ in ()).throw(FileNotFoundError(2, "x")))):
    try:
        fn()
        sys.exit("%s of the evicted block succeeded" % what)
    except FileNotFoundError:
        pass
    except OSError as e:
        sys.exit("%s of the evicted block: %s, expected ENOENT" % (what, errno.errorcode[e.errno]))
if "victim.bin" in os.listdir(mnt):
    sys.exit("evicted block still listed by readdir")
store("victim.bin")                                   # same name again
st = os.stat(os.path.join(mnt, "victim.bin"))
if st.st_size != 2 << 20:
    sys.exit("re-stored victim.bin has size %d" % st.st_size)
print("evicted block gave ENOENT at once; re-store works")
PYEOF
assert_le "$(du_backing)" $((9 * MiB)) "du"
bfs_unmount
log PASS
