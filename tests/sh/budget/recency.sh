#!/usr/bin/env bash
# Recency: of ten old blocks (pre-set mtimes, r0 oldest), r0 is read,
# r1 is looked up (stat), r2 is opened and closed; new blocks then push
# usage over the budget.  The oldest *untouched* blocks go, in age order,
# and the three touched ones (and the new ones) survive.
. "$(dirname "$0")/../lib.sh"

MAX=$((24 * MiB))
for i in $(seq 0 9); do mkblock_old "$BACKING/r/r$i.bin" 2M "$i"; done
bfs_mount max_size=24M

checkblock "$MNT/r/r0.bin" 2M >/dev/null || fail "read r0"      # open + read
assert_errno OK stat "$MNT/r/r1.bin"                              # lookup
assert_errno OK open "$MNT/r/r2.bin" r                            # open only
# The stamp lands in BACKING, and the mount shows it despite attr_timeout
# (the daemon invalidates the attributes it changed behind the kernel's back).
stamped() { [ "$(stat -c %Y "$BACKING/r/r1.bin")" -gt "$(date -d '2021-01-01' +%s)" ]; }
poll_until 5 "r1's mtime stamped in BACKING" stamped
same_mtime() { [ "$(stat -c %Y "$MNT/r/r1.bin")" = "$(stat -c %Y "$BACKING/r/r1.bin")" ]; }
poll_until 5 "the mount shows r1's new mtime" same_mtime
for i in 0 1 2; do mkblock "$MNT/r/new$i.bin" 2M; done            # 26 MiB > 24 MiB
poll_until 10 "usage <= high watermark" usage_at_most $((MAX * 95 / 100))

# a sweep may still be running: wait until the evictions counter matches
# the blocks gone from BACKING (bounded), then look at the order
gone_matches_stats() {
    local gone
    gone=$(( 13 - $(find "$BACKING/r" -name '*.bin' | wc -l) ))
    [ "$gone" = "$(stats_field evictions)" ]
}
poll_until 5 "stats evictions == block files gone" gone_matches_stats
pattern=""
for i in $(seq 3 9); do if [ -e "$BACKING/r/r$i.bin" ]; then pattern+="K"; else pattern+="E"; fi; done
log "untouched r3..r9 (E evicted, K kept): $pattern"
[[ $pattern =~ ^E+K*$ ]] || fail "untouched blocks not evicted oldest first: $pattern"
assert_exists "$BACKING/r/r0.bin" "r0 was read recently but evicted"
assert_exists "$BACKING/r/r1.bin" "r1 was looked up recently but evicted"
assert_exists "$BACKING/r/r2.bin" "r2 was opened recently but evicted"
for i in 0 1 2; do assert_exists "$BACKING/r/new$i.bin" "newly created block evicted before old ones"; done
assert_eq "${#pattern}" 7
bfs_unmount
log PASS
