#!/usr/bin/env python3
"""The sample tree the real-program scenarios (8x-real-*.sh) copy, and the
manifest they compare copies with.

usage: sample_tree.py mk DIR
       sample_tree.py manifest DIR [--mtime ns|s|none] [--no-owner]
                                   [--no-xattrs] [--links]

mk fills DIR (created if missing) with what copy tools must carry over:
modes 600 to 755 (none that umask 022 changes), a file and a directory owned
by 4242:4343, an empty, a sparse (4 MiB, 4 KiB of data) and a 3 MiB file, a
block file (blocks/0001.bin), names with spaces and non-ASCII, a hidden file,
a 700 directory, an empty directory, a hard-link pair, symlinks (to a file,
to a directory, dangling, absolute), a user.* xattr and (when setfacl is
installed) an access ACL and a default ACL; every entry, symlinks and
directories included, gets its own mtime with a nanosecond part.

manifest prints one line per entry below DIR (DIR itself excluded), sorted,
never following symlinks: path, type, mode, owner, size and md5 (regular
files), target (symlinks), mtime (--mtime: ns, whole seconds, or none; ns by
default), the user.* and system.posix_acl_* xattrs (md5 of each value), and
with --links, for a file with several names, the first of them (sorted walk).
"""
import hashlib
import os
import shutil
import stat
import subprocess
import sys

OWNER = (4242, 4343)
MTIME0 = 1_600_000_000_123_456_789     # ns; each entry gets its own offset


def pattern(n, seed):
    """n deterministic bytes (not compressible to nothing, cheap to make)"""
    block = hashlib.sha256(seed.encode()).digest() * 2048     # 64 KiB
    return (block * (n // len(block) + 1))[:n]


def write(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def mk(root):
    os.makedirs(root, exist_ok=True)
    j = lambda *p: os.path.join(root, *p)
    write(j("README.txt"), b"hello from the sample tree\n")
    write(j("empty"), b"")
    write(j("big.dat"), pattern(3 << 20, "big"))
    with open(j("sparse.img"), "wb") as f:
        f.truncate(4 << 20)
        f.seek(1 << 20)
        f.write(pattern(4096, "sparse"))
    write(j("run.sh"), b"#!/bin/sh\necho hi\n", 0o755)
    write(j("secret"), b"s3cret\n", 0o600)
    write(j("owned"), b"owned by 4242\n", 0o640)
    os.chown(j("owned"), *OWNER)
    write(j("name with spaces \u00fc.txt"), b"unicode name\n")
    write(j(".hidden"), b"hidden\n")
    os.makedirs(j("blocks"))
    write(j("blocks", "0001.bin"), pattern(1 << 20, "block"))
    os.makedirs(j("a", "b", "c"))
    write(j("a", "b", "c", "deep.txt"), b"deep\n")
    os.chown(j("a"), *OWNER)
    os.makedirs(j("private"))
    os.chmod(j("private"), 0o700)
    write(j("private", "x"), b"x\n", 0o600)
    os.makedirs(j("emptydir"))
    write(j("hard1"), b"two names, one inode\n")
    os.link(j("hard1"), j("hard2"))
    write(j("xattr.txt"), b"has a user xattr\n")
    os.setxattr(j("xattr.txt"), "user.comment", b"sample value")
    write(j("acl.txt"), b"has an access ACL\n", 0o640)
    os.makedirs(j("acldir"))
    if shutil.which("setfacl"):
        subprocess.run(["setfacl", "-m", "u:4242:rw-", j("acl.txt")], check=True)
        subprocess.run(["setfacl", "-d", "-m", "u:4242:rwx", j("acldir")], check=True)
    os.symlink("README.txt", j("link-file"))
    os.symlink("a/b", j("link-dir"))
    os.symlink("nowhere", j("link-dangling"))
    os.symlink("/etc/hostname", j("link-abs"))
    # mtimes last, children before their directory
    entries = []
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in sorted(filenames) + sorted(dirnames):
            entries.append(os.path.join(dirpath, name))
    for i, p in enumerate(entries):
        t = MTIME0 + i * 1_000_001_001
        os.utime(p, ns=(t, t), follow_symlinks=False)


def xattrs(p):
    try:
        names = os.listxattr(p, follow_symlinks=False)
    except OSError as e:
        return "listxattr:%s" % e.strerror
    out = []
    for n in sorted(names):
        if n.startswith("user.") or n.startswith("system.posix_acl_"):
            v = os.getxattr(p, n, follow_symlinks=False)
            out.append("%s=%s" % (n, hashlib.md5(v).hexdigest()[:8]))
    return " ".join(out)


def manifest(root, mtime="ns", owner=True, with_xattrs=True, links=False):
    lines, first_of = [], {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()     # a deterministic walk: hard-link groups are
        for name in sorted(dirnames + filenames):   # named by their first path
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            s = os.lstat(p)
            m = s.st_mode
            if stat.S_ISLNK(m):
                desc = ["symlink", "->" + os.readlink(p)]
            else:
                desc = ["dir" if stat.S_ISDIR(m) else "file" if stat.S_ISREG(m) else "other",
                        "%o" % stat.S_IMODE(m)]
            if owner:
                desc.append("%d:%d" % (s.st_uid, s.st_gid))
            if stat.S_ISREG(m):
                h = hashlib.md5()
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                desc.append("size=%d md5=%s" % (s.st_size, h.hexdigest()))
                if links and s.st_nlink > 1:
                    desc.append("group=%s" % first_of.setdefault((s.st_dev, s.st_ino), rel))
            if mtime == "ns":
                desc.append("mtime=%d" % s.st_mtime_ns)
            elif mtime == "s":
                desc.append("mtime=%d" % (s.st_mtime_ns // 1_000_000_000))
            if with_xattrs:
                desc.append(xattrs(p))
            lines.append("%s %s" % (rel, " ".join(d for d in desc if d)))
    return "\n".join(sorted(lines))


def main(argv):
    if len(argv) < 3 or argv[1] not in ("mk", "manifest"):
        sys.exit(__doc__)
    if argv[1] == "mk":
        mk(argv[2])
        return
    opts = argv[3:]
    mtime = "ns"
    if "--mtime" in opts:
        mtime = opts[opts.index("--mtime") + 1]
    print(manifest(argv[2], mtime=mtime, owner="--no-owner" not in opts,
                   with_xattrs="--no-xattrs" not in opts, links="--links" in opts))


if __name__ == "__main__":
    main(sys.argv)
