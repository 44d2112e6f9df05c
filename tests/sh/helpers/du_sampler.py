#!/usr/bin/env python3
"""Sample the usage of a tree every INTERVAL seconds (default 0.05) until
STOPFILE exists (or SECONDS pass, default 120; 0: no limit), taking one
reading after STOPFILE appears; then print
{"samples": n, "peak": bytes, "peak_at": seconds, "last": bytes}.

usage: du_sampler.py ROOT STOPFILE [INTERVAL] [--statfs] [--base BYTES]
                     [--seconds SECONDS]
       du_sampler.py ROOT --once [--statfs] [--base BYTES]

A reading is what `du -s --block-size=1 ROOT` counts (measure.du_bytes), a
walk that is not atomic: it can read high by about (write rate x walk
time). With --statfs, ROOT must be the root of a file system of its own
(e.g. a tmpfs): a reading is then its used bytes (measure.used_bytes), one
atomic reading of the same quantity. --base BYTES is subtracted from every
reading (an empty file system's own use). --once prints one reading, in
bytes, and exits.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import UsageSampler, du_bytes, used_bytes  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("stop", nargs="?")
    p.add_argument("interval", nargs="?", type=float, default=0.05)
    p.add_argument("--statfs", action="store_true")
    p.add_argument("--once", action="store_true")
    p.add_argument("--base", type=int, default=0)
    p.add_argument("--seconds", type=float, default=120)
    a = p.parse_args()
    measure = used_bytes if a.statfs else du_bytes
    if a.once:
        print(measure(a.root) - a.base)
        return
    if a.stop is None:
        p.error("STOPFILE is needed without --once")
    s = UsageSampler(lambda: measure(a.root) - a.base, a.interval)
    s.run(lambda: os.path.exists(a.stop), a.seconds or None)
    print(json.dumps({"samples": s.count, "peak": s.peak, "peak_at": s.peak_at, "last": s.last}), flush=True)


if __name__ == "__main__":
    main()
