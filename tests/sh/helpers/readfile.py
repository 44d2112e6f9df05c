#!/usr/bin/env python3
"""Read a whole file the way a KV tier loads a block, and print its md5.

Usage: readfile.py PATH MODE, MODE one of:
  buffered   open O_RDONLY, read 1 MiB at a time, close
  dontneed   the same, then posix_fadvise(POSIX_FADV_DONTNEED) on the whole
             file before the close (a reader that drops what it read)
  direct     open O_RDONLY|O_DIRECT, read into an aligned 1 MiB buffer
Exit 0 and "MD5 <hex>" on success; the errno's message and exit 1 otherwise.
"""
import hashlib
import mmap
import os
import sys


def main():
    path, mode = sys.argv[1], sys.argv[2]
    flags = os.O_RDONLY | (os.O_DIRECT if mode == "direct" else 0)
    fd = os.open(path, flags)
    buf = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
    h, off = hashlib.md5(), 0
    while True:
        n = os.preadv(fd, [buf], off)
        if n <= 0:
            break
        h.update(buf[:n])
        off += n
    if mode == "dontneed":
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    print("MD5", h.hexdigest())


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print(e)
        sys.exit(1)
