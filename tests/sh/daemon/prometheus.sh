#!/usr/bin/env bash
# /metrics over HTTP scraped by a real Prometheus server: -o metrics_listen
# refuses a port in use and a bad address before mounting (one line, no
# mount); serves the same families as the metrics file; Prometheus
# (Debian's prometheus, started here by PID with its own config and
# storage, scrape interval 1s) scrapes it while blocks are stored past the
# budget (evictions) and loaded (hits and misses). Checked through
# Prometheus's query API: usage / max_size in (0, 1], an eviction rate > 0,
# the hit ratio the status shows, latency histograms present, and every
# panel query of the Grafana dashboard (mount/grafana/boundfs.json) valid
# and non-empty: on the loaded mount, where the "Shared:" panels may be
# empty (no -o shared), and on a second, -o shared mount, where all must
# have results, each with its own `instance`.
. "$(dirname "$0")/../lib.sh"

DASH="$BFS_REPO/mount/grafana/boundfs.json"
# A fleet's nodes apart: the dashboard has an `instance` variable, the
# mountpoints are those of the chosen instances, and every panel query
# selects `instance=~"$instance"` wherever it selects the mountpoint (and
# joins on both), so two nodes' /mnt/kv are not summed or mixed up.
$PY - "$DASH" <<'PYEOF' || fail "the Grafana dashboard does not tell instances apart"
import json, sys
d = json.load(open(sys.argv[1]))
names = [v["name"] for v in d["templating"]["list"]]
mp = next(v for v in d["templating"]["list"] if v["name"] == "mountpoint")
bad = [] if "instance" in names else ["no instance variable: %s" % names]
if "$instance" not in mp["definition"]:
    bad.append("the mountpoint variable ignores $instance: " + mp["definition"])
for p in d["panels"]:
    for t in p.get("targets", []):
        e = t.get("expr", "")
        if e.count('mountpoint=~"$mountpoint"') != e.count('instance=~"$instance"') or "on(mountpoint)" in e:
            bad.append("%s: %s" % (p.get("title"), e))
bad and print("\n".join(bad[:5]), file=sys.stderr)
sys.exit(1 if bad else 0)
PYEOF
command -v prometheus >/dev/null || skip "prometheus not installed (scripts/install-deps.sh --tests installs it)"
PQ="$PY $BFS_HELPERS/promquery.py"

# free_port: a TCP port nothing listens on now, on 127.0.0.1
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port) PROM_PORT=$(free_port) SHARED_PORT=$(free_port)
[ "$(printf '%s\n' "$PORT" "$PROM_PORT" "$SHARED_PORT" | sort -u | wc -l)" = 3 ] || fail "free_port gave one port twice"

# ---- refused before mounting: a port in use, a bad address
$PY -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("up", flush=True); time.sleep(60)' \
    "$PORT" >"$BFS_TMP/holder.out" &
HOLDER=$!; bfs_bg "$HOLDER"
poll_until 5 "the port holder listening" grep -q up "$BFS_TMP/holder.out"
for bad in "127.0.0.1:$PORT" "localhost:$PORT" "127.0.0.1:0" "10.255.255.254:$PORT"; do
    err=$("$BOUNDFS" -f "$BACKING" "$MNT" -o "max_size=64M,metrics_listen=$bad" 2>&1); rc=$?
    assert_ne 0 "$rc" "exit status with metrics_listen=$bad"
    [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "metrics_listen=$bad: not one line: $err"
    case $err in *metrics_listen*) ;; *) fail "metrics_listen=$bad: the error does not name the option: $err" ;; esac
    ! bfs_is_mounted "$MNT" || fail "mounted with metrics_listen=$bad"
    log "metrics_listen=$bad refused: $err"
done
kill "$HOLDER"; wait "$HOLDER" 2>/dev/null

# ---- served over HTTP: the same families as the metrics file
bfs_mount "max_size=64M,metrics_listen=127.0.0.1:$PORT,metrics_file=$BFS_TMP/boundfs.prom,metrics_interval=1s"
http() { $PY -c 'import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }
http "http://127.0.0.1:$PORT/metrics" >"$BFS_TMP/scrape.prom" || fail "GET /metrics failed"
check=$($PY "$BFS_HELPERS/promcheck.py" "$BFS_TMP/scrape.prom") || fail "/metrics invalid: $check"
grep '^# TYPE' "$BFS_TMP/scrape.prom" >"$BFS_TMP/types.http"
grep '^# TYPE' "$BFS_TMP/boundfs.prom" >"$BFS_TMP/types.file"
cmp -s "$BFS_TMP/types.http" "$BFS_TMP/types.file" || fail "/metrics and the metrics file differ: $(diff "$BFS_TMP/types.http" "$BFS_TMP/types.file")"
grep -q '^# TYPE boundfs_fuse_request_duration_seconds histogram$' "$BFS_TMP/scrape.prom" || fail "no latency histogram in /metrics"
log "/metrics: $check"
# a second mount, -o shared (its own BACKING; the shared tier's figures)
B2="$BFS_TMP/backing2" M2="$BFS_TMP/mnt2"; mkdir "$B2" "$M2"
"$BOUNDFS" -f "$B2" "$M2" -o "max_size=64M,shared,metrics_listen=127.0.0.1:$SHARED_PORT" 2>"$BFS_TMP/shared.log" &
SHARED_PID=$!; bfs_bg "$SHARED_PID"
poll_until 10 "the -o shared mount ($(tail -1 "$BFS_TMP/shared.log"))" bfs_is_mounted "$M2" fuse
out=$(kv_store "$M2/kv" 4 shared 1M 1); [ "$(json_get "$out" stored)" = 4 ] || fail "store on the -o shared mount: $out"

# ---- a real Prometheus scraping it every second
cat >"$BFS_TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: boundfs
    static_configs:
      - targets: ["127.0.0.1:$PORT", "127.0.0.1:$SHARED_PORT"]
EOF
prometheus --config.file="$BFS_TMP/prometheus.yml" --storage.tsdb.path="$BFS_TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$BFS_TMP/prometheus.log" 2>&1 &
PROM_PID=$!; bfs_bg "$PROM_PID"
URL="http://127.0.0.1:$PROM_PORT"
ready() { http "$URL/-/ready" >/dev/null 2>&1; }
poll_until 20 "prometheus ready ($(tail -2 "$BFS_TMP/prometheus.log"))" ready
value() { $PQ "$URL" value "$1"; }
up() { [ "$(value "count(up{job=\"boundfs\"} == 1)" 2>/dev/null)" = 2 ]; }
poll_until 10 "prometheus scraping both mounts (up == 1)" up

# ---- the load: 48 blocks of 2 MiB into 64M (evictions), then loads of all
# (the evicted ones miss, the rest hit)
out=$(kv_store "$MNT/kv" 48 prom 2M 4); log "store: $out"
[ "$(json_get "$out" errors)" = 0 ] || fail "store errors: $out"
out=$(kv_load "$MNT/kv" 48 prom); log "load: $out"
evictions=$(stats_field evictions)
[ "$evictions" -gt 0 ] || fail "no evictions after storing 96 MiB into 64 MiB"
opens=$(stats_field block_opens) misses=$(stats_field lookup_misses)
[ "$opens" -gt 0 ] && [ "$misses" -gt 0 ] || fail "want hits and misses: $opens opens, $misses misses"
# Prometheus has scraped the counts of the status once its figures match
SEL="{mountpoint=\"$MNT\"}"
scraped() {
    [ "$(value "boundfs_evictions_total$SEL" 2>/dev/null)" = "$evictions" ] &&
        [ "$(value "boundfs_block_opens_total$SEL" 2>/dev/null)" = "$opens" ] &&
        [ "$(value "boundfs_lookup_misses_total$SEL" 2>/dev/null)" = "$misses" ]
}
poll_until 10 "prometheus showing the status's counts ($evictions evictions, $opens opens, $misses misses)" scraped

# ---- the assertions, through the query API
within() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v > lo && v <= hi) }'; }
frac=$(value "boundfs_usage_bytes$SEL / boundfs_max_size_bytes$SEL") || fail "usage / max_size query"
within "$frac" 0 1 || fail "usage / max_size = $frac, not in (0, 1]"
rate=$(value "rate(boundfs_evictions_total$SEL[1m])") || fail "eviction rate query"
within "$rate" 0 1e12 || fail "eviction rate $rate, not > 0"
hit=$(value "boundfs_block_opens_total$SEL / (boundfs_block_opens_total$SEL + boundfs_lookup_misses_total$SEL)") || fail "hit ratio query"
want=$(awk -v o="$opens" -v m="$misses" 'BEGIN { print o / (o + m) }')
awk -v a="$hit" -v b="$want" 'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }' ||
    fail "hit ratio in Prometheus $hit, the status says $want"
p99=$(value "histogram_quantile(0.99, sum by (le) (rate(boundfs_fuse_request_duration_seconds_bucket{mountpoint=\"$MNT\",op=\"CREATE\"}[1m])))") ||
    fail "CREATE p99 query"
within "$p99" 0 10 || fail "CREATE p99 $p99 s from the histogram"
log "usage/max_size $frac, eviction rate $rate/s, hit ratio $hit (status $want), CREATE p99 ${p99}s"

# ---- every panel query of the dashboard: valid, and a result
# (the mountpoint as the $mountpoint regex: its "." match themselves too)
out=$($PQ "$URL" dashboard "$DASH" --var "instance=127.0.0.1:$PORT" --var "mountpoint=$MNT" --var "__rate_interval=30s" --may-be-empty "Shared:"); rc=$?
[ -n "${VERBOSE:-}" ] && printf '%s\n' "$out"
case $rc in
    0) log "dashboard: $(grep -c '^OK' <<<"$out") panel queries with results, $(grep -c '^EMPTY (allowed)' <<<"$out") shared-tier ones empty" ;;
    2) fail "dashboard queries invalid: $(grep '^INVALID' <<<"$out")" ;;
    *) fail "dashboard queries empty: $(grep '^EMPTY [^(]' <<<"$out")" ;;
esac
# on the -o shared mount every panel has a result, the "Shared:" ones too
out=$($PQ "$URL" dashboard "$DASH" --var "instance=127.0.0.1:$SHARED_PORT" --var "mountpoint=$M2" --var "__rate_interval=30s"); rc=$?
[ -n "${VERBOSE:-}" ] && grep '^[A-Z]* Shared:' <<<"$out"
case $rc in
    0) log "dashboard on the -o shared mount: $(grep -c '^OK Shared:' <<<"$out") shared-tier queries with results" ;;
    2) fail "dashboard queries invalid on the shared mount: $(grep '^INVALID' <<<"$out")" ;;
    *) fail "dashboard queries empty on the shared mount: $(grep '^EMPTY' <<<"$out")" ;;
esac

# ---- stopped by PID
kill -TERM "$PROM_PID"
bfs_wait_exit "$PROM_PID" 10 || fail "prometheus did not stop on SIGTERM"
umount "$M2" || fail "umount $M2"
bfs_wait_exit "$SHARED_PID" 10 || fail "the -o shared daemon did not exit after umount"
bfs_unmount
bfs_done
