#!/usr/bin/env python3
"""Threads storing blocks into a mount until STOPFILE exists, each block
read back and checked (the load faults/upgrade-cap puts under upgrades).

  thread_stores.py MNT STOPFILE [--threads 4] [--block 2M] [--min-bytes B]

Each thread (one process, several threads: the writes release the GIL, as
an engine's I/O threads do) stores blocks in turn: makedirs of a two-level
hash directory `h[0:2]/h[2:4]`, open(`<hash>.bin_<tid>.tmp`, O_CREAT|O_WRONLY|
O_TRUNC|O_DIRECT), one write of the whole block from an aligned buffer,
close, rename to `<hash>.bin`, then open, read it whole and compare. Every
key is new. It runs until STOPFILE exists and at least --min-bytes have
been stored. ENOENT on the read back is counted (eviction may take a block
at once when the budget is small), any other error is a violation.

Prints one JSON line: stores, stored_bytes, readback_enoent, violations
(count) and the first violations.
"""
import argparse
import errno
import hashlib
import json
import mmap
import os
import threading

from blocks import size_of

O_DIRECT = getattr(os, "O_DIRECT", 0o40000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mnt")
    ap.add_argument("stop")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--block", default="2M")
    ap.add_argument("--min-bytes", type=int, default=0)
    a = ap.parse_args()
    size = size_of(a.block)
    lock = threading.Lock()
    tot = {"stores": 0, "stored_bytes": 0, "readback_enoent": 0, "violations": []}

    def done():
        with lock:
            return os.path.exists(a.stop) and tot["stored_bytes"] >= a.min_bytes

    def run(tid):
        buf = mmap.mmap(-1, size)
        n = 0
        while not done():
            h = hashlib.sha256(b"%d:%d" % (tid, n)).hexdigest()
            n += 1
            body = (h.encode() * (size // len(h) + 1))[:size]
            buf[:] = body
            d = os.path.join(a.mnt, h[0:2], h[2:4])
            dest = os.path.join(d, h + ".bin")
            tmp = "%s_%d.tmp" % (dest, tid)
            try:
                os.makedirs(d, exist_ok=True)
                fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | O_DIRECT, 0o644)
                try:
                    w = os.write(fd, buf)
                finally:
                    os.close(fd)
                if w != size:
                    raise OSError(errno.EIO, "short write %d of %d" % (w, size), tmp)
                os.rename(tmp, dest)
                with lock:
                    tot["stores"] += 1
                    tot["stored_bytes"] += size
            except OSError as e:
                with lock:
                    tot["violations"].append("store %s: %s" % (dest, e))
                continue
            try:
                with open(dest, "rb") as f:
                    got = f.read()
                if got != body:
                    with lock:
                        tot["violations"].append("read back %s: %d bytes, not the stored ones" % (dest, len(got)))
            except OSError as e:
                with lock:
                    if e.errno == errno.ENOENT:
                        tot["readback_enoent"] += 1
                    else:
                        tot["violations"].append("read back %s: %s" % (dest, e))

    ts = [threading.Thread(target=run, args=(t,)) for t in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    v = tot.pop("violations")
    tot["violations"] = len(v)
    tot["first_violations"] = v[:5]
    print(json.dumps(tot), flush=True)


if __name__ == "__main__":
    main()
