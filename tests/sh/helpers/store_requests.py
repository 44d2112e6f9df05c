#!/usr/bin/env python3
"""FUSE requests per step of vLLM-style stores, from the daemon's own counters.

  store_requests.py MNT N TAG [--same-dir]

Makes N stores of one 64 KiB block each, one at a time, the way vLLM's
offloading connector does: exists(dest) twice (its probe, then its check
before storing), os.makedirs(dir, exist_ok=True), open(<dest>_<rand>.tmp,
O_CREAT|O_EXCL|O_WRONLY|O_TRUNC|O_DIRECT), one write, close, rename. dest is
MNT/h[0:3]/h[3:5]/h.bin with h = sha256(TAG:i), so each store needs two new
directories; with --same-dir every store goes to MNT/flat/d/ instead, which
only the first store of a mount makes.

Reads the mount's status (the `user.boundfs.stats` xattr of its root, JSON,
`requests` = FUSE requests received per opcode) around every step and
prints one JSON object: {"stores": N, "per_store": {OPCODE: requests / N},
"steps": {STEP: {OPCODE: requests / N}}}. The status read's own GETXATTR is
left out; FORGET is left out too (the kernel sends it when it drops an inode,
at a time of its choosing, not as part of a store).
"""
import hashlib
import json
import mmap
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import status  # noqa: E402

LEFT_OUT = ("GETXATTR", "FORGET")


def requests(mnt):
    return status(mnt)["requests"]


def main():
    mnt, n, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    same_dir = "--same-dir" in sys.argv[4:]
    buf = mmap.mmap(-1, 64 << 10)  # page-aligned, as O_DIRECT wants
    buf.write(b"k" * len(buf))
    steps, total = {}, {}
    prev = requests(mnt)

    def step(name, fn):
        nonlocal prev
        out = fn()
        now = requests(mnt)
        for op, v in now.items():
            d = v - prev.get(op, 0)
            if d and op not in LEFT_OUT:
                steps.setdefault(name, {}).setdefault(op, 0)
                steps[name][op] += d
                total[op] = total.get(op, 0) + d
        prev = now
        return out

    for i in range(n):
        h = hashlib.sha256(f"{tag}:{i}".encode()).hexdigest()
        d = os.path.join(mnt, "flat", "d") if same_dir else os.path.join(mnt, h[:3], h[3:5])
        dest = os.path.join(d, h + ".bin")
        tmp = f"{dest}_{i:08x}.tmp"
        step("exists", lambda: os.path.exists(dest))
        step("exists again", lambda: os.path.exists(dest))
        step("makedirs", lambda: os.makedirs(d, exist_ok=True))
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC | os.O_DIRECT
        fd = step("open tmp", lambda: os.open(tmp, flags, 0o644))
        step("write", lambda: os.write(fd, buf))
        step("close", lambda: os.close(fd))
        step("rename", lambda: os.rename(tmp, dest))
    per = lambda m: {k: round(v / n, 3) for k, v in sorted(m.items())}
    print(json.dumps({"stores": n, "per_store": per(total), "steps": {k: per(v) for k, v in steps.items()}}))


if __name__ == "__main__":
    main()
