#!/usr/bin/env python3
"""SGLang 0.5.23's own HiCache file backend (`HiCacheFile`, with its
`LRUFileEvictor`) against a boundfs mount of 64 MiB, on CPU tensors.

Requests in HiCache's shape: pages keyed by a hash chain; `exists` page by
page until the first miss (the prefix in storage), `batch_get` of that
prefix into host tensors, `batch_set` of the rest; two threads issue
requests at once, as SGLang's prefetch and backup threads do. Pages are
2 MiB bf16 tensors. Three instances, each >= 3x max_size stored, and a fourth:
1. model A, no engine-side limit, `enable_metadata_cache` (a long TTL):
   boundfs alone bounds the directory; a page evicted behind the cache is
   still "present" to `exists`, and `get` is then a clean miss (None);
2. model B with `min_free_space=16M` on the mount left full of model A's
   cold pages (which model B's evictor does not own, so cannot evict):
   every `set()` succeeds because statfs's f_bavail counts the bytes
   boundfs can evict (with f_bavail = max_size - usage, each was refused);
3. model C with SGLang's own LRU evictor (`max_size=1G`, clamped to the
   statfs total minus min_free_space) beside boundfs's;
4. model D in a directory of its own, made once at start-up: B's pages
   evict all 20 of D's, the directory stays, and D's next `set()` works.
Asserted throughout: every get is the exact bytes or None for a page gone
from BACKING, never an exception; BACKING's usage, sampled atomically every
2 ms, never exceeds max_size + 1 MiB; at the end the newest pages are hits
and no `.<uuid>.tmp` is left.
"""
import hashlib
import os
import threading
import time

import realfix
from realfix import MiB, check, log

import torch
from sglang.srt.mem_cache.hicache_storage import HiCacheFile, HiCacheStorageConfig

MAX = 64 * MiB
PAGE = 2 * MiB
MIN_FREE = "16M"  # SGLang's human_readable_int: 16,000,000 bytes


def storage(path, model, **extra):
    cfg = HiCacheStorageConfig(
        tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1, is_mla_model=False,
        enable_storage_metrics=False, is_page_first_layout=True, model_name=model,
        extra_config=dict(file_storage_path=path, **extra))
    return HiCacheFile(cfg)


def page_key(conv, i):
    """SGLang's page keys are hex sha256 of the token chain."""
    return hashlib.sha256(("%s/%d" % (conv, i)).encode()).hexdigest()


def page(key):
    return torch.frombuffer(bytearray(realfix.block_bytes(key, PAGE)), dtype=torch.uint8).view(torch.bfloat16)


class Driver:
    """Requests against one HiCacheFile, counted."""

    def __init__(self, m, h, what):
        self.m, self.h, self.what = m, h, what
        self.lock = threading.Lock()
        self.c = dict(requests=0, stored=0, refused=0, exact=0, missed=0, cache_misses=0)

    def add(self, **kw):
        with self.lock:
            for k, v in kw.items():
                self.c[k] += v

    def backing_path(self, key):
        return self.m.b(os.path.relpath(self.h.file_path, self.m.mnt), "%s%s.bin" % (key, self.h.config_suffix))

    def get(self, keys):
        """batch_get of `keys`: (exact, misses)."""
        targets = [torch.zeros(PAGE // 2, dtype=torch.bfloat16) for _ in keys]
        got = self.h.batch_get(keys, targets)
        exact = missed = 0
        for k, t, g in zip(keys, targets, got):
            if g is None:
                check(not os.path.exists(self.backing_path(k)), "%s: get(%s) None while the page is in BACKING"
                      % (self.what, k[:12]))
                missed += 1
            else:
                check(t.view(torch.uint8).numpy().tobytes() == realfix.block_bytes(k, PAGE),
                      "%s: get(%s) returned other bytes than stored" % (self.what, k[:12]))
                exact += 1
        return exact, missed

    def request(self, keys):
        n = 0
        while n < len(keys) and self.h.exists(keys[n]):
            n += 1
        exact, missed = self.get(keys[:n]) if n else (0, 0)
        stored = refused = 0
        for k in keys[n:] if not missed else keys:
            if self.h.set(k, page(k)):
                stored += 1
            else:
                refused += 1
        self.add(requests=1, exact=exact, missed=missed, stored=stored, refused=refused)

    def run(self, convs, turns, growth):
        """`convs` conversations of `turns` turns, each `growth` pages longer
        than the last, two threads (one per half of the conversations)."""
        errors = []

        def worker(mine):
            try:
                for t in range(turns):
                    for c in mine:
                        self.request([page_key("%s%d" % (self.what, c), i) for i in range(growth * (t + 1))])
            except BaseException as e:  # reported by the main thread
                errors.append(e)
        threads = [threading.Thread(target=worker, args=(range(i, convs, 2),)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        stored_bytes = self.c["stored"] * PAGE
        log("%s: %d requests, %d pages stored (%.1fx max_size), %d refused, gets %d exact / %d clean misses"
            % (self.what, self.c["requests"], self.c["stored"], stored_bytes / MAX, self.c["refused"],
               self.c["exact"], self.c["missed"]))
        check(self.c["refused"] == 0, "%s: set() refused %d of %d times (with min_free_space: statfs f_bavail must "
              "count what boundfs can evict)" % (self.what, self.c["refused"], self.c["refused"] + self.c["stored"]))
        check(stored_bytes >= 3 * MAX, "%s: only %d bytes stored" % (self.what, stored_bytes))
        return self.c


def main(m, backing):
    m.start(MAX)
    backing.start_sampler()
    t0 = time.monotonic()
    root = m.m("hicache")
    totals = dict(stored=0, exact=0, missed=0)

    # ---- 1. model A, boundfs alone, metadata cache on
    a = Driver(m, storage(root, "model/A", enable_metadata_cache=True, metadata_ttl=3600), "A")
    first = page_key("A0", 0)
    c = a.run(convs=4, turns=6, growth=4)
    check(not os.path.exists(a.backing_path(first)), "A: the first page was never evicted")
    check(a.h.exists(first), "A: the metadata cache no longer says the first page exists")
    got = a.h.get(first, torch.zeros(PAGE // 2, dtype=torch.bfloat16))
    check(got is None, "A: get of a page evicted behind the metadata cache is not None")
    log("A: metadata cache says an evicted page exists; its get is a clean miss (None)")
    for k in totals:
        totals[k] += c[k]

    # ---- 4 (set up before 2). model D in a directory of its own, which
    # SGLang makes once, at start-up: 20 pages; model B's pages then evict
    # them all. A fan-out leaf with one block, emptied by the same eviction,
    # shows when the reaper has run past both (see after 2).
    d = Driver(m, storage(m.m("hicache-d"), "model/D"), "D")
    for i in range(20):
        check(d.h.set(page_key("D", i), page(page_key("D", i))), "D: set() of page %d" % i)
    os.makedirs(m.m("fan", "x"))
    with open(m.m("fan", "x", "one.bin"), "wb") as f:
        f.write(b"x" * 4096)

    # ---- 2. model B gates on min_free_space, the mount full of A's cold pages
    v = os.statvfs(root)
    log("before B: f_bfree %d bytes, f_bavail %d bytes" % (v.f_bfree * v.f_frsize, v.f_bavail * v.f_frsize))
    b = Driver(m, storage(root, "model/B", min_free_space=MIN_FREE), "B")
    c = b.run(convs=4, turns=6, growth=4)
    for k in totals:
        totals[k] += c[k]

    # ---- 4. D's pages are evicted; once the emptied leaf is removed, D's
    # directory must still be there and take D's next page (it was removed
    # with its last page, and every later set() failed with ENOENT)
    def pending():
        check(os.path.isdir(m.b("hicache-d")), "D: its directory was removed when eviction emptied it")
        return os.path.exists(m.b("fan")) or any(n.endswith(".bin") for n in os.listdir(m.b("hicache-d")))
    deadline = time.monotonic() + 10
    while pending():
        check(time.monotonic() < deadline, "D's pages or the fan-out leaf still in BACKING 10 s after B's stores")
        time.sleep(0.05)
    check(d.h.set(page_key("D", 99), page(page_key("D", 99))), "D: set() after eviction emptied its directory")
    log("D: its directory stayed when eviction emptied it; the next set() stored")

    # ---- 3. model C with SGLang's own LRU evictor beside boundfs's
    cs = Driver(m, storage(root, "model/C", max_size="1G", min_free_space="8M"), "C")
    total = v.f_blocks * v.f_frsize
    check(cs.h._evictor.max_size_bytes == total - 8_000_000,
          "C: SGLang's cap %d, expected the statfs total %d minus min_free_space" % (cs.h._evictor.max_size_bytes, total))
    c = cs.run(convs=4, turns=6, growth=4)
    for k in totals:
        totals[k] += c[k]

    # ---- the end: the newest pages are hits
    last = [page_key("C3", i) for i in range(20, 24)]
    check(all(cs.h.exists(k) for k in last), "C: the newest pages are not all there")
    exact, missed = cs.get(last)
    check(exact == len(last), "C: the newest pages did not load (%d missed)" % missed)
    sample = backing.stop_sampler()
    realfix.check_peak(sample, MAX, "SGLang")
    left = realfix.temporaries(m.backing)
    check(not left, "temporaries left in BACKING: %s" % left[:5])
    m.check_budget()
    log("SGLang: %d requests, %d pages (%d MiB) stored = %.1fx max_size, gets %d exact / %d clean misses, "
        "peak usage %d / %d, %.1fs" % (a.c["requests"] + b.c["requests"] + cs.c["requests"], totals["stored"],
                                        totals["stored"] * PAGE // MiB, totals["stored"] * PAGE / MAX,
                                        totals["exact"], totals["missed"], sample["peak"], MAX, realfix.elapsed(t0)))


if __name__ == "__main__":
    realfix.run(main, backing_size=4 * MAX)
