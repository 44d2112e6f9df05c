#!/usr/bin/env python3
"""Replay: vLLM filesystem KV tier (kv_offload tiering, type "fs").

The calls, as /work/shared/ENGINES.md lists them:
  * start-up O_DIRECT probe: one page written with O_DIRECT to
    `.o_direct_probe_<random>.tmp`, then unlinked (a failure would make the
    tier fall back to buffered I/O);
  * store: exists(dest) -> makedirs -> open(dest_<random>.tmp,
    O_CREAT|O_EXCL|O_WRONLY|O_TRUNC|O_DIRECT) -> one write() of the whole block
    from an aligned buffer -> close -> rename(tmp, dest); newer variant:
    link(tmp, dest) with EEXIST as success, then unlink(tmp); both with several
    threads storing one key at once;
  * load: open(O_RDONLY|O_DIRECT) -> one readv of the whole block -> close;
    ENOENT is a miss, a short read would make vLLM unlink the block;
  * lookup: access(F_OK) in batches (from C: here through ctypes);
  * proposed checksums: xattr user.vllm.kv_crc32c set on the tmp file,
    read back on the published block;
  * config.json written once in a sibling <model>_<digest>/ directory.
Layout: <root>/<model>_<digest>_r<rank>/<h[0:3]>/<h[3:5]>_g<group>/<h>.bin.
Budget 32 MiB, 2 MiB blocks (Llama-3.1-8B, 16-token block): eviction runs.
"""
import ctypes
import errno
import hashlib
import os
import secrets
import threading

import fixture as F
from fixture import MiB, check, log

BLOCK = 2 * MiB
MAX = 32 * MiB
MODEL = "llama-3.1-8b_5d41402a"
ROOT_DIR = MODEL + "_r0"
CRC_XATTR = "user.vllm.kv_crc32c"
DIRECT_WRITE = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC | os.O_DIRECT

libc = ctypes.CDLL(None, use_errno=True)


def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc_table()


def crc32c(data):
    """CRC-32C (Castagnoli), the checksum vLLM's proposal stores."""
    crc, t = 0xFFFFFFFF, CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def khash(key):
    return hashlib.sha256(key.encode()).hexdigest()


class Tier:
    """The engine side: paths and the exact calls of store / load / lookup."""

    def __init__(self, m):
        self.m = m
        self.root = m.mnt

    def rel(self, key):
        h = khash(key)
        return os.path.join(ROOT_DIR, h[0:3], h[3:5] + "_g0", h + ".bin")

    def dest(self, key):
        return os.path.join(self.root, self.rel(key))

    def probe(self):
        """The start-up O_DIRECT probe; raises on failure."""
        path = os.path.join(self.root, ".o_direct_probe_%s.tmp" % secrets.token_hex(8))
        buf = F.aligned(b"\xa5" * 4096)
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_DIRECT, 0o644)
        try:
            n = os.write(fd, buf)
        finally:
            os.close(fd)
        os.unlink(path)
        return path, n

    def write_tmp(self, key, xattr=False):
        """Steps 2-5 of a store up to the close: returns the tmp path."""
        d = self.dest(key)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        tmp = "%s_%s.tmp" % (d, secrets.token_hex(8))
        data = F.block_bytes(key, BLOCK)
        buf = F.aligned(data)
        fd = os.open(tmp, DIRECT_WRITE, 0o644)
        try:
            n = os.write(fd, buf)
            check(n == BLOCK, "store %s: write() of the whole block returned %d of %d" % (key, n, BLOCK))
            if xattr:
                os.setxattr(fd, CRC_XATTR, crc32c(data).to_bytes(4, "little"))
        finally:
            os.close(fd)
        return tmp

    def publish(self, tmp, key, link):
        """rename, or link + unlink with EEXIST as success. Returns "ok" or "EEXIST"."""
        d = self.dest(key)
        if not link:
            os.rename(tmp, d)
            return "ok"
        try:
            os.link(tmp, d)
            res = "ok"
        except FileExistsError:
            res = "EEXIST"
        os.unlink(tmp)
        return res

    def store(self, key, link=False, xattr=False):
        if os.path.exists(self.dest(key)):
            return "skipped"
        return self.publish(self.write_tmp(key, xattr), key, link)

    def load(self, key):
        """Whole block with O_DIRECT + one readv. Raises OSError (ENOENT = miss)."""
        fd = os.open(self.dest(key), os.O_RDONLY | os.O_DIRECT)
        try:
            buf = F.aligned_empty(BLOCK)
            n = os.readv(fd, [buf])
        finally:
            os.close(fd)
        check(n == BLOCK, "load %s: short read %d of %d (vLLM would unlink the block)" % (key, n, BLOCK))
        check(buf[:] == F.block_bytes(key, BLOCK), "load %s: wrong bytes" % key)
        return buf

    def access_batch(self, keys):
        """access(F_OK) per key from C; returns {key: 0 or errno}."""
        out = {}
        for k in keys:
            r = libc.access(self.dest(k).encode(), os.F_OK)
            out[k] = 0 if r == 0 else ctypes.get_errno()
        return out


def backing_has(m, t, key):
    return os.path.exists(m.b(t.rel(key)))


def concurrent_same_key(m, t, key, link, threads=4):
    """Several threads store one key at once: all pass exists() before any
    publishes, all write their own tmp, then publish together. With rename, a
    reader opens the block after the first publish and holds it while the
    others replace it. Returns the list of publish results."""
    passed_exists = threading.Barrier(threads)
    first_done = threading.Event()
    reader_holds = threading.Event()
    results, errors = [None] * threads, []

    def worker(i):
        try:
            check(not os.path.exists(t.dest(key)), "exists() true before any store")
            passed_exists.wait(10)
            tmp = t.write_tmp(key)
            passed_exists.wait(10)            # every tmp written and closed
            if i == 0:
                results[i] = t.publish(tmp, key, link)
                first_done.set()
            else:
                check(reader_holds.wait(10), "reader never opened the block")
                results[i] = t.publish(tmp, key, link)
        except Exception as e:               # reported by the main thread
            errors.append("thread %d: %r" % (i, e))
            first_done.set()

    ths = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for th in ths:
        th.start()
    check(first_done.wait(20), "first publish never happened")
    held = None
    if not errors:
        held = os.open(t.dest(key), os.O_RDONLY | os.O_DIRECT)
    reader_holds.set()
    for th in ths:
        th.join(30)
    check(not any(th.is_alive() for th in ths), "a store thread hung for 30s")
    check(not errors, "concurrent store of one key: %s" % errors)
    if held is not None:
        buf = F.aligned_empty(BLOCK)
        n = os.preadv(held, [buf], 0)
        os.close(held)
        check(n == BLOCK and buf[:] == F.block_bytes(key, BLOCK),
              "a reader holding the block while other writers published read %d bytes%s"
              % (n, "" if n != BLOCK else " with wrong content"))
    t.load(key)
    left = sorted(os.listdir(os.path.dirname(m.b(t.rel(key)))))
    check(left == [os.path.basename(t.rel(key))], "after concurrent stores the block's directory holds %s" % left)
    check(os.stat(m.b(t.rel(key))).st_nlink == 1, "published block has %d links" % os.stat(m.b(t.rel(key))).st_nlink)
    return results


def main(m):
    m.start(MAX)
    t = Tier(m)

    # --- start-up O_DIRECT probe
    try:
        path, n = t.probe()
    except OSError as e:
        raise F.Failure("O_DIRECT start-up probe failed with %s: vLLM would fall back to buffered I/O" % F.errname(e))
    check(n == 4096, "O_DIRECT probe wrote %d of 4096 bytes" % n)
    check(not os.path.exists(m.b(os.path.basename(path))), "probe file left in BACKING after unlink")

    # --- config.json in the sibling <model>_<digest>/ directory, plain open/write
    cfg = b'{"model": "%s", "block_size": 16, "dtype": "bfloat16"}\n' % MODEL.encode()
    os.makedirs(m.m(MODEL), exist_ok=True)
    with open(m.m(MODEL, "config.json"), "wb") as f:
        f.write(cfg)

    # --- 24 blocks (48 MiB through a 32 MiB budget) stored by 4 threads, rename variant
    keys = ["seq0-blk%d" % i for i in range(24)]
    errors, done = [], []

    def store_range(ks):
        for k in ks:
            try:
                check(t.store(k) == "ok", "store %s was skipped: exists() true for a new key" % k)
                done.append(k)
            except (OSError, F.Failure) as e:
                errors.append("%s: %s" % (k, e))
    ths = [threading.Thread(target=store_range, args=(keys[i::4],), daemon=True) for i in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(60)
    check(not any(th.is_alive() for th in ths), "a store thread hung for 60s")
    check(not errors, "stores failed (an engine would see these errnos): %s" % errors[:3])
    s = m.wait_settled()
    check(s["evictions"] > 0, "48 MiB through a 32 MiB budget evicted nothing")
    for k in done[-6:]:                       # the 12 MiB stored last must have survived
        t.load(k)
    log("24 stores: %d evictions, %d ENOSPC" % (s["evictions"], s["enospc"]))
    check(s["enospc"] == 0, "ENOSPC although evictable blocks existed")

    # --- several threads store one key at once: rename, then link + unlink
    r = concurrent_same_key(m, t, "race-rename", link=False)
    check(r == ["ok"] * 4, "rename publishes: %s" % r)
    r = concurrent_same_key(m, t, "race-link", link=True)
    check(sorted(r) == ["EEXIST"] * 3 + ["ok"], "link publishes: %s, expected one ok and EEXIST for the rest" % r)
    check(t.store("race-link", link=True) == "skipped", "exists() false for a published block")

    # --- checksum xattr set on the tmp file survives the publish
    for k, link in (("crc-a", False), ("crc-b", True)):
        check(t.store(k, link=link, xattr=True) == "ok", "store %s" % k)
        buf = t.load(k)
        try:
            v = os.getxattr(t.dest(k), CRC_XATTR)
        except OSError as e:
            raise F.Failure("getxattr %s on the published block: %s" % (CRC_XATTR, F.errname(e)))
        check(int.from_bytes(v, "little") == crc32c(buf[:]), "%s of %s does not match its bytes" % (CRC_XATTR, k))
        check(os.getxattr(m.b(t.rel(k)), CRC_XATTR) == v, "%s differs in BACKING" % CRC_XATTR)

    # --- a block evicted between the engine's access(F_OK) and its open: ENOENT
    for rnd in range(3):
        target = "stale-%d" % rnd
        check(t.store(target) == "ok", "store %s" % target)
        check(t.access_batch([target])[target] == 0, "access(F_OK) of a fresh block failed")
        pushed = 0
        while backing_has(m, t, target) and pushed < 2 * MAX // BLOCK:
            check(t.store("push-%d-%d" % (rnd, pushed)) == "ok", "push store")
            pushed += 1
        F.poll(lambda: not backing_has(m, t, target), 10, "%s to be evicted" % target)
        F.expect_errno(errno.ENOENT, lambda: t.load(target),
                       "open(O_RDONLY|O_DIRECT) of a block evicted after access(F_OK) said it exists")
        # the ENOENT answer waits for the eviction's invalidation, so the
        # engine's exists() right after the miss already says "gone"
        check(not os.path.exists(t.dest(target)), "exists() true right after open gave ENOENT for evicted %s" % target)
        check(t.store(target) == "ok", "re-store of an evicted block was skipped (exists() still true)")
        t.load(target)

    # --- a block opened before the pressure is read whole (never evicted, never short)
    before = "pre-held"
    check(t.store(before) == "ok", "store pre-held")
    check(t.store("held") == "ok", "store held")
    fd = os.open(t.dest("held"), os.O_RDONLY | os.O_DIRECT)
    try:
        for i in range(MAX // BLOCK + 4):
            check(t.store("after-held-%d" % i) == "ok", "store after-held-%d" % i)
        F.poll(lambda: not backing_has(m, t, before), 10, "blocks older than the held one to be evicted")
        buf = F.aligned_empty(BLOCK)
        n = os.readv(fd, [buf])
        check(n == BLOCK and buf[:] == F.block_bytes("held", BLOCK),
              "readv of a block opened before eviction pressure: %d bytes" % n)
        check(backing_has(m, t, "held"), "a block with an open fd was evicted")
    finally:
        os.close(fd)

    # --- lookup: access(F_OK) in batches; answers match BACKING exactly
    m.wait_settled()
    every = (keys + ["race-rename", "race-link", "crc-a", "crc-b", "held"]
             + ["stale-%d" % i for i in range(3)] + ["pre-held"] + ["after-held-%d" % i for i in range(MAX // BLOCK + 4)]
             + ["never-%d" % i for i in range(16)])
    batches = [every[i:i + 32] for i in range(0, len(every), 32)]

    def backing_view():
        return {k: backing_has(m, t, k) for k in every}

    def mount_view():
        out = {}
        for b in batches:
            out.update(t.access_batch(b))
        return out
    truth, seen = F.stable_listing(backing_view, mount_view)
    bad = {k: F.errname(v) if v else "OK" for k, v in seen.items() if (v == 0) != truth[k] or v not in (0, errno.ENOENT)}
    check(not bad, "access(F_OK) answers differ from BACKING: %s" % dict(list(bad.items())[:5]))
    present = [k for k in every if truth[k]]
    check(any(not truth[k] for k in keys), "no early block was evicted")
    for k in present:
        F.hit_or_evicted(lambda: t.load(k), m.b(t.rel(k)), "load %s" % k)
    log("lookup: %d probes in %d batches, %d present, all loads exact" % (len(every), len(batches), len(present)))

    # --- config.json never evicted (it is the oldest file of the tree)
    check(os.path.exists(m.b(MODEL, "config.json")), "config.json was evicted")
    with open(m.m(MODEL, "config.json"), "rb") as f:
        check(f.read() == cfg, "config.json changed")
    s = m.check_budget()
    check(s["evictions"] > 0, "no eviction happened")
    m.stop()
    with open(m.b(MODEL, "config.json"), "rb") as f:
        check(f.read() == cfg, "config.json in BACKING changed or lost")


if __name__ == "__main__":
    F.run(main)
