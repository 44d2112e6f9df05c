#!/usr/bin/env python3
"""vLLM 0.33.0's own filesystem tier (`FileSystemTierManager`, tier type
`fs`, built by `SecondaryTierFactory`, with its C extension `vllm.fs_io_C`)
against a boundfs mount of 64 MiB, on CPU tensors.

Requests in vLLM's shape: look every block of the prompt up (async lookups,
answered after the step's flush), load the leading hits into the primary
(CPU) KV buffer in one job, store the rest from it (one job per 4 blocks, on
the tier's own 4+4 I/O threads). 4 conversations of 6 turns behind a shared
4-block system prompt, each turn 4 blocks (2 MiB, Llama-3.1-8B at 16 tokens)
longer than the last: 100 distinct blocks (200 MiB, 3.1x max_size), and
more stored again after their eviction (a miss is recomputed). Asserted:
- every loaded block is the exact bytes stored; a failed load job keeps its
  loaded prefix (exact too) and the rest is a miss, never an exception;
- BACKING's usage, sampled atomically every 2 ms, never exceeds max_size + 1 MiB;
- the O_DIRECT probe passes and the C extension is in use;
- a block looked up as a hit and evicted before its load fails the job
  cleanly, and the next lookup says miss;
- at the end the tier still serves hits, config.json is still there, and no
  temporary (`*.tmp`) is left.
"""
import errno
import hashlib
import logging
import mmap
import os
import time

import realfix
from realfix import MiB, check, log

import torch  # noqa: F401  (before vllm.fs_io_C: the extension needs torch's libraries)
import numpy as np
from vllm.v1.kv_offload import base as kvbase
from vllm.v1.kv_offload.config import (OffloadingCacheConfig, OffloadingConfig, OffloadingGroupConfig,
                                       OffloadingModelConfig, OffloadingParallelConfig)
from vllm.v1.kv_offload.tiering import base as tbase
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory
from vllm.v1.kv_offload.tiering.fs import io as fsio

MAX = 64 * MiB
BLOCK = 2 * MiB
SLOTS = 32  # blocks in the primary (CPU) KV buffer
CONVS, TURNS, GROWTH, SYSTEM = 4, 6, 4, 4
POLL = 60  # seconds any one job or lookup may take


class Spec(kvbase.OffloadingSpec):
    """The offloading spec the tier reads its configuration from (the
    scheduler/worker factories are not used by a tier)."""

    def get_manager(self):
        raise NotImplementedError

    def get_worker(self, kv_caches):
        raise NotImplementedError


def make_spec():
    cfg = OffloadingConfig(
        groups=(OffloadingGroupConfig(tokens_per_block=16, layer_names=("model.layers.0.self_attn",), group_id=0),),
        worker_kv_bytes_per_block=BLOCK, enable_kv_cache_events=False, extra_config={}, engine_id="boundfs-test",
        model=OffloadingModelConfig(name="meta-llama/Llama-3.1-8B-Instruct", dtype="bfloat16"),
        cache=OffloadingCacheConfig(tokens_per_hash=16, blocks_per_chunk=1),
        parallel=OffloadingParallelConfig(rank=0, world_size=1, tp_size=1, pp_size=1, pcp_size=1, dcp_size=1,
                                          data_parallel_index=0, data_parallel_size=1,
                                          data_parallel_rank_local=None, is_parallelism_agnostic=True))
    return Spec(cfg)


def key_of(name):
    return kvbase.make_offload_key(hashlib.sha256(name.encode()).digest(), 0)


def content(key):
    return realfix.block_bytes(key.hex(), BLOCK)


class IoErrors(logging.Handler):
    """The tier's I/O thread pool logs each failed task ("Job N block I/O
    failed: <exception>"): kept here to see which errno failed a job."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.lines = []
        logging.getLogger("vllm.v1.kv_offload.tiering.fs.thread_pool").addHandler(self)

    def emit(self, record):
        self.lines.append(record.getMessage())

    def take(self):
        lines, self.lines = self.lines, []
        return lines


class Engine:
    """The scheduler and worker side of one vLLM instance around the tier."""

    def __init__(self, root):
        # the primary KV buffer is page-aligned, as vLLM's (pinned or shared
        # mmap) CPU buffers are: O_DIRECT needs aligned user buffers
        self.mem = mmap.mmap(-1, SLOTS * BLOCK)
        self.kv = torch.frombuffer(self.mem, dtype=torch.uint8).view(SLOTS, BLOCK)
        self.view = memoryview(self.kv.numpy())
        self.errors = IoErrors()
        self.tier = SecondaryTierFactory.create_secondary_tier(
            {"type": "fs", "root_dir": root, "n_read_threads": 4, "n_write_threads": 4}, self.view, make_spec())
        self.next_job = 0
        self.next_req = 0
        self.counts = dict(requests=0, stored=0, stored_bytes=0, exact=0, missed=0, failed_loads=0)

    def ctx(self):
        self.next_req += 1
        c = kvbase.ReqContext(req_id="req-%d" % self.next_req)
        self.tier.on_new_request(c)
        return c

    def step(self):
        self.tier.on_schedule_end(kvbase.ScheduleEndContext(new_req_ids=(), preempted_req_ids=()))

    def lookup(self, keys, ctx):
        """vLLM's lookups: RETRY until the step's flush has been answered."""
        deadline = time.monotonic() + POLL
        while True:
            res = [self.tier.lookup(k, ctx) for k in keys]
            if kvbase.LookupResult.RETRY not in res:
                return res
            check(time.monotonic() < deadline, "lookups not answered within %d s" % POLL)
            self.step()
            time.sleep(0.001)

    def submit(self, keys, slots, ctx, load):
        self.next_job += 1
        job = tbase.TransferJob(job_id=self.next_job, keys=list(keys), chunk_ids=np.array(slots, dtype=np.int64),
                                is_promotion=load, req_context=ctx)
        (self.tier.submit_load if load else self.tier.submit_store)(job)
        return self.next_job

    def wait(self, jobs):
        """JobResult of each job id, waiting (bounded) for them to finish."""
        want, got = set(jobs), {}
        deadline = time.monotonic() + POLL
        while want - set(got):
            for r in self.tier.get_finished_jobs():
                got[r.job_id] = r
            check(time.monotonic() < deadline, "jobs %s not finished within %d s" % (sorted(want - set(got)), POLL))
            time.sleep(0.001)
        return got

    def check_slot(self, slot, key, what):
        check(self.kv[slot].numpy().tobytes() == content(key), "%s: loaded bytes of %s differ from the stored ones"
              % (what, key.hex()[:12]))

    def load(self, keys, ctx, what):
        """Load `keys` into slots 0..; returns how many loaded (a prefix)."""
        self.kv[: len(keys)].zero_()
        r = self.wait([self.submit(keys, range(len(keys)), ctx, load=True)])[self.next_job]
        n = len(keys) if r.success else len(r.successful_keys or ())
        errors = self.errors.take()
        if not r.success:
            self.counts["failed_loads"] += 1
            enoent = "[Errno %d]" % errno.ENOENT
            check(errors and all(enoent in e for e in errors),
                  "%s: a load failed for another reason than a missing (evicted) file: %s" % (what, errors))
            check(tuple(r.successful_keys or ()) == tuple(keys[:n]), "%s: the kept keys are not a prefix" % what)
        for i in range(n):
            self.check_slot(i, keys[i], what)
        self.counts["exact"] += n
        self.counts["missed"] += len(keys) - n
        return n

    def store(self, keys, first_slot, ctx, what):
        """Fill slots first_slot.. with the blocks' bytes and store them, 4
        blocks a job, all jobs in flight at once."""
        jobs = []
        for i in range(0, len(keys), 4):
            part = keys[i:i + 4]
            slots = list(range(first_slot + i, first_slot + i + len(part)))
            for s, k in zip(slots, part):
                self.kv[s] = torch.frombuffer(bytearray(content(k)), dtype=torch.uint8)
            jobs.append(self.submit(part, slots, ctx, load=False))
        for j, r in self.wait(jobs).items():
            check(r.success, "%s: store job %d failed: %s" % (what, j, self.errors.take()))
        self.counts["stored"] += len(keys)
        self.counts["stored_bytes"] += len(keys) * BLOCK

    def request(self, keys, what):
        """One request: lookup, load the leading hits, store the rest."""
        ctx = self.ctx()
        res = self.lookup(keys, ctx)
        hits = next((i for i, r in enumerate(res) if r != kvbase.LookupResult.HIT), len(keys))
        loaded = self.load(keys[:hits], ctx, what) if hits else 0
        self.store(keys[loaded:], loaded, ctx, what)
        self.tier.on_request_finished(ctx)
        self.counts["requests"] += 1
        return loaded


def main(m, backing):
    m.start(MAX)
    backing.start_sampler()
    t0 = time.monotonic()
    e = Engine(m.mnt)
    check(fsio._HAS_FSIO_C, "vllm.fs_io_C did not load: the C store/load path is not under test")
    check(e.tier._use_o_direct, "vLLM's O_DIRECT probe failed on the mount: it fell back to buffered I/O")
    config = e.tier.file_mapper.get_config_file_path()
    config_b = m.b(os.path.relpath(config, m.mnt))
    check(os.path.exists(config_b), "config.json not written")
    log("tier up: O_DIRECT probe passed, fs_io_C in use, %s" % os.path.relpath(config, m.mnt))

    # ---- 4 conversations x 8 turns, round robin
    hit_blocks = 0
    for t in range(TURNS):
        for c in range(CONVS):
            keys = [key_of("system/%d" % i) for i in range(SYSTEM)]
            keys += [key_of("system/conv%d/%d" % (c, i)) for i in range(GROWTH * (t + 1))]
            hit_blocks += e.request(keys, "conv %d turn %d" % (c, t))
    check(hit_blocks > 0, "no request ever hit")
    s = m.stats()
    check(s["evictions"] > 0, "boundfs never evicted: the workload did not press on the budget")
    log("conversations: %(requests)d requests, %(stored)d blocks stored, %(exact)d loaded exact, "
        "%(missed)d missed" % e.counts + ", %d evictions" % s["evictions"])

    # ---- hit at lookup, evicted before the load
    ctx = e.ctx()
    victim = key_of("victim")
    e.request([victim], "victim store")
    check(e.lookup([victim], ctx) == [kvbase.LookupResult.HIT], "victim not a hit right after its store")
    victim_b = m.b(os.path.relpath(e.tier.file_mapper.get_file_name(victim), m.mnt))
    filler = []
    while os.path.exists(victim_b):
        check(len(filler) < 2 * MAX // BLOCK, "victim still in BACKING after %d more blocks" % len(filler))
        filler.append(key_of("filler%d" % len(filler)))
        e.request([filler[-1]], "filler")
    newest = filler[-1]
    check(e.lookup([newest], ctx) == [kvbase.LookupResult.HIT], "newest block not a hit")
    n = e.load([newest, victim], ctx, "hit then evicted")
    check(n == 1, "load of [present, evicted]: %d blocks kept, expected the present one" % n)
    check(e.lookup([victim], ctx) == [kvbase.LookupResult.MISS], "lookup after the failed load is not a miss")
    e.tier.on_request_finished(ctx)
    check(e.lookup([victim], e.ctx()) == [kvbase.LookupResult.MISS], "a fresh lookup of the evicted block is not a miss")
    log("hit then evicted (after %d more blocks): the job failed cleanly, prefix kept, next lookup a miss" % len(filler))

    # ---- still serving at the end
    last = filler[-8:]
    ctx = e.ctx()
    check(e.lookup(last, ctx) == [kvbase.LookupResult.HIT] * len(last), "the 8 newest blocks are not all hits")
    check(e.load(last, ctx, "final") == len(last), "final load failed")
    e.tier.on_request_finished(ctx)
    e.tier.drain_jobs()
    e.tier.shutdown()
    sample = backing.stop_sampler()
    realfix.check_peak(sample, MAX, "vLLM")
    check(os.path.exists(config_b), "config.json was evicted")
    left = realfix.temporaries(m.backing)
    check(not left, "temporaries left in BACKING: %s" % left[:5])
    m.check_budget()
    c = e.counts
    log("vLLM: %d requests, %d blocks (%d MiB) stored = %.1fx max_size, loads %d exact / %d clean misses "
        "(%d failed jobs), peak usage %d / %d, %.1fs" % (
            c["requests"], c["stored"], c["stored_bytes"] // MiB, c["stored_bytes"] / MAX, c["exact"], c["missed"],
            c["failed_loads"], sample["peak"], MAX, realfix.elapsed(t0)))


if __name__ == "__main__":
    realfix.run(main, backing_size=4 * MAX)
