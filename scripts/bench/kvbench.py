#!/usr/bin/env python3
"""Workload drivers for scripts/bench.sh (Python 3 standard library only).

Every timed command prints one JSON line on stdout:
  {"op": ..., "ops": N, "bytes": B, "seconds": S, "errors": E}
where `seconds` covers only the measured loop (no key generation, no setup).
Failures are counted in `errors`; the first few are described on stderr.

Block naming (vLLM filesystem tier layout): block i of seed S has
h = sha256(f"{S}:{i}") and lives at ROOT/h[0:3]/h[3:5]/h.bin.

Commands
  store ROOT N      vLLM's O_DIRECT start-up probe (one page to .o_direct_probe_*.tmp;
                    on failure everything below is buffered), then per block: exists? ; makedirs ; open(<dest>_<rand>.tmp,
                    O_CREAT|O_EXCL|O_WRONLY|O_TRUNC|O_DIRECT) ; one write() from a
                    page-aligned mmap buffer ; close ; rename to dest. No fsync.
                    --lru-budget B: the native baseline of a bounded mount, the
                    writer keeping ROOT within B bytes by its own exact LRU
                    (BudgetLRU; --lru-adopt counts the blocks already there).
                    Adds "lat_us" (p50/p99 per store), "cpu_s" (this process)
                    and, with --lru-budget, "lru" (held, evictions, peak bytes).
  load ROOT N       open(O_RDONLY[|O_DIRECT]) ; one readv() of the whole block into
                    an aligned buffer ; close. A short read counts as an error.
                    --dontneed: posix_fadvise(POSIX_FADV_DONTNEED) before the close.
  uncache ROOT N    POSIX_FADV_DONTNEED on each of the N blocks (page cache dropped).
  mkfiles ROOT N    N empty block files in the hashed layout (--layout vllm|h3).
  probe ROOT N      access(F_OK) on N existing block paths and N missing ones
                    (same leaf directory, other name), interleaved and shuffled;
                    --again times a second pass over the same names.
  mkflat DIR N      N empty files in one flat directory.
  readdir DIR       os.scandir full listing (names + d_type, no stat).
  statrt ROOT N     os.stat of ROOT/statrt.bin N times, one thread; "lat_us" p50/p99 per stat.
  reqdiff B A N     FUSE requests per operation between two `stats` outputs.
  path ROOT I       prints the path of block I.   stats MNT   boundfs status JSON.
  metric FILE EXPR...  evaluates each EXPR over the last JSON line of FILE.
"""

import argparse
import collections
import hashlib
import json
import mmap
import os
import random
import secrets
import stat
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from kvblocks import store_file  # noqa: E402  the one vLLM-style block writer

PAGE = 4096
O_DIRECT = getattr(os, "O_DIRECT", 0)
MAX_ERR_LINES = 5


def parse_size(text):
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().rstrip("b").rstrip("i")
    suffix = t[-1] if t and t[-1] in units else ""
    n = int(t[: len(t) - len(suffix)]) * units[suffix]
    if n <= 0:
        raise argparse.ArgumentTypeError("size must be > 0")
    return n


def block_hash(seed, i):
    return hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()


def block_path(root, h, layout="vllm"):
    """vllm: ROOT/h[0:3]/h[3:5]/h.bin (up to 4096 x 256 leaf directories);
    h3: ROOT/h[0:3]/h.bin (4096 directories, for large many-file trees)."""
    if layout == "h3":
        return os.path.join(root, h[0:3], h + ".bin")
    return os.path.join(root, h[0:3], h[3:5], h + ".bin")


class Errors:
    def __init__(self):
        self.n = 0
        self.lock = threading.Lock()

    def add(self, what):
        with self.lock:
            self.n += 1
            if self.n <= MAX_ERR_LINES:
                print(f"kvbench: {what}", file=sys.stderr)


def aligned_buffer(size, fill):
    """A page-aligned anonymous mapping of `size` bytes, filled with `fill`."""
    buf = mmap.mmap(-1, size)
    if fill:
        reps = (size + len(fill) - 1) // len(fill)
        buf[:] = (fill * reps)[:size]
    return buf


def run_threads(n_threads, items, work):
    """Splits `items` round-robin over n_threads threads, each calling
    work(thread_index, item_list); returns wall seconds of the whole run."""
    shares = [items[t::n_threads] for t in range(n_threads)]
    start = threading.Barrier(n_threads + 1)
    threads = []
    for t in range(n_threads):
        def body(t=t):
            start.wait()
            work(t, shares[t])
        th = threading.Thread(target=body, daemon=True)
        th.start()
        threads.append(th)
    start.wait()
    t0 = time.perf_counter()
    for th in threads:
        th.join()
    return time.perf_counter() - t0


def emit(op, ops, nbytes, seconds, errors, **extra):
    d = {"op": op, "ops": ops, "bytes": nbytes, "seconds": round(seconds, 6), "errors": errors}
    d.update(extra)
    print(json.dumps(d), flush=True)


# ---------------------------------------------------------------- native budget

class BudgetLRU:
    """The fair baseline of a bounded mount: a plain directory whose writer
    keeps it within `budget` bytes by itself, with an exact in-process LRU.

    It counts what boundfs counts, as du does (st_blocks * 512): each block
    file it holds or is storing, and each directory between a block and ROOT
    (ROOT itself not), a directory's cost measured once at the start by
    making one. A load and a store make a block most recent (`touch`,
    `commit`). Before a store writes, `reserve` takes its block (and any
    directory it will make) into the count and picks the least recently used
    held blocks until the count is within the budget; the storing thread
    unlinks those victims, and removes a directory its victims emptied,
    before it writes (`evict`), so the directory's usage never exceeds the
    budget by more than the victims other threads are still unlinking. A
    block being stored is never a victim. Thread-safe."""

    def __init__(self, root, budget, block_size):
        self.root = os.path.abspath(root)
        self.budget = budget
        self.block_cost = -(-block_size // PAGE) * PAGE
        self.lock = threading.Lock()
        self.held = collections.OrderedDict()  # path -> cost, least recent first
        self.pending = set()
        self.blocks_in = collections.Counter()  # directory -> blocks held or pending under it
        self.used = self.peak = self.evictions = self.over = 0
        os.makedirs(self.root, exist_ok=True)
        probe = os.path.join(self.root, f".lru_probe_{secrets.token_hex(8)}")
        os.mkdir(probe)
        try:
            self.dir_cost = os.lstat(probe).st_blocks * 512
        finally:
            os.rmdir(probe)

    def _dirs(self, path):
        """Directories from path's parent up to ROOT (exclusive), deepest first."""
        out = []
        d = os.path.dirname(path)
        while len(d) > len(self.root):
            out.append(d)
            d = os.path.dirname(d)
        return out

    def _add(self, path, cost):
        self.used += cost
        for d in self._dirs(path):
            if self.blocks_in[d] == 0:
                self.used += self.dir_cost
            self.blocks_in[d] += 1

    def _drop(self, path, cost):
        """Uncounts path; returns the directories it leaves empty, deepest first."""
        self.used -= cost
        gone = []
        for d in self._dirs(path):
            self.blocks_in[d] -= 1
            if self.blocks_in[d] == 0:
                del self.blocks_in[d]
                self.used -= self.dir_cost
                gone.append(d)
        return gone

    def adopt(self):
        """Counts the *.bin files already under ROOT, oldest mtime least
        recent (untimed set-up, before any thread runs)."""
        found = []
        for d, _, files in os.walk(self.root):
            for f in files:
                if f.endswith(".bin"):
                    p = os.path.join(d, f)
                    st = os.lstat(p)
                    found.append((st.st_mtime_ns, p, st.st_blocks * 512))
        for _, p, cost in sorted(found):
            self.held[p] = cost
            self._add(p, cost)
        self.peak = max(self.peak, self.used)
        return len(found)

    def touch(self, path):
        with self.lock:
            if path in self.held:
                self.held.move_to_end(path)

    def reserve(self, path):
        """Victims [(path, emptied dirs)] to evict before storing path, or
        None when path is held or another thread is storing it."""
        with self.lock:
            if path in self.held or path in self.pending:
                if path in self.held:
                    self.held.move_to_end(path)
                return None
            self.pending.add(path)
            self._add(path, self.block_cost)
            victims = []
            while self.used > self.budget and self.held:
                vp, cost = self.held.popitem(last=False)
                victims.append((vp, self._drop(vp, cost)))
                self.evictions += 1
            if self.used > self.budget:
                self.over += 1  # the stores in flight alone exceed it
            self.peak = max(self.peak, self.used)
            return victims

    def commit(self, path):
        with self.lock:
            self.pending.discard(path)
            self.held[path] = self.block_cost

    def abandon(self, path):
        with self.lock:
            self.pending.discard(path)
            gone = self._drop(path, self.block_cost)
        for d in gone:
            try:
                os.rmdir(d)
            except OSError:
                pass

    @staticmethod
    def evict(victims):
        for vp, gone in victims:
            try:
                os.unlink(vp)
            except FileNotFoundError:
                pass
            for d in gone:
                try:
                    os.rmdir(d)
                except OSError:  # another thread's store is making it again
                    pass

    def store(self, path, write):
        """The bounded store of one block: reserve, evict, write(path) (the
        caller's vLLM-style store), count it most recent. A store that meets
        ENOENT because a victim's directory was removed under it retries.
        Returns False when path was already held or in flight."""
        victims = self.reserve(path)
        if victims is None:
            return False
        self.evict(victims)
        try:
            for attempt in range(5):
                try:
                    write(path)
                    break
                except FileNotFoundError:
                    if attempt == 4:
                        raise
        except BaseException:
            self.abandon(path)
            raise
        self.commit(path)
        return True

    def summary(self):
        with self.lock:
            return {"budget": self.budget, "used": self.used, "peak": self.peak,
                    "held": len(self.held), "evictions": self.evictions,
                    "over_budget": self.over, "dir_cost": self.dir_cost}


# ---------------------------------------------------------------- store / load

def direct_write_works(root):
    """vLLM's start-up probe: write one page with O_DIRECT to a tmp file in
    ROOT and delete it. False (buffered I/O from then on) if that fails."""
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f".o_direct_probe_{secrets.token_hex(8)}.tmp")
    buf = aligned_buffer(PAGE, b"p")
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | O_DIRECT, 0o644)
        try:
            return os.write(fd, buf) == PAGE
        finally:
            os.close(fd)
    except OSError as e:
        print(f"kvbench: O_DIRECT probe failed ({e}); storing buffered, as vLLM does", file=sys.stderr)
        return False
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def cmd_store(a):
    a.root = os.path.abspath(a.root)  # BudgetLRU counts directories up to it
    hashes = [block_hash(a.seed, i) for i in range(a.n)]
    fill = hashlib.sha256(a.seed.encode()).digest() * 128  # 4 KiB pattern
    bufs = [aligned_buffer(a.size, fill) for _ in range(a.threads)]
    err = Errors()
    direct = not a.buffered and direct_write_works(a.root)
    lru = None
    if a.lru_budget:
        lru = BudgetLRU(a.root, a.lru_budget, a.size)
        if a.lru_adopt:
            lru.adopt()
    lat = [[] for _ in range(a.threads)]
    clock = time.perf_counter_ns

    def write(dest, buf):
        store_file(dest, buf, direct=direct)

    def work(t, hs):
        buf = bufs[t]
        mine = lat[t]
        for h in hs:
            dest = block_path(a.root, h)
            t0 = clock()
            try:
                if os.path.exists(dest):
                    continue
                if lru:
                    lru.store(dest, lambda p: write(p, buf))
                else:
                    write(dest, buf)
            except OSError as e:
                err.add(f"store {dest}: {e}")
            mine.append(clock() - t0)

    cpu0 = os.times()
    secs = run_threads(a.threads, hashes, work)
    cpu1 = os.times()
    extra = {"direct": direct, "lat_us": {"store": percentiles([x for l in lat for x in l])},
             "cpu_s": round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 3)}
    if lru:
        extra["lru"] = lru.summary()
    emit("store", a.n, a.n * a.size, secs, err.n, **extra)


def percentiles(ns):
    """p50 and p99 (nearest rank) of latencies in ns, in microseconds."""
    if not ns:
        return {"n": 0, "p50": None, "p99": None}
    ns = sorted(ns)
    rank = lambda q: ns[min(len(ns) - 1, max(0, -(-len(ns) * q // 100) - 1))]
    return {"n": len(ns), "p50": round(rank(50) / 1000, 1), "p99": round(rank(99) / 1000, 1)}


def cmd_load(a):
    paths = [block_path(a.root, block_hash(a.seed, i)) for i in range(a.n)]
    bufs = [aligned_buffer(a.size, b"") for _ in range(a.threads)]
    err = Errors()
    flags = os.O_RDONLY | (O_DIRECT if a.direct else 0)
    total = [0] * a.threads

    def work(t, ps):
        buf = bufs[t]
        got = 0
        for p in ps:
            try:
                fd = os.open(p, flags)
                try:
                    n = os.readv(fd, [buf])
                    if a.dontneed:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
                if n != a.size:
                    err.add(f"short read {n}/{a.size}: {p}")
                got += n
            except OSError as e:
                err.add(f"load {p}: {e}")
        total[t] = got

    secs = run_threads(a.threads, paths, work)
    emit("load_direct" if a.direct else "load", a.n, sum(total), secs, err.n)


def cmd_uncache(a):
    """Drops the blocks' clean pages from the page cache (POSIX_FADV_DONTNEED
    on each file, opened where ROOT is: run it on the backing directory)."""
    t0 = time.perf_counter()
    for i in range(a.n):
        fd = os.open(block_path(a.root, block_hash(a.seed, i)), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    emit("uncache", a.n, 0, time.perf_counter() - t0, 0)


# ---------------------------------------------------------------- metadata

def cmd_mkfiles(a):
    # mknod(S_IFREG) makes the same empty regular file as open(O_CREAT)+close,
    # and is several times cheaper on some ext4 setups (setup only, untimed).
    paths = [block_path(a.root, block_hash(a.seed, i), a.layout) for i in range(a.n)]
    dirs = sorted({os.path.dirname(p) for p in paths})
    t0 = time.perf_counter()
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    mode = 0o644 | stat.S_IFREG
    for p in paths:
        os.mknod(p, mode)
    emit("mkfiles", a.n, 0, time.perf_counter() - t0, 0, dirs=len(dirs))


def cmd_path(a):
    print(block_path(a.root, block_hash(a.seed, a.n), a.layout))


def cmd_statrt(a):
    """os.stat of ROOT/statrt.bin (made if missing, untimed), N times in a
    row from one thread: each a round trip to the daemon where nothing is
    cached (boundfs -o attr_timeout=0)."""
    path = os.path.join(a.root, "statrt.bin")
    if not os.path.exists(path):
        open(path, "wb").close()
    err = Errors()
    lat = []
    clock, st = time.perf_counter_ns, os.stat
    t0 = time.perf_counter()
    for _ in range(a.n):
        t = clock()
        try:
            st(path)
        except OSError as e:
            err.add(f"stat {path}: {e}")
        lat.append(clock() - t)
    emit("stat", a.n, 0, time.perf_counter() - t0, err.n, lat_us={"stat": percentiles(lat)})


def cmd_reqdiff(a):
    """FUSE requests per operation between two status files (`stats`) over
    N operations; the second status read's own two GETXATTRs (os.getxattr
    asks with a small buffer first, then again with room) and FORGETs (sent
    when the kernel drops an inode, not by the operation) are left out."""
    b, c = (json.loads(open(p).read().splitlines()[-1])["requests"] for p in (a.before, a.after))
    d = {k: v - b.get(k, 0) for k, v in c.items() if k != "FORGET"}
    d["GETXATTR"] = d.get("GETXATTR", 0) - 2
    print(json.dumps({"per_op": round(sum(d.values()) / a.n, 3),
                      "ops": {k: round(v / a.n, 3) for k, v in sorted(d.items()) if v}}))


def cmd_stats(a):
    """The boundfs status xattr of a mountpoint, as one JSON line."""
    print(os.getxattr(a.mnt, "user.boundfs.stats").decode().strip())


def cmd_fiobw(a):
    """MiB/s of direction RW ("read"/"write") from a fio --output-format=json file."""
    text = open(a.file).read()
    d = json.loads(text[text.index("{"):])
    print(f"{d['jobs'][0][a.rw]['bw_bytes'] / 1048576:.6g}")


def cmd_metric(a):
    """Evaluates each EXPR over the last JSON line of FILE (fields as names),
    one value a line; an expression that fails prints None."""
    with open(a.file) as f:
        lines = [l for l in f.read().splitlines() if l.startswith("{")]
    d = json.loads(lines[-1])
    for expr in a.expr:
        try:
            v = eval(expr, {"__builtins__": {}}, d)  # our own expressions only
        except (KeyError, TypeError, ZeroDivisionError, NameError):
            if len(a.expr) == 1:
                raise
            v = None
        print(f"{v:.6g}" if isinstance(v, float) else v)


def cmd_probe(a):
    hashes = [block_hash(a.seed, i) for i in range(a.n)]
    paths = []
    for h in hashes:
        paths.append((block_path(a.root, h), True))
        # same leaf directory, a name that was never stored
        miss = h[:5] + hashlib.sha256(("miss:" + h).encode()).hexdigest()[5:]
        paths.append((block_path(a.root, miss), False))
    random.Random(a.seed).shuffle(paths)
    err = Errors()
    access, F_OK = os.access, os.F_OK
    if a.again:
        # an engine checks the same prefix's blocks on every request: time
        # the second pass over the same names
        [access(p, F_OK) for p, _ in paths]
    t0 = time.perf_counter()
    answers = [access(p, F_OK) for p, _ in paths]
    secs = time.perf_counter() - t0
    for (p, want), got in zip(paths, answers):
        if got != want:
            err.add(f"access({p}) = {got}, expected {want}")
    emit("probe", len(paths), 0, secs, err.n, hits=sum(answers))


def cmd_mkflat(a):
    os.makedirs(a.dir, exist_ok=True)
    mode = 0o644 | stat.S_IFREG
    t0 = time.perf_counter()
    for i in range(a.n):
        os.mknod(os.path.join(a.dir, f"{block_hash('flat', i)}.bin"), mode)
    emit("mkflat", a.n, 0, time.perf_counter() - t0, 0)


def cmd_readdir(a):
    t0 = time.perf_counter()
    n = files = 0
    with os.scandir(a.dir) as it:
        for e in it:
            n += 1
            files += e.is_file(follow_symlinks=False)  # d_type, no stat
    secs = time.perf_counter() - t0
    errors = 0 if a.expect is None or n == a.expect else 1
    if errors:
        print(f"kvbench: readdir saw {n} entries, expected {a.expect}", file=sys.stderr)
    emit("readdir", n, 0, secs, errors, files=files)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def blocks_cmd(name, fn):
        s = sub.add_parser(name)
        s.add_argument("root")
        s.add_argument("n", type=int)
        s.add_argument("--seed", default="bench")
        s.add_argument("--size", type=parse_size, default=2 << 20)
        s.add_argument("--threads", type=int, default=4)
        s.set_defaults(fn=fn)
        return s

    s = blocks_cmd("store", cmd_store)
    s.add_argument("--buffered", action="store_true", help="no O_DIRECT")
    s.add_argument("--lru-budget", type=parse_size, help="keep ROOT within this many bytes by an exact in-process LRU (BudgetLRU)")
    s.add_argument("--lru-adopt", action="store_true", help="with --lru-budget: count the *.bin already in ROOT first (oldest mtime least recent)")
    s = blocks_cmd("load", cmd_load)
    s.add_argument("--direct", action="store_true", help="O_DIRECT")
    s.add_argument("--dontneed", action="store_true", help="posix_fadvise(POSIX_FADV_DONTNEED) each block after reading it")
    blocks_cmd("uncache", cmd_uncache)
    blocks_cmd("mkfiles", cmd_mkfiles).add_argument("--layout", choices=["vllm", "h3"], default="vllm")
    blocks_cmd("path", cmd_path).add_argument("--layout", choices=["vllm", "h3"], default="vllm")
    s = sub.add_parser("statrt")
    s.add_argument("root")
    s.add_argument("n", type=int)
    s.set_defaults(fn=cmd_statrt)
    s = sub.add_parser("reqdiff")
    s.add_argument("before")
    s.add_argument("after")
    s.add_argument("n", type=int)
    s.set_defaults(fn=cmd_reqdiff)
    s = sub.add_parser("stats")
    s.add_argument("mnt")
    s.set_defaults(fn=cmd_stats)
    s = sub.add_parser("fiobw")
    s.add_argument("file")
    s.add_argument("rw", choices=["read", "write"])
    s.set_defaults(fn=cmd_fiobw)
    s = sub.add_parser("metric")
    s.add_argument("file")
    s.add_argument("expr", nargs="+")
    s.set_defaults(fn=cmd_metric)
    blocks_cmd("probe", cmd_probe).add_argument("--again", action="store_true", help="time a second pass")
    s = sub.add_parser("mkflat")
    s.add_argument("dir")
    s.add_argument("n", type=int)
    s.set_defaults(fn=cmd_mkflat)
    s = sub.add_parser("readdir")
    s.add_argument("dir")
    s.add_argument("--expect", type=int)
    s.set_defaults(fn=cmd_readdir)
    a = p.parse_args()
    if a.cmd in ("store", "load") and a.size % PAGE:
        p.error("--size must be a multiple of 4096 (O_DIRECT)")
    a.fn(a)


if __name__ == "__main__":
    main()
