#!/usr/bin/env python3
"""Sample the usage of a tree the way `du -s --block-size=1` counts it
(st_blocks * 512 of every entry, the root included, hard links once) every
INTERVAL seconds until STOPFILE exists (or 120 s pass); then print
{"samples": n, "peak": bytes, "last": bytes}.

usage: du_sampler.py ROOT STOPFILE [INTERVAL] [--statfs | --once]

A tree walk is not atomic: bytes freed in a part already visited and
written in a part not yet visited are both counted, so a walk can read high
by about (write rate x walk time).  With --statfs, ROOT must be the root of
a file system of its own (e.g. a tmpfs): used = (f_blocks - f_bfree) x
f_frsize is then one atomic reading of the same quantity.
"""
import json
import os
import sys
import time


def usage(root):
    seen = set()
    total = 0
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            st = os.lstat(d)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                        continue
                    s = e.stat(follow_symlinks=False)
                except OSError:
                    continue          # vanished between readdir and stat
                if s.st_nlink > 1:
                    if (s.st_dev, s.st_ino) in seen:
                        continue
                    seen.add((s.st_dev, s.st_ino))
                total += s.st_blocks * 512
    return total


def used(root):
    s = os.statvfs(root)
    return (s.f_blocks - s.f_bfree) * s.f_frsize


def main():
    root, stop = sys.argv[1], sys.argv[2]
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
    mode = sys.argv[4] if len(sys.argv) > 4 else ""
    if mode == "--once":
        print(usage(root))
        return
    measure = used if mode == "--statfs" else usage
    n, peak, last = 0, 0, 0
    end = time.monotonic() + 120
    while time.monotonic() < end:
        done = os.path.exists(stop)
        last = measure(root)
        n += 1
        peak = max(peak, last)
        if done:
            break
        time.sleep(interval)
    print(json.dumps({"samples": n, "peak": peak, "last": last}))


if __name__ == "__main__":
    main()
