#!/usr/bin/env bash
# Stale engine temporaries: files named like vLLM/llm-d (*.tmp) or SGLang
# (*.tmp.*; 0.5.23 and later: .<uuid4 hex>.tmp) temporaries, unchanged for
# stale_tmp by both mtime and ctime (default 1h; 8s here) and not open
# through the mount, are removed by the reconcile pass; until then they count
# toward usage.  Kept: a fresh one, one unpacked by tar just now with an old
# mtime (its ctime is new), an old one held open through the mount (removed
# once closed), one with a second hard link, an old directory and an old
# symlink named *.tmp (whose target outside BACKING is untouched), and old
# files that are not temporaries.
. "$(dirname "$0")/../lib.sh"

OUT="$BFS_TMP/outside"; mkdir -p "$OUT"
printf 'outside' > "$OUT/target.tmp"; touch -d '3 hours ago' "$OUT/target.tmp"
mkdir -p "$BACKING/kv/abc/de" "$BACKING/hicache"
K="$BACKING/kv/abc/de"
mkblock "$K/abcde.bin_5f3a9c01.tmp" 1M                         # vLLM/llm-d, crashed before rename
mkblock "$BACKING/hicache/0f3e_llama_0_1.bin.tmp.123.456.9f1e" 1M  # SGLang before 0.5.23
SGL="$BACKING/hicache/.9b2c4e7d1f0a4c6e8d3b5a7f9e1c2d4b.tmp"
mkblock "$SGL" 1M                                                # SGLang 0.5.23
mkblock "$K/.o_direct_probe_77aa.tmp" 4K                         # vLLM's O_DIRECT probe
mkblock "$K/held.bin_2222.tmp" 1M
mkblock "$K/linked.bin_3333.tmp" 1M; ln "$K/linked.bin_3333.tmp" "$K/linked-too"
mkdir "$K/dir.tmp"; ln -s "$OUT/target.tmp" "$K/link.tmp"
mkblock "$K/abcdf.bin" 1M; printf '{}' > "$BACKING/kv/config.json"
for f in "$K/abcde.bin_5f3a9c01.tmp" "$BACKING/hicache/0f3e_llama_0_1.bin.tmp.123.456.9f1e" \
         "$K/.o_direct_probe_77aa.tmp" "$SGL" "$K/linked.bin_3333.tmp" "$K/dir.tmp" "$K/abcdf.bin" "$BACKING/kv/config.json"; do
    touch -d '2 hours ago' "$f"
done
touch -h -d '2 hours ago' "$K/link.tmp"
OLD=("$K/abcde.bin_5f3a9c01.tmp" "$BACKING/hicache/0f3e_llama_0_1.bin.tmp.123.456.9f1e" "$K/.o_direct_probe_77aa.tmp" "$SGL")

# reconcile off: temporaries are counted and stay
bfs_mount max_size=64M,reconcile_interval=0
wait_indexed
assert_eq "$(du_backing)" "$(stats_field usage)" "usage counts the temporaries (== du)"
bfs_unmount

# the old files' ctimes are from the start of this test: stale 8 s after it
bfs_mount max_size=64M,reconcile_interval=1s,stale_tmp=8s
exec 7<"$MNT/kv/abc/de/held.bin_2222.tmp" || fail "open through the mount"
touch -d '2 hours ago' "$K/held.bin_2222.tmp"     # stale in 8 s, but open
gone() { local f; for f in "${OLD[@]}"; do [ ! -e "$f" ] || return 1; done; }
poll_until 20 "old temporaries removed by the reconcile pass" gone
assert_eq 4 "$(stats_field stale_tmp_removed)" "stale_tmp_removed"
assert_errno ENOENT stat "$MNT/kv/abc/de/abcde.bin_5f3a9c01.tmp"
# made now: a fresh temporary, and one tar unpacks with a two-hour-old mtime
mkblock "$K/fresh.bin_1111.tmp" 1M
mkdir -p "$BFS_TMP/tar/in"; printf 'notes' > "$BFS_TMP/tar/in/notes.tmp"; touch -d '2 hours ago' "$BFS_TMP/tar/in/notes.tmp"
tar -C "$BFS_TMP/tar/in" -cf "$BFS_TMP/tar/t.tar" notes.tmp && tar -C "$MNT/kv" -xf "$BFS_TMP/tar/t.tar" || fail "tar x on the mount"
n0=$(stats_field reconciles)
passes_since() { [ "$(stats_field reconciles)" -ge $((n0 + 2)) ]; }
poll_until 10 "two reconcile passes after the new temporaries" passes_since
for f in fresh.bin_1111.tmp held.bin_2222.tmp linked.bin_3333.tmp linked-too dir.tmp abcdf.bin; do
    assert_exists "$K/$f" "kept by the stale-temporary pass"
done
assert_eq notes "$(cat "$MNT/kv/notes.tmp" 2>&1)" "a temporary tar unpacked just now with an old mtime" 
[ -L "$K/link.tmp" ] || fail "a symlink named *.tmp was removed"
assert_eq outside "$(cat "$OUT/target.tmp")" "the symlink's target outside BACKING"
assert_exists "$BACKING/kv/config.json"
head -c 16 <&7 >/dev/null || fail "read of the held temporary"
exec 7<&-
poll_until 10 "the held temporary removed once closed" test ! -e "$K/held.bin_2222.tmp"
usage_is_du() { [ "$(stats_field usage)" = "$(du_backing)" ]; }
poll_until 5 "usage == du after the removals" usage_is_du
bfs_unmount
log PASS
