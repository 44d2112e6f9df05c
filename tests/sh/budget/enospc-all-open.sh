#!/usr/bin/env bash
# ENOSPC when every block is held open: with all block files open through the
# mount nothing is evictable, so a write that would cross max_size fails with
# ENOSPC, no block is evicted, other files are untouched and a small write
# that fits still works.  After the handles close, the same write succeeds.
. "$(dirname "$0")/../lib.sh"

MAX=$((16 * MiB))
bfs_mount max_size=16M
mkdir -p "$MNT/kv/aa" "$MNT/model"
for i in 0 1 2 3 4 5; do mkblock "$MNT/kv/aa/held$i.bin" 2M; done
printf '{"model":"x"}' > "$MNT/model/config.json"
mkblock "$MNT/model/notes.txt" 512K
before=$($PY "$BFS_HELPERS/tree.py" "$BACKING")
assert_le "$(du_backing)" $((MAX * 95 / 100)) "setup stays below the high watermark"

$BLOCKS hold --ready "$BFS_TMP/ready" --go "$BFS_TMP/go" --timeout 60 --size 2M \
    "$MNT"/kv/aa/held{0,1,2,3,4,5}.bin > "$BFS_TMP/hold.out" 2>&1 &
HOLD=$!; bfs_bg "$HOLD"
poll_until 10 "reader holds all six blocks open" test -e "$BFS_TMP/ready"
assert_eq 6 "$(stats_field open_handles)" "open_handles while six blocks are held"

# (a refused write may leave a partly written file: remove it at once, since
# a closed partial *.bin is an evictable block like any other)
assert_errno ENOSPC writefile "$MNT/kv/aa/big.bin" 6M
rm -f "$MNT/kv/aa/big.bin"
assert_errno ENOSPC writedirect "$MNT/kv/aa/new.bin_x.tmp" 6M
rm -f "$MNT/kv/aa/new.bin_x.tmp"
assert_errno ENOSPC writefile "$MNT/model/big.txt" 6M
rm -f "$MNT/model/big.txt"
assert_le "$(du_backing)" $((MAX + MiB)) "du after refused writes"
# (the evictions counter may move: a refused *.bin is an evictable block once
# closed; what matters is that the six held blocks are untouched, below)
assert_ge "$(stats_field enospc)" 3 "enospc counter"
after=$($PY "$BFS_HELPERS/tree.py" "$BACKING")
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after"); fail "BACKING changed by refused writes"; }
# a write that fits still works
assert_errno OK writefile "$MNT/model/small.txt" 256K

touch "$BFS_TMP/go"
bfs_wait_exit "$HOLD" 20 || fail "holder did not finish"; rc=$BFS_RC
assert_eq 0 "$rc" "holder read every held block correctly: $(cat "$BFS_TMP/hold.out")"
poll_until 5 "open_handles back to 0 after close" test "$(stats_field open_handles)" = 0

# now the blocks are evictable: the same write succeeds
assert_errno OK writefile "$MNT/kv/aa/big.bin" 6M
assert_ge "$(stats_field evictions)" 1 "evictions after the handles closed"
assert_le "$(du_backing)" $((MAX + MiB)) "du after the write"
assert_eq '{"model":"x"}' "$(cat "$BACKING/model/config.json")" "config.json untouched"
checkblock "$BACKING/model/notes.txt" 512K >/dev/null || fail "notes.txt changed"
checkblock "$BACKING/kv/aa/big.bin" 6M >/dev/null || fail "big.bin bytes"
bfs_unmount
log PASS
