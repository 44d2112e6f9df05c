"""Measurements taken from outside a mount, shared by the test helpers and
fixtures (standard library only; imported, never run):

- `used_bytes(root)`: the used bytes of the file system whose root is
  `root`, one statvfs, so one atomic reading;
- `du_bytes(root)`: what `du -s --block-size=1 root` counts (a walk, not
  atomic);
- `UsageSampler`: one of those (or any reading in bytes) taken every
  `interval` seconds, with the peak, when it was seen, and optionally every
  sample with its time;
- `longest_over(samples, limit, interval)`: the longest stretch of samples
  over a limit, in seconds;
- `status(mnt)`, `try_status(mnt)`: the daemon's status, the JSON in the
  `user.boundfs.stats` xattr of the mount root.

tests/sh/helpers/ scripts import it from their own directory;
tests/engines/fixture.py (and through it tests/real-engines/realfix.py)
loads it from there too.
"""
import json
import os
import threading
import time

STATS_XATTR = "user.boundfs.stats"


def used_bytes(root):
    """Used bytes of the file system at `root`: (f_blocks - f_bfree) x
    f_frsize from one statvfs. With `root` the root of a file system that
    holds only the tree under test (a tmpfs, a loop-mounted ext4), this is
    the tree's usage in one atomic reading (du's count plus files unlinked
    while still open)."""
    s = os.statvfs(root)
    return (s.f_blocks - s.f_bfree) * s.f_frsize


def du_bytes(root):
    """Bytes of the tree at `root` the way `du -s --block-size=1` counts
    them: st_blocks x 512 of every entry, `root` included, hard links once.
    A walk is not atomic: bytes freed in a part already visited and written
    in a part not yet visited are both counted, so under a writer it reads
    high by about (write rate x walk time). Entries that vanish during the
    walk are skipped."""
    seen = set()
    total = 0
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            st = os.lstat(d)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                        continue
                    s = e.stat(follow_symlinks=False)
                except OSError:
                    continue          # vanished between readdir and stat
                if s.st_nlink > 1:
                    if (s.st_dev, s.st_ino) in seen:
                        continue
                    seen.add((s.st_dev, s.st_ino))
                total += s.st_blocks * 512
    return total


class UsageSampler:
    """Calls `read()` (a reading in bytes, e.g. `lambda: used_bytes(root)`)
    every `interval` seconds, either in a thread of its own (`start`,
    `stop`) or in the caller's (`run`).

    Each round checks whether to stop, takes a reading, then stops if it was
    told to before the reading: the last reading is always taken after the
    stop was asked, so the end of a load is never missed.

    After it stops: `count` (readings), `peak` (bytes, 0 before any reading),
    `peak_at` (seconds from the start to the peak reading, None while no
    reading was above 0),
    `last` (bytes), and with `keep=True` `samples`, a list of (seconds from
    the start, bytes), the time taken just before each reading.
    """

    def __init__(self, read, interval, keep=False):
        self.read, self.interval, self.keep = read, interval, keep
        self.count, self.peak, self.peak_at, self.last = 0, 0, None, 0
        self.samples = []
        self._stop = threading.Event()
        self._thread = None

    def run(self, until, seconds=None):
        """Sample in this thread until `until()` is true (or `seconds`
        seconds have passed, when given: then without the reading after)."""
        t0 = time.monotonic()
        end = None if seconds is None else t0 + seconds
        while end is None or time.monotonic() < end:
            done = until()
            t = time.monotonic() - t0
            self.last = self.read()
            self.count += 1
            if self.last > self.peak:
                self.peak, self.peak_at = self.last, t
            if self.keep:
                self.samples.append((t, self.last))
            if done:
                break
            time.sleep(self.interval)
        return self

    def start(self):
        """Start sampling in a thread of its own."""
        self._thread = threading.Thread(target=self.run, args=(self._stop.is_set,), daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop the thread (after one more reading) and wait for it."""
        self._stop.set()
        self._thread.join()
        return self

    def longest_over(self, limit):
        """Longest stretch over `limit` bytes, seconds (needs `keep`)."""
        return longest_over(self.samples, limit, self.interval)


def longest_over(samples, limit, interval):
    """The longest run of consecutive samples ((seconds, bytes) in time
    order) reading more than `limit` bytes, in seconds: from the first
    sample of the run to its last, plus `interval` (each sample stands for
    the interval after it). 0.0 when none is over."""
    longest, start = 0.0, None
    for t, u in samples:
        if u > limit:
            start = t if start is None else start
            longest = max(longest, t - start + interval)
        else:
            start = None
    return longest


def status(mnt):
    """The daemon's status: the JSON object in the `user.boundfs.stats`
    xattr of the mount root `mnt` (byte counts in bytes). Raises OSError
    (not a boundfs mount, daemon gone) or ValueError (not JSON)."""
    return json.loads(os.getxattr(mnt, STATS_XATTR))


def try_status(mnt):
    """`status(mnt)`, or None when it cannot be read."""
    try:
        return status(mnt)
    except (OSError, ValueError):
        return None
