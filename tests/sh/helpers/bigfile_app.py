#!/usr/bin/env python3
"""An application that stores big files and may manage its own space
(a cache sized from df, deleting its own oldest files), for SECONDS:

  bigfile_app.py MNT SECONDS [--threads 4] [--min 6M] [--max 96M] [--self-size]

Each thread stores files `f<thread>_<n>.bin` of a random size between --min
and --max (a fixed seed): create, posix_fallocate to the full size, write
it in 1 MiB chunks, fsync, close. With --self-size the application sizes
its own cache at start as 0.95 x f_bavail x f_frsize of statvfs(MNT), keeps
its own LRU below that (deleting its oldest files before a store would pass
it) and reads a random one of its files back after each store; a read that
finds a file it did not delete gone (ENOENT) counts in `gone`.

Prints one JSON line: stores, stored_bytes, enospc (ENOSPC answers, any
call), failed (stores that failed), gone, budget (the self-sized cache,
bytes, or 0), other (other errors) and the first errors.
"""
import argparse
import errno
import json
import os
import random
import threading
import time

from blocks import size_of


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mnt")
    ap.add_argument("seconds", type=float)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--min", default="6M")
    ap.add_argument("--max", default="96M")
    ap.add_argument("--self-size", action="store_true")
    a = ap.parse_args()
    lo, hi = size_of(a.min), size_of(a.max)
    lock = threading.Lock()
    tot = {"stores": 0, "stored_bytes": 0, "enospc": 0, "failed": 0, "gone": 0, "budget": 0, "other": 0}
    errors = []
    lru = []  # (path, size), oldest first: the application's own cache
    cached = [0]
    if a.self_size:
        v = os.statvfs(a.mnt)
        tot["budget"] = int(0.95 * v.f_bavail * v.f_frsize)
    chunk = b"\xa5" * (1 << 20)
    end = time.monotonic() + a.seconds

    def note(what, e):
        with lock:
            if e.errno == errno.ENOSPC:
                tot["enospc"] += 1
            else:
                tot["other"] += 1
            if len(errors) < 5:
                errors.append("%s: %s" % (what, e))

    def make_room(size):
        victims = []
        with lock:
            while lru and cached[0] + size > tot["budget"]:
                p, s = lru.pop(0)
                cached[0] -= s
                victims.append(p)
            cached[0] += size
        for p in victims:
            try:
                os.unlink(p)
            except OSError as e:
                note("unlink " + p, e)

    def run(t):
        rng = random.Random(t)
        n = 0
        while time.monotonic() < end:
            size = rng.randrange(lo, hi + 1) & ~4095
            path = os.path.join(a.mnt, "f%d_%d.bin" % (t, n))
            n += 1
            if a.self_size:
                make_room(size)
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                try:
                    os.posix_fallocate(fd, 0, size)
                    done = 0
                    while done < size:
                        done += os.write(fd, chunk[: min(len(chunk), size - done)])
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                note("store " + path, e)
                with lock:
                    tot["failed"] += 1
                    if a.self_size:
                        cached[0] -= size
                try:
                    os.unlink(path)
                except OSError:
                    pass
                continue
            with lock:
                tot["stores"] += 1
                tot["stored_bytes"] += size
                if a.self_size:
                    lru.append((path, size))
                    pick = rng.choice(lru)[0]
                else:
                    pick = None
            if pick:
                try:
                    with open(pick, "rb") as f:
                        f.read(4096)
                except OSError as e:
                    with lock:
                        gone = e.errno == errno.ENOENT and any(p == pick for p, _ in lru)
                    if gone:
                        with lock:
                            tot["gone"] += 1
                    elif e.errno != errno.ENOENT:
                        note("read " + pick, e)

    ts = [threading.Thread(target=run, args=(t,)) for t in range(a.threads)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    tot["first_errors"] = errors
    print(json.dumps(tot), flush=True)


if __name__ == "__main__":
    main()
