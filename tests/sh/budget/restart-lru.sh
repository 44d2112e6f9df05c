#!/usr/bin/env bash
# Restart keeps LRU order.  Phase 1: twelve blocks placed in BACKING with
# pre-set (shuffled) mtimes; after mounting and overfilling, the evicted
# ones are exactly the oldest-mtime ones.  Phase 2: two surviving old
# blocks are read through the mount; their recency is stamped into the
# backing mtime; after unmount + remount and more pressure, every unread
# old block and the phase-1 blocks go before the two read ones.
. "$(dirname "$0")/../lib.sh"

MAX=$((32 * MiB))
OPTS=max_size=32M,stamp_interval=1s
# name -> age rank (0 = oldest); names do not follow the age order
RANK=(7 2 10 0 5 11 3 8 1 9 4 6)
for i in "${!RANK[@]}"; do
    mkblock_old "$BACKING/lru/b$i.bin" 2M "${RANK[$i]}"
done
by_age=()   # block names, oldest first
for r in $(seq 0 11); do
    for i in "${!RANK[@]}"; do [ "${RANK[$i]}" = "$r" ] && by_age+=("b$i"); done
done

bfs_mount "$OPTS"
mkdir "$MNT/new" || fail "mkdir new"
for i in 0 1 2 3 4 5; do           # 12 MiB of new blocks: 36 MiB > 32 MiB
    mkblock "$MNT/new/p1_$i.bin" 2M
done
poll_until 10 "usage <= high watermark after phase 1" usage_at_most $((MAX * 95 / 100))

pattern=""
for b in "${by_age[@]}"; do
    if [ -e "$BACKING/lru/$b.bin" ]; then pattern+="K"; else pattern+="E"; fi
done
log "phase 1, old blocks oldest first (E evicted, K kept): $pattern"
[[ $pattern =~ ^E+K+$ ]] || fail "evictions do not follow the pre-set mtime order: $pattern"
for i in 0 1 2 3 4 5; do assert_exists "$BACKING/new/p1_$i.bin" "new block evicted before old ones"; done

# phase 2: read the two oldest survivors through the mount
survivors=()
for b in "${by_age[@]}"; do [ -e "$BACKING/lru/$b.bin" ] && survivors+=("$b"); done
read1=${survivors[0]}; read2=${survivors[1]}; unread=("${survivors[@]:2}")
checkblock "$MNT/lru/$read1.bin" 2M >/dev/null || fail "read $read1"
checkblock "$MNT/lru/$read2.bin" 2M >/dev/null || fail "read $read2"
newest_p1=$(stat -c %.9Y "$BACKING"/new/p1_*.bin | sort -n | tail -n 1)
stamped() {
    local b t
    for b in "$read1" "$read2"; do
        t=$(stat -c %.9Y "$BACKING/lru/$b.bin")
        awk -v a="$t" -v b="$newest_p1" 'BEGIN { exit !(a > b) }' || return 1
    done
}
poll_until 10 "reads of $read1/$read2 stamped into their backing mtime (stamp_interval=1s)" stamped
bfs_unmount

bfs_mount "$OPTS"
for i in $(seq 0 $(( ${#unread[@]} + 2 ))); do   # evicts all unread + 3 phase-1 blocks
    mkblock "$MNT/new/p2_$i.bin" 2M
done
poll_until 10 "usage <= high watermark after phase 2" usage_at_most $((MAX * 95 / 100))
for b in "${unread[@]}"; do assert_missing "$BACKING/lru/$b.bin" "unread old block $b (oldest mtime) should go first"; done
assert_exists "$BACKING/lru/$read1.bin" "block read before the restart was evicted (recency lost across restart)"
assert_exists "$BACKING/lru/$read2.bin" "block read before the restart was evicted (recency lost across restart)"
gone_p1=$(for i in 0 1 2 3 4 5; do [ -e "$BACKING/new/p1_$i.bin" ] || echo x; done | wc -l)
assert_ge "$gone_p1" 1 "phase-1 blocks (older than the reads) should be evicted before the read ones"
bfs_unmount
log PASS
