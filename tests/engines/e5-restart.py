#!/usr/bin/env python3
"""Replay: an engine restarted on the same tier (and boundfs with it).

Operators reported accounting starting from zero after a restart, nothing
reused, and a 460 GB directory against a 250 GB limit after restarts
(/work/shared/ENGINES.md). So:
  1. blocks stored in one mount (vLLM's store: O_DIRECT tmp + rename), the
     daemon restarted (umount, mount the same BACKING): the same keys exist and
     load with exact bytes, and count toward usage once the start-up index
     is done (stats xattr and statfs; before that the stats say the index
     runs), so the next stores evict at the right point;
  2. a BACKING filled beyond max_size while no daemon ran (an old, larger
     budget, or files copied in) is brought under max_size promptly after
     mounting, with no request needed (bounded poll: 10 s), and the newest
     blocks by mtime are the ones kept; files that are not blocks stay.
"""
import errno
import os
import secrets

import fixture as F
from fixture import MiB, check, log

MAX = 32 * MiB
BLOCK = 2 * MiB


def rel(key):
    return os.path.join("model_r0", key[:2], key + ".bin")


def store(m, key):
    d = os.path.join(m.mnt, rel(key))
    if os.path.exists(d):
        return "skipped"
    os.makedirs(os.path.dirname(d), exist_ok=True)
    tmp = "%s_%s.tmp" % (d, secrets.token_hex(6))
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC | os.O_DIRECT, 0o644)
    try:
        check(os.write(fd, F.aligned(F.block_bytes(key, BLOCK))) == BLOCK, "short write")
    finally:
        os.close(fd)
    os.rename(tmp, d)
    return "ok"


def load(m, key):
    fd = os.open(os.path.join(m.mnt, rel(key)), os.O_RDONLY | os.O_DIRECT)
    try:
        buf = F.aligned_empty(BLOCK)
        n = os.readv(fd, [buf])
    finally:
        os.close(fd)
    check(n == BLOCK and buf[:] == F.block_bytes(key, BLOCK), "load %s after restart: %d bytes" % (key, n))


def main(m):
    # --- 1. store, restart, reuse
    m.start(MAX)
    keys = ["%02x-blk%d" % (i * 37 % 256, i) for i in range(10)]      # 20 MiB: below the high watermark
    for k in keys:
        check(store(m, k) == "ok", "store %s" % k)
    with open(m.m("model_r0", "config.json"), "w") as f:
        f.write('{"restart": true}\n')
    s1 = m.stats()
    check(s1["evictions"] == 0, "evicted below the high watermark")
    m.stop()
    du = m.du()

    m.start(MAX, wait_index=False)
    s0 = m.stats()                                   # the first request of the new mount
    # The start-up index runs beside the first requests: until it is done the
    # stats say so (`indexing`, usage counts what is indexed so far) and
    # reservations are checked against BACKING's whole used space instead.
    # So the first request sees every stored block counted, or the index
    # still running; never a finished index that missed them.
    check(s0["usage"] >= len(keys) * BLOCK or s0["indexing"],
          "at the first request usage is %d with the index done: stored blocks not counted" % s0["usage"])
    m.wait_indexed()                                 # exact from here on (an upper bound before)
    s2 = m.stats()
    total, used, _ = m.statfs()
    log("usage before restart %d, after %d (du %d, statfs used %d, evictable %d)"
        % (s1["usage"], s2["usage"], du, used, s2["evictable_bytes"]))
    check(s2["usage"] >= len(keys) * BLOCK, "after restart usage is %d: stored blocks not counted" % s2["usage"])
    check(abs(s2["usage"] - du) <= MiB, "after restart usage %d, du %d" % (s2["usage"], du))
    # statfs: the restored blocks are evictable, so df counts them as Avail, not Used
    check(s2["evictable_bytes"] >= len(keys) * BLOCK,
          "after restart %d bytes evictable: stored blocks not counted" % s2["evictable_bytes"])
    # Used: du minus the evictable bytes plus the headroom above the high
    # watermark (df's Avail stops there, src/fs/statfs.rs)
    head = s2["max_size"] - s2["high_watermark_bytes"]
    check(abs(used - (du - s2["evictable_bytes"] + head)) <= MiB,
          "after restart statfs used %d, du %d minus evictable %d plus headroom %d"
          % (used, du, s2["evictable_bytes"], head))
    check(s2["block_files"] == len(keys), "after restart %d block files indexed, expected %d" % (s2["block_files"], len(keys)))
    for k in keys:
        check(store(m, k) == "skipped", "exists() false after restart for %s: the engine would store it again" % k)
        load(m, k)
    # the restored usage decides eviction: 8 more blocks (36 MiB total) must evict, the oldest first
    for i in range(8):
        check(store(m, "%02x-new%d" % (i, i)) == "ok", "store new%d" % i)
    s3 = m.wait_settled()
    check(s3["evictions"] > 0, "36 MiB in a 32 MiB budget after restart evicted nothing: old blocks not counted")
    check(not os.path.exists(m.b(rel(keys[0]))), "the oldest pre-restart block survived while new ones were stored")
    F.expect_errno(errno.ENOENT, lambda: load(m, keys[0]), "load of the evicted pre-restart block")
    m.check_budget("after restart")
    m.stop()

    # --- 2. BACKING filled beyond max_size while unmounted
    for i in range(24):                              # +48 MiB: ~84 MiB in BACKING
        k = "%02x-offline%d" % (i, i)
        p = m.b(rel(k))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(F.block_bytes(k, BLOCK))
        os.utime(p, (1_700_000_000 + i, 1_700_000_000 + i))   # oldest first: offline0
    over = m.du()
    check(over > 2 * MAX, "pre-fill reached only %d bytes" % over)
    m.start(MAX)
    F.poll(lambda: m.du() <= MAX, 10, "a BACKING of %d bytes to be brought under max_size %d after mount" % (over, MAX))
    s4 = m.check_budget("pre-filled")
    log("pre-filled BACKING %d bytes -> %d after mount (%d evictions)" % (over, m.du(), s4["evictions"]))
    check(os.path.exists(m.b("model_r0", "config.json")), "config.json was evicted")
    newest = ["%02x-new%d" % (i, i) for i in range(8)]
    for k in newest:
        check(os.path.exists(m.b(rel(k))), "the newest block %s was evicted before older (offline) ones" % k)
        load(m, k)
    m.stop()


if __name__ == "__main__":
    F.run(main)
