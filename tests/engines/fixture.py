"""Mount fixture and measurements for the engine replays (Python 3 stdlib only).

Each replay script in tests/engines/ calls `run(main)`: it checks the
preconditions (root, /dev/fuse, the daemon binary; exit 77 = skip), gives
`main` a fresh `Mount` (temporary BACKING and mountpoint, nothing mounted
yet), and always unmounts, stops the daemon and removes the tree afterwards.
Exit status: 0 pass, 1 fail, 77 skip.  A failed `check` prints one line
saying what broke, then the daemon's last log lines.

Environment: BOUNDFS (daemon binary, default target/release/boundfs),
BFS_ENGINE_TMP (where to put the temporary tree; tests/run sets it and
sweeps it afterwards), TMPDIR, BFS_KEEP_ON_FAIL=1 (keep the tree on failure).
"""
import errno
import hashlib
import mmap
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

MiB = 1 << 20
KiB = 1 << 10
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPERS = os.path.join(REPO, "tests", "sh", "helpers")

# the shared readings (tests/sh/helpers/measure.py); the helpers directory
# leaves the path again so its other modules cannot shadow an engine's
sys.path.insert(0, HELPERS)
import measure  # noqa: E402
sys.path.remove(HELPERS)


class Failure(Exception):
    """A broken contract: the message says which."""


class Skip(Exception):
    """The replay cannot run here: the message says why."""


def check(cond, msg):
    """Fail the replay with `msg` unless `cond`."""
    if not cond:
        raise Failure(msg)


def errname(e):
    """Errno name of an OSError (or of an errno number)."""
    n = e.errno if isinstance(e, OSError) else e
    return errno.errorcode.get(n, str(n))


def expect_errno(want, fn, what):
    """Run fn(); it must fail with one of the errnos in `want` (an errno
    number or a tuple of them). Returns the errno it failed with."""
    want = (want,) if isinstance(want, int) else tuple(want)
    names = "/".join(errname(w) for w in want)
    try:
        fn()
    except OSError as e:
        check(e.errno in want, "%s: %s, expected %s" % (what, errname(e), names))
        return e.errno
    raise Failure("%s succeeded, expected %s" % (what, names))


def hit_or_evicted(load, backing_path, what):
    """Run the engine's `load()`: a hit (True), or ENOENT (False) for a block
    that is really gone from BACKING (`backing_path`); anything else fails.
    Eviction may still be running when a replay reads, so a miss is fine as
    long as BACKING agrees."""
    try:
        load()
        return True
    except OSError as e:
        check(e.errno == errno.ENOENT, "%s: %s, expected the bytes or ENOENT" % (what, errname(e)))
        check(not os.path.exists(backing_path), "%s: ENOENT although the file is in BACKING" % what)
        return False


def log(msg):
    print("[%s] %s" % (NAME, msg), flush=True)


def known_issue(msg):
    """Report a known core bug the replay tolerates (expected failure): one
    line starting "[name] XFAIL", which tests/run shows even when the replay
    passes. Use only for a bug written down in docs/guarantees.md's known limits."""
    print("[%s] XFAIL (known core issue): %s" % (NAME, msg), flush=True)


NAME = os.path.splitext(os.path.basename(sys.argv[0]))[0]


# ------------------------------------------------------------------ data
def block_bytes(key, size):
    """Deterministic content of `size` bytes for `key` (different per key)."""
    return hashlib.shake_256(key.encode()).digest(size)


def aligned(data):
    """A page-aligned anonymous mmap holding `data` (an O_DIRECT buffer)."""
    buf = mmap.mmap(-1, max(len(data), 1))
    buf[: len(data)] = data
    return buf


def aligned_empty(size):
    """A page-aligned zeroed buffer of `size` bytes."""
    return mmap.mmap(-1, size)


# ------------------------------------------------------------------ the mount
def _mounts_at(path):
    """fstype of the mount at exactly `path` (None if not a mount point)."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            if parts[4] == path:
                found = parts[sep + 1]
    return found


class Mount:
    """A boundfs daemon over a fresh BACKING, mounted at MNT.

    `backing`, `mnt`: absolute paths. `max_size`: bytes of the running mount.
    """

    def __init__(self):
        base = os.environ.get("BFS_ENGINE_TMP") or os.environ.get("TMPDIR") or "/tmp"
        self.tmp = tempfile.mkdtemp(prefix="boundfs-%s." % NAME, dir=base)
        self.backing = os.path.join(self.tmp, "backing")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.backing)
        os.mkdir(self.mnt)
        self.proc = None
        self.logs = []
        self.max_size = None
        self.high = self.low = None

    # -------------------------------------------------------------- daemon
    def start(self, max_size, extra="", wait_index=True):
        """Start the daemon with `-o max_size=<bytes>[,extra]` and wait (10 s
        at most) until it is mounted, then (unless `wait_index` is false) until
        its start-up index is complete (30 s at most)."""
        check(self.proc is None, "start: a daemon is already running")
        opts = "max_size=%d" % max_size + ("," + extra if extra else "")
        logpath = os.path.join(self.tmp, "daemon.%d.log" % (len(self.logs) + 1))
        self.logs.append(logpath)
        binary = os.environ.get("BOUNDFS") or os.path.join(REPO, "target/release/boundfs")
        with open(logpath, "wb") as logf:
            self.proc = subprocess.Popen(
                [binary, "-f", self.backing, self.mnt, "-o", opts],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                env=dict(os.environ, RUST_BACKTRACE="1"))
        deadline = time.monotonic() + 10
        while not (_mounts_at(self.mnt) or "").startswith("fuse"):
            rc = self.proc.poll()
            if rc is not None:
                self.proc = None
                raise Failure("daemon exited with %d before mounting (-o %s)" % (rc, opts))
            check(time.monotonic() < deadline, "not mounted within 10 s (-o %s)" % opts)
            time.sleep(0.02)
        self.max_size = max_size
        if wait_index:
            self.wait_indexed()
        s = self.stats()
        self.high = int(max_size * float(s["high_watermark"]))
        self.low = int(max_size * float(s["low_watermark"]))
        log("mounted -o %s" % opts)

    def wait_indexed(self):
        """The start-up index runs in the background; until it is complete
        usage is an upper bound. Waits (30 s at most) for it."""
        poll(lambda: not self.stats().get("indexing"), 30, "the start-up index to complete")

    def stop(self):
        """umount MNT; the daemon must exit 0 within 10 s."""
        check(self.proc is not None, "stop: no daemon running")
        r = subprocess.run(["umount", self.mnt], capture_output=True, text=True)
        check(r.returncode == 0, "umount %s failed: %s" % (self.mnt, r.stderr.strip()))
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            raise Failure("daemon still running 10 s after umount")
        self.proc = None
        check(rc == 0, "daemon exited with %d after umount, expected 0" % rc)
        check(_mounts_at(self.mnt) is None, "still mounted after the daemon exited")

    def unmount(self, wait=5):
        """Unmount (lazily if need be) and stop the daemon: it must exit
        within `wait` seconds, else it is killed."""
        if _mounts_at(self.mnt):
            if subprocess.run(["umount", self.mnt], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", self.mnt], capture_output=True)
        if self.proc is not None:
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def cleanup(self, keep=False):
        """Unmount (lazily if need be), stop the daemon, remove the tree."""
        self.unmount()
        if keep:
            print("[%s] kept %s" % (NAME, self.tmp), file=sys.stderr)
        else:
            # the guard leaves the bare mountpoint immutable after the unmount
            subprocess.run(["chattr", "-i", self.mnt], stderr=subprocess.DEVNULL, check=False)
            shutil.rmtree(self.tmp, ignore_errors=True)

    def log_tail(self, n=30):
        """The last `n` lines of the current daemon's log."""
        if not self.logs or not os.path.exists(self.logs[-1]):
            return ""
        with open(self.logs[-1], errors="replace") as f:
            return "".join(f.readlines()[-n:])

    # -------------------------------------------------------------- paths
    def m(self, *parts):
        """Path under the mountpoint."""
        return os.path.join(self.mnt, *parts)

    def b(self, *parts):
        """The same path under BACKING."""
        return os.path.join(self.backing, *parts)

    # -------------------------------------------------------------- measurements
    def stats(self):
        """The live status JSON (getxattr user.boundfs.stats on the mount root)."""
        return measure.status(self.mnt)

    def du(self):
        """Bytes BACKING occupies, as `du -s --block-size=1` counts them."""
        # du fails when a directory it is about to enter is removed meanwhile
        # (eviction reaps emptied directories): walk again, a few times
        for _ in range(5):
            r = subprocess.run(["du", "-s", "--block-size=1", self.backing], capture_output=True, text=True)
            if r.returncode == 0 or "No such file or directory" not in r.stderr:
                break
        check(r.returncode == 0, "du failed: %s" % r.stderr.strip())
        return int(r.stdout.split()[0])

    def statfs(self):
        """(total, used, f_bsize) in bytes from statvfs of the mountpoint: df's
        Size and Used. Used is what no write can get, usage minus the
        evictable block files (README, "What df shows")."""
        v = os.statvfs(self.mnt)
        return v.f_blocks * v.f_frsize, (v.f_blocks - v.f_bfree) * v.f_frsize, v.f_bsize

    def wait_settled(self, secs=15):
        """Bounded poll for the background evictor: until the ledger's usage is
        at most the high watermark and no eviction happened for 0.3 s."""
        deadline = time.monotonic() + secs
        last, since = None, time.monotonic()
        while True:
            s = self.stats()
            if s["evictions"] != last:
                last, since = s["evictions"], time.monotonic()
            if s["usage"] <= self.high and time.monotonic() - since >= 0.3:
                return s
            check(time.monotonic() < deadline,
                  "eviction did not settle within %d s (usage %d, high watermark %d)" % (secs, s["usage"], self.high))
            time.sleep(0.05)

    def check_budget(self, what="end"):
        """usage <= max_size three ways: du of BACKING, statfs of the mount,
        and the stats JSON; statfs reports max_size as the size and as Used
        du minus the evictable bytes (within 1 MiB). Waits (bounded) for
        eviction to settle first."""
        hard = self.du()
        check(hard <= self.max_size + MiB,
              "%s: du of BACKING %d > max_size %d + 1 MiB slack (hard cap broken)" % (what, hard, self.max_size))
        s = self.wait_settled()
        du = self.du()
        total, used, bsize = self.statfs()
        check(du <= self.max_size, "%s: du of BACKING %d > max_size %d" % (what, du, self.max_size))
        check(used <= self.max_size, "%s: statfs used %d > max_size %d" % (what, used, self.max_size))
        check(s["usage"] <= self.max_size, "%s: stats usage %d > max_size %d" % (what, s["usage"], self.max_size))
        check(total == self.max_size // bsize * bsize,
              "%s: statfs size %d, expected max_size %d" % (what, total, self.max_size))
        ev = self.stats()["evictable_bytes"]
        # df's Avail stops at the high watermark (src/fs/statfs.rs): Used is
        # du minus the evictable bytes plus the headroom above it
        want = min(du - ev + self.max_size - self.high, self.max_size)
        check(abs(used - want) <= MiB,
              "%s: statfs used %d disagrees with du %d minus evictable %d plus the headroom above the high "
              "watermark %d" % (what, used, du, ev, self.max_size - self.high))
        log("%s: du %d, statfs used %d (evictable %d), max_size %d, evictions %d"
            % (what, du, used, ev, self.max_size, s["evictions"]))
        return s


def poll(cond, secs, what):
    """Bounded poll of `cond()` (for asynchronous background work only)."""
    deadline = time.monotonic() + secs
    while not cond():
        check(time.monotonic() < deadline, "timed out after %ss waiting for %s" % (secs, what))
        time.sleep(0.02)


def stable_listing(list_backing, list_other, tries=20):
    """Compare a listing through the mount with BACKING's when nothing changed
    meanwhile (BACKING listed before and after): returns (backing, other)."""
    for _ in range(tries):
        before = list_backing()
        other = list_other()
        after = list_backing()
        if before == after:
            return before, other
        time.sleep(0.05)
    raise Failure("BACKING kept changing while listing (eviction never settled)")


# ------------------------------------------------------------------ entry point
def run(main):
    """Run `main(mount)` with the preconditions, signal handling and cleanup."""
    def on_signal(sig, _frame):
        raise SystemExit(128 + sig)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    m = None
    rc = 1
    try:
        if os.geteuid() != 0:
            raise Skip("needs root (FUSE mount without fusermount)")
        if not os.path.exists("/dev/fuse"):
            raise Skip("/dev/fuse is absent")
        binary = os.environ.get("BOUNDFS") or os.path.join(REPO, "target/release/boundfs")
        check(os.access(binary, os.X_OK), "daemon binary %s missing (cargo build --release)" % binary)
        m = Mount()
        t0 = time.monotonic()
        main(m)
        log("PASS (%.1fs)" % (time.monotonic() - t0))
        rc = 0
    except Skip as e:
        log("SKIP: %s" % e)
        rc = 77
    except Failure as e:
        print("[%s] FAIL: %s" % (NAME, e), flush=True)
        if m is not None:
            print("---- daemon log (last lines) ----\n" + m.log_tail() + "----", flush=True)
    except SystemExit as e:
        print("[%s] interrupted (%s)" % (NAME, e.code), flush=True)
        rc = e.code if isinstance(e.code, int) else 1
    except Exception as e:
        print("[%s] FAIL: unexpected %s: %s" % (NAME, type(e).__name__, e), flush=True)
        traceback.print_exc(file=sys.stdout)
        if m is not None:
            print("---- daemon log (last lines) ----\n" + m.log_tail() + "----", flush=True)
    finally:
        if m is not None:
            m.cleanup(keep=rc not in (0, 77) and bool(os.environ.get("BFS_KEEP_ON_FAIL")))
    sys.exit(rc)
