#!/usr/bin/env python3
"""vLLM's own filesystem tier across `boundfs upgrade`: r1-vllm.py's whole
run (4 conversations x 6 turns through `FileSystemTierManager` and its C
extension, O_DIRECT, 3.1x max_size stored, every load checked byte for
byte, a hit evicted before its load, peak usage sampled every 2 ms) while
the mount is handed to a new boundfs process UPGRADES times (default 4).

Each upgrade is started (`boundfs upgrade MNT`, in the background) just
before a request's store jobs are submitted, so vLLM's I/O threads have
stores in flight (open, O_DIRECT writes, rename) while the old daemon
drains and the kernel re-sends to the new one. Asserted, beyond r1's
checks (any failed store, any load error but a missing evicted file, any
wrong byte fails it): every upgrade exits 0 and names a new pid, and the
daemon serving at the end is the last one. Needs Linux >= 6.9 (the
upgrade refuses older kernels: the test is skipped there).
"""
import importlib.util
import os
import platform
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import realfix  # noqa: E402
from realfix import check, log  # noqa: E402
import fixture  # noqa: E402

UPGRADES = int(os.environ.get("BFS_REAL_UPGRADES", "4"))
# store() calls (one per request with blocks to store) before which an
# upgrade starts: spread over the conversations (about 24 requests)
AT = {3 + 5 * i for i in range(UPGRADES)}

spec = importlib.util.spec_from_file_location("r1_vllm", os.path.join(HERE, "r1-vllm.py"))
r1 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(r1)


class Upgrader:
    """Starts `boundfs upgrade` before chosen store() calls; one at a time."""

    def __init__(self, mnt):
        self.mnt = mnt
        self.binary = os.environ.get("BOUNDFS") or os.path.join(fixture.REPO, "target/release/boundfs")
        self.calls = 0
        self.running = None
        self.done = []  # (rc, output)

    def finish(self):
        if self.running is None:
            return
        try:
            out, _ = self.running.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.running.kill()
            raise fixture.Failure("boundfs upgrade did not return within 60 s")
        self.done.append((self.running.returncode, out.strip()))
        self.running = None

    def before_store(self):
        self.calls += 1
        if self.calls in AT:
            self.finish()
            self.running = subprocess.Popen([self.binary, "upgrade", self.mnt], stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True)


def main(m, backing):
    up = Upgrader(m.mnt)
    store = r1.Engine.store

    def store_with_upgrades(self, keys, first_slot, ctx, what):
        up.before_store()
        return store(self, keys, first_slot, ctx, what)

    r1.Engine.store = store_with_upgrades
    r1.main(m, backing)
    up.finish()
    check(len(up.done) == UPGRADES, "%d upgrades started of %d (the run had %d stores)" % (
        len(up.done), UPGRADES, up.calls))
    pids = []
    for rc, out in up.done:
        check(rc == 0, "boundfs upgrade failed (%d): %s" % (rc, out))
        got = re.search(r"pid (\d+) -> (\d+)", out)
        check(got is not None, "boundfs upgrade named no new pid: %s" % out)
        pids.append(int(got.group(2)))
        log(out)
    check(m.stats()["pid"] == pids[-1], "the daemon serving is not the last upgrade's (%s)" % pids)
    log("vLLM's tier ran across %d upgrades: 0 errors" % len(up.done))


if __name__ == "__main__":
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", platform.release()).groups())
    if (major, minor) < (6, 9):
        print("SKIP: Linux >= 6.9 needed (FUSE_NOTIFY_RESEND)")
        sys.exit(77)
    realfix.run(main, backing_size=4 * r1.MAX)
