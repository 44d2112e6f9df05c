#!/usr/bin/env bash
# A budget full of what can't be evicted is said, not hidden. Before
# this was built: with non-block files above the high watermark every new
# block was evicted right after its store (chasing a low watermark that can't
# be reached), ENOSPC stayed 0 and nothing said why; with the wrong pattern
# for the engine nothing said so either.
. "$(dirname "$0")/../lib.sh"

PROM="$BFS_TMP/metrics/boundfs.prom"
mkdir -p "$BFS_TMP/metrics"
bfs_mount max_size=64M,metrics_file=$PROM,metrics_interval=1s
wait_indexed
head -c 62M /dev/zero > "$MNT/engine.log"     # above the high watermark (60.8M)
mkdir -p "$MNT/kv"
for i in 1 2 3 4; do mkblock "$MNT/kv/b$i.bin" 256K; done   # 63M in all: fits max_size
warned() { [ -n "$(stats_field nonblock_warning)" ]; }
poll_until 10 "the non-block warning in status" warned
w=$(stats_field nonblock_warning)
log "status: $w"
case "$w" in *engine.log*) ;; *) fail "the warning does not name the biggest non-block file: $w" ;; esac
case "$w" in *'*.bin'*) ;; *) fail "the warning does not name the pattern in force: $w" ;; esac
for i in 1 2 3 4; do
    assert_exists "$BACKING/kv/b$i.bin" "b$i.bin evicted chasing a low watermark non-block files make unreachable"
done
assert_eq 0 "$(stats_field evictions)" "evictions while every block fits max_size"
"$BOUNDFS" status "$MNT" | grep -q '^WARNING .*engine.log' || fail "boundfs status shows no warning row"
metric_one() { grep -q "^boundfs_nonblock_over_high_watermark{.*} 1$" "$PROM" 2>/dev/null; }
poll_until 5 "boundfs_nonblock_over_high_watermark 1 in the metrics file" metric_one
# A write that crosses max_size still evicts what it needs, and only that.
mkblock "$MNT/kv/b5.bin" 1M                   # 64M + directories: one 256K block must go
assert_exists "$BACKING/kv/b5.bin"
assert_eq 1 "$(stats_field evictions)" "evictions for a write crossing max_size (only what it needs)"
assert_le "$(du_backing)" $((64 * 1024 * 1024 + 1024 * 1024)) "du within max_size"
n=$(grep -c "is above the high watermark" "$BFS_LOG")
assert_eq 1 "$n" "warning lines in the log (once per episode)"
rm "$MNT/engine.log"
cleared() { [ -z "$(stats_field nonblock_warning)" ]; }
# The evictor re-checks on its next wake (at most a second, and a recount every 2 s).
poll_until 10 "the warning cleared once the log is gone" cleared
bfs_unmount

# Files an engine writes under a pattern that does not match them (LMCache's *.pt).
bfs_mount max_size=64M
wait_indexed
mkdir -p "$MNT/lmc"
for i in $(seq 1 12); do
    head -c 4096 /dev/urandom > "$MNT/lmc/k$i.pt.tmp" && mv "$MNT/lmc/k$i.pt.tmp" "$MNT/lmc/k$i.pt"
done
w=$(stats_field pattern_warning)
log "status: $w"
assert_eq "12 of 12 files created since mount match no pattern (*.bin), e.g. k12.pt: set -o pattern=*.pt" "$w" \
    "pattern warning"
grep -q "12 of 12 files created since mount\|10 of 10 files created since mount" "$BFS_LOG" ||
    fail "the log does not say that files match no pattern"
bfs_unmount

# Directories alone above the high watermark (a deep hash tree of small
# blocks): the warning says so. Before, it named no file ("biggest: -").
rm -rf "${BACKING:?}"/*
bfs_mount max_size=4M
wait_indexed
mkdir "$MNT/d"
for i in $(seq 1 979); do mkdir "$MNT/d/$i" || fail "mkdir d/$i"; done  # 980 x 4 KiB: past 0.95 x 4 MiB
poll_until 10 "the non-block warning in status" warned
w=$(stats_field nonblock_warning)
log "status: $w"
case "$w" in *"biggest files: none; "9[0-9][0-9]" directories take 3."[0-9]" MiB"*) ;;
    *) fail "the warning does not say that directories take the space: $w" ;; esac
bfs_unmount
log PASS
