#!/usr/bin/env python3
"""Run a fixed sequence of file-system operations below ROOT and print one
transcript line per step: the step, then OK plus what it observed, or the
errno name.  Run it once on a plain directory and once on a boundfs mount
(on the same backing file system) and diff the transcripts: a passthrough
must give the same results and errnos.

usage: mirror_ops.py ROOT
Only observations that a passthrough must preserve are printed (no inode
numbers, devices, or times the test did not set itself).
"""
import ctypes
import errno
import mmap
import os
import stat
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
AT_FDCWD = -100
ROOT = sys.argv[1]
out = []


def P(*parts):
    return os.path.join(ROOT, *parts)


def ctypes_check(r):
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def renameat2(a, b, flags):
    ctypes_check(libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags))


def fallocate(fd, mode, off, length):
    ctypes_check(libc.fallocate(fd, mode, off, length))


def st(p, follow=False):
    s = os.stat(p) if follow else os.lstat(p)
    t = {stat.S_IFDIR: "dir", stat.S_IFREG: "file", stat.S_IFLNK: "symlink"}.get(stat.S_IFMT(s.st_mode), "other")
    r = "%s mode=%o nlink=%d uid=%d gid=%d" % (t, stat.S_IMODE(s.st_mode), s.st_nlink, s.st_uid, s.st_gid)
    if t != "dir":
        r += " size=%d" % s.st_size
    return r


def step(name, fn):
    try:
        r = fn()
        out.append("%-40s OK%s" % (name, "" if r is None else " " + str(r)))
    except OSError as e:
        out.append("%-40s %s" % (name, errno.errorcode.get(e.errno, e.errno)))


def wr(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode=0o644):
    fd = os.open(path, flags, mode)
    try:
        return os.write(fd, data)
    finally:
        os.close(fd)


def rd(path, n=1 << 20, off=0):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, n, off)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- directories
step("mkdir d", lambda: os.mkdir(P("d"), 0o755))
step("mkdir d again", lambda: os.mkdir(P("d")))
step("mkdir missing/x", lambda: os.mkdir(P("missing", "x")))
step("mkdir d/sub 0700", lambda: os.mkdir(P("d", "sub"), 0o700))
step("stat d/sub", lambda: st(P("d", "sub")))
step("mkdir longname", lambda: os.mkdir(P("n" * 256)))

# ---------------------------------------------------------------- create/open
step("create excl d/f", lambda: os.close(os.open(P("d", "f"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)))
step("create excl d/f again", lambda: os.open(P("d", "f"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640))
step("stat d/f", lambda: st(P("d", "f")))
step("open missing", lambda: os.open(P("d", "nope"), os.O_RDONLY))
step("open missing/x creat", lambda: os.open(P("missing", "x"), os.O_CREAT | os.O_WRONLY))
step("open dir for write", lambda: os.open(P("d"), os.O_WRONLY))
step("open file O_DIRECTORY", lambda: os.open(P("d", "f"), os.O_RDONLY | os.O_DIRECTORY))
step("write d/f", lambda: wr(P("d", "f"), b"hello"))
step("append d/f", lambda: wr(P("d", "f"), b" world", os.O_WRONLY | os.O_APPEND))
step("read d/f", lambda: rd(P("d", "f")))
step("pread d/f @6", lambda: rd(P("d", "f"), 3, 6))
step("open trunc d/f", lambda: os.close(os.open(P("d", "f"), os.O_WRONLY | os.O_TRUNC)))
step("stat d/f after trunc", lambda: st(P("d", "f")))
step("write d/f 100k", lambda: wr(P("d", "f"), bytes(range(256)) * 400))


def fsync_file():
    fd = os.open(P("d", "f"), os.O_RDWR)
    try:
        os.write(fd, b"X")
        os.fsync(fd)
        os.fdatasync(fd)
    finally:
        os.close(fd)


step("fsync/fdatasync d/f", fsync_file)
step("read d/f head", lambda: rd(P("d", "f"), 4))
step("read d/f len", lambda: len(rd(P("d", "f"), 1 << 20)))

# ---------------------------------------------------------------- truncate
step("truncate d/f 10", lambda: os.truncate(P("d", "f"), 10))
step("stat d/f", lambda: st(P("d", "f")))
step("truncate d/f 300000", lambda: os.truncate(P("d", "f"), 300000))
step("read d/f tail is zero", lambda: rd(P("d", "f"), 16, 299984) == bytes(16))


def ftrunc():
    fd = os.open(P("d", "f"), os.O_RDWR)
    try:
        os.ftruncate(fd, 7)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


step("ftruncate d/f 7", ftrunc)
step("truncate missing", lambda: os.truncate(P("d", "nope"), 1))
step("truncate dir", lambda: os.truncate(P("d"), 1))

# ---------------------------------------------------------------- attrs
step("chmod d/f 600", lambda: os.chmod(P("d", "f"), 0o600))
step("stat d/f", lambda: st(P("d", "f")))
step("chmod d/f 4755", lambda: os.chmod(P("d", "f"), 0o4755))
step("stat d/f", lambda: st(P("d", "f")))
step("chown d/f 1234:4321", lambda: os.chown(P("d", "f"), 1234, 4321))
step("stat d/f", lambda: st(P("d", "f")))
step("chown d/f -1:99", lambda: os.chown(P("d", "f"), -1, 99))
step("stat d/f", lambda: st(P("d", "f")))
step("chmod missing", lambda: os.chmod(P("d", "nope"), 0o600))
step("utimens d/f", lambda: os.utime(P("d", "f"), ns=(1000000000123456789, 1100000000987654321)))


def times(p):
    s = os.stat(p)
    return "atime=%d mtime=%d" % (s.st_atime_ns, s.st_mtime_ns)


step("times d/f", lambda: times(P("d", "f")))
step("utimens d/sub", lambda: os.utime(P("d", "sub"), ns=(900000000000000000, 950000000000000000)))
step("times d/sub", lambda: times(P("d", "sub")))
step("utimens missing", lambda: os.utime(P("d", "nope"), ns=(1, 1)))

# ---------------------------------------------------------------- access
step("access d/f F_OK", lambda: ctypes_check(libc.access(P("d", "f").encode(), os.F_OK)))
step("access d/f R|W", lambda: ctypes_check(libc.access(P("d", "f").encode(), os.R_OK | os.W_OK)))
step("chmod d/f 644", lambda: os.chmod(P("d", "f"), 0o644))
step("access d/f X_OK", lambda: ctypes_check(libc.access(P("d", "f").encode(), os.X_OK)))
step("access missing", lambda: ctypes_check(libc.access(P("d", "nope").encode(), os.F_OK)))

# ---------------------------------------------------------------- readdir
for i in range(40):
    wr(P("d", "e%02d" % i), b"%d" % i)
step("readdir d", lambda: " ".join(sorted(os.listdir(P("d")))))
step("readdir d types", lambda: " ".join(sorted("%s:%s" % (e.name, "d" if e.is_dir(follow_symlinks=False) else "f") for e in os.scandir(P("d")))))
step("readdir missing", lambda: os.listdir(P("nope")))
step("readdir file", lambda: os.listdir(P("d", "f")))

# ---------------------------------------------------------------- rmdir/unlink
step("rmdir nonempty d", lambda: os.rmdir(P("d")))
step("rmdir file", lambda: os.rmdir(P("d", "f")))
step("unlink dir", lambda: os.unlink(P("d", "sub")))
step("unlink missing", lambda: os.unlink(P("d", "nope")))
for i in range(40):
    step("unlink e%02d" % i, lambda i=i: os.unlink(P("d", "e%02d" % i)))
step("readdir d after unlinks", lambda: " ".join(sorted(os.listdir(P("d")))))

# ---------------------------------------------------------------- rename
wr(P("d", "a"), b"AAAA")
wr(P("d", "b"), b"BB")
step("rename a->c", lambda: os.rename(P("d", "a"), P("d", "c")))
step("stat a", lambda: st(P("d", "a")))
step("read c", lambda: rd(P("d", "c")))
step("rename c->b replace", lambda: os.rename(P("d", "c"), P("d", "b")))
step("read b", lambda: rd(P("d", "b")))
wr(P("d", "a"), b"new-a")
step("renameat2 noreplace a->b", lambda: renameat2(P("d", "a"), P("d", "b"), 1))
step("renameat2 noreplace a->z", lambda: renameat2(P("d", "a"), P("d", "z"), 1))
step("renameat2 exchange z<->b", lambda: renameat2(P("d", "z"), P("d", "b"), 2))
step("read z", lambda: rd(P("d", "z")))
step("read b", lambda: rd(P("d", "b")))
step("renameat2 exchange z<->missing", lambda: renameat2(P("d", "z"), P("d", "nope"), 2))
step("rename missing", lambda: os.rename(P("d", "nope"), P("d", "x")))
step("rename file onto dir", lambda: os.rename(P("d", "z"), P("d", "sub")))
step("rename dir onto file", lambda: os.rename(P("d", "sub"), P("d", "z")))
os.mkdir(P("d2"))
wr(P("d2", "keep"), b"k")
step("rename dir onto nonempty dir", lambda: os.rename(P("d", "sub"), P("d2")))
step("rename dir into own child", lambda: os.rename(P("d"), P("d", "sub", "x")))
step("rename across dirs", lambda: os.rename(P("d", "z"), P("d2", "z")))
step("readdir d2", lambda: " ".join(sorted(os.listdir(P("d2")))))
step("rename dir d2->d3", lambda: os.rename(P("d2"), P("d3")))
step("read d3/z", lambda: rd(P("d3", "z")))
step("read d3/keep", lambda: rd(P("d3", "keep")))

# ---------------------------------------------------------------- link/symlink
step("link b->h", lambda: os.link(P("d", "b"), P("d", "h")))
step("stat b", lambda: st(P("d", "b")))
step("link b->h again", lambda: os.link(P("d", "b"), P("d", "h")))
step("link dir", lambda: os.link(P("d", "sub"), P("d", "sublink")))
step("write via h", lambda: wr(P("d", "h"), b"through-h", os.O_WRONLY | os.O_TRUNC))
step("read b", lambda: rd(P("d", "b")))
step("unlink h", lambda: os.unlink(P("d", "h")))
step("stat b nlink", lambda: st(P("d", "b")))
step("symlink s->b", lambda: os.symlink("b", P("d", "s")))
step("symlink s again", lambda: os.symlink("x", P("d", "s")))
step("lstat s", lambda: st(P("d", "s")))
step("readlink s", lambda: os.readlink(P("d", "s")))
step("readlink file", lambda: os.readlink(P("d", "b")))
step("read via s", lambda: rd(P("d", "s")))
step("symlink dangling", lambda: os.symlink("../../../nowhere/at/all", P("d", "dang")))
step("readlink dangling", lambda: os.readlink(P("d", "dang")))
step("stat dangling", lambda: st(P("d", "dang"), follow=True))
step("open O_NOFOLLOW s", lambda: os.open(P("d", "s"), os.O_RDONLY | os.O_NOFOLLOW))
step("symlink long target", lambda: os.symlink("t" * 1000, P("d", "longt")))
step("readlink long target", lambda: len(os.readlink(P("d", "longt"))))

# ---------------------------------------------------------------- xattrs
step("setxattr user.a", lambda: os.setxattr(P("d", "b"), "user.a", b"value-a"))
step("getxattr user.a", lambda: os.getxattr(P("d", "b"), "user.a"))
step("setxattr user.a create", lambda: os.setxattr(P("d", "b"), "user.a", b"v", os.XATTR_CREATE))
step("setxattr user.b replace", lambda: os.setxattr(P("d", "b"), "user.b", b"v", os.XATTR_REPLACE))
step("setxattr user.big 4000", lambda: os.setxattr(P("d", "b"), "user.big", b"z" * 4000))
step("getxattr user.big len", lambda: len(os.getxattr(P("d", "b"), "user.big")))
step("setxattr user.empty", lambda: os.setxattr(P("d", "b"), "user.empty", b""))
step("getxattr user.empty", lambda: os.getxattr(P("d", "b"), "user.empty"))
step("listxattr", lambda: " ".join(sorted(x for x in os.listxattr(P("d", "b")) if x.startswith("user."))))
step("removexattr user.a", lambda: os.removexattr(P("d", "b"), "user.a"))
step("getxattr user.a gone", lambda: os.getxattr(P("d", "b"), "user.a"))
step("removexattr user.a again", lambda: os.removexattr(P("d", "b"), "user.a"))
step("setxattr on dir", lambda: os.setxattr(P("d"), "user.dir", b"dv"))
step("getxattr on dir", lambda: os.getxattr(P("d"), "user.dir"))
step("getxattr missing file", lambda: os.getxattr(P("d", "nope"), "user.a"))
step("lsetxattr on symlink", lambda: os.setxattr(P("d", "s"), "user.l", b"x", follow_symlinks=False))
step("getxattr via rename", lambda: (os.rename(P("d", "b"), P("d", "b2")), os.getxattr(P("d", "b2"), "user.big")[:3])[1])

# ---------------------------------------------------------------- fallocate / lseek
wr(P("d", "fa"), b"")


def falloc(mode, off, length):
    fd = os.open(P("d", "fa"), os.O_RDWR)
    try:
        fallocate(fd, mode, off, length)
    finally:
        os.close(fd)
    s = os.stat(P("d", "fa"))
    return "size=%d allocated>=len:%s" % (s.st_size, s.st_blocks * 512 >= length)


step("fallocate 0..1M", lambda: falloc(0, 0, 1 << 20))
step("fallocate keep_size 1M..3M", lambda: falloc(1, 1 << 20, 2 << 20))
def pfalloc():
    fd = os.open(P("d", "fa"), os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, 4 << 20)
    finally:
        os.close(fd)
    return os.stat(P("d", "fa")).st_size


step("posix_fallocate 0..4M", pfalloc)
step("punch hole 0..64k", lambda: falloc(3, 0, 65536))
step("read punched is zero", lambda: rd(P("d", "fa"), 65536) == bytes(65536))

wr(P("d", "sparse"), b"")


def lseeks():
    fd = os.open(P("d", "sparse"), os.O_RDWR)
    try:
        os.pwrite(fd, b"D" * 4096, 1 << 20)
        os.fsync(fd)
        r = [os.lseek(fd, 0, os.SEEK_END), os.lseek(fd, 100, os.SEEK_SET), os.lseek(fd, 5, os.SEEK_CUR)]
        r.append(os.lseek(fd, 0, os.SEEK_DATA))
        r.append(os.lseek(fd, 1 << 20, os.SEEK_HOLE))
        try:
            os.lseek(fd, (1 << 20) + 8192, os.SEEK_DATA)
            r.append("no-ENXIO")
        except OSError as e:
            r.append(errno.errorcode[e.errno])
        return " ".join(map(str, r))
    finally:
        os.close(fd)


step("lseek end/set/cur/data/hole", lseeks)

# ---------------------------------------------------------------- O_DIRECT
def direct():
    n = 1 << 20
    buf = mmap.mmap(-1, n)
    buf.write(bytes(range(256)) * (n // 256))
    fd = os.open(P("d", "direct.tmp"), os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC | os.O_DIRECT, 0o644)
    try:
        w = os.write(fd, buf)
    finally:
        os.close(fd)
    rbuf = mmap.mmap(-1, n)
    fd = os.open(P("d", "direct.tmp"), os.O_RDONLY | os.O_DIRECT)
    try:
        r = os.readv(fd, [rbuf])
    finally:
        os.close(fd)
    return "wrote=%d read=%d same=%s" % (w, r, rbuf[:] == buf[:])


step("O_DIRECT write+readv 1M", direct)
step("rename direct into place", lambda: os.rename(P("d", "direct.tmp"), P("d", "direct.bin")))


def direct_probe():
    buf = mmap.mmap(-1, 4096)
    buf.write(b"p" * 4096)
    p = P(".o_direct_probe_1234.tmp")
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_DIRECT, 0o644)
    try:
        return os.write(fd, buf)
    finally:
        os.close(fd)
        os.unlink(p)


step("O_DIRECT probe (vLLM)", direct_probe)

# ---------------------------------------------------------------- mixed opens
def mixed():
    p = P("d", "mixed")
    wr(p, b"0" * 8192)
    a = os.open(p, os.O_RDONLY)
    b = os.open(p, os.O_RDWR)
    buf = mmap.mmap(-1, 4096)
    c = os.open(p, os.O_RDONLY | os.O_DIRECT)
    try:
        os.pwrite(b, b"1" * 4096, 0)
        r1 = os.pread(a, 4, 0)
        os.preadv(c, [buf], 0)
        m = mmap.mmap(a, 8192, prot=mmap.PROT_READ)
        r3 = m[4092:4100]
        m.close()
        return "%s %s %s" % (r1, buf[:4], r3)
    finally:
        os.close(a)
        os.close(b)
        os.close(c)


step("mixed buffered/direct/mmap opens", mixed)


def shared_mmap():
    p = P("d", "mm")
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, 16384)
        m = mmap.mmap(fd, 16384, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        m[0:5] = b"mmap!"
        m[16379:16384] = b"tail!"
        m.flush()
        m.close()
    finally:
        os.close(fd)
    d = rd(p)
    return "%s %s %d" % (d[:5], d[-5:], len(d))


step("ftruncate + MAP_SHARED write", shared_mmap)

# ---------------------------------------------------------------- unlink while open
def unlinked_open():
    p = P("d", "ghost")
    wr(p, b"boo")
    fd = os.open(p, os.O_RDWR)
    try:
        os.unlink(p)
        gone = not os.path.lexists(p)
        os.pwrite(fd, b"-still-here", 3)
        os.fsync(fd)
        s = os.fstat(fd)
        return "gone=%s nlink=%d size=%d data=%s" % (gone, s.st_nlink, s.st_size, os.pread(fd, 100, 0))
    finally:
        os.close(fd)


step("unlink while open", unlinked_open)
step("readdir d final", lambda: " ".join(sorted(os.listdir(P("d")))))

# ---------------------------------------------------------------- cleanup path
step("rmdir d/sub", lambda: os.rmdir(P("d", "sub")))
step("rmdir d/sub again", lambda: os.rmdir(P("d", "sub")))

print("\n".join(out))
