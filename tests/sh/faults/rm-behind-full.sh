#!/usr/bin/env bash
# Deleting in BACKING while the mount is nearly full: the
# blocks stored after the delete are all kept (the deleted ones stop counting
# as soon as eviction meets them, instead of live blocks being evicted to pay
# for them), and a create under a directory the kernel still caches but that
# is gone from BACKING succeeds (the daemon recreates it).
# Before: (a) 23 of 30 stored, 7 ENOENT, none left; (b) only 2 of 5 left.
. "$(dirname "$0")/../lib.sh"

# (b) 7 blocks under 16M, 5 removed behind the daemon, 3 more stored.
bfs_mount max_size=16M
mkdir -p "$MNT/kv"
for i in $(seq 1 7); do mkblock "$MNT/kv/n$i.bin" 2M; done
rm "$BACKING"/kv/n{1,2,3,4,5}.bin
for i in 1 2 3; do mkblock "$MNT/kv/p$i.bin" 2M; done
for f in n6 n7 p1 p2 p3; do
    assert_exists "$BACKING/kv/$f.bin" "$f.bin evicted to pay for blocks removed behind the daemon"
done
log "(b) kept n6 n7 p1 p2 p3; usage $(stats_field usage), du $(du_backing)"

# A create and a mkdir in cached directories removed behind the daemon.
mkdir -p "$MNT/kv/a/b"
mkblock "$MNT/kv/a/b/x.bin" 4K
stat "$MNT/kv/a/b" >/dev/null
rm -rf "$BACKING/kv/a"
mkblock "$MNT/kv/a/b/y.bin" 4K
assert_exists "$BACKING/kv/a/b/y.bin" "create under a directory removed behind the daemon"
mkdir "$MNT/kv/a/b/c" || fail "mkdir under a directory removed behind the daemon"
assert_exists "$BACKING/kv/a/b/c"
[ "$(checkblock "$MNT/kv/a/b/y.bin" 4K)" = OK ] || fail "y.bin not readable through the mount"
bfs_unmount

# (a) 94 vLLM-style blocks under 200M, rm -rf BACKING/*, 30 more stored.
bfs_mount max_size=200M
r=$(kv_store "$MNT" 94 first)
assert_eq 94 "$(json_get "$r" stored)" "first store: $r"
rm -rf "${BACKING:?}"/*
r=$(kv_store "$MNT" 30 second)
assert_eq 30 "$(json_get "$r" stored)" "stores after rm -rf in BACKING: $r"
r=$(kv_load "$MNT" 30 second)
assert_eq 30 "$(json_get "$r" loaded)" "blocks stored after the rm -rf, read back: $r"
n=$(find "$BACKING" -name '*.bin' | wc -l)
assert_eq 30 "$n" "block files left in BACKING"
log "(a) 30 of 30 stored and present; usage $(stats_field usage), du $(du_backing)"

# (c) Status and du agree within a second of an rm -rf in BACKING, with no
# request through the mount meanwhile (the inotify watch on BACKING asks for
# a reconcile pass at once; the periodic one is 60 s away).
rm -rf "${BACKING:?}"/*
t0=$(date +%s%N)
# One sample costs a getfattr and a du (no python: the machine is shared).
usage_now() { stats_json | grep -o '"usage":[0-9]*' | cut -d: -f2; }
agree() { [ "$(usage_now)" -le $(( $(du_backing) + 64 * 1024 )) ]; }
poll_until 5 "status usage to match du after rm -rf in BACKING" agree
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
log "(c) status and du agree ${ms} ms after rm -rf: usage $(stats_field usage), du $(du_backing)"
assert_le "$ms" 1000 "status and du agree within one second of rm -rf in BACKING"
bfs_unmount
log PASS
