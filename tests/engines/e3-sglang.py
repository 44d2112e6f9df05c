#!/usr/bin/env python3
"""Replay: SGLang HiCache file backend.

The calls, as /work/shared/ENGINES.md lists them:
  * one flat directory of `<sha256>_<model>_<tp_rank>_<tp_size>.bin` files;
  * written to `<path>.tmp.<pid>.<tid>.<uuid>` (numpy.tofile: open "wb",
    write, close), then os.replace(tmp, path);
  * existence by os.path.exists, or by a scandir of the whole directory per
    batch: readdir of a flat directory with tens of thousands of entries is
    on the hot path.
The directory holds 50,000 entries left by an earlier run (created in BACKING
before mounting) plus 16 older 1 MiB pages; the budget leaves room for 20 MiB
of pages beyond the directory itself, so storing through the mount evicts.
Scandir through the mount must list exactly what BACKING holds, also while
evictions remove entries concurrently (then every unchanged entry exactly once).
"""
import hashlib
import os
import threading
import uuid

import fixture as F
from fixture import MiB, check, log

ENTRIES = 50_000
PAGE = MiB
MODEL = "Qwen3-8B"


def page_name(key):
    return "%s_%s_0_1.bin" % (hashlib.sha256(key.encode()).hexdigest(), MODEL)


class HiCacheFile:
    """The engine side: set / get / exists / batch_exists."""

    def __init__(self, d):
        self.dir = d

    def path(self, key):
        return os.path.join(self.dir, page_name(key))

    def set(self, key):
        p = self.path(key)
        tmp = "%s.tmp.%d.%d.%s" % (p, os.getpid(), threading.get_native_id(), uuid.uuid4().hex)
        with open(tmp, "wb") as f:           # numpy.tofile
            f.write(F.block_bytes(key, PAGE))
        os.replace(tmp, p)

    def get(self, key):
        buf = bytearray(PAGE)
        with open(self.path(key), "rb") as f:
            n = f.readinto(buf)
        check(n == PAGE and buf == F.block_bytes(key, PAGE), "get %s: %d bytes%s" % (key, n, "" if n != PAGE else ", wrong content"))

    def exists(self, key):
        return os.path.exists(self.path(key))

    def batch_exists(self, keys):
        names = {e.name for e in os.scandir(self.dir)}
        return [page_name(k) in names for k in keys]


def prefill(d):
    """50,000 empty entries, then 16 older 1 MiB pages (mtime 2020)."""
    os.mkdir(d)
    for i in range(ENTRIES):
        os.close(os.open(os.path.join(d, page_name("old-run-%d" % i)), os.O_CREAT | os.O_WRONLY, 0o644))
    for i in range(16):
        p = os.path.join(d, page_name("old-page-%d" % i))
        with open(p, "wb") as f:
            f.write(F.block_bytes("old-page-%d" % i, PAGE))
        os.utime(p, (1577836800 + i * 60, 1577836800 + i * 60))


def main(m):
    bdir = m.b("hicache")
    prefill(bdir)
    max_size = (m.du() // MiB + 20) * MiB
    m.start(max_size)
    hc = HiCacheFile(m.m("hicache"))
    empties = {page_name("old-run-%d" % i) for i in range(ENTRIES)}

    # --- the whole directory through the mount is exactly BACKING's
    names = {e.name for e in os.scandir(hc.dir)}
    check(names == set(os.listdir(bdir)), "scandir through the mount differs from BACKING before any store")
    check(len(names) == ENTRIES + 16, "scandir listed %d entries, expected %d" % (len(names), ENTRIES + 16))
    s = m.stats()
    check(s["usage"] >= max_size - 20 * MiB, "the pre-filled directory is not counted in usage: %s" % s["usage"])

    # --- stores in batches by two threads while a third thread keeps scanning
    keys = ["page-%d" % i for i in range(24)]
    errors, scans = [], []
    storing = threading.Event()
    storing.set()

    def scanner():
        while storing.is_set():
            seen = [e.name for e in os.scandir(hc.dir)]
            scans.append(seen)

    def storer(ks):
        try:
            for k in ks:
                check(not hc.exists(k), "exists() true before %s was stored" % k)
                hc.set(k)
                check(hc.exists(k), "exists() false right after os.replace of %s" % k)
        except (OSError, F.Failure) as e:
            errors.append("%s" % e)
    sc = threading.Thread(target=scanner, daemon=True)
    sc.start()
    try:
        for batch in (keys[0:8], keys[8:16], keys[16:24]):
            check(not any(hc.batch_exists(batch)), "batch scandir finds pages not stored yet")
            ths = [threading.Thread(target=storer, args=(batch[i::2],), daemon=True) for i in range(2)]
            for th in ths:
                th.start()
            for th in ths:
                th.join(60)
            check(not any(th.is_alive() for th in ths), "a store thread hung for 60s")
            check(not errors, "store failed: %s" % errors[:3])
            check(all(hc.batch_exists(batch[-4:])), "batch scandir misses pages just stored")
    finally:
        storing.clear()
        sc.join(60)
        check(not sc.is_alive(), "a scandir hung for 60 s")
    s = m.wait_settled()
    check(s["evictions"] > 0, "24 MiB of pages beyond a 20 MiB margin evicted nothing")
    pages = {page_name(k) for k in keys} | {page_name("old-page-%d" % i) for i in range(16)}
    for seen in scans:
        check(len(seen) == len(set(seen)), "a scandir during evictions listed an entry twice")
        missing = empties - set(seen)
        check(not missing, "a scandir during evictions skipped %d unchanged entries" % len(missing))
        alien = [n for n in seen if n not in empties and n not in pages and n.split(".tmp.")[0] not in pages]
        check(not alien, "a scandir listed names never created: %s" % alien[:3])
    log("%d concurrent scandirs of %d+ entries during %d evictions: every unchanged entry exactly once"
        % (len(scans), ENTRIES, s["evictions"]))

    # --- after settling: scandir == BACKING (minus nothing, plus nothing); exists() agrees
    backing, mounted = F.stable_listing(lambda: sorted(os.listdir(bdir)),
                                        lambda: sorted(e.name for e in os.scandir(hc.dir)))
    check(mounted == backing, "scandir through the mount: %d entries, BACKING %d; only via mount %s, only in BACKING %s"
          % (len(mounted), len(backing), sorted(set(mounted) - set(backing))[:3], sorted(set(backing) - set(mounted))[:3]))
    check(empties <= set(backing), "entries of the earlier run were evicted before older pages")
    check(not [n for n in backing if ".tmp." in n], "tmp files left behind")
    check(all(e.is_file(follow_symlinks=False) for e in os.scandir(hc.dir)), "scandir d_type is not a regular file")
    gone = [k for k in ("old-page-%d" % i for i in range(16)) if not os.path.exists(os.path.join(bdir, page_name(k)))]
    check(gone, "no old page evicted")
    for k in ("old-page-%d" % i for i in range(16)):
        check(hc.exists(k) == os.path.exists(os.path.join(bdir, page_name(k))), "exists(%s) differs from BACKING" % k)
    hits = 0
    for k in keys:
        bp = os.path.join(bdir, page_name(k))
        if os.path.exists(bp) and F.hit_or_evicted(lambda: hc.get(k), bp, "get %s" % k):
            hits += 1
        else:
            check(not hc.exists(k), "exists() true for an evicted page")
    check(all(hc.batch_exists(keys[-8:])), "the newest pages were evicted")
    log("settled: %d entries listed as in BACKING; %d old pages and %d new pages evicted; %d loads exact"
        % (len(backing), len(gone), len(keys) - hits, hits))
    m.check_budget()
    m.stop()


if __name__ == "__main__":
    F.run(main)
