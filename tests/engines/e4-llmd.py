#!/usr/bin/env python3
"""Replay: llm-d fs connector.

The calls, as /work/shared/ENGINES.md lists them:
  * layout <root>/<model>/<hhh>/<hh>/<hash>.bin;
  * write, preferred: open(dir, O_TMPFILE|O_WRONLY) then linkat(AT_EMPTY_PATH)
    onto the target, EEXIST counting as success. Through this FUSE mount the
    open fails (the kernel's FUSE client offers no O_TMPFILE here): it must
    fail cleanly with EOPNOTSUPP (or EISDIR from kernels without O_TMPFILE),
    which is what sends the connector to its fallback, and leave nothing
    behind. Should a kernel ever offer it, the linkat path is replayed;
  * write, fallback: `<target>_<random>.tmp`, plain 4 MiB write()s, fflush,
    close (no fsync, no O_DIRECT), rename onto the target;
  * read: seek to the end to learn the size, seek back, read the whole file;
  * recency helper: utimensat(path, {atime = UTIME_NOW, mtime = UTIME_OMIT}).
Budget 48 MiB with 8 MiB blocks (two 4 MiB writes each): eviction runs.
"""
import ctypes
import errno
import hashlib
import os
import secrets
import time

import fixture as F
from fixture import MiB, check, log

MAX = 48 * MiB
BLOCK = 8 * MiB
CHUNK = 4 * MiB
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2

libc = ctypes.CDLL(None, use_errno=True)


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def utimensat_atime_now(path):
    """utimensat(AT_FDCWD, path, {UTIME_NOW, UTIME_OMIT}, 0); raises OSError."""
    ts = (Timespec * 2)(Timespec(0, UTIME_NOW), Timespec(0, UTIME_OMIT))
    if libc.utimensat(AT_FDCWD, path.encode(), ts, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)


def linkat_empty_path(fd, dest):
    if libc.linkat(fd, b"", AT_FDCWD, dest.encode(), AT_EMPTY_PATH) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), dest)


class Connector:
    def __init__(self, root):
        self.root = root
        self.tmpfile = None            # decided by the first store, as the connector does

    def rel(self, key):
        h = hashlib.sha256(key.encode()).hexdigest()
        return os.path.join("llama-70b", h[:3], h[3:5], h + ".bin")

    def path(self, key):
        return os.path.join(self.root, self.rel(key))

    def _write_all(self, fd, data):
        for off in range(0, len(data), CHUNK):
            chunk = data[off:off + CHUNK]
            n = os.write(fd, chunk)
            check(n == len(chunk), "write() of %d returned %d" % (len(chunk), n))

    def store(self, key):
        """Returns "ok" or "EEXIST" (both success for the connector)."""
        target = self.path(key)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        data = F.block_bytes(key, BLOCK)
        if self.tmpfile is not False:
            try:
                fd = os.open(os.path.dirname(target), os.O_TMPFILE | os.O_WRONLY, 0o644)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR):
                    raise F.Failure("open(dir, O_TMPFILE): %s, expected success or EOPNOTSUPP/EISDIR "
                                    "(the connector's fallback is not taken on other errors)" % F.errname(e))
                self.tmpfile = False
                self.tmpfile_errno = e.errno
            else:
                self.tmpfile = True
                try:
                    self._write_all(fd, data)
                    try:
                        linkat_empty_path(fd, target)
                        return "ok"
                    except FileExistsError:
                        return "EEXIST"
                finally:
                    os.close(fd)
        tmp = "%s_%s.tmp" % (target, secrets.token_hex(6))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self._write_all(fd, data)
        finally:
            os.close(fd)
        os.rename(tmp, target)
        return "ok"

    def load(self, key):
        """Seek to the end for the size, then read it all; raises OSError (ENOENT = miss)."""
        with open(self.path(key), "rb") as f:
            size = f.seek(0, os.SEEK_END)
            check(size == BLOCK, "load %s: seek to the end says %d, expected %d" % (key, size, BLOCK))
            f.seek(0)
            data = f.read(size)
        check(data == F.block_bytes(key, BLOCK), "load %s: %d bytes%s" % (key, len(data), "" if len(data) != BLOCK else ", wrong content"))


def main(m):
    m.start(MAX)
    c = Connector(m.mnt)

    # --- first store decides: O_TMPFILE + linkat, or the tmp + rename fallback
    before = m.du()
    c.store("k0")
    if c.tmpfile:
        log("O_TMPFILE is offered: replaying linkat(AT_EMPTY_PATH) with EEXIST as success")
        check(c.store("k0") == "EEXIST", "linkat onto an existing block did not answer EEXIST")
    else:
        log("open(dir, O_TMPFILE) -> %s: the connector falls back to tmp + rename" % F.errname(c.tmpfile_errno))
        check(c.tmpfile_errno in (errno.EOPNOTSUPP, errno.EISDIR), "O_TMPFILE fell back on %s" % F.errname(c.tmpfile_errno))
    d = os.path.dirname(m.b(c.rel("k0")))
    check(os.listdir(d) == [os.path.basename(c.rel("k0"))], "store left extra files: %s" % os.listdir(d))
    c.load("k0")
    check(m.du() - before <= BLOCK + 64 * 1024, "the failed O_TMPFILE attempt left bytes behind")

    # --- 12 blocks (96 MiB) through a 48 MiB budget, with the recency helper after every load
    keys = ["k%d" % i for i in range(1, 13)]
    for i, k in enumerate(keys):
        check(c.store(k) in ("ok", "EEXIST"), "store %s" % k)
        c.load(k)
        utimensat_atime_now(c.path(k))
        if i >= 1:
            c.load(keys[i - 1])
            utimensat_atime_now(c.path(keys[i - 1]))
    s = m.wait_settled()
    check(s["evictions"] > 0 and s["enospc"] == 0, "evictions %d, ENOSPC %d" % (s["evictions"], s["enospc"]))
    for k in keys[-3:]:
        c.load(k)
    F.expect_errno(errno.ENOENT, lambda: c.load("k0"), "load of the oldest (evicted) block")

    # --- utimensat(atime = now, mtime = omit): atime moves, mtime stays
    k = keys[-1]
    p, bp = c.path(k), m.b(c.rel(k))
    os.utime(p, ns=(1_600_000_000 * 10**9, 1_650_000_000 * 10**9))   # known old times
    t0 = time.time()
    try:
        utimensat_atime_now(p)
    except OSError as e:
        raise F.Failure("utimensat(atime=UTIME_NOW, mtime=UTIME_OMIT): %s" % F.errname(e))
    t1 = time.time()
    for where, path in (("mount", p), ("BACKING", bp)):
        st = os.stat(path)
        check(st.st_mtime_ns == 1_650_000_000 * 10**9, "%s: UTIME_OMIT changed mtime to %d" % (where, st.st_mtime_ns))
        check(t0 - 1 <= st.st_atime <= t1 + 1, "%s: atime %.3f not set to now (%.3f)" % (where, st.st_atime, t0))
    c.load(k)
    m.check_budget()
    m.stop()


if __name__ == "__main__":
    F.run(main)
