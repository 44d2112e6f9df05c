#!/usr/bin/env python3
"""Replays a prefix-sharing request trace through a directory, vLLM-style
(Python 3 standard library only), for scripts/bench.sh.

The trace is JSON lines with a `hash_ids` list per request (the Mooncake
synthetic trace in ../shared/traces/ has that shape): a request's blocks are a
prefix chain, and an engine with prefix caching can reuse them only up to the
first one it does not have. Per request, in trace order, on one of --threads
threads (closed loop, the timestamps are ignored):

  1. probe: access(F_OK) of each block's path until the first miss;
  2. load the hit prefix: open(O_RDONLY|O_DIRECT), one readv() into an aligned
     buffer, close; every byte is checked against the block's pattern. A load
     that fails (the block was evicted between probe and load) or comes back
     short ends the prefix there: the rest is stored, as vLLM recomputes it;
  3. store the rest: exists? ; makedirs ; open(<dest>_<rand>.tmp,
     O_CREAT|O_EXCL|O_WRONLY|O_TRUNC|O_DIRECT) ; one write() ; close ; rename.

Block i lives at ROOT/h[0:3]/h[3:5]/h.bin with h = sha256("trace:<i>"), and
holds the 8-byte little-endian id i repeated. Prints one JSON line:
  {"op": "trace", "requests", "refs", "hits", "stores", "loads", "load_misses",
   "bytes", "seconds", "errors", "direct"}
   "lat_us", "cpu_s"[, "lru"]}
where `hits` counts block references served from the directory, `seconds`
covers only the replay, and `errors` counts wrong bytes and failures other
than a load's ENOENT (a clean miss). `lat_us` has the count, p50 and p99 in
microseconds of each probe (one exists()), load (open, readv, close) and
store (from its exists() to its rename, with any eviction the replayer does
itself); `cpu_s` is this process's user+system CPU over the replay.

With --lru-budget BYTES the replayer is the fair native baseline of a
bounded mount: it keeps ROOT within BYTES itself, by an exact LRU over its
own loads and stores (kvbench.BudgetLRU: a load and a store make a block
most recent; before a store it unlinks its least recently used blocks, and
removes the directories they emptied, until the block fits; it counts block
files and directories as du does, as boundfs counts usage). "lru" then has
the blocks held at the end, evictions and peak bytes counted.

  trace.py run ROOT      replay the trace into ROOT
  trace.py lru N         hit ratio of an ideal block LRU holding N blocks,
                         over the same requests (sequential, no I/O)
  trace.py distinct      distinct blocks in the requests replayed
  trace.py requests BEFORE AFTER RUN MAX
                         from two boundfs status JSONs taken around a run
                         and the run's JSON line: FUSE requests per stored
                         block (all requests of the run / blocks stored),
                         daemon syscalls per FUSE request and per stored
                         block; fails when usage
                         went over MAX bytes + 1 MiB
  trace.py loadpass BACKING MNT N
                         loads (O_DIRECT, bytes checked) N block files of
                         BACKING through MNT twice; prints the FUSE requests
                         per loaded block of each pass (the second with the
                         kernel's entries cached), and each pass's requests
                         by opcode (the status reads' GETXATTRs left out)
"""

import argparse
import collections
import errno
import json
import os
import queue
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kvbench import O_DIRECT, BudgetLRU, Errors, aligned_buffer, block_hash, direct_write_works, percentiles  # noqa: E402
from kvblocks import parse_size, store_file  # noqa: E402  (kvbench put scripts/ on the path)

# ../shared next to the repository (as in CI), or $BOUNDFS_SHARED
SHARED = os.environ.get("BOUNDFS_SHARED") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared")
DEFAULT_TRACE = os.path.join(SHARED, "traces", "mooncake_synthetic_trace.jsonl")


def read_trace(path, limit):
    """The first `limit` requests' hash_id chains, as lists of ints."""
    chains = []
    with open(path) as f:
        for line in f:
            if len(chains) >= limit:
                break
            line = line.strip()
            if line:
                chains.append(json.loads(line)["hash_ids"])
    return chains


def pattern(block_id, size):
    return struct.pack("<Q", block_id) * (size // 8)


def path_of(root, block_id):
    h = block_hash("trace", block_id)
    return os.path.join(root, h[0:3], h[3:5] + "_g0", h + ".bin")


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = collections.Counter()

    def add(self, **kw):
        with self.lock:
            self.c.update(kw)


def cmd_run(a):
    a.root = os.path.abspath(a.root)  # BudgetLRU counts directories up to it
    chains = read_trace(a.trace, a.requests)
    size = a.block_size
    err = Errors()
    counts = Counts()
    direct = not a.buffered and direct_write_works(a.root)
    odirect = O_DIRECT if direct else 0
    lru = BudgetLRU(a.root, a.lru_budget, size) if a.lru_budget else None
    work = queue.Queue()
    for chain in chains:
        work.put(chain)
    clock = time.perf_counter_ns
    lat = {"probe": [], "load": [], "store": []}  # ns per call, all threads
    lat_lock = threading.Lock()

    def load(buf, bid, mine):
        """True when the block was read whole and exact; False on a clean miss."""
        p = path_of(a.root, bid)
        t0 = clock()
        try:
            fd = os.open(p, os.O_RDONLY | odirect)
        except FileNotFoundError:
            return False
        try:
            n = os.readv(fd, [buf])
        finally:
            os.close(fd)
        mine.append(clock() - t0)
        if n != size:
            counts.add(short_loads=1)
            return False
        if buf[:size] != pattern(bid, size):
            err.add(f"wrong bytes in block {bid} ({p})")
            return False
        if lru:
            lru.touch(p)
        return True

    def store(buf, bid, mine):
        dest = path_of(a.root, bid)
        t0 = clock()
        if os.path.exists(dest):
            if lru:
                lru.touch(dest)
            return False
        def content():
            buf[:size] = pattern(bid, size)
            return buf

        if lru:
            stored = lru.store(dest, lambda p: store_file(p, content, direct=direct))
        else:
            store_file(dest, content, direct=direct)
            stored = True
        mine.append(clock() - t0)
        return stored

    def worker():
        buf = aligned_buffer(size, b"")
        mine = {k: [] for k in lat}
        while True:
            try:
                chain = work.get_nowait()
            except queue.Empty:
                break
            hit = 0
            for bid in chain:
                t0 = clock()
                there = os.path.exists(path_of(a.root, bid))
                mine["probe"].append(clock() - t0)
                if not there:
                    break
                hit += 1
            loaded = 0
            for bid in chain[:hit]:
                try:
                    if not load(buf, bid, mine["load"]):
                        break
                except OSError as e:
                    err.add(f"load {bid}: {e}")
                    break
                loaded += 1
            stored = 0
            for bid in chain[loaded:]:
                try:
                    stored += store(buf, bid, mine["store"])
                except OSError as e:
                    if e.errno == errno.ENOSPC:
                        counts.add(enospc=1)
                    err.add(f"store {bid}: {e}")
            counts.add(refs=len(chain), hits=loaded, load_misses=hit - loaded, stores=stored, loads=loaded)
        with lat_lock:
            for k, v in mine.items():
                lat[k] += v

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(a.threads)]
    cpu0 = os.times()
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    cpu1 = os.times()
    c = counts.c
    out = {
        "op": "trace",
        "requests": len(chains),
        "refs": c["refs"],
        "hits": c["hits"],
        "stores": c["stores"],
        "loads": c["loads"],
        "load_misses": c["load_misses"],
        "short_loads": c["short_loads"],
        "enospc": c["enospc"],
        "bytes": (c["stores"] + c["loads"]) * size,
        "seconds": round(secs, 6),
        "errors": err.n,
        "direct": direct,
        "lat_us": {k: percentiles(v) for k, v in lat.items()},
        "cpu_s": round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 3),
    }
    if lru:
        out["lru"] = lru.summary()
    print(json.dumps(out), flush=True)


def ideal_lru(chains, capacity):
    """Hit ratio of a block LRU holding `capacity` blocks: per request, the
    prefix present is a hit (and made most recent), the rest is inserted."""
    lru = collections.OrderedDict()
    refs = hits = 0
    for chain in chains:
        refs += len(chain)
        i = 0
        while i < len(chain) and chain[i] in lru:
            lru.move_to_end(chain[i])
            i += 1
        hits += i
        for bid in chain[i:]:
            lru[bid] = None
            lru.move_to_end(bid)
            if len(lru) > capacity:
                lru.popitem(last=False)
    return hits / refs if refs else 0.0


def cmd_lru(a):
    chains = read_trace(a.trace, a.requests)
    print(json.dumps({"op": "lru", "capacity": a.n, "hit_ratio": round(ideal_lru(chains, a.n), 6)}))


def cmd_distinct(a):
    chains = read_trace(a.trace, a.requests)
    print(len({b for c in chains for b in c}))


def total_requests(status):
    return sum(status.get("requests", {}).values())


def cmd_requests(a):
    before, after = (json.load(open(p)) for p in (a.before, a.after))
    run = json.loads(open(a.run).read().splitlines()[-1])
    if after["usage"] > a.max + (1 << 20):
        sys.exit(f"usage {after['usage']} > max_size {a.max} + 1 MiB")
    if "requests" not in after:
        print(json.dumps({"per_store": None, "syscalls_per_request": None, "syscalls_per_store": None}))
        return
    reqs = total_requests(after) - total_requests(before)
    calls = after.get("syscalls", 0) - before.get("syscalls", 0)
    out = {
        "requests": reqs,
        "per_store": round(reqs / run["stores"], 3) if run["stores"] else None,
        "syscalls_per_request": round(calls / reqs, 3) if reqs else None,
        "syscalls_per_store": round(calls / run["stores"], 3) if run["stores"] else None,
        "by_opcode": {
            k: v - before.get("requests", {}).get(k, 0)
            for k, v in sorted(after["requests"].items())
            if v != before.get("requests", {}).get(k, 0)
        },
    }
    print(json.dumps(out))


def read_status(mnt):
    return json.loads(os.getxattr(mnt, "user.boundfs.stats"))


def cmd_loadpass(a):
    names = []
    for d, _, files in os.walk(a.backing):
        names += [os.path.relpath(os.path.join(d, f), a.backing) for f in files if f.endswith(".bin")]
        if len(names) >= a.n:
            break
    names = names[: a.n]
    buf = aligned_buffer(max(os.path.getsize(os.path.join(a.backing, n)) for n in names), b"")
    out = {"op": "loadpass", "blocks": len(names)}
    for label in ("first", "again"):
        before = read_status(a.mnt)
        for n in names:
            fd = os.open(os.path.join(a.mnt, n), os.O_RDONLY | O_DIRECT)
            try:
                os.readv(fd, [buf])
            finally:
                os.close(fd)
        after = read_status(a.mnt)
        out[f"per_load_{label}"] = round((total_requests(after) - total_requests(before)) / len(names), 3)
        # by FUSE opcode, the status read's own GETXATTR left out
        got = {k: v - before.get("requests", {}).get(k, 0) for k, v in after.get("requests", {}).items()}
        out[f"by_opcode_{label}"] = {k: v for k, v in sorted(got.items()) if v and k != "GETXATTR"}
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default=DEFAULT_TRACE, help="JSON-lines trace (default: ../shared/traces/mooncake)")
    p.add_argument("--requests", type=int, default=1000, help="first N requests of the trace (default 1000)")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("root")
    r.add_argument("--block-size", type=int, default=64 << 10, help="bytes per block, a multiple of 4096")
    r.add_argument("--threads", type=int, default=4)
    r.add_argument("--buffered", action="store_true", help="no O_DIRECT")
    r.add_argument("--lru-budget", type=parse_size, metavar="BYTES",
                   help="the native baseline of a bounded mount: keep ROOT within BYTES by an exact in-process LRU")
    r.set_defaults(fn=cmd_run)
    lr = sub.add_parser("lru")
    lr.add_argument("n", type=int, help="blocks the ideal LRU holds")
    lr.set_defaults(fn=cmd_lru)
    d = sub.add_parser("distinct")
    d.set_defaults(fn=cmd_distinct)
    rq = sub.add_parser("requests")
    rq.add_argument("before")
    rq.add_argument("after")
    rq.add_argument("run")
    rq.add_argument("max", type=int)
    rq.set_defaults(fn=cmd_requests)
    lp = sub.add_parser("loadpass")
    lp.add_argument("backing")
    lp.add_argument("mnt")
    lp.add_argument("n", type=int)
    lp.set_defaults(fn=cmd_loadpass)
    a = p.parse_args()
    if getattr(a, "block_size", 4096) % 4096:
        p.error("--block-size must be a multiple of 4096 (O_DIRECT)")
    if not os.path.exists(a.trace):
        p.error(f"trace not found: {a.trace} (give --trace PATH)")
    a.fn(a)


if __name__ == "__main__":
    main()
