#!/usr/bin/env bash
# Metrics file: -o metrics_file=PATH exists as soon as the mount is live,
# every line is valid Prometheus text exposition format (helpers/promcheck.py;
# and prometheus_client's parser when installed), values agree with the
# status, it is rewritten every metrics_interval by rename (a new inode each
# time: never a partial file), and removed at a clean shutdown. Bad metrics options are refused
# before mounting.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../lib-daemon.sh"

PROMDIR="$BFS_TMP/textfile"; mkdir "$PROMDIR"
PROM="$PROMDIR/boundfs.prom"

# ---- refused before mounting
for bad in "metrics_file=$BFS_TMP/nodir/x.prom" "metrics_file=$BACKING/x.prom" "metrics_file=$BFS_TMP" "metrics_file=$PROM,metrics_interval=0s" \
    "metrics_file=$PROM,metrics_interval=soon"; do
    err=$("$BOUNDFS" -f "$BACKING" "$MNT" -o "max_size=64M,$bad" 2>&1); rc=$?
    assert_eq 2 "$rc" "exit status with $bad"
    [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$bad: not one line: $err"
    ! bfs_is_mounted "$MNT" || fail "mounted with $bad"
done

# ---- written before the mount is reported live (daemon mode returns then);
# valid; agrees with the status
bfs_run_reaped "$BOUNDFS" "$BACKING" "$MNT" -o "max_size=64M,metrics_file=$PROM,metrics_interval=1s"
assert_eq 0 "$BFS_CMD_RC" "daemon-mode mount with a metrics file"
[ -f "$PROM" ] || fail "no metrics file once the mount is live"
check=$($PY "$BFS_HELPERS/promcheck.py" "$PROM") || fail "metrics file invalid: $check"
log "metrics file: $check"
metric() { # NAME: the value of NAME in the metrics file
    awk -v n="$1" 'index($0, n "{") == 1 { print $NF }' "$PROM"
}
assert_eq $((64 * MiB)) "$(metric boundfs_max_size_bytes)" "boundfs_max_size_bytes"
grep -q "^boundfs_usage_bytes{mountpoint=\"$MNT\"} " "$PROM" || fail "usage sample lacks the mountpoint label"

# ---- rewritten every interval
mkdir -p "$MNT/kv"
for i in 0 1 2; do mkblock "$MNT/kv/$i.bin" 1M "$i"; done
has_three() { [ "$(metric boundfs_block_files)" = 3 ]; }
poll_until 5 "boundfs_block_files 3 in the metrics file" has_three
check=$($PY "$BFS_HELPERS/promcheck.py" "$PROM") || fail "metrics file invalid after writes: $check"
# the values track the status: once the writes are done, the next rewrite
# shows what the status shows
tracks_status() {
    [ "$(stats_field usage)" = "$(metric boundfs_usage_bytes)" ] &&
        [ "$(stats_field evictable_bytes)" = "$(metric boundfs_evictable_bytes)" ] &&
        [ "$(du_backing)" = "$(metric boundfs_usage_bytes)" ]
}
poll_until 5 "metrics file agrees with the status and du" tracks_status

# ---- never a partial file: each rewrite is a new file renamed over the old
# one (a new inode), so a scrape opens either the old file or the new one
ino0=$(stat -c %i "$PROM")
renamed() { [ "$(stat -c %i "$PROM" 2>/dev/null)" != "$ino0" ]; }
poll_until 5 "the metrics file replaced by rename" renamed
check=$($PY "$BFS_HELPERS/promcheck.py" "$PROM") || fail "metrics file invalid after a rewrite: $check"

# ---- removed at a clean shutdown, no temporary left
umount "$MNT" || fail "umount"
bfs_expect_daemon_exit 0 "after umount"
[ ! -e "$PROM" ] || fail "metrics file left after a clean shutdown"
assert_eq "" "$(ls -A "$PROMDIR")" "files left in the metrics directory"
bfs_done
