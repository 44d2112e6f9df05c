#!/usr/bin/env python3
"""Full-speed load on one or more nodes of the shared tier, measured from
outside the mounts (scripts/bench-shared.sh drives it).

usage: shared_bench.py --mnt ROOT [--mnt ROOT ...] --statfs FSROOT --max BYTES
           [--redis URL [--redis-netns /run/netns/NAME]] [--seconds S]
           [--block 2M] [--writers W] [--held H] [--age 1.0]
           [--load-every 0.2] [--low 0.9] [--self-evict] [--trace FILE]
           [--verify-root DIR]

One process per node (ROOT: that node's mount, or a plain JuiceFS client's
directory), so the nodes do not share one interpreter lock:
  - W writer threads store the node's own blocks back to back, unthrottled,
    the way the engines do (scripts/kvblocks.py store_file: makedirs,
    <dest>_<rand>.tmp with O_CREAT|O_EXCL|O_DIRECT, one aligned write, close,
    rename), after an exists() check; each store is timed from the exists()
    check to the rename's return (its content is made before the clock);
  - one loader reads, every --load-every seconds, one of the four newest
    blocks the next node (K+1 mod N; itself with one node) finished storing
    more than --age seconds ago, through this node's mount: a hit is the
    exact content, a miss ENOENT, anything else corrupt; with
    --verify-root DIR (the shared directory through a plain JuiceFS client,
    not a boundfs mount), each miss is read again there 1.2 s later (past
    the client's 1 s entry and attribute caches): the exact content then is
    a false miss (the block was there: keys are never stored twice, and it
    was stored more than --age seconds before the miss);
  - with --self-evict (no boundfs: the writer keeps the budget itself, as
    DESIGN.md's cost reference does) the node unlinks its own oldest blocks
    while it holds more than max_size / N of them.
Before the clock starts, node 1 stores H blocks and the last node opens them
(reads their first page) and keeps them open; at the end they are read
whole through the same descriptors and checked ("held open survival").

The sampler reads, every 0.1 s, the volume's used bytes two ways: the Redis
`usedSpace` counter of the JuiceFS volume (the truth every client updates;
--redis) and statvfs of FSROOT (a JuiceFS client's root, not a boundfs
mount; on JuiceFS 1.4 over Redis it is that counter plus the client's own
changes not yet added, tests/sh/helpers/occupancy_trace.py). The figures
(peak, time over max_size, occupancy) come from the counter when given,
else from statvfs; both series go to --trace.

With --verify-root, at the end (load stopped, every store returned) the
tree is walked there: its directories, block files (*.bin), temporaries
and other files (the shared tier's own, under .boundfs), in bytes as
JuiceFS counts them (4 KiB per directory, each file's length rounded up
to 4 KiB), with the counter read just before and after the walk.

Prints one line of JSON.
"""
import argparse
import errno
import json
import mmap
import multiprocessing as mp
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))
from blocks import dest_of, key, size_of  # noqa: E402
from kvblocks import store_file  # noqa: E402  the one vLLM-style block writer
from measure import used_bytes  # noqa: E402
from occupancy_trace import RedisCounter  # noqa: E402

RING = 1 << 16          # per node: completion times of its last RING blocks
STAMP_EVERY = 64 << 10  # the block's key is written at the start of every 64 KiB


class Content:
    """A block's bytes: one random base buffer (made once per process),
    the block's key stamped at every 64 KiB; cheap to make and to check
    (a 2 MiB block from blocks.content costs ~60 ms of this machine's CPU,
    which would pace the writers)."""

    def __init__(self, size):
        self.size = size
        self.base = random.Random("shared_bench").randbytes(size)

    def fill(self, buf, h):
        buf[:self.size] = self.base
        stamp = h.encode()
        for off in range(0, self.size, STAMP_EVERY):
            buf[off:off + len(stamp)] = stamp

    def bytes(self, h):
        b = bytearray(self.size)
        self.fill(b, h)
        return bytes(b)


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def node_main(k, a, size, issued, ring_i, ring_t, start, stop, out, inflight):
    """Node k's writers and loader; puts its results on `out`."""
    n = len(a.mnt)
    root = a.mnt[k]
    cont = Content(size)
    lock = threading.Lock()
    res = {"node": k + 1, "stored": 0, "enospc": 0, "errors": 0, "lat": [], "hits": 0, "misses": 0,
           "corrupt": 0, "self_evicted": 0, "first_errors": [], "false_misses": 0, "first_false_misses": []}
    recheck = []   # (when, key, path through the mount, seconds since stored) of misses to read again
    own = []   # with --self-evict: this node's blocks, oldest first
    budget = a.max // n

    def writer():
        buf = mmap.mmap(-1, size)
        counted = [False]

        def phase(tmp):
            # in flight from just before its WRITE (where the mount reserves
            # and may evict inline) until the rename has returned
            if tmp is not None and not counted[0]:
                with inflight[k].get_lock():
                    inflight[k].value += 1
                counted[0] = True
        while not stop.is_set():
            with issued[k].get_lock():
                i = issued[k].value
                issued[k].value += 1
            h = key("n%d" % (k + 1), i)
            dest = dest_of(root, h)
            cont.fill(buf, h)
            t0 = time.monotonic()
            try:
                if not os.path.exists(dest):
                    try:
                        store_file(dest, memoryview(buf)[:size], direct=True, phase=phase)
                    finally:
                        if counted[0]:
                            with inflight[k].get_lock():
                                inflight[k].value -= 1
                            counted[0] = False
                r = "stored"
            except OSError as e:
                r = "enospc" if e.errno == errno.ENOSPC else "errors"
                if r == "errors" and len(res["first_errors"]) < 5:
                    res["first_errors"].append("%s: %s" % (dest, e))
            t1 = time.monotonic()
            if r == "stored":
                slot = k * RING + i % RING
                ring_t[slot] = t1
                ring_i[slot] = i
            victims = []
            with lock:
                res[r] += 1
                if r == "stored" and t1 <= start.value + a.seconds:
                    res["lat"].append(t1 - t0)
                if a.self_evict and r == "stored":
                    own.append(dest)
                    while len(own) * size > budget:
                        victims.append(own.pop(0))
            for v in victims:
                try:
                    os.unlink(v)
                    with lock:
                        res["self_evicted"] += 1
                except OSError:
                    pass

    def loader():
        other = (k + 1) % n
        while not stop.is_set():
            now = time.monotonic()
            top = issued[other].value
            cands = []
            for i in range(top - 1, max(-1, top - 4096), -1):
                slot = other * RING + i % RING
                if ring_i[slot] == i and ring_t[slot] > 0 and ring_t[slot] <= now - a.age:
                    cands.append(i)
                    if len(cands) == 4:
                        break
            if cands:
                i = random.choice(cands)
                h = key("n%d" % (other + 1), i)
                try:
                    with open(dest_of(root, h), "rb") as f:
                        data = f.read()
                    r = "hits" if data == cont.bytes(h) else "corrupt"
                except FileNotFoundError:
                    r = "misses"
                except OSError:
                    r = "corrupt"
                with lock:
                    res[r] += 1
                    if r == "misses" and a.verify_root:
                        age = time.monotonic() - ring_t[other * RING + i % RING]
                        recheck.append((time.monotonic() + 1.2, h, age))
            stop.wait(a.load_every)

    def verifier():
        """Reads each miss again through the plain client, 1.2 s later."""
        while True:
            with lock:
                due = recheck[0] if recheck else None
            if due is None:
                if stop.is_set():
                    return
                stop.wait(0.1)
                continue
            when, h, age = due
            if time.monotonic() < when:
                time.sleep(min(0.1, when - time.monotonic()))
                continue
            with lock:
                recheck.pop(0)
            try:
                with open(dest_of(a.verify_root, h), "rb") as f:
                    there = f.read() == cont.bytes(h)
            except OSError:
                there = False
            if there:
                with lock:
                    res["false_misses"] += 1
                    if len(res["first_false_misses"]) < 5:
                        res["first_false_misses"].append("%s (stored %.2f s before the miss)" % (h, age))

    threads = [threading.Thread(target=writer) for _ in range(a.writers)] + [threading.Thread(target=loader)]
    if a.verify_root:
        threads.append(threading.Thread(target=verifier))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(res)


def stretches(series, limit):
    """Longest time (s) the series stayed above limit, one sample period
    counted per stretch."""
    longest, start, prev = 0.0, None, None
    for t, u in series:
        if u > limit:
            start = t if start is None else start
            longest = max(longest, t - start + (t - prev if prev is not None else 0.1))
        else:
            start = None
        prev = t
    return longest


def walk(root):
    """The tree at root, in bytes as JuiceFS counts them: directories (4 KiB
    each, root not included), block files (*.bin), temporaries (*.tmp),
    other files (each length rounded up to 4 KiB); names that vanish during
    the walk are skipped."""
    al = lambda n: (n + 4095) // 4096 * 4096  # noqa: E731
    t = {"dirs": 0, "bins": 0, "bin_bytes": 0, "tmp_bytes": 0, "other_bytes": 0, "other": {}}
    for d, dirs, files in os.walk(root):
        t["dirs"] += len(dirs)
        for f in files:
            try:
                n = al(os.lstat(os.path.join(d, f)).st_size)
            except OSError:
                continue
            if f.endswith(".bin"):
                t["bins"] += 1
                t["bin_bytes"] += n
            elif f.endswith(".tmp"):
                t["tmp_bytes"] += n
            else:
                t["other_bytes"] += n
                rel = os.path.relpath(os.path.join(d, f), root)
                t["other"][rel] = n
    t["dir_bytes"] = 4096 * t["dirs"]
    t["overhead_bytes"] = t["dir_bytes"] + t["other_bytes"]
    return t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mnt", action="append", required=True)
    p.add_argument("--statfs", required=True, metavar="FSROOT")
    p.add_argument("--max", type=int, required=True)
    p.add_argument("--redis")
    p.add_argument("--redis-netns")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--block", default="2M")
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--held", type=int, default=2)
    p.add_argument("--age", type=float, default=1.0)
    p.add_argument("--load-every", type=float, default=0.2)
    p.add_argument("--low", type=float, default=0.9)
    p.add_argument("--self-evict", action="store_true")
    p.add_argument("--trace")
    p.add_argument("--verify-root")
    a = p.parse_args()
    size = size_of(a.block)
    n = len(a.mnt)
    cont = Content(size)

    # held blocks: stored through node 1, held open through the last node
    held = [key("held", i) for i in range(a.held)]
    for h in held:
        store_file(dest_of(a.mnt[0], h), cont.bytes(h), direct=False)
    fds = [os.open(dest_of(a.mnt[-1], h), os.O_RDONLY) for h in held]
    for fd in fds:
        os.read(fd, 4096)

    ctx = mp.get_context("fork")
    issued = [ctx.Value("q", 0) for _ in range(n)]
    inflight = [ctx.Value("q", 0) for _ in range(n)]   # stores between their WRITE and their rename's return
    ring_i = ctx.Array("q", [-1] * (RING * n), lock=False)
    ring_t = ctx.Array("d", RING * n, lock=False)
    start = ctx.Value("d", 0.0)
    stop = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=node_main, args=(k, a, size, issued, ring_i, ring_t, start, stop, out, inflight))
             for k in range(n)]

    redis = RedisCounter(a.redis, a.redis_netns) if a.redis else None
    load0 = os.getloadavg()
    t0 = time.monotonic()
    start.value = t0
    for pr in procs:
        pr.start()
    samples = []   # (t, counter or None, statvfs, stores in flight)
    end = t0 + a.seconds
    while True:
        now = time.monotonic()
        if now >= end:
            break
        f0 = sum(v.value for v in inflight)
        c = redis.get("usedSpace") if redis else None
        s = used_bytes(a.statfs)
        f1 = sum(v.value for v in inflight)
        samples.append((round(now - t0, 3), c, s, max(f0, f1)))
        time.sleep(max(0.0, min(0.1, end - time.monotonic())))
    stop.set()
    results = [out.get() for _ in procs]
    for pr in procs:
        pr.join()
    secs = a.seconds
    load1 = os.getloadavg()

    held_ok = 0
    for h, fd in zip(held, fds):
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while True:
            try:
                b = os.read(fd, 1 << 20)
            except OSError:
                break
            if not b:
                break
            chunks.append(b)
        os.close(fd)
        held_ok += b"".join(chunks) == cont.bytes(h)

    tree = None
    if a.verify_root:
        time.sleep(1.2)   # past the plain client's entry and attribute caches
        before = redis.get("usedSpace") if redis else used_bytes(a.statfs)
        tree = walk(a.verify_root)
        tree["used_before_walk"] = before
        tree["used_after_walk"] = redis.get("usedSpace") if redis else used_bytes(a.statfs)

    src = "redis_usedSpace" if redis else "statvfs"
    series = [(t, c if redis else s) for t, c, s, _ in samples]
    peak = max(u for _, u in series)
    fill = next((i for i, (_, u) in enumerate(series) if u >= a.low * a.max), None)
    after = [u for _, u in series[fill:]] if fill is not None else []
    # with the stores in flight (a whole block each: their bytes may be
    # reserved, and paid for by an eviction, before JuiceFS counts them)
    after_inflight = [u + f * size for (_, u), (_, _, _, f) in zip(series[fill:], samples[fill:])] \
        if fill is not None else []
    results.sort(key=lambda r: r["node"])
    lat_all = [x for r in results for x in r["lat"]]
    ms = lambda x: None if x is None else round(x * 1000, 1)  # noqa: E731
    o = {
        "nodes": n,
        "seconds": secs,
        "max_size": a.max,
        "block": size,
        "writers_per_node": a.writers,
        "self_evict": a.self_evict,
        "usage_from": src,
        "samples": len(series),
        "peak": peak,
        "peak_over": peak - a.max,
        "peak_pct": round(100.0 * peak / a.max, 1),
        "peak_statvfs": max(s for _, _, s, _ in samples),
        "longest_over_s": round(stretches(series, a.max), 2),
        "time_over_s": round(sum(t1 - t0 for (t0, u), (t1, _) in zip(series, series[1:]) if u > a.max), 1),
        "filled_at_s": series[fill][0] if fill is not None else None,
        "floor": min(after) if after else None,
        "floor_pct": round(100.0 * min(after) / a.max, 1) if after else None,
        "floor_with_inflight": min(after_inflight) if after else None,
        "floor_with_inflight_pct": round(100.0 * min(after_inflight) / a.max, 1) if after else None,
        "max_inflight": max(f for _, _, _, f in samples),
        "mean_pct": round(100.0 * sum(after) / len(after) / a.max, 1) if after else None,
        "held_ok": held_ok,
        "held": len(held),
        "cross_hits": sum(r["hits"] for r in results),
        "cross_tries": sum(r["hits"] + r["misses"] + r["corrupt"] for r in results),
        "cross_corrupt": sum(r["corrupt"] for r in results),
        "cross_misses": sum(r["misses"] for r in results),
        "false_misses": sum(r["false_misses"] for r in results) if a.verify_root else None,
        "first_false_misses": [e for r in results for e in r["first_false_misses"]][:5],
        "used_at_start": series[0][1],
        "stores_per_s": [round(r["stored"] / secs, 1) for r in results],
        "mib_per_s": round(sum(r["stored"] for r in results) * size / secs / (1 << 20), 1),
        "lat_p50_ms": ms(pct(lat_all, 0.5)),
        "lat_p99_ms": ms(pct(lat_all, 0.99)),
        "lat_p50_ms_per_node": [ms(pct(r["lat"], 0.5)) for r in results],
        "lat_p99_ms_per_node": [ms(pct(r["lat"], 0.99)) for r in results],
        "store_errors": sum(r["errors"] for r in results),
        "enospc": sum(r["enospc"] for r in results),
        "first_errors": [e for r in results for e in r["first_errors"]][:5],
        "self_evicted": sum(r["self_evicted"] for r in results),
        "loadavg_start_end": [round(load0[0], 2), round(load1[0], 2)],
    }
    if tree is not None:
        o["tree_end"] = tree
    if a.trace:
        with open(a.trace, "w") as f:
            for t, c, s, fl in samples:
                f.write(json.dumps({"t": t, "usedSpace": c, "statvfs": s, "inflight": fl}) + "\n")
    print(json.dumps(o))
    return 0


if __name__ == "__main__":
    sys.exit(main())
