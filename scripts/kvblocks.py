#!/usr/bin/env python3
"""Store and load KV-cache-like block files the way vLLM's filesystem tier does.

Store, per block:
  exists(dest)? skip : makedirs; open(dest_<rand>.tmp, O_CREAT|O_EXCL|O_WRONLY|
  O_TRUNC|O_DIRECT); one write() of the whole block from a page-aligned buffer;
  close; rename(tmp, dest).  No fsync.

Load, per block:
  open(dest, O_RDONLY|O_DIRECT); one readv() of the whole file into a
  page-aligned buffer; close; compare every byte with the expected content.

Block i of seed S is named by h = sha256(f"{S}:{i}") and lives at
ROOT/h[0:3]/h[3:5]/h.bin.  Its content is a pure function of (S, i, size), so
`load` can verify it without any side file.

Both commands print one JSON line of counters on stdout (details of failures go
to stderr).  Python 3 standard library only.
"""

import argparse
import concurrent.futures
import errno
import hashlib
import json
import mmap
import os
import re
import secrets
import struct
import sys
import threading
import time

PAGE = 4096
O_DIRECT = getattr(os, "O_DIRECT", 0)

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text):
    """'2M', '2MiB', '512k', '4096' -> bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgtKMGT]?)(?:i?[bB])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (try 2M, 512K, 4096)")
    n = int(m.group(1)) * _UNITS[m.group(2).lower()]
    if n <= 0:
        raise argparse.ArgumentTypeError("size must be > 0")
    return n


def block_hash(seed, i):
    return hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()


def block_path(root, seed, i):
    h = block_hash(seed, i)
    return os.path.join(root, h[0:3], h[3:5], h + ".bin")


def block_content(seed, i, size):
    """Deterministic bytes of block i.

    A 4 KiB pattern derived from sha256 is repeated; the first 24 bytes of
    every 4 KiB page are replaced by (magic, block index, page number) so that a
    page from another block, or a page moved within this block, is detected.
    """
    pattern = b"".join(
        hashlib.sha256(f"kvblocks:{seed}:{i}:{k}".encode()).digest()
        for k in range(PAGE // 32)
    )
    tail = pattern[24:]
    npages = -(-size // PAGE)
    data = b"".join(
        struct.pack("<8sQQ", b"KVBLOCK\0", i, p) + tail for p in range(npages)
    )
    return data[:size]


def aligned_len(n):
    return max(PAGE, -(-n // PAGE) * PAGE)


class Buffers(threading.local):
    """One page-aligned anonymous mapping per thread, grown on demand."""

    def __init__(self):
        self.buf = None

    def get(self, size):
        need = aligned_len(size)
        if self.buf is None or len(self.buf) < need:
            if self.buf is not None:
                self.buf.close()
            self.buf = mmap.mmap(-1, need)  # anonymous mappings are page-aligned
        return self.buf


def indices(start, count, last=None):
    first = start
    if last is not None:
        first = max(start, start + count - last)
    return range(first, start + count)


def emit(result, t0):
    result["seconds"] = round(time.monotonic() - t0, 3)
    print(json.dumps(result), flush=True)


def note(msg):
    print(f"kvblocks: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------- store
# The one vLLM-style block writer: this tool, scripts/bench (kvbench.py,
# trace.py) and the test helpers (tests/sh/helpers/blocks.py, stress.py) all
# store through write_tmp / store_file.


def write_tmp(dest, data, direct=True, phase=None):
    """The first half of vLLM's store of one block file at `dest`: makedirs
    of its directory; open(<dest>_<16 hex>.tmp, O_CREAT|O_EXCL|O_WRONLY|
    O_TRUNC, plus O_DIRECT when `direct`, mode 0644); one write() of all of
    `data` (bytes-like, page-aligned when `direct`; or a function returning
    them, called once the directory is there, so a store that fails early
    does not pay for making its content); close. Returns the
    temporary's path. `phase(tmp)` is called just before the write and
    `phase(None)` once the close has returned or the store failed, so a
    caller can tell which stores are in flight. Raises OSError (EIO for a
    short write), after removing the temporary."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if callable(data):
        data = data()
    tmp = f"{dest}_{secrets.token_hex(8)}.tmp"
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC | (O_DIRECT if direct else 0)
    fd = os.open(tmp, flags, 0o644)
    try:
        try:
            if phase:
                phase(tmp)
            n = os.write(fd, data)
        finally:
            os.close(fd)
            if phase:
                phase(None)
        if n != len(data):
            raise OSError(errno.EIO, f"short write: {n} of {len(data)} bytes", tmp)
    except BaseException:
        _discard(tmp)
        raise
    return tmp


def _discard(tmp):
    """Removes a failed store's temporary, if it is still there."""
    try:
        os.unlink(tmp)
    except OSError:
        pass


def store_file(dest, data, direct=True, phase=None):
    """vLLM's store of one block file: write_tmp, then rename(tmp, dest). No
    exists() check and no fsync. Raises OSError, after removing the
    temporary."""
    tmp = write_tmp(dest, data, direct, phase)
    try:
        os.rename(tmp, dest)
    except BaseException:
        _discard(tmp)
        raise


def store_one(root, seed, i, size, flags, bufs):
    """Returns 'stored' | 'skipped'; raises OSError on failure."""
    dest = block_path(root, seed, i)
    if os.path.exists(dest):
        return "skipped"
    def content():
        buf = bufs.get(size)
        buf[:size] = block_content(seed, i, size)
        return memoryview(buf)[:size]

    store_file(dest, content, direct=bool(flags & O_DIRECT))
    return "stored"


def cmd_store(args):
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC
    if not args.no_direct:
        if not O_DIRECT:
            sys.exit("kvblocks: O_DIRECT is not available on this platform (use --no-direct)")
        if args.size % PAGE:
            sys.exit(f"kvblocks: with O_DIRECT --size must be a multiple of {PAGE}")
        flags |= O_DIRECT
    res = {"stored": 0, "skipped": 0, "enospc": 0, "errors": 0, "bytes": 0}
    lock = threading.Lock()
    bufs = Buffers()
    shown = [0]

    def work(i):
        try:
            what = store_one(args.root, args.seed, i, args.size, flags, bufs)
        except OSError as e:
            with lock:
                key = "enospc" if e.errno == errno.ENOSPC else "errors"
                res[key] += 1
                if key == "errors" or shown[0] < 3:
                    shown[0] += 1
                    note(f"store block {i}: {e}")
            return
        with lock:
            res[what] += 1
            if what == "stored":
                res["bytes"] += args.size

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.threads) as ex:
        list(ex.map(work, indices(args.start, args.count)))
    emit(res, t0)
    return 1 if res["errors"] else 0


# ---------------------------------------------------------------------- load


def load_one(root, seed, i, want_size, flags, bufs):
    """Returns ('loaded'|'missing'|'short'|'corrupt', nbytes); raises OSError."""
    dest = block_path(root, seed, i)
    try:
        fd = os.open(dest, flags)
    except FileNotFoundError:
        return "missing", 0
    try:
        size = os.fstat(fd).st_size
        buf = bufs.get(size)
        n = os.readv(fd, [buf])  # whole (aligned) buffer: one request
    finally:
        os.close(fd)
    if n != size or (want_size is not None and size != want_size):
        note(f"load block {i}: read {n} bytes, file has {size}, expected "
             f"{want_size if want_size is not None else size}")
        return "short", n
    if buf[:size] != block_content(seed, i, size):
        note(f"load block {i}: content mismatch ({dest})")
        return "corrupt", n
    return "loaded", n


def cmd_load(args):
    flags = os.O_RDONLY
    if not args.no_direct:
        if not O_DIRECT:
            sys.exit("kvblocks: O_DIRECT is not available on this platform (use --no-direct)")
        flags |= O_DIRECT
    res = {"loaded": 0, "missing": 0, "corrupt": 0, "short": 0, "errors": 0, "bytes": 0}
    lock = threading.Lock()
    bufs = Buffers()

    def work(i):
        try:
            what, n = load_one(args.root, args.seed, i, args.size, flags, bufs)
        except OSError as e:
            with lock:
                res["errors"] += 1
                note(f"load block {i}: {e}")
            return
        with lock:
            res[what] += 1
            res["bytes"] += n

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.threads) as ex:
        list(ex.map(work, indices(args.start, args.count, args.last)))
    emit(res, t0)
    return 1 if (res["corrupt"] or res["short"] or res["errors"]) else 0


# ---------------------------------------------------------------------- main


def positive(text):
    v = int(text)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return v


def non_negative(text):
    v = int(text)
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return v


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Store/load vLLM-style KV block files (sha256-named *.bin, "
                    "tmp+rename, O_DIRECT) and verify their content.")
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp):
        sp.add_argument("root", metavar="ROOT", help="directory that holds the blocks")
        sp.add_argument("--count", type=non_negative, required=True,
                        help="number of block indices (start .. start+count-1)")
        sp.add_argument("--seed", default="0", help="names and content derive from it (default 0)")
        sp.add_argument("--start", type=non_negative, default=0, help="first block index (default 0)")
        sp.add_argument("--threads", type=positive, default=4, help="parallel workers (default 4)")
        sp.add_argument("--no-direct", action="store_true", help="buffered I/O instead of O_DIRECT")

    s = sub.add_parser("store", help="write blocks that do not exist yet")
    common(s)
    s.add_argument("--size", type=parse_size, default=parse_size("2M"),
                   help="bytes per block, binary units (default 2M = 2 MiB)")
    s.set_defaults(func=cmd_store)

    l = sub.add_parser("load", help="read blocks back and verify every byte")
    common(l)
    l.add_argument("--last", type=non_negative, default=None,
                   help="only the last K indices of the range")
    l.add_argument("--size", type=parse_size, default=None,
                   help="expected bytes per block; a different file size counts as short")
    l.set_defaults(func=cmd_load)

    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
