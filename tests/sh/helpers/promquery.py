#!/usr/bin/env python3
"""Queries a Prometheus server's HTTP API (/api/v1/query), for the shell
scenarios.

  promquery.py URL value QUERY
      prints the value of the instant query's first sample (one number);
      exit 2 for an invalid query (HTTP 400 or status "error"), 3 for an
      empty result.
  promquery.py URL dashboard FILE --var NAME=VALUE ...
      runs every target expression of every panel of the Grafana dashboard
      FILE (the variables $NAME replaced by VALUE; longest names first) and
      prints one line per query: OK / EMPTY / INVALID, the panel title and
      the expression. Exit 2 if any query is invalid; 3 if any is empty,
      except panels whose title starts with a prefix given by
      --may-be-empty PREFIX (e.g. "Shared:" on a mount without -o shared).
"""
import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request


def query(url, expr):
    """(status, result list or error text) of an instant query."""
    q = urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        try:
            body = json.load(e)
        except ValueError:
            return "error", f"HTTP {e.code}"
        return "error", f"HTTP {e.code}: {body.get('error', '')}"
    if body.get("status") != "success":
        return "error", body.get("error", "no status")
    return "success", body["data"]["result"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("value")
    v.add_argument("expr")
    d = sub.add_parser("dashboard")
    d.add_argument("file")
    d.add_argument("--var", action="append", default=[])
    d.add_argument("--may-be-empty", action="append", default=[])
    a = p.parse_args()
    url = a.url.rstrip("/")
    if a.cmd == "value":
        status, res = query(url, a.expr)
        if status != "success":
            print(f"invalid query {a.expr}: {res}", file=sys.stderr)
            return 2
        if not res:
            print(f"empty result: {a.expr}", file=sys.stderr)
            return 3
        s = res[0]
        print(s["value"][1] if "value" in s else s["values"][-1][1])
        return 0
    with open(a.file) as f:
        dash = json.load(f)
    variables = sorted((kv.split("=", 1) for kv in a.var), key=lambda kv: -len(kv[0]))
    rc, n = 0, 0
    panels = list(dash.get("panels", []))
    for panel in panels:
        panels.extend(panel.get("panels", []))  # rows may hold panels
        for t in panel.get("targets", []):
            expr = t.get("expr")
            if not expr:
                continue
            for name, val in variables:
                expr = expr.replace("$" + name, val)
            n += 1
            status, res = query(url, expr)
            title = panel.get("title", "?")
            if status != "success":
                print(f"INVALID {title}: {expr}: {res}")
                rc = 2
            elif not res:
                allowed = any(title.startswith(pre) for pre in a.may_be_empty)
                print(f"{'EMPTY (allowed)' if allowed else 'EMPTY'} {title}: {expr}")
                if not allowed and rc == 0:
                    rc = 3
            else:
                print(f"OK {title}: {expr}")
    if n == 0:
        print("no panel query found", file=sys.stderr)
        return 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
