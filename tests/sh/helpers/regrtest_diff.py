#!/usr/bin/env python3
"""Compare two runs of CPython's regression tests (`python -m test
--junit-xml FILE`), one in a plain directory and one under the mount.

usage: regrtest_diff.py PLAIN.xml MOUNT.xml [--known FILE]

Prints, per test module, how many cases ran, failed (failure or error) and
were skipped on each side; then every case that passed on the plain
directory and failed, errored, was skipped or did not run at all under the
mount.  --known FILE lists cases allowed to differ, one per line: the full
case name, a tab, and the reason (printed with the case).  The last line is
"N test cases fail only on the mount (K known), S skipped only on the mount".
Exit status: 0 when no case outside the known list fails only on the mount
(skips are reported, not failed: a mount-only skip names the feature a test
found missing), 1 otherwise, 2 if a file cannot be read.
"""
import collections
import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    """{case name: 'pass' | 'fail' | 'skip'} of one junit file"""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit("regrtest_diff: cannot read %s: %s" % (path, e))
    res = {}
    for tc in root.iter("testcase"):
        kinds = {child.tag for child in tc}
        if kinds & {"failure", "error"}:
            res[tc.get("name")] = "fail"
        elif "skipped" in kinds:
            res[tc.get("name")] = "skip"
        else:
            res[tc.get("name")] = "pass"
    return res


def module_of(name):
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else name


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    plain, mount = outcomes(argv[1]), outcomes(argv[2])
    known = {}
    if "--known" in argv:
        with open(argv[argv.index("--known") + 1]) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    name, _, why = line.rstrip("\n").partition("\t")
                    known[name.strip()] = why.strip()
    table = collections.defaultdict(lambda: [0] * 6)
    for side, res in ((0, plain), (3, mount)):
        for name, out in res.items():
            row = table[module_of(name)]
            row[side] += 1
            row[side + 1] += out == "fail"
            row[side + 2] += out == "skip"
    print("%-28s %22s   %22s" % ("module", "plain: run fail skip", "mount: run fail skip"))
    for mod in sorted(table):
        print("%-28s %10d %5d %5d   %10d %5d %5d" % (mod, *table[mod]))
    failed, skipped, known_hit = [], [], []
    for name in sorted(plain):
        if plain[name] != "pass":
            continue
        got = mount.get(name, "did not run")
        if got == "pass":
            continue
        if got == "skip":
            skipped.append(name)
        elif name in known:
            known_hit.append(name)
        else:
            failed.append((name, got))
    for name, got in failed:
        print("MOUNT ONLY: %s: %s" % (name, got))
    for name in known_hit:
        print("KNOWN: %s: %s" % (name, known[name]))
    for name in skipped:
        print("skipped only on the mount: %s" % name)
    print("%d test cases fail only on the mount (%d known), %d skipped only on the mount"
          % (len(failed) + len(known_hit), len(known_hit), len(skipped)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
