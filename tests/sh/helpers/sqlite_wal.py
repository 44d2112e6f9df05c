#!/usr/bin/env python3
"""A WAL-mode SQLite database with a concurrent reader in another process,
the interleaving forced step by step (no sleeps): the reader is a child
process driven over a pipe, one command per line, one answer per line.

usage: sqlite_wal.py DB          run the whole sequence; exit 0 if every
                                 answer is the one SQLite promises
       sqlite_wal.py --reader DB (the child)

What SQLite's WAL mode promises (https://sqlite.org/wal.html): a reader sees
the last commit made before its read transaction began, however many commits
come after; readers and a writer run at once; a checkpoint copies the WAL
into the database without disturbing readers.  Reader and writer share the
wal-index through a MAP_SHARED mapping of DB-shm, so this also checks that
two processes mapping one file through the directory see each other's
stores.
"""
import sqlite3
import subprocess
import sys


def reader(db):
    con = sqlite3.connect(db, isolation_level=None, timeout=10)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "count":
            out = con.execute("select count(*) from t").fetchone()[0]
        elif cmd == "begin":
            con.execute("begin")
            out = con.execute("select count(*) from t").fetchone()[0]
        elif cmd == "end":
            con.execute("commit")
            out = "ok"
        elif cmd == "mode":
            out = con.execute("pragma journal_mode").fetchone()[0]
        else:
            out = "unknown command %r" % cmd
        print(out, flush=True)
    con.close()


def main(db):
    failures = []

    def want(expected, got, what):
        status = "ok" if str(expected) == str(got) else "FAILED"
        print("%-60s %s (expected %s, got %s)" % (what, status, expected, got))
        if status != "ok":
            failures.append(what)

    w = sqlite3.connect(db, isolation_level=None, timeout=10)
    want("wal", w.execute("pragma journal_mode=wal").fetchone()[0], "journal_mode=wal")
    w.execute("create table t(a integer primary key, b text)")
    w.execute("begin")
    w.executemany("insert into t(b) values (?)", [("row %d" % (i * 10),) for i in range(100)])
    w.execute("commit")

    child = subprocess.Popen([sys.executable, __file__, "--reader", db],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(cmd):
        child.stdin.write(cmd + "\n")
        child.stdin.flush()
        line = child.stdout.readline()
        if not line:
            raise SystemExit("the reader process died answering %r" % cmd)
        return line.strip()

    try:
        want("wal", ask("mode"), "the reader sees journal_mode wal")
        want(100, ask("count"), "the reader sees the first commit")
        want(100, ask("begin"), "the reader opens a read transaction")
        w.execute("begin")
        w.executemany("insert into t(b) values (?)", [("more %d" % i,) for i in range(100)])
        want(100, ask("count"), "uncommitted rows are invisible to the reader")
        w.execute("commit")
        want(100, ask("count"), "the reader's snapshot holds across a commit")
        want(100, ask("count"), "... and again")
        want("ok", ask("end"), "the reader ends its transaction")
        want(200, ask("count"), "the reader now sees the second commit")
        busy, log, done = w.execute("pragma wal_checkpoint(passive)").fetchone()
        want("0 True", "%d %s" % (busy, log == done), "a passive checkpoint copies every frame")
        w.execute("insert into t(b) values ('after checkpoint')")
        want(201, ask("count"), "the reader sees a commit made after the checkpoint")
        busy, log, done = w.execute("pragma wal_checkpoint(truncate)").fetchone()
        want("0 0 0", "%d %d %d" % (busy, log, done), "a truncating checkpoint empties the WAL")
        w.execute("insert into t(b) values ('last')")
        want(202, ask("count"), "the reader sees a commit into the emptied WAL")
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    want(0, child.returncode, "the reader exits 0")
    w.close()

    con = sqlite3.connect(db)
    want("ok", con.execute("pragma integrity_check").fetchone()[0], "integrity_check on reopen")
    want(202, con.execute("select count(*) from t").fetchone()[0], "rows after reopen")
    want("wal", con.execute("pragma journal_mode").fetchone()[0], "still WAL after reopen")
    con.close()
    if failures:
        sys.exit("%d WAL step(s) failed: %s" % (len(failures), "; ".join(failures)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--reader":
        reader(sys.argv[2])
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
