#!/usr/bin/env python3
"""What is in flight at each sample of the shared tier's usage, to check that
once full, usage stays at or above low_watermark x max_size minus one block,
except what open files make impossible.

An outside sampler reading the used bytes of a JuiceFS volume (statvfs
through one client) sees less than the tier holds while stores are in
flight: a store's temporary is created, written and closed; JuiceFS counts
its bytes when the client commits the file (at FLUSH, i.e. close), but the
node counted them at WRITE (reserving them, evicting inline when they would
pass max_size). Until the close returns, the room is freed and the bytes
that paid for it are not shown. These are the open files of the issue's
exception. The load driver knows its open stores ([`InFlight`], fed by
`blocks.store_one`'s phase hook); [`credit_inflight`] counts a store in
flight at a reading when its write began before the reading and its close
returned after it, for `block - its temporary's size as the sampler's
client showed it` right after the reading.

With a Redis URL it also reads the volume's `usedSpace` counter: statvfs on
a JuiceFS client is that counter plus the client's own changes not yet
added to it (JuiceFS `baseMeta.statRootFs`), so `statvfs_k - counter` shows
whether another client's changes reach the sampler late (with JuiceFS 1.4
over Redis they do not: the differences seen, in about one sample in ten,
are the same for every client read after a change, i.e. the reads raced a
store or an eviction).

Each sample also records every node's own stats (`user.boundfs.stats`:
usage, reserved, node_bytes, evictions, sweeps), so the lowest sample can
be decomposed and its evictions attributed.
"""
import ctypes
import json
import os
import socket
import sys
import time
from urllib.parse import urlparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import try_status, used_bytes  # noqa: E402

CLONE_NEWNET = 0x40000000
STAT_FIELDS = ("usage", "reserved", "node_bytes", "evictions", "evicted_bytes", "eviction_sweeps",
               "evict_skipped", "open_handles", "enospc", "reconciles")


def _setns(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class RedisCounter:
    """Reads one counter of a JuiceFS volume's Redis metadata engine (RESP
    over a plain socket), connecting from inside network namespace `netns`
    (a /run/netns path; the socket keeps it once made) when given."""

    def __init__(self, url, netns=None):
        u = urlparse(url)
        own = None
        if netns:
            own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
            ns = os.open(netns, os.O_RDONLY)
            try:
                _setns(ns)
            finally:
                os.close(ns)
        try:
            self.sock = socket.create_connection((u.hostname, u.port or 6379), timeout=2)
        finally:
            if own is not None:
                _setns(own)
                os.close(own)
        self.buf = b""
        db = (u.path or "/0").strip("/") or "0"
        self._cmd("SELECT", db)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise OSError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _cmd(self, *args):
        out = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
        self.sock.sendall(out)
        line = self._line()
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(4096)
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v.decode()
        if line[:1] == b"-":
            raise OSError("redis: %s" % line.decode())
        return line[1:].decode()

    def get(self, key):
        """The counter's value, 0 when unset."""
        v = self._cmd("GET", key)
        return int(v) if v else 0


class InFlight:
    """The load driver's stores in flight: `blocks.store_one`'s phase hook
    records, per store, the temporary's path, when its write began and when
    its close returned (JuiceFS has committed it by then), on the
    monotonic clock."""

    def __init__(self, n):
        self.open = [None] * n
        self.done = []

    def hook(self, k):
        def phase(tmp):
            now = time.monotonic()
            if tmp is not None:
                self.open[k] = (tmp, now)
            elif self.open[k] is not None:
                self.done.append((k, self.open[k][0], self.open[k][1], now))
                self.open[k] = None
        return phase

    def current(self):
        return [o[0] for o in self.open if o is not None]

    def intervals(self):
        """(node, temporary, write began, close returned), the ones still
        open ending never."""
        return self.done + [(k, o[0], o[1], float("inf")) for k, o in enumerate(self.open) if o is not None]


def node_stats(mnt):
    """The STAT_FIELDS of the node's status at `mnt`, None when unreadable."""
    j = try_status(mnt)
    return None if j is None else {k: j.get(k) for k in STAT_FIELDS}


class Tracer:
    """One sample: the sampler's reading (statvfs through `clients[0]`) and
    when it began and ended (`t0`, `t1`, monotonic), the size the sampler's
    client shows for each temporary open now (`tree` is that client's view
    of the mounts' BACKING), statvfs through every client and the Redis
    counter (when `redis` is given), and every node's stats (`mounts`).
    Which stores were in flight across the reading is settled after the run
    from `inflight`'s intervals ([`credit_inflight`])."""

    def __init__(self, clients, tree, mounts, inflight, redis=None):
        self.clients, self.tree, self.mounts = clients, tree, mounts
        self.inflight, self.redis = inflight, redis

    def sample(self):
        open_before = self.inflight.current()
        t0 = time.monotonic()
        used = used_bytes(self.clients[0])
        t1 = time.monotonic()
        # right after the reading: what the sampler's client shows of each
        # temporary open before it (gone: renamed, so committed)
        seen = {}
        for tmp in open_before:
            rel = next((os.path.relpath(tmp, m) for m in self.mounts if tmp.startswith(m + "/")), None)
            try:
                seen[tmp] = os.lstat(os.path.join(self.tree, rel)).st_size if rel else -1
            except OSError:
                seen[tmp] = -1
        others = [used_bytes(c) for c in self.clients[1:]]
        counter = self.redis.get("usedSpace") if self.redis else None
        s = {"used": used, "t0": t0, "t1": t1, "seen": seen, "stats": [node_stats(m) for m in self.mounts]}
        if counter is not None:
            # each client's changes not yet in the shared counter
            s["pending"] = [u - counter for u in [used] + others]
        return s


def credit_inflight(samples, intervals, block):
    """Sets each sample's `inflight` (bytes) and `tmps` ({node:temporary:
    size shown}): every store whose write began before the reading and whose
    close returned after it counts `block` minus what the sampler's client
    showed of its temporary right after the reading; nothing when it showed
    none (renamed already: committed). So a store counts only while provably
    not yet committed; one whose write had not reached its node yet counts
    too (at most a block per storing node)."""
    ivs = sorted(intervals, key=lambda iv: iv[2])
    for _, s in samples:
        tmps = {}
        for k, tmp, start, end in ivs:
            if start > s["t0"]:
                break
            if end >= s["t1"] and tmp in s["seen"]:
                tmps["%d:%s" % (k + 1, os.path.basename(tmp))] = s["seen"][tmp]
        s["tmps"] = tmps
        s["inflight"] = sum(block - min(block, v) for v in tmps.values() if v >= 0)


def decompose(samples, fill, low_bytes, block):
    """The lowest sample after the fill, by the sampler's reading and by
    reading + in-flight stores, with what each node was doing around it.
    `samples`: [(seconds, sample)] from [`Tracer.sample`]."""
    after = samples[fill:]
    if not after:
        return {}
    i_vis = min(range(len(after)), key=lambda i: after[i][1]["used"])
    i_fl = min(range(len(after)), key=lambda i: after[i][1]["used"] + after[i][1]["inflight"])

    def around(i):
        t, s = after[i]
        prev = after[max(0, i - 10)][1]
        d = {"t": round(t, 2), "used": s["used"], "inflight": s["inflight"],
             "used_plus_inflight": s["used"] + s["inflight"], "tmps": s["tmps"],
             "below_low_minus_block": max(0, low_bytes - block - s["used"] - s["inflight"])}
        if "pending" in s:
            d["pending"] = s["pending"]
        # each node's view and its evictions over the ten samples before (about a second)
        d["nodes"] = []
        for k, (n, p) in enumerate(zip(s["stats"], prev["stats"])):
            if not n:
                d["nodes"].append(None)
                continue
            row = {"usage": n["usage"], "reserved": n["reserved"], "node_bytes": n["node_bytes"]}
            if p:
                row["evicted_1s"] = n["evicted_bytes"] - p["evicted_bytes"]
                row["sweeps_1s"] = n["eviction_sweeps"] - p["eviction_sweeps"]
            d["nodes"].append(row)
        return d

    out = {"lowest_visible": around(i_vis), "lowest_with_inflight": around(i_fl)}
    if all("pending" in s for _, s in after):
        out["samples_with_pending"] = sum(any(s["pending"]) for _, s in after)
    return out


def write_trace(path, samples):
    """Writes `samples` ([(seconds since the start, sample)]) to `path`, one
    JSON object a line with the seconds as `t`."""
    with open(path, "w") as f:
        for t, s in samples:
            f.write(json.dumps({"t": round(t, 3), **s}) + "\n")


