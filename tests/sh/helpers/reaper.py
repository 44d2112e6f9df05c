#!/usr/bin/env python3
"""reaper.py OUT -- CMD [ARGS...]

Runs CMD as a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so a daemon
that CMD forks and leaves behind becomes our child when CMD exits, and its
exit status can be read, as a test must for "the daemon exits 0".

CMD's stdout and stderr go to the file OUT (appended); the daemon inherits
them. Lines on our stdout, flushed one by one:

    started PID       CMD started with this pid
    cmd RC            CMD exited (RC, or 128+signal)
    daemon PID        a process CMD left behind (one line each), or
    daemon none
    exit PID RC       such a process exited (RC, or 128+signal)

We exit once no child is left.
"""
import ctypes
import os
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36


def code(status):
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def children():
    pids = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return pids


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: reaper.py OUT -- CMD [ARGS...]")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
    with open(sys.argv[1], "ab") as out:
        p = subprocess.Popen(sys.argv[3:], stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        print(f"started {p.pid}", flush=True)
        _, status = os.waitpid(p.pid, 0)
    print(f"cmd {code(status)}", flush=True)
    left = children()
    for pid in left:
        print(f"daemon {pid}", flush=True)
    if not left:
        print("daemon none", flush=True)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        print(f"exit {pid} {code(status)}", flush=True)


if __name__ == "__main__":
    main()
