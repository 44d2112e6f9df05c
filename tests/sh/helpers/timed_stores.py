#!/usr/bin/env python3
"""A store load that times every store, for the fault scenarios.

usage: timed_stores.py ROOT --stop FILE [--threads T] [--size 2M] [--seed S]
           [--progress FILE] [--grace SECS]
           [--redis URL [--redis-netns /run/netns/NAME]]

T threads store vLLM-style blocks (blocks.py store_one, seeds S:0, S:1, ...)
under ROOT until FILE exists. Each store is timed from its start to its
return (wall clock). --progress: the number of stores returned so far is
written to that file after each (a scenario polls it). --redis: the
volume's usedSpace counter is sampled every 0.1 s meanwhile (its peak is
reported). Once FILE exists, stores in flight get --grace seconds (default
30) to return; those that have not are reported as stuck and the process
exits anyway (a store blocked in the filesystem is what is measured, not a
reason to hang).

Prints one line of JSON: stored, enospc, errors (by errno name), stuck,
max_s (the longest store), max_start (its start, time.time()), p50_s,
p99_s, slow (stores over 1 s: [start, seconds, result], the first 20),
peak_used and peak_at (time.time()) with --redis.
"""
import argparse
import errno
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blocks import content, dest_of, key, size_of  # noqa: E402
from occupancy_trace import RedisCounter  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))
from kvblocks import store_file  # noqa: E402  the one vLLM-style block writer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--stop", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--size", default="2M")
    ap.add_argument("--seed", default="t")
    ap.add_argument("--progress")
    ap.add_argument("--grace", type=float, default=30)
    ap.add_argument("--redis")
    ap.add_argument("--redis-netns")
    ap.add_argument("--trace", help="write every usedSpace sample here, 'time bytes' a line")
    a = ap.parse_args()
    size = size_of(a.size)
    lock = threading.Lock()
    res = {"stored": 0, "enospc": 0, "errors": {}}
    times = []  # (start, seconds, result)
    next_i = [0]
    running = [0]

    def one(i):
        h = key(a.seed, i)
        buf = content(size, h)  # made before the clock starts

        def data():
            return buf

        t0 = time.time()
        try:
            store_file(dest_of(a.root, h), data, direct=False)
            r = "stored"
        except OSError as e:
            r = errno.errorcode.get(e.errno, str(e.errno))
            print("%.3f store %s: %s" % (time.time(), h, e), file=sys.stderr, flush=True)
        dt = time.time() - t0
        with lock:
            if r == "stored":
                res["stored"] += 1
            elif r == "ENOSPC":
                res["enospc"] += 1
            else:
                res["errors"][r] = res["errors"].get(r, 0) + 1
            times.append((t0, dt, r))
            n = len(times)
        if a.progress:
            tmp = a.progress + ".tmp%d" % threading.get_ident()
            with open(tmp, "w") as f:
                f.write("%d\n" % n)
            os.replace(tmp, a.progress)

    def worker():
        while not os.path.exists(a.stop):
            with lock:
                i = next_i[0]
                next_i[0] += 1
                running[0] += 1
            one(i)
            with lock:
                running[0] -= 1

    peak = {"used": None, "at": None}
    sampling = threading.Event()

    trace = open(a.trace, "w", buffering=1) if a.trace else None

    def sampler():
        try:
            rc = RedisCounter(a.redis, a.redis_netns)
        except OSError as e:
            print("redis: %s" % e, file=sys.stderr)
            return
        while not sampling.is_set():
            try:
                v = rc.get("usedSpace")
            except OSError:
                break
            if peak["used"] is None or v > peak["used"]:
                peak["used"], peak["at"] = v, time.time()
            if trace:
                trace.write("%.3f %d\n" % (time.time(), v))
            time.sleep(0.1)

    if a.redis:
        threading.Thread(target=sampler, daemon=True).start()
    ths = [threading.Thread(target=worker, daemon=True) for _ in range(a.threads)]
    for t in ths:
        t.start()
    while not os.path.exists(a.stop):
        time.sleep(0.05)
    deadline = time.time() + a.grace
    for t in ths:
        t.join(max(0.0, deadline - time.time()))
    sampling.set()
    with lock:
        ts = sorted(t[1] for t in times)
        longest = max(times, key=lambda t: t[1]) if times else (None, 0.0, None)
        out = dict(res)
        out["stuck"] = running[0]
        out["max_s"] = round(longest[1], 3)
        out["max_start"] = longest[0]
        out["p50_s"] = round(ts[len(ts) // 2], 3) if ts else None
        out["p99_s"] = round(ts[min(len(ts) - 1, int(len(ts) * 0.99))], 3) if ts else None
        out["slow"] = [[round(s, 2), round(d, 2), r] for s, d, r in times if d > 1][:20]
        if a.redis:
            out["peak_used"], out["peak_at"] = peak["used"], peak["at"]
    print(json.dumps(out), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
