#!/usr/bin/env python3
"""Close-to-open across two mounts of one shared tier, interleaving forced.

  close_to_open.py --count N --size 2M WRITE_DIR READ_DIR

For each of N fresh names: write a block through WRITE_DIR (node A), fork a
child that keeps the open file description alive (so the kernel's RELEASE
cannot happen yet: only the FLUSH of close(2) can), close(2) in the parent,
then at once open and read the same name through READ_DIR (node B), compare
with the bytes written, and let the child go. Prints one JSON line:
{"blocks": N, "whole": K, "short": [[name, bytes read], ...]}.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blocks import content, size_of  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--size", default="2M")
    ap.add_argument("write_dir")
    ap.add_argument("read_dir")
    a = ap.parse_args()
    size = size_of(a.size)
    out = {"blocks": a.count, "whole": 0, "short": []}
    for i in range(a.count):
        name = "c2o-%d-%d.bin" % (os.getpid(), i)
        data = content(size, name)
        fd = os.open(os.path.join(a.write_dir, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, data)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # holds the file description until the parent has read
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        os.close(r)
        os.close(fd)  # FLUSH now; RELEASE only after the child exits
        try:
            with open(os.path.join(a.read_dir, name), "rb") as f:
                got = f.read()
        except OSError as e:
            got = b""
            out["short"].append([name, str(e)])
        else:
            if got == data:
                out["whole"] += 1
            else:
                out["short"].append([name, len(got)])
        os.close(w)
        os.waitpid(pid, 0)
    print(json.dumps(out))
    return 0 if out["whole"] == a.count else 1


if __name__ == "__main__":
    sys.exit(main())
