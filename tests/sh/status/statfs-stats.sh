#!/usr/bin/env bash
# statfs reports the budget as df reads it (tests/sh/status/df-columns.sh checks
# every state against `boundfs status`): df total = max_size, capped by what
# BACKING's filesystem can hold; f_bfree = f_bavail = what a write can get
# before background eviction begins, high_watermark x max_size - usage + the
# evictable block files (issue 32 item 5); so df's Used is usage minus the
# evictable bytes plus the headroom above the high watermark (here 0.8, so
# Avail on an empty mount is 80 % of max_size). The user.boundfs.stats xattr on the mount root is
# one line of JSON with the documented keys and sane values.
. "$(dirname "$0")/../lib.sh"

MAX=$((64 * MiB))
HIGH=$((MAX * 8 / 10))
bfs_mount max_size=64M,high_watermark=0.8,low_watermark=0.5

statfs_check() { # check df/stat -f against du; $1 = label
    local total bsize blocks bfree bavail u ev
    read -r total < <(df -B1 --output=size "$MNT" | tail -n 1)
    assert_eq "$MAX" "$total" "df total ($1)"
    read -r bsize blocks bfree bavail < <(stat -f -c '%S %b %f %a' "$MNT")
    assert_eq "$MAX" $((blocks * bsize)) "f_blocks x f_bsize ($1)"
    assert_eq "$bfree" "$bavail" "f_bfree == f_bavail ($1)"
    u=$(du_backing); ev=$(stats_field evictable_bytes)
    local avail=$((bavail * bsize)) want=$((HIGH - u + ev)) tol=$((bsize * 2 + 64 * 1024))
    local diff=$(( avail > want ? avail - want : want - avail ))
    assert_le "$diff" "$tol" "f_bavail ($avail) vs 0.8 x max_size - du + evictable ($HIGH - $u + $ev) ($1)"
    local used=$(( (blocks - bfree) * bsize )) hu=$((u - ev + MAX - HIGH))
    diff=$(( used > hu ? used - hu : hu - used ))
    assert_le "$diff" "$tol" "df Used ($used) vs du - evictable + the headroom above the high watermark ($u - $ev + $MAX - $HIGH) ($1)"
    log "statfs ($1): bsize=$bsize total=$total used=$used avail=$avail evictable=$ev du=$u"
}
statfs_check empty
mkdir -p "$MNT/kv/a"
for i in 0 1 2; do mkblock "$MNT/kv/a/s$i.bin" 2M; done
mkblock "$MNT/config.json" 64K
mkblock "$MNT/kv/a/x.tmp" 1M
statfs_check "7 MiB written"

# ---- stats xattr
j=$(stats_json) || fail "getfattr -n user.boundfs.stats $MNT failed"
log "stats: $j"
[ "$(printf '%s' "$j" | wc -l)" -le 1 ] || fail "stats is not one line"
for k in usage max_size high_watermark low_watermark files block_files open_handles evictions evicted_bytes enospc; do
    printf '%s' "$j" | $PY -c 'import json,sys; d=json.load(sys.stdin); sys.exit(sys.argv[1] not in d)' "$k" ||
        fail "stats lacks key $k"
done
assert_eq "$MAX" "$(stats_field max_size)" "stats max_size"
assert_eq 0.8 "$($PY -c "print(float('$(stats_field high_watermark)'))")" "stats high_watermark"
assert_eq 0.5 "$($PY -c "print(float('$(stats_field low_watermark)'))")" "stats low_watermark"
assert_ge "$(stats_field files)" 5 "stats files (3 blocks + config.json + x.tmp, maybe directories too)"
assert_eq 3 "$(stats_field block_files)" "stats block_files"
assert_eq 0 "$(stats_field open_handles)" "open_handles with nothing open"
assert_eq 0 "$(stats_field evictions)" "evictions before pressure"
assert_eq 0 "$(stats_field enospc)" "enospc"
u=$(stats_field usage); d=$(du_backing)
assert_le "$(( u > d ? u - d : d - u ))" $((64 * 1024)) "stats usage ($u) vs du ($d)"

exec {f1}<"$MNT/kv/a/s0.bin" {f2}<"$MNT/config.json"
assert_eq 2 "$(stats_field open_handles)" "open_handles with two fds open"
exec {f1}<&- {f2}<&-
poll_until 5 "open_handles back to 0" test "$(stats_field open_handles)" = 0

# pressure: 40 x 2 MiB more; high 0.8 -> evict down to 0.5 x 64 MiB
res=$(kv_store "$MNT/kv" 40 stats) || fail "writer crashed"
assert_eq 0 "$(json_get "$res" errors)" "store errors ($res)"
poll_until 10 "usage <= high watermark 0.8" usage_at_most $((MAX * 80 / 100))
gone=unknown
gone_matches_stats() {
    gone=$(( 43 - $(find "$BACKING" -name '*.bin' | wc -l) ))
    [ "$gone" = "$(stats_field evictions)" ]
}
poll_until 5 "stats evictions == block files gone from BACKING ($gone)" gone_matches_stats
ev=$(stats_field evictions); eb=$(stats_field evicted_bytes)
assert_ge "$eb" $((ev * 2 * MiB)) "evicted_bytes >= evictions x 2 MiB"
assert_le "$eb" $((ev * (2 * MiB + 64 * 1024))) "evicted_bytes <= evictions x (2 MiB + 64 KiB)"
assert_eq "$(find "$BACKING" -name '*.bin' | wc -l)" "$(stats_field block_files)" "block_files after eviction"
statfs_check "after eviction"
bfs_unmount

# ---- free space capped by BACKING's own free space (8 MiB tmpfs, max 64M)
SMALL="$BFS_TMP/small"; mkdir "$SMALL"
mount -t tmpfs -o size=8M tmpfs "$SMALL" || fail "cannot mount a tmpfs for the small-backing case"
BACKING="$SMALL"
bfs_mount max_size=64M
read -r bsize blocks bavail < <(stat -f -c '%S %b %a' "$MNT")
read -r sbsize sbavail < <(stat -f -c '%S %a' "$SMALL")
assert_eq $((8 * MiB)) $((blocks * bsize)) "total with a small backing: what the 8 MiB tmpfs holds, not max_size"
assert_le $((bavail * bsize)) $((sbavail * sbsize + bsize)) "free is capped by backing free space"
log "small backing: free $((bavail * bsize)), backing free $((sbavail * sbsize))"
bfs_unmount
umount "$SMALL"
log PASS
