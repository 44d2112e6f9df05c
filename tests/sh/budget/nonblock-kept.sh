#!/usr/bin/env bash
# Non-block files are never evicted: config.json, orphaned *.tmp, *.txt,
# names that only look like blocks (x.binx, x.bin.bak, a directory named
# d.bin) all older than every block, survive an overfill of 3 x max_size
# byte for byte, while they still count toward usage.  A custom pattern
# (pattern=*.kv) makes *.bin files non-block and *.kv files block files.
. "$(dirname "$0")/../lib.sh"

MAX=$((32 * MiB))
mkdir -p "$BACKING/model_abc" "$BACKING/kv/000/11" "$BACKING/dir.bin"
printf '{"block_size":16}' > "$BACKING/model_abc/config.json"
mkblock "$BACKING/kv/000/11/orphan.bin_1f2e.tmp" 2M
mkblock "$BACKING/notes.txt" 1M
mkblock "$BACKING/lookalike.binx" 1M
mkblock "$BACKING/kv/000/11/backup.bin.bak" 1M
mkblock "$BACKING/dir.bin/inner.txt" 512K
mkblock "$BACKING/BIG.BIN" 1M           # pattern is case-sensitive
for i in 0 1 2; do mkblock "$BACKING/kv/000/11/old$i.bin" 2M; done
find "$BACKING" -mindepth 1 -exec touch -h -d "$(old_mtime 0)" {} +
KEEP=(model_abc model_abc/config.json kv/000/11 kv/000/11/orphan.bin_1f2e.tmp notes.txt
      lookalike.binx kv/000/11/backup.bin.bak dir.bin dir.bin/inner.txt BIG.BIN)
keep_manifest() {
    local p
    for p in "${KEEP[@]}"; do
        if [ -f "$BACKING/$p" ]; then
            echo "$p $(stat -c '%F %s %a %Y' "$BACKING/$p") $(file_md5 "$BACKING/$p")"
        elif [ -d "$BACKING/$p" ]; then
            echo "$p directory"
        else
            echo "$p MISSING"
        fi
    done
}
nonblock_before=$(keep_manifest)
nonblock_bytes=$(du -s --block-size=1 --exclude='old*.bin' "$BACKING" | cut -f1)

bfs_mount max_size=32M
res=$(kv_store "$MNT/kv" 48 keep) || fail "writer crashed"
log "writer: $res"
assert_eq 0 "$(json_get "$res" errors)" "store errors"
assert_eq 0 "$(json_get "$res" enospc)" "ENOSPC although blocks were evictable"
poll_until 10 "usage <= high watermark" usage_at_most $((MAX * 95 / 100))
assert_ge "$(stats_field evictions)" 3 "evictions"
for i in 0 1 2; do assert_missing "$BACKING/kv/000/11/old$i.bin" "oldest block should have been evicted"; done

nonblock_after=$(keep_manifest)
if [ "$nonblock_before" != "$nonblock_after" ]; then
    diff <(echo "$nonblock_before") <(echo "$nonblock_after")
    fail "a non-block file or its directory was changed or evicted"
fi
# non-block bytes count: the blocks kept + non-block bytes stay within max
blocks_kept=$(find "$BACKING" -name '*.bin' -type f | wc -l)
assert_le $((blocks_kept * 2 * MiB + nonblock_bytes)) $((MAX + MiB)) "non-block bytes were not counted toward usage"
u=$(stats_field usage); d=$(du_backing)
assert_le "$(( u > d ? u - d : d - u ))" $((256 * 1024)) "stats usage ($u) vs du ($d)"
bfs_unmount

# ---- custom pattern: *.kv are blocks, *.bin are not
rm -rf "${BACKING:?}"/*
mkblock "$BACKING/precious.bin" 2M
touch -d "$(old_mtime 0)" "$BACKING/precious.bin"
bfs_mount max_size=16M,pattern=*.kv
for i in $(seq 0 19); do
    assert_errno OK writedirect "$MNT/c$i.kv_t.tmp" 2M "c$i"
    assert_errno OK rename "$MNT/c$i.kv_t.tmp" "$MNT/c$i.kv"
done
assert_le "$(du_backing)" $((17 * MiB)) "du with pattern=*.kv"
assert_exists "$BACKING/precious.bin" "*.bin is not a block under pattern=*.kv"
checkblock "$BACKING/precious.bin" 2M >/dev/null || fail "precious.bin changed"
assert_missing "$BACKING/c0.kv" "oldest .kv block should be evicted"
assert_exists "$BACKING/c19.kv" "newest .kv block"
bfs_unmount
log PASS
