#!/usr/bin/env python3
"""promcheck.py FILE: checks that every line of FILE is valid Prometheus text
exposition format (prometheus.io/docs/instrumenting/exposition_formats), in
the canonical spacing boundfs writes (single spaces, none before `{`), and
follows boundfs's conventions. Prints one line per problem and exits 1 if
there is any; prints "ok N families, M samples" otherwise.

Format: `# HELP name text`, `# TYPE name type`, other `#` comments, and
samples `name{label="value",...} value [timestamp]`; label values escape
only \\, \" and \\n; TYPE comes before a family's samples, at most once;
a family's samples are contiguous; no series twice; the file ends in "\\n".
boundfs conventions: names start with boundfs_; every family has HELP and
TYPE; counters end in _total; every sample has a mountpoint label.
Histograms: a family's samples are NAME_bucket (with `le`, cumulative,
ending at le="+Inf"), NAME_sum and NAME_count, the +Inf bucket equal to the
count, per series.

When the prometheus_client package is installed, its parser must accept the
file too.
"""
import math
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
LVALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(
    rf"^(?P<name>{NAME})(?:\{{(?P<labels>(?:{LABEL}={LVALUE})(?:,{LABEL}={LVALUE})*,?)?\}})?"
    r" (?P<value>\S+)(?: (?P<ts>-?[0-9]+))?$"
)
PAIR = re.compile(rf"({LABEL})=({LVALUE})")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def value_ok(v):
    if v in ("NaN", "+Inf", "-Inf", "Inf"):
        return True
    try:
        f = float(v)
    except ValueError:
        return False
    return not math.isnan(f) and re.fullmatch(r"[-+]?[0-9.eE+-]+", v) is not None


def check(text):
    errs = []
    helps, types, seen_series, done_families = {}, {}, set(), set()
    current = None
    nsamples = 0
    hist = {}
    if not text.endswith("\n"):
        errs.append("file does not end with a newline")
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = f"line {n}: {line!r}"
        if line.startswith("#"):
            m = re.match(rf"^# (HELP|TYPE) ({NAME}) (.*)$", line)
            if not m:
                if line.startswith("# HELP") or line.startswith("# TYPE"):
                    errs.append(f"{where}: malformed HELP/TYPE")
                continue
            kind, name, rest = m.groups()
            table = helps if kind == "HELP" else types
            if name in table:
                errs.append(f"{where}: second {kind} for {name}")
            if kind == "TYPE":
                if rest not in TYPES:
                    errs.append(f"{where}: unknown type {rest}")
                if name in done_families or name == current:
                    errs.append(f"{where}: TYPE after samples of {name}")
            elif re.search(r"\\[^\\n]", rest):
                errs.append(f"{where}: bad escape in HELP")
            table[name] = rest
            continue
        if line == "":
            errs.append(f"{where}: empty line")
            continue
        m = SAMPLE.match(line)
        if not m:
            errs.append(f"{where}: not a sample line")
            continue
        nsamples += 1
        sample = m.group("name")
        labels = tuple(PAIR.findall(m.group("labels") or ""))
        # a histogram's samples belong to the family named without the suffix
        name = sample
        for suffix in ("_bucket", "_sum", "_count"):
            base = sample[: -len(suffix)]
            if sample.endswith(suffix) and types.get(base) == "histogram":
                name = base
                rest = tuple(kv for kv in labels if kv[0] != "le")
                h = hist.setdefault((base, rest), {"last": -1.0, "inf": None, "count": None})
                if suffix == "_bucket":
                    le = dict(labels).get("le")
                    v = float(m.group("value"))
                    if le is None:
                        errs.append(f"{where}: bucket without le")
                    elif v < h["last"]:
                        errs.append(f"{where}: buckets not cumulative")
                    h["last"] = v
                    if le == '"+Inf"':
                        h["inf"] = v
                elif suffix == "_count":
                    h["count"] = float(m.group("value"))
        if name == sample and types.get(name) == "histogram":
            errs.append(f"{where}: histogram sample without _bucket, _sum or _count")
        if not value_ok(m.group("value")):
            errs.append(f"{where}: bad value")
        if name != current:
            if name in done_families:
                errs.append(f"{where}: samples of {name} are not contiguous")
            if current:
                done_families.add(current)
            current = name
        keys = [k for k, _ in labels]
        if len(set(keys)) != len(keys):
            errs.append(f"{where}: a label is given twice")
        series = (sample, tuple(sorted(labels)))
        if series in seen_series:
            errs.append(f"{where}: series given twice")
        seen_series.add(series)
        # boundfs conventions
        if not name.startswith("boundfs_"):
            errs.append(f"{where}: name lacks the boundfs_ prefix")
        if name not in types or name not in helps:
            errs.append(f"{where}: {name} has no HELP or TYPE before it")
        elif types[name] == "counter" and not name.endswith("_total"):
            errs.append(f"{where}: counter {name} does not end in _total")
        if "mountpoint" not in keys:
            errs.append(f"{where}: no mountpoint label")
    for (base, rest), h in hist.items():
        if h["inf"] is None or h["inf"] != h["count"]:
            errs.append(f"histogram {base}{dict(rest)}: +Inf bucket {h['inf']} is not the count {h['count']}")
    families = {s[0] for s in seen_series} | {b for b, _ in hist}
    for name in types:
        if name not in families:
            errs.append(f"TYPE {name} has no samples")
    return errs, len(types), nsamples


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    errs, fams, samples = check(text)
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        pass
    else:
        try:
            parsed = list(text_string_to_metric_families(text))
            if sum(len(f.samples) for f in parsed) != samples:
                errs.append("prometheus_client parsed a different number of samples")
        except Exception as e:  # noqa: BLE001 - any parser failure is a finding
            errs.append(f"prometheus_client parser: {e}")
    for e in errs:
        print(e)
    if errs:
        sys.exit(1)
    print(f"ok {fams} families, {samples} samples")


if __name__ == "__main__":
    main()
