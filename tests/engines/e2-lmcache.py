#!/usr/bin/env python3
"""Replay: LMCache local disk backend.

The calls, as /work/shared/ENGINES.md lists them:
  * a flat directory of `<key with "/" replaced>.pt` files (mounted with
    pattern=*.pt so they are the block files);
  * each file written in place: open("wb") -> write -> close; no tmp file,
    no rename;
  * read with readinto into a preallocated buffer; ENOENT is a miss (the
    engine's own index is in memory and does not know about eviction);
  * O_DIRECT only when configured and size % statvfs(dir).f_bsize == 0: so
    f_bsize from the mount decides it, and it must divide block-aligned
    chunk sizes (multiples of 256 KiB).
Budget 24 MiB with 1.25 MiB and 1.5 MiB chunks: eviction runs. A file held
open while being written is never evicted, even when it is the oldest.
"""
import errno
import os

import fixture as F
from fixture import KiB, MiB, check, log

MAX = 24 * MiB
ALIGNED = 5 * 256 * KiB            # 1.25 MiB: a multiple of 256 KiB
UNALIGNED = 6 * 256 * KiB + 100    # 1.5 MiB + 100 bytes: never O_DIRECT


def key_name(i, size):
    # LMCache's key string with "/" replaced, plus the .pt suffix
    return "vllm@meta-llama-Llama-3.1-8B@1@0@%016x-%d.pt" % (i * 0x9E3779B97F4A7C15 & (2**64 - 1), size)


class LocalDisk:
    """The engine side: the calls of put / get, O_DIRECT chosen by size."""

    def __init__(self, path):
        self.path = path
        self.bsize = os.statvfs(path).f_bsize

    def use_direct(self, size):
        return size % self.bsize == 0

    def put(self, name, size):
        data = F.block_bytes(name, size)
        p = os.path.join(self.path, name)
        if self.use_direct(size):
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
            with os.fdopen(fd, "wb", buffering=0) as f:
                n = f.write(F.aligned(data))
        else:
            with open(p, "wb") as f:
                n = f.write(data)
        check(n == size, "put %s: wrote %d of %d" % (name, n, size))

    def get(self, name, size):
        """readinto a preallocated buffer; raises OSError (ENOENT = miss)."""
        p = os.path.join(self.path, name)
        if self.use_direct(size):
            buf = F.aligned_empty(size)
            fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
            with os.fdopen(fd, "rb", buffering=0) as f:
                n = f.readinto(buf)
        else:
            buf = bytearray(size)
            with open(p, "rb") as f:
                n = f.readinto(buf)
        check(n == size, "get %s: readinto returned %d of %d" % (name, n, size))
        check(bytes(buf[:size]) == F.block_bytes(name, size), "get %s: wrong bytes" % name)


def main(m):
    m.start(MAX, "pattern=*.pt")
    store = os.path.join(m.mnt, "lmcache")
    os.mkdir(store)
    disk = LocalDisk(store)

    # --- statfs decides O_DIRECT: f_bsize must divide 256 KiB-aligned sizes
    bs = disk.bsize
    check(bs >= 512 and bs & (bs - 1) == 0, "f_bsize %d is not a power of two >= 512" % bs)
    for k in (1, 2, 5, 8, 16):
        check(disk.use_direct(k * 256 * KiB), "size %d %% f_bsize %d != 0: LMCache would not use O_DIRECT" % (k * 256 * KiB, bs))
    check(not disk.use_direct(UNALIGNED), "an unaligned size would be read with O_DIRECT")
    log("statfs f_bsize %d: 256 KiB multiples take the O_DIRECT path" % bs)

    # --- a chunk being written, held open, while stores push past the budget
    held = key_name(0, ALIGNED)
    data = F.block_bytes(held, ALIGNED)
    hp = os.path.join(store, held)
    f = open(hp, "wb")
    half = ALIGNED // 2
    f.write(data[:half])
    f.flush()
    index = {}                                 # LMCache's in-memory index: name -> size
    for i in range(1, 41):                     # ~55 MiB through a 24 MiB budget
        size = ALIGNED if i % 2 else UNALIGNED
        name = key_name(i, size)
        disk.put(name, size)
        index[name] = size
        check(os.path.exists(m.b("lmcache", held)), "the chunk held open for writing was evicted (after %d puts)" % i)
    s = m.stats()
    check(s["evictions"] > 0, "55 MiB of puts through a 24 MiB budget evicted nothing")
    check(s["enospc"] == 0, "ENOSPC although evictable chunks existed")
    f.write(data[half:])
    f.close()
    index[held] = ALIGNED
    disk.get(held, ALIGNED)
    log("40 puts with a chunk held open: %d evictions, held chunk intact" % s["evictions"])

    # --- gets: hit = exact bytes, evicted = ENOENT (a miss), nothing else
    m.wait_settled()
    hits = misses = 0
    for name, size in index.items():
        in_backing = os.path.exists(m.b("lmcache", name))
        if in_backing and F.hit_or_evicted(lambda: disk.get(name, size), m.b("lmcache", name), "get %s" % name):
            hits += 1
        else:
            F.expect_errno(errno.ENOENT, lambda: disk.get(name, size), "get of evicted chunk %s" % name)
            misses += 1
    check(misses > 0 and hits > 0, "expected both hits and misses, got %d/%d" % (hits, misses))
    newest = list(index)[-9:-1]                # the last 8 puts (~11 MiB) must have survived
    for name in newest:
        check(os.path.exists(m.b("lmcache", name)), "a recent chunk was evicted before older ones: %s" % name)
    log("gets: %d hits, %d misses (ENOENT)" % (hits, misses))

    # --- in place: no tmp files, the directory is exactly the surviving chunks
    names = sorted(os.listdir(store))
    check(names == sorted(os.listdir(m.b("lmcache"))), "listing through the mount differs from BACKING")
    check(all(n.endswith(".pt") for n in names), "stray files: %s" % [n for n in names if not n.endswith(".pt")])
    m.check_budget()
    m.stop()


if __name__ == "__main__":
    F.run(main)
