#!/usr/bin/env python3
"""LMCache 0.5.6's own local disk tier (`LocalDiskBackend` over a
`LocalCPUBackend` with a `MixedMemoryAllocator`, no CUDA) against a boundfs
mount of 64 MiB with `pattern=*.pt` (LMCache's file names), on CPU tensors.

LMCache must be given its own limit at or below the mount's budget
(`max_local_disk_size`, here 56 MiB): 0.5.6 breaks when a file it indexes
disappears behind it (KeyError from get_blocking, a deadlock on the
prefetch path, FileNotFoundError out of remove()), so boundfs must never be
the one to evict its files. With that setting, asserted:
- requests in LMCache's shape (`contains(pin=True)` chunk by chunk for the
  prefix, `batched_get_blocking` of it, `batched_submit_put_task` of the
  rest on its disk worker threads; 2 MiB bf16 chunks of 256 tokens; 4
  conversations of 6 turns behind a shared 2-chunk system prompt, >= 3x
  max_size stored) load exact bytes, never raise;
- BACKING's usage, sampled atomically every 2 ms, never exceeds max_size + 1 MiB;
- every file LMCache indexes is still in BACKING at the end (boundfs evicted
  nothing behind it), the newest chunks are hits, and no temporary is left.
"""
import asyncio
import hashlib
import os
import threading
import time

import realfix
from realfix import MiB, check, log

import torch
from lmcache.utils import CacheEngineKey
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.memory_allocators.mixed_memory_allocator import MixedMemoryAllocator
from lmcache.v1.memory_management import MemoryFormat
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
from lmcache.v1.storage_backend.local_disk_backend import LocalDiskBackend

MAX = 64 * MiB
LMCACHE_LIMIT = 56 * MiB  # LMCache's own max_local_disk_size, below the budget
CHUNK_SHAPE = torch.Size([2, 1, 256, 2048])  # K and V, 256 tokens, bf16: 2 MiB
CHUNK = 2 * MiB
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CONVS, TURNS, GROWTH, SYSTEM = 4, 6, 4, 2
POLL = 60


def key_of(name):
    return CacheEngineKey(MODEL, 1, 0, int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big"),
                          torch.bfloat16)


def content(key):
    return realfix.block_bytes(key.to_string(), CHUNK)


class Engine:
    """One LMCache worker's disk tier."""

    def __init__(self, path):
        cfg = LMCacheEngineConfig.from_defaults(chunk_size=256, local_cpu=False, max_local_cpu_size=0.25,
                                                local_disk=path, max_local_disk_size=LMCACHE_LIMIT / 1024 ** 3)
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.cpu = LocalCPUBackend(cfg, memory_allocator=MixedMemoryAllocator(256 * MiB), dst_device="cpu")
        self.disk = LocalDiskBackend(cfg, self.loop, self.cpu, dst_device="cpu")
        self.c = dict(requests=0, stored=0, exact=0, missed=0)

    def wait_puts(self, keys):
        deadline = time.monotonic() + POLL
        while any(self.disk.exists_in_put_tasks(k) for k in keys):
            check(time.monotonic() < deadline, "puts not written within %d s" % POLL)
            time.sleep(0.002)

    def request(self, keys):
        n = 0
        while n < len(keys) and self.disk.contains(keys[n], pin=True):
            n += 1
        got = self.disk.batched_get_blocking(keys[:n]) if n else []
        for k, obj in zip(keys[:n], got):
            if obj is None:
                self.c["missed"] += 1
                continue
            check(obj.tensor.view(torch.uint8).numpy().tobytes() == content(k),
                  "get of %s returned other bytes than stored" % k.to_string())
            obj.ref_count_down()
            self.c["exact"] += 1
        for k in keys[:n]:
            self.disk.unpin(k)
        self.disk.touch_cache()
        new = keys[n:]
        objs = []
        for k in new:
            obj = self.cpu.allocate(CHUNK_SHAPE, torch.bfloat16, MemoryFormat.KV_2LTD)
            check(obj is not None, "LocalCPUBackend could not allocate a chunk")
            obj.tensor.view(torch.uint8).copy_(torch.frombuffer(bytearray(content(k)), dtype=torch.uint8)
                                               .view(obj.tensor.view(torch.uint8).shape))
            objs.append(obj)
        self.disk.batched_submit_put_task(new, objs)
        for obj in objs:
            obj.ref_count_down()
        self.wait_puts(new)
        self.c["stored"] += len(new)
        self.c["requests"] += 1
        return n


def main(m, backing):
    m.start(MAX, "pattern=*.pt")
    backing.start_sampler()
    t0 = time.monotonic()
    e = Engine(m.m("lmcache"))
    for t in range(TURNS):
        for c in range(CONVS):
            keys = [key_of("system/%d" % i) for i in range(SYSTEM)]
            keys += [key_of("conv%d/%d" % (c, i)) for i in range(GROWTH * (t + 1))]
            e.request(keys)
    c = e.c
    check(c["stored"] * CHUNK >= 3 * MAX, "only %d chunks stored" % c["stored"])
    check(c["exact"] > 0, "no request ever hit")
    check(c["missed"] == 0, "%d indexed chunks failed to load" % c["missed"])

    # boundfs evicted nothing behind LMCache: every indexed file is there
    with e.disk.disk_lock:
        paths = [meta.path for meta in e.disk.dict.values()]
    gone = [p for p in paths if not os.path.exists(m.b(os.path.relpath(p, m.mnt)))]
    check(not gone, "%d of %d files LMCache indexes are gone from BACKING" % (len(gone), len(paths)))
    last = [key_of("conv%d/%d" % (CONVS - 1, i)) for i in range(GROWTH * (TURNS - 1), GROWTH * TURNS)]
    check(all(e.disk.contains(k) for k in last), "the newest chunks are not hits")
    sample = backing.stop_sampler()
    realfix.check_peak(sample, MAX, "LMCache")
    left = realfix.temporaries(m.backing)
    check(not left, "temporaries left in BACKING: %s" % left[:5])
    m.check_budget()
    e.disk.close()
    log("LMCache: %d requests, %d chunks (%d MiB) stored = %.1fx max_size, loads %d exact / %d clean misses, "
        "%d files indexed at the end, peak usage %d / %d, %.1fs" % (
            c["requests"], c["stored"], c["stored"] * CHUNK // MiB, c["stored"] * CHUNK / MAX, c["exact"],
            c["missed"], len(paths), sample["peak"], MAX, realfix.elapsed(t0)))


if __name__ == "__main__":
    realfix.run(main, backing_size=4 * MAX)
