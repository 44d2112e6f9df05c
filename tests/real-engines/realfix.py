"""What the real-engine tests share: an ext4 BACKING of its own (so its
usage can be sampled atomically), the sampler, and the end-of-run checks.

Each tests/real-engines/r*.py runs with the engines' venv python (see
scripts/install-deps.sh), drives one engine's OWN storage class against a
fresh mount, and reuses tests/engines/fixture.py for the mount itself
(`run`, `Mount`, `check`, `log`).

The atomic sampler: BACKING is the root of a loop-mounted ext4 (no journal,
so an unlink frees its blocks at once) made for the test. ext4's statfs
counts delayed-allocation bytes as used, so `(f_blocks - f_bfree) * f_frsize`
minus the empty filesystem's own is the backing tree's usage in one reading,
never a walk that can miss a free or double-count a write. A child process
(tests/sh/helpers/du_sampler.py --statfs, stdlib only, no GIL shared with
the engine's threads) reads it every SAMPLE_INTERVAL seconds and reports the
peak.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "engines"))
import fixture  # noqa: E402
from fixture import MiB, Failure, check, log  # noqa: E402,F401
from fixture import measure  # noqa: E402

SAMPLE_INTERVAL = 0.002  # seconds between two statvfs readings of BACKING
SLACK = MiB  # max_size's slack for filesystem metadata (docs/reference.md, Mount options)
SAMPLER = os.path.join(fixture.HELPERS, "du_sampler.py")


class Backing:
    """BACKING of `m` (a fixture.Mount, not yet started) made the root of a
    fresh ext4 image of `size` bytes (sparse, in the test's temp tree);
    `start_sampler` / `stop_sampler` measure its peak usage."""

    def __init__(self, m, size):
        self.m = m
        self.image = os.path.join(m.tmp, "backing.ext4")
        with open(self.image, "wb") as f:
            f.truncate(size)
        self._run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0", self.image])
        self._run(["mount", "-o", "loop", self.image, m.backing])
        self.mounted = True
        os.rmdir(os.path.join(m.backing, "lost+found"))
        # the root directory is part of the backing tree's usage (du counts it)
        self.base = measure.used_bytes(m.backing) - os.lstat(m.backing).st_blocks * 512
        self.proc = None
        self.stop_file = os.path.join(m.tmp, "sampler.stop")

    @staticmethod
    def _run(cmd):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise fixture.Skip("%s failed (%s): needs loop devices and mkfs.ext4" % (cmd[0], r.stderr.strip()))

    def usage(self):
        """Backing tree usage now, bytes (one statvfs)."""
        return measure.used_bytes(self.m.backing) - self.base

    def start_sampler(self):
        """Start sampling BACKING's usage every SAMPLE_INTERVAL seconds."""
        if os.path.exists(self.stop_file):
            os.unlink(self.stop_file)
        self.proc = subprocess.Popen(
            [sys.executable, SAMPLER, self.m.backing, self.stop_file, str(SAMPLE_INTERVAL), "--statfs",
             "--base", str(self.base), "--seconds", "0"],
            stdout=subprocess.PIPE, text=True)

    def stop_sampler(self):
        """Stop the sampler: {"samples", "peak" (bytes), "peak_at" (s),
        "last" (bytes)}."""
        open(self.stop_file, "w").close()
        out, _ = self.proc.communicate(timeout=30)
        self.proc = None
        return json.loads(out)

    def close(self):
        """Stop the sampler, the daemon (lazily if need be), unmount the image."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.m.unmount(wait=10)  # the daemon first: it holds BACKING open
        if self.mounted:
            if subprocess.run(["umount", self.m.backing], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", self.m.backing], capture_output=True)
            self.mounted = False


def check_peak(sample, max_size, what):
    """The sampler's peak is within max_size + 1 MiB."""
    check(sample["samples"] > 100, "%s: only %d usage samples" % (what, sample["samples"]))
    check(sample["peak"] <= max_size + SLACK,
          "%s: backing usage peaked at %d > max_size %d + 1 MiB (sampled atomically, %d samples)"
          % (what, sample["peak"], max_size, sample["samples"]))
    log("%s: peak usage %d of max_size %d (%.1f%%), %d samples"
        % (what, sample["peak"], max_size, 100.0 * sample["peak"] / max_size, sample["samples"]))


def temporaries(root):
    """Paths under `root` whose name marks an engine temporary (`*.tmp`,
    `*.tmp.*`: vLLM `<dest>_<n>.tmp`, `.o_direct_probe_<n>.tmp`, SGLang
    `.<uuid hex>.tmp`)."""
    found = []
    for d, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(".tmp") or ".tmp." in f:
                found.append(os.path.join(d, f))
    return found


def block_bytes(key, size):
    """Deterministic content for `key`: fixture.block_bytes."""
    return fixture.block_bytes(key, size)


def run(main, backing_size):
    """fixture.run with BACKING on its own ext4 of `backing_size` bytes:
    main(m, backing)."""
    def outer(m):
        if subprocess.run(["which", "mkfs.ext4"], capture_output=True).returncode != 0:
            raise fixture.Skip("mkfs.ext4 is absent (e2fsprogs)")
        b = Backing(m, backing_size)
        try:
            main(m, b)
        finally:
            b.close()
    fixture.run(outer)


def elapsed(t0):
    """Seconds since `t0` (time.monotonic), for log lines."""
    return time.monotonic() - t0
