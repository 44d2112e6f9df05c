#!/usr/bin/env python3
"""Deterministic block files for the shell fixtures.

  blocks.py mk PATH SIZE [SEED]        write a file (plain buffered write)
  blocks.py check PATH SIZE [SEED]     verify it; prints OK / MISMATCH / errno
  blocks.py store ROOT --count N --size 2M [--threads T] [--seed S]
      vLLM-style stores: ROOT/h[0:3]/h[3:5]/h.bin, written as
      <dest>_<rand>.tmp with O_CREAT|O_EXCL|O_DIRECT, one aligned write,
      rename into place.  Prints {"stored":..,"enospc":..,"errors":..}.
  blocks.py load ROOT --count N --size 2M [--seed S] [--last K]
      Prints {"loaded":..,"missing":..,"corrupt":..,"errors":..}.
  blocks.py hold --ready F --go F [--timeout S] --size N PATH...
      open every PATH, read its first half, create F(ready), wait for
      F(go) to exist, read the rest and verify; prints JSON, exit 1 if any
      byte was wrong or a read failed.
The content of a file is a pure function of (SIZE, SEED); SEED defaults to
the file's name without its extension.
"""
import argparse
import errno
import hashlib
import json
import mmap
import os
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))
from kvblocks import store_file  # noqa: E402  the one vLLM-style block writer


def size_of(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s[-1:].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(s)


def seed_of(path, seed=None):
    if seed is not None:
        return seed
    return os.path.basename(path).split(".")[0]


def content(size, seed):
    return random.Random(seed).randbytes(size)


def key(seed, i):
    return hashlib.sha256(("%s:%d" % (seed, i)).encode()).hexdigest()


def dest_of(root, h):
    return os.path.join(root, h[0:3], h[3:5], h + ".bin")


def cmd_mk(a):
    n = size_of(a.size)
    with open(a.path, "wb") as f:
        f.write(content(n, seed_of(a.path, a.seed)))
    return 0


def cmd_check(a):
    n = size_of(a.size)
    try:
        with open(a.path, "rb") as f:
            data = f.read()
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno))
        return 1
    if data != content(n, seed_of(a.path, a.seed)):
        print("MISMATCH len=%d" % len(data))
        return 1
    print("OK")
    return 0


def store_one(root, h, size, phase=None):
    """One vLLM-style store of block h under root: "stored", "enospc" or
    "errors". phase(tmp_path or None): called with the temporary's path just
    before its write begins and with None once its close has returned (or
    the store failed), so a caller can tell which stores are in flight."""
    dest = dest_of(root, h)
    if os.path.exists(dest):
        return "stored"
    def data():
        buf = mmap.mmap(-1, size)
        buf.write(content(size, h))
        return buf

    try:
        store_file(dest, data, direct=True, phase=phase)
        return "stored"
    except OSError as e:
        if e.errno == errno.ENOSPC:
            return "enospc"
        print("store %s: %s" % (dest, e), file=sys.stderr)
        return "errors"


def cmd_store(a):
    size = size_of(a.size)
    res = {"stored": 0, "enospc": 0, "errors": 0}
    lock = threading.Lock()

    def one(i):
        r = store_one(a.root, key(a.seed, i), size)
        with lock:
            res[r] += 1

    with ThreadPoolExecutor(max_workers=a.threads) as ex:
        list(ex.map(one, range(a.count)))
    print(json.dumps(res))
    return 0


def cmd_load(a):
    size = size_of(a.size)
    res = {"loaded": 0, "missing": 0, "corrupt": 0, "errors": 0}
    first = a.count - a.last if a.last else 0
    for i in range(max(first, 0), a.count):
        h = key(a.seed, i)
        try:
            with open(dest_of(a.root, h), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            res["missing"] += 1
            continue
        except OSError as e:
            print("load %s: %s" % (h, e), file=sys.stderr)
            res["errors"] += 1
            continue
        if data == content(len(data), h) and (size <= 0 or len(data) == size):
            res["loaded"] += 1
        else:
            res["corrupt"] += 1
    print(json.dumps(res))
    return 0


def cmd_hold(a):
    size = size_of(a.size)
    half = size // 2
    fds, heads, out = [], [], {"held": 0, "ok": 0, "bad": []}
    for p in a.paths:
        fd = os.open(p, os.O_RDONLY)
        fds.append(fd)
        heads.append(os.read(fd, half))
    out["held"] = len(fds)
    with open(a.ready + ".part", "w") as f:
        f.write(str(os.getpid()))
    os.rename(a.ready + ".part", a.ready)
    deadline = time.monotonic() + a.timeout
    while not os.path.exists(a.go):
        if time.monotonic() > deadline:
            print(json.dumps({"error": "no go signal"}))
            return 1
        time.sleep(0.02)
    for p, fd, head in zip(a.paths, fds, heads):
        try:
            rest = b""
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                rest += chunk
            if head + rest == content(size, seed_of(p)):
                out["ok"] += 1
            else:
                out["bad"].append("%s: wrong bytes (len %d)" % (p, len(head + rest)))
        except OSError as e:
            out["bad"].append("%s: %s" % (p, e))
        finally:
            os.close(fd)
    print(json.dumps(out))
    return 0 if not out["bad"] else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("mk", "check"):
        p = sub.add_parser(name)
        p.add_argument("path")
        p.add_argument("size")
        p.add_argument("seed", nargs="?")
    p = sub.add_parser("store")
    p.add_argument("root")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--size", default="2M")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--seed", default="0")
    p = sub.add_parser("load")
    p.add_argument("root")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--size", default="0")
    p.add_argument("--seed", default="0")
    p.add_argument("--last", type=int, default=0)
    p = sub.add_parser("hold")
    p.add_argument("--ready", required=True)
    p.add_argument("--go", required=True)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--size", required=True)
    p.add_argument("paths", nargs="+")
    a = ap.parse_args()
    return {"mk": cmd_mk, "check": cmd_check, "store": cmd_store,
            "load": cmd_load, "hold": cmd_hold}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
