#!/usr/bin/env python3
"""What a bounded KV tier costs the backing filesystem itself, without FUSE
(Python 3 standard library only; see docs/performance.md, "Where the time
goes").

  inode_churn.py DIR N K

Runs N stores (mkdir of a fresh directory + create of one file in it) twice
under DIR: once keeping everything, once keeping only the newest K (each
store past K unlinks the oldest file and removes its directory, as boundfs's
eviction and its reaping of emptied hash directories do). Prints one JSON
line {"n", "k", "unbounded_s", "bounded_s", "ratio"}. On ext4 without a
journal the bounded run is several times slower: ext4 skips inodes freed in
the last minute when it allocates one (fs/ext4/ialloc.c, recently_deleted),
one by one. Removes what it created.
"""

import collections
import json
import os
import shutil
import sys
import time


def run(root, n, keep):
    os.makedirs(root)
    live = collections.deque()
    t = time.perf_counter()
    for i in range(n):
        d = os.path.join(root, f"{i:x}")
        os.mkdir(d)
        os.close(os.open(os.path.join(d, "x.bin"), os.O_CREAT | os.O_WRONLY, 0o644))
        live.append(d)
        if keep and len(live) > keep:
            old = live.popleft()
            os.unlink(os.path.join(old, "x.bin"))
            os.rmdir(old)
    took = time.perf_counter() - t
    shutil.rmtree(root)
    return took


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: inode_churn.py DIR N K   (DIR must not exist yet; N stores, keep the newest K)")
    base, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if os.path.exists(base):
        sys.exit(f"inode_churn.py: {base} exists; give a new path")
    a = run(os.path.join(base, "unbounded"), n, 0)
    b = run(os.path.join(base, "bounded"), n, k)
    os.rmdir(base)
    print(json.dumps({"n": n, "k": k, "unbounded_s": round(a, 3), "bounded_s": round(b, 3), "ratio": round(b / a, 2)}))


if __name__ == "__main__":
    main()
