#!/usr/bin/env python3
"""Latency of the distributed filesystem's primitives a cross-node budget
would be built from, measured through one client's directory (not a boundfs
mount): what one store would pay for each mechanism sketched in
docs/design/shared-budget.md.

usage: jfs_primitives.py DIR [--seconds S] [--peers N] [--every 0.05]

Round-robin until S seconds pass, one operation every --every seconds:
  flock      open a ledger file, flock(LOCK_EX), flock(LOCK_UN), close
  ledger     open, flock(LOCK_EX), pread 4 KiB, pwrite 64 B, fsync,
             LOCK_UN, close: one transaction on a shared ledger file
  append     open(O_APPEND), write one 80-byte line, close (the commit):
             what the removal journal costs per eviction call today
  read_peers for each of N peer files: open, fstat, pread 4 KiB, close (as
             the journal reader does), plus one listing of DIR
Prints one line of JSON: per primitive the count and p50 / p99 in ms.
"""
import argparse
import fcntl
import json
import os
import sys
import time


def pct(xs, q):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 2) if xs else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--peers", type=int, default=2)
    p.add_argument("--every", type=float, default=0.05)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    ledger = os.path.join(a.dir, "ledger")
    with open(ledger, "wb") as f:
        f.write(b"\0" * 4096)
    peers = [os.path.join(a.dir, "peer%d.log" % i) for i in range(a.peers)]
    for pth in peers:
        with open(pth, "wb") as f:
            f.write(b"1 x/y/z.bin\n" * 100)
    mine = os.path.join(a.dir, "mine.log")
    line = b"%d %s\n" % (12345678, b"a" * 68)

    def flock():
        fd = os.open(ledger, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def ledger_tx():
        fd = os.open(ledger, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pread(fd, 4096, 0)
        os.pwrite(fd, b"x" * 64, 0)
        os.fsync(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def append():
        fd = os.open(mine, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, line)
        os.close(fd)

    def read_peers():
        os.listdir(a.dir)
        for pth in peers:
            fd = os.open(pth, os.O_RDONLY)
            os.fstat(fd)
            os.pread(fd, 4096, 0)
            os.close(fd)

    ops = {"flock": flock, "ledger": ledger_tx, "append": append, "read_peers": read_peers}
    lat = {k: [] for k in ops}
    errors = {k: 0 for k in ops}
    end = time.monotonic() + a.seconds
    names = list(ops)
    i = 0
    while time.monotonic() < end:
        k = names[i % len(names)]
        i += 1
        t0 = time.monotonic()
        try:
            ops[k]()
            lat[k].append(time.monotonic() - t0)
        except OSError:
            errors[k] += 1
        time.sleep(a.every)
    out = {k: {"n": len(v), "p50_ms": pct(v, 0.5), "p99_ms": pct(v, 0.99), "errors": errors[k]}
           for k, v in lat.items()}
    out["peers"] = a.peers
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
