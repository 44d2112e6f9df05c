#!/usr/bin/env python3
"""Stress a boundfs mount with checked invariants (used by tests/sh/faults/stress.sh).

  stress.py MNT BACKING --seconds S --max-size BYTES [--writers 4] [--readers 4]
            [--probers 2] [--hold 6] [--block 2M]

Processes (forked, sharing a few counters in shared memory):
  writers  store blocks vLLM-style: exists? / makedirs / open(tmp, O_CREAT|O_EXCL|
           O_WRONLY|O_TRUNC|O_DIRECT) / one write / close / rename.  Most stores are
           new keys, one in ten rewrites one of the writer's own keys with the next
           generation (rename over an existing block).  They run S seconds and at
           least until 3 x max_size has been stored (bounded by 3 S + 30 s).
  readers  load random stored blocks (O_DIRECT or buffered, alternately) and check
           every byte: a block's content is a pure function of (key, generation)
           and its 32-byte header names both, so any byte is checkable.
  probers  access(F_OK) random keys, stored or never stored.
  holder   stores HOLD blocks of its own, opens them, reads half, holds the fds the
           whole run, then reads to EOF and checks every byte.
  sampler  (a thread of the main process, measure.UsageSampler) statvfs(BACKING)
           every 10 ms; BACKING must be a file system of its own (a tmpfs), so that
           used blocks are an atomic reading of its usage (du's count plus files
           unlinked while open).

An ENOENT (load or probe) is legitimate only for a block never stored before the
call, or one that is gone from BACKING (evicted) within 2 s after, or one a writer
began to store again meanwhile.  Any other errno (EIO, EBADF, ENOSPC ...), a short
read or a wrong byte is a violation.

Prints one JSON line: counts and the first violations.  Exit 0 always (the
caller asserts); exit 2 on bad usage.
"""
import argparse
import errno
import hashlib
import json
import mmap
import multiprocessing as mp
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kvblocks import write_tmp  # noqa: E402  the one vLLM-style block writer
from measure import UsageSampler, try_status, used_bytes  # noqa: E402

NKEYS = 1 << 16
HDR = struct.Struct("<8sQQQ")
MAGIC = b"BFSTRESS"


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1:].upper() in mult else int(s)


def key_hash(i):
    return hashlib.sha256(b"stress:%d" % i).hexdigest()


def block_path(root, i, ns="k"):
    h = key_hash(i) if ns == "k" else hashlib.sha256(b"held:%d" % i).hexdigest()
    return os.path.join(root, h[0:3], h[3:5], h + ".bin")


def content(i, gen, size):
    body = hashlib.shake_128(b"%d:%d" % (i, gen)).digest(size - HDR.size)
    return HDR.pack(MAGIC, i, gen, size) + body


def check(data, i, size):
    """None if `data` is a whole, correct generation of block i, else why not."""
    if len(data) != size:
        return "short or long read: %d bytes of %d" % (len(data), size)
    magic, ki, gen, sz = HDR.unpack_from(data)
    if magic != MAGIC or ki != i or sz != size:
        return "bad header %r" % (data[: HDR.size],)
    if data != content(i, gen, size):
        first = next(n for n, (a, b) in enumerate(zip(data, content(i, gen, size))) if a != b)
        return "wrong bytes from offset %d (generation %d)" % (first, gen)
    return None


def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno))


class Shared:
    def __init__(self, writers):
        self.begin = mp.Array("q", NKEYS, lock=False)   # stores begun (rename about to happen)
        self.end = mp.Array("q", NKEYS, lock=False)     # stores completed
        self.gen = mp.Array("q", NKEYS, lock=False)     # last generation stored
        self.next = mp.Array("q", writers, lock=False)  # per writer: next new index
        self.stored_bytes = mp.Value("q", 0)
        self.stop = mp.Value("b", 0, lock=False)


def write_block(path, data, aligned):
    """The first half of vLLM's store (scripts/kvblocks.py write_tmp, the one
    block writer): returns the temporary's path, which the caller renames, or
    raises OSError."""
    aligned[: len(data)] = data
    return write_tmp(path, aligned, direct=True)


def writer(a, sh, w, out):
    size, W = a.block, a.writers
    aligned = mmap.mmap(-1, size)
    rng = random.Random(w)
    res = {"stores": 0, "rewrites": 0, "violations": []}
    mine = []
    while not sh.stop.value:
        rewrite = mine and rng.random() < 0.1
        if rewrite:
            i = rng.choice(mine)
            gen = sh.gen[i] + 1
        else:
            i = sh.next[w] * W + w
            if i >= NKEYS:
                break
            gen = 0
        path = block_path(a.mnt, i)
        try:
            if not rewrite and os.path.exists(path):
                res["violations"].append("writer %d: new key %d already exists" % (w, i))
            data = content(i, gen, size)
            tmp = write_block(path, data, aligned)
            sh.begin[i] += 1
            os.rename(tmp, path)
            sh.gen[i] = gen
            sh.end[i] += 1
        except OSError as e:
            res["violations"].append("store %d gen %d: %s %s (%s)" % (i, gen, ename(e), e.strerror, e.filename))
            continue
        if not rewrite:
            mine.append(i)
            sh.next[w] += 1
        res["stores"] += 1
        res["rewrites"] += bool(rewrite)
        with sh.stored_bytes.get_lock():
            sh.stored_bytes.value += size
    out.put(("writer", res))


def enoent_ok(a, sh, i, begin0, end0):
    """Is an ENOENT for block i, seen by a call that began with these counts, legitimate?"""
    if end0 == 0:
        return True                      # never stored when the call began
    bpath = block_path(a.backing, i)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        if not os.path.lexists(bpath):
            return True                  # evicted (the unlink may trail the ENOENT)
        if sh.begin[i] != begin0:
            return True                  # a store of it raced the call
        time.sleep(0.02)
    return False


def pick(rng, sh, W, spread=1.0, recent=0):
    """A random key of a random writer: among its `recent` newest keys four
    times in five when `recent` is set (those are mostly still stored), else
    among all it stored (times `spread`, to include never-stored keys)."""
    w = rng.randrange(W)
    n = sh.next[w]
    if n == 0:
        return None
    if recent and rng.random() < 0.8:
        return rng.randrange(max(0, n - recent), n) * W + w
    return int(rng.randrange(max(1, int(n * spread)))) * W + w


def reader(a, sh, r, out):
    size, W = a.block, a.writers
    rng = random.Random(100 + r)
    buf = mmap.mmap(-1, size)
    res = {"loads": 0, "load_hits": 0, "load_enoent": 0, "violations": []}
    n = 0
    while not sh.stop.value:
        i = pick(rng, sh, W, recent=max(2, a.max_size // a.block // W))
        if i is None:
            time.sleep(0.01)
            continue
        n += 1
        direct = n % 2 == 0
        begin0, end0 = sh.begin[i], sh.end[i]
        path = block_path(a.mnt, i)
        res["loads"] += 1
        try:
            fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
            try:
                if direct:
                    got = os.readv(fd, [buf])
                    data = bytes(buf[:got])
                    extra = os.readv(fd, [buf])   # must be EOF
                    if extra:
                        data += bytes(buf[:extra])
                else:
                    chunks = []
                    while True:
                        c = os.read(fd, 1 << 20)
                        if not c:
                            break
                        chunks.append(c)
                    data = b"".join(chunks)
            finally:
                os.close(fd)
        except OSError as e:
            if e.errno == errno.ENOENT:
                res["load_enoent"] += 1
                if not enoent_ok(a, sh, i, begin0, end0):
                    res["violations"].append("load %d: ENOENT but the block stayed in BACKING" % i)
            else:
                res["violations"].append("load %d (%s): %s %s" % (i, "direct" if direct else "buffered",
                                                                   ename(e), e.strerror))
            continue
        why = check(data, i, size)
        if why:
            res["violations"].append("load %d (%s): %s" % (i, "direct" if direct else "buffered", why))
        else:
            res["load_hits"] += 1
    out.put(("reader", res))


def prober(a, sh, p, out):
    W = a.writers
    rng = random.Random(200 + p)
    res = {"probes": 0, "probe_hits": 0, "probe_enoent": 0, "violations": []}
    while not sh.stop.value:
        for _ in range(64):
            i = pick(rng, sh, W, spread=1.25, recent=max(2, a.max_size // a.block // W))
            if i is None or i >= NKEYS:
                continue
            begin0, end0 = sh.begin[i], sh.end[i]
            res["probes"] += 1
            try:
                if os.access(block_path(a.mnt, i), os.F_OK):
                    res["probe_hits"] += 1
                    continue
                # access() hides the errno: ask again with stat for it
                os.stat(block_path(a.mnt, i))
                res["probe_hits"] += 1
            except OSError as e:
                if e.errno == errno.ENOENT:
                    res["probe_enoent"] += 1
                    if not enoent_ok(a, sh, i, begin0, end0):
                        res["violations"].append("probe %d: ENOENT but the block stayed in BACKING" % i)
                else:
                    res["violations"].append("probe %d: %s %s" % (i, ename(e), e.strerror))
        time.sleep(0.002)   # pacing, so probers do not starve the others of CPU
    out.put(("prober", res))


def holder(a, sh, ready, out):
    size = a.block
    res = {"held": 0, "held_ok": 0, "violations": []}
    aligned = mmap.mmap(-1, size)
    fds, heads = [], []
    try:
        for j in range(a.hold):
            path = block_path(a.mnt, j, ns="held")
            tmp = write_block(path, content(NKEYS + j, 0, size), aligned)
            os.rename(tmp, path)
            fd = os.open(path, os.O_RDONLY)
            fds.append((j, path, fd))
            heads.append(os.read(fd, size // 2))
    except OSError as e:
        res["violations"].append("holder setup: %s %s" % (ename(e), e.strerror))
    res["held"] = len(fds)
    ready.set()
    while not sh.stop.value:
        time.sleep(0.05)
    for (j, path, fd), head in zip(fds, heads):
        if not os.path.exists(block_path(a.backing, j, ns="held")):
            res["violations"].append("held block %d was removed from BACKING while open" % j)
        try:
            rest = []
            while True:
                c = os.read(fd, 1 << 20)
                if not c:
                    break
                rest.append(c)
            why = check(head + b"".join(rest), NKEYS + j, size)
            if why:
                res["violations"].append("held block %d: %s" % (j, why))
            else:
                res["held_ok"] += 1
        except OSError as e:
            res["violations"].append("held block %d: %s %s" % (j, ename(e), e.strerror))
        finally:
            os.close(fd)
    out.put(("holder", res))


def stats(mnt):
    return try_status(mnt) or {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mnt")
    ap.add_argument("backing")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--max-size", type=int, required=True)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--readers", type=int, default=4)
    ap.add_argument("--probers", type=int, default=2)
    ap.add_argument("--hold", type=int, default=6)
    ap.add_argument("--block", default="2M")
    a = ap.parse_args()
    a.block = parse_size(a.block)
    mp.set_start_method("fork")
    sh = Shared(a.writers)
    out = mp.Queue()
    ready = mp.Event()
    hold = mp.Process(target=holder, args=(a, sh, ready, out))
    hold.start()
    ready.wait(60)
    ev0 = stats(a.mnt).get("evictions", 0)
    samp = UsageSampler(lambda: used_bytes(a.backing), 0.01).start()
    t0 = time.monotonic()
    procs = [mp.Process(target=writer, args=(a, sh, w, out)) for w in range(a.writers)]
    procs += [mp.Process(target=reader, args=(a, sh, r, out)) for r in range(a.readers)]
    procs += [mp.Process(target=prober, args=(a, sh, p, out)) for p in range(a.probers)]
    for p in procs:
        p.start()
    hard = t0 + 3 * a.seconds + 30
    while True:
        now = time.monotonic()
        if now >= hard or (now - t0 >= a.seconds and sh.stored_bytes.value >= 3 * a.max_size):
            break
        time.sleep(0.05)
    sh.stop.value = 1
    results = []
    for _ in range(len(procs) + 1):
        try:
            results.append(out.get(timeout=60))
        except Exception:
            break
    for p in procs + [hold]:
        p.join(10)
    elapsed = time.monotonic() - t0
    samp.stop()
    tot = {"seconds": round(elapsed, 1), "stores": 0, "rewrites": 0, "stored_bytes": sh.stored_bytes.value,
           "loads": 0, "load_hits": 0, "load_enoent": 0, "probes": 0, "probe_hits": 0, "probe_enoent": 0,
           "held": 0, "held_ok": 0}
    violations = []
    for _, r in results:
        for k, v in r.items():
            if k == "violations":
                violations += v
            else:
                tot[k] += v
    if len(results) != len(procs) + 1:
        violations.append("%d of %d workers did not report (crashed or hung)" % (
            len(procs) + 1 - len(results), len(procs) + 1))
    s = stats(a.mnt)
    tot["evictions"] = s.get("evictions", 0) - ev0
    tot["enospc"] = s.get("enospc", 0)
    tot["enoent"] = tot["load_enoent"] + tot["probe_enoent"]
    tot["usage_peak"] = samp.peak
    tot["usage_peak_at"] = round(samp.peak_at or 0.0, 3)
    tot["usage_samples"] = samp.count
    tot["max_size"] = a.max_size
    if samp.peak > a.max_size + (1 << 20):
        violations.append("usage of BACKING peaked at %d > max_size + 1 MiB, %.2f s after the sampler started"
                          % (samp.peak, samp.peak_at or 0.0))
    tot["violations"] = len(violations)
    tot["first_violations"] = violations[:20]
    print(json.dumps(tot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
