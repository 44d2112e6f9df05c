#!/usr/bin/env python3
"""Change a file's content or size one way, for the set-ID scenario.

usage: change_paths.py WAY FILE

WAY is one of the paths a change can take through the kernel: wronly,
append, rdwr, direct (O_WRONLY|O_DIRECT, one aligned block), otrunc (an
open with O_TRUNC and nothing written), ftruncate, truncate (by path),
fallocate, copy (copy_file_range from a scratch file beside FILE), mmap (a
shared writable mapping written and msync'ed).  Prints OK, or the errno
name when the change fails, and exits 0.
"""
import errno
import mmap
import os
import sys


def change(way, path):
    if way in ("wronly", "append", "rdwr"):
        flags = {"wronly": os.O_WRONLY, "append": os.O_WRONLY | os.O_APPEND, "rdwr": os.O_RDWR}[way]
        fd = os.open(path, flags)
        try:
            os.write(fd, b"changed\n")
        finally:
            os.close(fd)
    elif way == "direct":
        buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants
        buf.write(b"d" * 4096)
        fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
        try:
            os.pwritev(fd, [buf], 0)
        finally:
            os.close(fd)
    elif way == "otrunc":
        os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
    elif way == "ftruncate":
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, 1)
        finally:
            os.close(fd)
    elif way == "truncate":
        os.truncate(path, 2)
    elif way == "fallocate":
        fd = os.open(path, os.O_WRONLY)
        try:
            os.posix_fallocate(fd, 0, 65536)
        finally:
            os.close(fd)
    elif way == "copy":
        src = path + ".src"
        with open(src, "wb") as f:
            f.write(b"copied\n")
        s, d = os.open(src, os.O_RDONLY), os.open(path, os.O_WRONLY)
        try:
            os.copy_file_range(s, d, 7, 0, 0)
        finally:
            os.close(s)
            os.close(d)
            os.unlink(src)
    elif way == "mmap":
        fd = os.open(path, os.O_RDWR)
        try:
            m = mmap.mmap(fd, 4, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            m[0:4] = b"mmap"
            m.flush()
            m.close()
        finally:
            os.close(fd)
    else:
        print("unknown way %s" % way, file=sys.stderr)
        sys.exit(2)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        change(sys.argv[1], sys.argv[2])
        print("OK")
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))


if __name__ == "__main__":
    main()
