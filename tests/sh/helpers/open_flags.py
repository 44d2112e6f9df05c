#!/usr/bin/env python3
"""Open-flag table: every combination of the open flags a program can pass,
run on a boundfs mount and on a plain directory side by side.

    open_flags.py MOUNT_DIR PLAIN_DIR

For each case a fresh 8 KiB file `f` (and a symlink `l` -> `f`) is made in
both directories, then opened with the case's flags. The outcome compared is:
the errno of open(2) (or success), F_GETFL and FD_CLOEXEC of the new fd, the
result of a 4 KiB pread at 0 (if readable) and of a 4 KiB write(2) (if
writable; O_APPEND decides where it lands), and the file's size and content
after close. Buffers are page aligned so O_DIRECT behaves as on the backing
filesystem. Cases: O_RDONLY/O_WRONLY/O_RDWR x every subset of O_NOFOLLOW,
O_NOATIME, O_APPEND, O_DIRECT, O_TRUNC, O_SYNC, O_CLOEXEC, O_NOCTTY on the
regular file, and a set on the symlink (O_NOFOLLOW there must be ELOOP).

Prints one line per differing case and a summary; exit 0 when no case
differs, 1 otherwise, 2 on bad arguments.
"""
import errno
import fcntl
import hashlib
import itertools
import mmap
import os
import sys

ACCESS = [("O_RDONLY", os.O_RDONLY), ("O_WRONLY", os.O_WRONLY), ("O_RDWR", os.O_RDWR)]
EXTRA = ["O_NOFOLLOW", "O_NOATIME", "O_APPEND", "O_DIRECT", "O_TRUNC", "O_SYNC", "O_CLOEXEC", "O_NOCTTY"]
PAGE = 4096
INITIAL = bytes(range(256)) * 32  # 8 KiB


def aligned(fill):
    buf = mmap.mmap(-1, PAGE)
    buf.write(fill * PAGE)
    return buf


def reset(d):
    for n in ("f", "l"):
        try:
            os.unlink(os.path.join(d, n))
        except FileNotFoundError:
            pass
    with open(os.path.join(d, "f"), "wb") as f:
        f.write(INITIAL)
    os.symlink("f", os.path.join(d, "l"))


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def run(d, target, flags):
    """The outcome of one case in directory d, as a tuple of strings."""
    reset(d)
    path = os.path.join(d, target)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        return ("open=" + err(e),)
    out = ["open=ok"]
    try:
        out.append("getfl=%#o" % fcntl.fcntl(fd, fcntl.F_GETFL))
        out.append("cloexec=%d" % (fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
        acc = flags & os.O_ACCMODE
        if acc in (os.O_RDONLY, os.O_RDWR):
            buf = aligned(b"\0")
            try:
                n = os.preadv(fd, [buf], 0)
                out.append("read=%d:%s" % (n, hashlib.md5(buf[:n]).hexdigest()[:8]))
            except OSError as e:
                out.append("read=" + err(e))
        if acc in (os.O_WRONLY, os.O_RDWR):
            try:
                out.append("write=%d" % os.write(fd, aligned(b"w")))
            except OSError as e:
                out.append("write=" + err(e))
    finally:
        os.close(fd)
    with open(os.path.join(d, "f"), "rb") as f:
        data = f.read()
    out.append("size=%d:%s" % (len(data), hashlib.md5(data).hexdigest()[:8]))
    return tuple(out)


def cases():
    for (aname, acc), k in itertools.product(ACCESS, range(len(EXTRA) + 1)):
        for extra in itertools.combinations(EXTRA, k):
            flags = acc
            for n in extra:
                flags |= getattr(os, n)
            yield "f", "|".join((aname,) + extra), flags
    for (aname, acc) in ACCESS:
        for extra in [(), ("O_NOFOLLOW",), ("O_NOFOLLOW", "O_TRUNC"), ("O_NOFOLLOW", "O_APPEND"), ("O_TRUNC",),
                      ("O_APPEND", "O_SYNC")]:
            flags = acc
            for n in extra:
                flags |= getattr(os, n)
            yield "l", "|".join((aname,) + extra), flags


def main():
    if len(sys.argv) != 3 or not all(os.path.isdir(d) for d in sys.argv[1:]):
        print("usage: open_flags.py MOUNT_DIR PLAIN_DIR (two existing directories)", file=sys.stderr)
        return 2
    mnt, plain = sys.argv[1:]
    n = bad = 0
    for target, name, flags in cases():
        n += 1
        a, b = run(mnt, target, flags), run(plain, target, flags)
        if a != b:
            bad += 1
            print("DIFF %s %s: mount %s plain %s" % (target, name, " ".join(a), " ".join(b)))
    print("%d cases, %d differ" % (n, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
