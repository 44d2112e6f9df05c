#!/usr/bin/env bash
# ENOSPC only when the bytes cannot fit (issue 32 item 5), for an
# application that stores big block files: helpers/bigfile_app.py, 4
# threads, each storing files of 6-56 MiB (create, posix_fallocate to the
# full size, write, fsync) for 15 s into a 256 MiB budget on a tmpfs
# BACKING (statfs sampled every 2 ms). Four such files always fit (4 x 56
# MiB < 256 MiB), so exact accounting never gives ENOSPC: with
# passthrough=reads, every byte through the daemon, none comes. Asserted
# with the default passthrough=auto (the stores become kernel passthrough
# writers, each holding the largest of the last 32 sizes from its CREATE):
# 0 ENOSPC and 0 failed stores, usage never above max_size + 1 MiB. Before
# the fix a writer's FALLOCATE reserved its size again on top of what it
# held, and every writer held the largest recent size until its RELEASE:
# 37 of 837 stores failed ENOSPC, usage peaking at 84 % of max_size.
. "$(dirname "$0")/../lib.sh"

[ "$(id -u)" = 0 ] || skip "passthrough needs CAP_SYS_ADMIN"
MAX=$((256 * MiB))
mount -t tmpfs -o size=1G,mode=0755 boundfs-big "$BACKING" || fail "cannot mount a tmpfs as BACKING"
bfs_mount max_size=256M,threads=4
grep -q "kernel passthrough on" "$BFS_LOG" || skip "this kernel offers no FUSE passthrough: $(uname -r)"

$PY "$BFS_HELPERS/du_sampler.py" "$BACKING" "$BFS_TMP/sampler.stop" 0.002 --statfs --seconds 0 > "$BFS_TMP/sampler.out" &
SAMPLER=$!; bfs_bg "$SAMPLER"
res=$($PY "$BFS_HELPERS/bigfile_app.py" "$MNT" 15 --threads 4 --min 6M --max 56M) || fail "the application crashed: $res"
touch "$BFS_TMP/sampler.stop"; wait "$SAMPLER"
smp=$(cat "$BFS_TMP/sampler.out")
log "application: $res"
log "usage (statfs every 2 ms): $smp; passthrough writers $(stats_field passthrough_writers), evictions $(stats_field evictions)"
assert_ge "$(json_get "$res" stores)" 40 "stores"
assert_ge "$(stats_field passthrough_writers)" 20 "stores written by kernel passthrough writers"
assert_eq 0 "$(json_get "$res" enospc)" "ENOSPC answers to the application (first: $(json_get "$res" first_errors))"
assert_eq 0 "$(json_get "$res" failed)" "failed stores"
assert_eq 0 "$(json_get "$res" other)" "other errors"
assert_le "$(json_get "$smp" peak)" $((MAX + MiB)) "usage of BACKING (statfs, every 2 ms)"
bfs_unmount
umount "$BACKING" || fail "umount tmpfs backing"
log PASS
