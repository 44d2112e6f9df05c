#!/usr/bin/env python3
"""Print a manifest of a directory tree (never following symlinks): one line
per entry with its relative path, type, mode, owner, size, content digest,
symlink target and user.* xattrs.  Two trees that a passthrough should keep
identical give identical manifests.

usage: tree.py ROOT [--no-times]  (times: mtime of regular files only)
"""
import hashlib
import os
import stat
import sys

root = sys.argv[1]
with_times = "--times" in sys.argv[2:]


def xattrs(p):
    try:
        names = sorted(n for n in os.listxattr(p, follow_symlinks=False) if n.startswith("user."))
    except OSError:
        return ""
    return " ".join("%s=%s" % (n, hashlib.md5(os.getxattr(p, n, follow_symlinks=False)).hexdigest()[:8]) for n in names)


lines = []
for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for name in sorted(dirnames + filenames):
        p = os.path.join(dirpath, name)
        rel = os.path.relpath(p, root)
        s = os.lstat(p)
        m = s.st_mode
        desc = "%o %d:%d" % (stat.S_IMODE(m), s.st_uid, s.st_gid)
        if stat.S_ISLNK(m):
            desc = "symlink -> %s %s" % (os.readlink(p), desc)
        elif stat.S_ISDIR(m):
            desc = "dir %s" % desc
        elif stat.S_ISREG(m):
            h = hashlib.md5()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            desc = "file %s size=%d md5=%s nlink=%d" % (desc, s.st_size, h.hexdigest(), s.st_nlink)
            if with_times:
                desc += " mtime=%d" % s.st_mtime_ns
        else:
            desc = "other %s" % desc
        lines.append("%s %s %s" % (rel, desc, xattrs(p)))
print("\n".join(lines))
