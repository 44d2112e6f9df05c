#!/usr/bin/env bash
# Files added, removed and rewritten in BACKING behind the daemon (an
# external reaper, an operator's cp) are picked up by the periodic reconcile
# (reconcile_interval=1s here): usage comes back to du of BACKING; files added
# past max_size are then evicted, oldest mtime first, down to the budget;
# a client reading through the mount all along sees no error.  With
# reconcile_interval=0 the drift stays (the option really switches it off).
. "$(dirname "$0")/../lib.sh"

MAX=$((32 * MiB)); SLACK=$MiB
usage_is_du() { [ "$(stats_field usage)" = "$(du_backing)" ]; }

bfs_mount max_size=32M,reconcile_interval=0
wait_indexed
mkdir -p "$MNT/own"
for i in 0 1 2; do mkblock "$MNT/own/o$i.bin" 2M; done
mkdir -p "$BACKING/ext"; mkblock "$BACKING/ext/drift.bin" 2M
assert_ne "$(du_backing)" "$(stats_field usage)" "usage with reconcile off after an external add"
bfs_unmount
rm "$BACKING/ext/drift.bin"

bfs_mount max_size=32M,reconcile_interval=1s
# a client loads the mount's own blocks all along (they stay most recent)
(
    end=$((SECONDS + 60)); n=0; bad=0
    while [ ! -e "$BFS_TMP/reader.stop" ] && [ "$SECONDS" -lt "$end" ]; do
        for i in 0 1 2; do
            r=$(checkblock "$MNT/own/o$i.bin" 2M 2>&1) || { bad=$((bad + 1)); echo "o$i: $r" >&2; }
            n=$((n + 1))
        done
    done
    echo "$n $bad" > "$BFS_TMP/reader.out"
) 2>"$BFS_TMP/reader.err" &
READER=$!; bfs_bg "$READER"

# add behind the daemon: 5 old blocks (2020 mtimes), 5 fresh ones, a config file
for i in 0 1 2 3 4; do mkblock_old "$BACKING/ext/old$i.bin" 2M "$i"; mkblock "$BACKING/ext/new$i.bin" 2M; done
printf '{"model": "x"}' > "$BACKING/ext/config.json"
poll_until 10 "usage == du after files were added behind the daemon" usage_is_du
log "after external adds: usage $(stats_field usage) == du, reconcile_fixes $(stats_field reconcile_fixes)"
# remove and rewrite behind the daemon
rm "$BACKING/ext/new0.bin" "$BACKING/ext/new1.bin"
mkblock "$BACKING/ext/new2.bin" 1M new2
poll_until 10 "usage == du after files were removed/rewritten behind the daemon" usage_is_du
# past max_size behind the daemon: 12 more fresh blocks (24 MiB): eviction must follow
for i in $(seq 0 11); do mkblock "$BACKING/ext/late$i.bin" 2M; done
log "du of BACKING after the external overfill: $(du_backing) (max_size $MAX)"
poll_until 10 "usage <= max_size + 1 MiB after the overfill behind the daemon" usage_at_most $((MAX + SLACK))
poll_until 10 "usage == du once evicted" usage_is_du
for i in 0 1 2 3 4; do assert_missing "$BACKING/ext/old$i.bin" "an external block with a 2020 mtime outlived newer ones"; done
for i in 0 1 2; do assert_exists "$BACKING/own/o$i.bin" "a block the client keeps reading was evicted"; done
assert_exists "$BACKING/ext/config.json" "a non-block file was removed"
assert_exists "$BACKING/ext/late11.bin" "the newest external block was evicted before older ones"
touch "$BFS_TMP/reader.stop"; wait "$READER"
read -r n bad < "$BFS_TMP/reader.out"
log "client loads during the test: $n, failed $bad"
[ "$bad" = 0 ] || { head -5 "$BFS_TMP/reader.err"; fail "$bad client loads failed"; }
assert_ge "$n" 3 "client loads"
bfs_unmount
log PASS
