#!/usr/bin/env python3
"""One file-system operation, for the shell fixtures.

usage: op.py OP ARGS...

Prints "OK" (optionally followed by a result) when the operation succeeds, or
the errno name (ENOENT, ENOSPC, ...) when it fails, on the first line, and
always exits 0 unless the arguments are wrong (exit 2).  The shell side
compares the first word with what it expects.
"""
import ctypes
import errno
import mmap
import os
import stat
import sys

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2

FLAG_NAMES = {
    "r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR,
    "creat": os.O_CREAT, "excl": os.O_EXCL, "trunc": os.O_TRUNC,
    "append": os.O_APPEND, "direct": os.O_DIRECT, "nofollow": os.O_NOFOLLOW,
    "directory": os.O_DIRECTORY, "path": getattr(os, "O_PATH", 0),
}


def flags_of(spec):
    f = 0
    for part in spec.split(","):
        if part:
            f |= FLAG_NAMES[part]
    return f


def kind(mode):
    for name, test in (("dir", stat.S_ISDIR), ("file", stat.S_ISREG),
                       ("symlink", stat.S_ISLNK), ("fifo", stat.S_ISFIFO)):
        if test(mode):
            return name
    return "other"


def describe(st):
    return "%s mode=%o size=%d nlink=%d uid=%d gid=%d" % (
        kind(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, st.st_nlink,
        st.st_uid, st.st_gid)


def size_of(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s[-1:].upper() in mult:
        return int(s[:-1]) * mult[s[-1].upper()]
    return int(s)


def renameat2(a, b, flags):
    r = libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def fill(n, seed):
    import random
    return random.Random(seed).randbytes(n)


def run(op, a):
    if op == "stat":
        return describe(os.stat(a[0]))
    if op == "lstat":
        return describe(os.lstat(a[0]))
    if op == "exists":
        os.stat(a[0])
        return ""
    if op == "open":
        fd = os.open(a[0], flags_of(a[1]), int(a[2], 8) if len(a) > 2 else 0o644)
        os.close(fd)
        return ""
    if op == "mkdir":
        os.mkdir(a[0], int(a[1], 8) if len(a) > 1 else 0o755)
        return ""
    if op == "rmdir":
        os.rmdir(a[0])
        return ""
    if op == "unlink":
        os.unlink(a[0])
        return ""
    if op == "rename":
        os.rename(a[0], a[1])
        return ""
    if op == "renameat2":
        renameat2(a[0], a[1], {"noreplace": RENAME_NOREPLACE,
                               "exchange": RENAME_EXCHANGE, "none": 0}[a[2]])
        return ""
    if op == "link":
        os.link(a[0], a[1])
        return ""
    if op == "symlink":
        os.symlink(a[0], a[1])
        return ""
    if op == "readlink":
        return os.readlink(a[0])
    if op == "truncate":
        os.truncate(a[0], size_of(a[1]))
        return ""
    if op == "chmod":
        os.chmod(a[0], int(a[1], 8))
        return ""
    if op == "lchown":
        os.lchown(a[0], int(a[1]), int(a[2]))
        return ""
    if op == "setxattr":
        fl = {"": 0, "create": os.XATTR_CREATE, "replace": os.XATTR_REPLACE}[a[3] if len(a) > 3 else ""]
        os.setxattr(a[0], a[1], a[2].encode(), fl)
        return ""
    if op == "lsetxattr":
        os.setxattr(a[0], a[1], a[2].encode(), 0, follow_symlinks=False)
        return ""
    if op == "getxattr":
        return os.getxattr(a[0], a[1]).decode(errors="replace")
    if op == "removexattr":
        os.removexattr(a[0], a[1])
        return ""
    if op == "access":
        m = 0
        for c in a[1]:
            m |= {"f": os.F_OK, "r": os.R_OK, "w": os.W_OK, "x": os.X_OK}[c]
        if not os.access(a[0], m):
            # os.access hides errno; redo with libc to get it
            r = libc.access(a[0].encode(), m)
            e = ctypes.get_errno() if r != 0 else errno.EACCES
            raise OSError(e, os.strerror(e))
        return ""
    if op == "writefile":
        # writefile PATH SIZE [SEED [FLAGS]]: create/truncate, write, fsync, close
        # (content as blocks.py mk: SEED defaults to the name without extension)
        n = size_of(a[1])
        seed = a[2] if len(a) > 2 else os.path.basename(a[0]).split(".")[0]
        extra = flags_of(a[3]) if len(a) > 3 else 0
        data = fill(n, seed)
        fd = os.open(a[0], os.O_CREAT | os.O_WRONLY | os.O_TRUNC | extra, 0o644)
        try:
            off = 0
            while off < n:
                off += os.write(fd, data[off:off + (1 << 20)])
            os.fsync(fd)
        finally:
            os.close(fd)
        return ""
    if op == "pwrite":
        # pwrite PATH FLAGS TEXT: open an existing file with FLAGS (w, rw,
        # w,direct ...; no O_CREAT, no O_TRUNC), write TEXT at offset 0, close
        # (with direct: TEXT padded to 4 KiB in an aligned buffer)
        fd = os.open(a[0], flags_of(a[1]))
        data = a[2].encode()
        if "direct" in a[1].split(","):
            buf = mmap.mmap(-1, 4096)
            buf.write(data[:4096])
            data = buf
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
        return ""
    if op == "writedirect":
        # writedirect PATH SIZE [SEED]: one aligned O_DIRECT write of the
        # whole buffer (vLLM store pattern); a short write is continued, so
        # the error that stopped it is what gets reported
        n = size_of(a[1])
        buf = mmap.mmap(-1, n)
        buf.write(fill(n, a[2] if len(a) > 2 else os.path.basename(a[0]).split(".")[0]))
        mv = memoryview(buf)
        fd = os.open(a[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC | os.O_DIRECT, 0o644)
        try:
            off = 0
            while off < n:
                w = os.write(fd, mv[off:])
                if w <= 0:
                    return "zero-length write at %d" % off
                off += w
        finally:
            mv.release()
            os.close(fd)
        return ""
    if op == "cat":
        with open(a[0], "rb") as f:
            return f.read().decode(errors="replace")
    if op == "readall":
        with open(a[0], "rb") as f:
            return str(len(f.read()))
    if op == "fallocate":
        fd = os.open(a[0], os.O_RDWR)
        try:
            mode = int(a[3]) if len(a) > 3 else 0
            r = libc.fallocate(fd, mode, ctypes.c_long(size_of(a[1])), ctypes.c_long(size_of(a[2])))
            if r != 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
        finally:
            os.close(fd)
        return ""
    if op == "listdir":
        return " ".join(sorted(os.listdir(a[0])))
    raise SystemExit("op.py: unknown op %r" % op)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    try:
        res = run(sys.argv[1], sys.argv[2:])
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)), e.strerror)
        return
    except (IndexError, KeyError, ValueError) as e:
        print("op.py: bad arguments: %r" % (e,), file=sys.stderr)
        sys.exit(2)
    print(("OK " + res) if res else "OK")


if __name__ == "__main__":
    main()
