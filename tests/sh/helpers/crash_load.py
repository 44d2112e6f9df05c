#!/usr/bin/env python3
"""A vLLM-style store/load load for crash-recovery scenarios.

crash_load.py MNT STOPFILE OUT.json [--threads N] [--held N] [--size BYTES]
              [--bound SECONDS] [--seed S] [--held-dir NAME]
              [--flat N] [--recent N] [--keep N]

Before the load: --held blocks are stored (in MNT/NAME, default held) and
opened read-only, and stay
open for the whole run (their bytes are checked through those fds all
along and at the end). Then --threads threads loop until STOPFILE exists:
store a block into a new hash directory (os.makedirs: MKDIRs; O_DIRECT
write of a temporary, then rename onto the .bin name, as the engines do),
then load a block stored earlier (O_DIRECT read) and check every byte
(ENOENT: evicted, fine). Every call is timed: one longer than --bound
seconds counts as a hang (a watcher thread notices it while it is still
waiting). Errors are counted per errno name. Writes JSON: calls, hangs,
wrong (bytes that differ), held_ok, errors {ERRNO: n}, stored, loaded.
"""

import argparse
import errno
import hashlib
import json
import mmap
import os
import random
import threading
import time


def content(name, size):
    """The bytes of block `name`: a pattern seeded by its name."""
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


class Load:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.errors = {}
        self.calls = 0
        self.wrong = 0
        self.hangs = 0
        self.stored = []
        self.kept_from = 0  # --keep: stored[:kept_from] were unlinked
        self.loaded = 0
        self.busy = {}  # thread -> (start, what)
        self.held_ok = True

    def err(self, e):
        name = errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) else type(e).__name__
        with self.lock:
            self.errors[name] = self.errors.get(name, 0) + 1
            if sum(self.errors.values()) <= 5:
                print(f"crash_load: {e}", flush=True)

    def call(self, what, fn, *args):
        t = threading.get_ident()
        self.busy[t] = (time.monotonic(), what)
        try:
            return fn(*args)
        finally:
            start, _ = self.busy.pop(t)
            with self.lock:
                self.calls += 1
                if time.monotonic() - start > self.a.bound:
                    self.hangs += 1

    def buf(self):
        return mmap.mmap(-1, self.a.size)

    def store(self, rng, tid, i):
        h = hashlib.sha1(f"{self.a.seed}-{tid}-{i}".encode()).hexdigest()
        if self.a.flat:
            d = os.path.join(self.a.mnt, "%02x" % (int(h[:8], 16) % self.a.flat))
        else:
            d = os.path.join(self.a.mnt, "kv", h[:2], h[2:4])
        name = f"{h}.bin"
        data = content(name, self.a.size)
        self.call("makedirs", os.makedirs, d, 0o755, True)
        tmp = os.path.join(d, f".{name}.tmp.{tid}")
        m = self.buf()
        m[:] = data
        fd = self.call("open-w", os.open, tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        try:
            n = self.call("write", os.write, fd, m)
            if n != len(data):
                raise OSError(errno.EIO, "short write")
        finally:
            self.call("close", os.close, fd)
        self.call("rename", os.rename, tmp, os.path.join(d, name))
        gone = None
        with self.lock:
            self.stored.append(os.path.join(d, name))
            if self.a.keep and len(self.stored) - self.kept_from > self.a.keep:
                gone = self.stored[self.kept_from]
                self.kept_from += 1
        if gone:
            try:
                self.call("unlink", os.unlink, gone)
            except FileNotFoundError:
                pass

    def load(self, rng):
        with self.lock:
            if not self.stored:
                return
            path = rng.choice(self.stored[-self.a.recent:] if self.a.recent else self.stored)
        m = self.buf()
        try:
            fd = self.call("open-r", os.open, path, os.O_RDONLY | os.O_DIRECT)
        except FileNotFoundError:
            return  # evicted
        try:
            n = self.call("read", os.readv, fd, [m])
        finally:
            self.call("close", os.close, fd)
        want = content(os.path.basename(path), self.a.size)
        if n != self.a.size or m[:] != want:
            got = m[:n]
            at = next((i for i in range(min(n, len(want))) if got[i] != want[i]), min(n, len(want)))
            print(f"crash_load: wrong bytes in {path}: read {n}, first difference at {at}", flush=True)
            with self.lock:
                self.wrong += 1
        with self.lock:
            self.loaded += 1

    def worker(self, tid):
        rng = random.Random(f"{self.a.seed}-{tid}")
        i = 0
        while not os.path.exists(self.a.stop):
            for step in (self.store, self.load):
                try:
                    if step == self.store:
                        step(rng, tid, i)
                    else:
                        step(rng)
                except OSError as e:
                    self.err(e)
            self.check_held(rng)
            i += 1

    def check_held(self, rng):
        if not self.held:
            return
        name, fd = rng.choice(self.held)
        m = self.buf()
        try:
            n = self.call("held-read", os.preadv, fd, [m], 0)
            if n != self.a.size or m[:] != content(name, self.a.size):
                with self.lock:
                    self.wrong += 1
                    self.held_ok = False
        except OSError as e:
            self.err(e)
            self.held_ok = False

    def watcher(self, done):
        while not done.is_set():
            now = time.monotonic()
            for start, what in list(self.busy.values()):
                if now - start > self.a.bound:
                    print(f"crash_load: a {what} has waited {now - start:.1f}s", flush=True)
            done.wait(1)

    def run(self):
        self.held = []
        d = os.path.join(self.a.mnt, self.a.held_dir)
        os.makedirs(d, exist_ok=True)
        for k in range(self.a.held):
            name = f"held-{k}.bin"
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.write(content(name, self.a.size))
            self.held.append((name, os.open(p, os.O_RDONLY)))
        done = threading.Event()
        w = threading.Thread(target=self.watcher, args=(done,), daemon=True)
        w.start()
        ts = [threading.Thread(target=self.worker, args=(t,)) for t in range(self.a.threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        done.set()
        for name, fd in self.held:
            m = self.buf()
            n = os.preadv(fd, [m], 0)
            if n != self.a.size or m[:] != content(name, self.a.size):
                self.held_ok = False
            os.close(fd)
        return {
            "calls": self.calls,
            "hangs": self.hangs,
            "wrong": self.wrong,
            "held_ok": self.held_ok,
            "errors": self.errors,
            "stored": len(self.stored),
            "loaded": self.loaded,
        }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mnt")
    p.add_argument("stop")
    p.add_argument("out")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--held", type=int, default=4)
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--bound", type=float, default=10.0)
    p.add_argument("--seed", default="0")
    p.add_argument("--held-dir", default="held")
    p.add_argument("--flat", type=int, default=0)
    p.add_argument("--recent", type=int, default=0)
    p.add_argument("--keep", type=int, default=0)
    a = p.parse_args()
    r = Load(a).run()
    with open(a.out, "w") as f:
        json.dump(r, f)


if __name__ == "__main__":
    main()
