#!/usr/bin/env bash
# The daemon SIGKILLed during stores: clients get ENOTCONN at once (the writer
# exits, a stat answers ENOTCONN, all bounded: no hang).  After `umount -l`
# and a remount: no partially written or half-evicted block under its final
# name (stores are tmp + rename; eviction unlinks before it truncates), the
# index is rebuilt from BACKING (usage == du), and the LRU order of before
# the crash is kept (recency persisted as mtime).
. "$(dirname "$0")/../lib.sh"

OPTS=max_size=32M,stamp_interval=1s
RANK=(5 2 7 0 4 1 6 3)              # old blocks' age ranks (0 = oldest), shuffled
for i in "${!RANK[@]}"; do mkblock_old "$BACKING/lru/b$i.bin" 2M "${RANK[$i]}"; done
by_age=()
for r in $(seq 0 7); do for i in "${!RANK[@]}"; do [ "${RANK[$i]}" = "$r" ] && by_age+=("b$i"); done; done
read1=${by_age[0]}; read2=${by_age[1]}; unread=("${by_age[@]:2}")

bfs_mount "$OPTS"
checkblock "$MNT/lru/$read1.bin" 2M >/dev/null || fail "read $read1"
checkblock "$MNT/lru/$read2.bin" 2M >/dev/null || fail "read $read2"
newest_old=$(stat -c %Y "$BACKING/lru/${by_age[7]}.bin")
stamped() { [ "$(stat -c %Y "$BACKING/lru/$read1.bin")" -gt "$newest_old" ] &&
            [ "$(stat -c %Y "$BACKING/lru/$read2.bin")" -gt "$newest_old" ]; }
poll_until 10 "the reads of $read1 and $read2 stamped into their mtimes" stamped

# stores in flight when the daemon dies
$KVBLOCKS store "$MNT/kv" --count 20000 --seed crash --size 2M --threads 4 >"$BFS_TMP/w.out" 2>"$BFS_TMP/w.err" &
W=$!; bfs_bg "$W"
nbins() { find "$BACKING/kv" -name '*.bin' 2>/dev/null | wc -l; }
enough() { [ "$(nbins)" -ge 4 ]; }
poll_until 20 "a few blocks stored before the kill" enough
kill -KILL "$BFS_DPID"
t0=$(date +%s%N)
bfs_wait_exit "$W" 10 || fail "a writer hung after the daemon died (no ENOTCONN)"
dt=$(( ($(date +%s%N) - t0) / 1000000 ))
log "writer exited ${dt} ms after the SIGKILL: $(tail -n 1 "$BFS_TMP/w.out")"
grep -q -i 'not connected\|ENOTCONN\|Errno 107' "$BFS_TMP/w.err" || {
    head -5 "$BFS_TMP/w.err"; fail "the writer's failures were not ENOTCONN"; }
t1=$(date +%s%N)
got=$(timeout 5 $OP stat "$MNT/kv/new-name" | cut -d' ' -f1); rc=$?
ms=$(( ($(date +%s%N) - t1) / 1000000 ))
[ "$rc" -ne 124 ] || fail "stat on the dead mount hung"
assert_eq ENOTCONN "$got" "stat on the mount of a dead daemon"
log "a stat on the dead mount answered $got in ${ms} ms"
assert_le "$ms" 2000 "ms for a stat on the dead mount to fail"
bfs_wait_exit "$BFS_DPID" 5 || fail "killed daemon did not go"; BFS_DPID=""
# mounting again on the dead mount is refused with the command that fixes it
out=$("$BOUNDFS" -f "$BACKING" "$MNT" -o max_size=8M 2>&1); rc=$?
assert_eq 4 "$rc" "exit status of a mount on the dead mount (a dead mount in the way: 4) ($out)"
[[ $out == *"umount -l $MNT"* ]] || fail "the error should name umount -l: $out"
umount -l "$MNT" || fail "umount -l of the dead mount"

# no partial block under a final name: every *.bin is whole and correct
n=$(nbins); tmps=$(find "$BACKING/kv" -name '*.tmp' | wc -l)
chk=$(kv_load "$BACKING/kv" 20000 crash) || fail "loader crashed"
log "after the crash: $n blocks, $tmps temporaries left in BACKING; direct check: $chk"
assert_eq "$n" "$(json_get "$chk" loaded)" "blocks in BACKING that are whole and correct"
assert_eq 0 "$(json_get "$chk" corrupt)" "partially written or corrupt blocks under their final name"
# nor one the daemon was evicting when it died (old blocks included)
short=$(find "$BACKING" -name '*.bin' ! -size 2048k)
[ -z "$short" ] || fail "a block file under its final name is not whole after the crash: $short"

bfs_mount "$OPTS"
wait_indexed
assert_eq "$(du_backing)" "$(stats_field usage)" "usage after the remount == du of BACKING (index rebuilt)"
assert_eq "$(find "$BACKING" -type f | wc -l)" "$(stats_field files)" "indexed regular files == regular files in BACKING"
assert_eq "$(find "$BACKING" -type d | wc -l)" "$(stats_field dirs)" "indexed directories == directories in BACKING"
# pressure until one of the two read blocks goes: every unread old block must be gone first
i=0
while [ -e "$BACKING/lru/$read1.bin" ] && [ -e "$BACKING/lru/$read2.bin" ]; do
    [ "$i" -lt 40 ] || fail "40 new blocks stored and the read blocks are still there"
    mkdir -p "$MNT/new"; mkblock "$MNT/new/n$i.bin" 2M; i=$((i + 1))
    poll_until 10 "usage <= high watermark" usage_at_most $((32 * MiB * 95 / 100))
done
for b in "${unread[@]}"; do assert_missing "$BACKING/lru/$b.bin" "unread old block $b outlived a block read before the crash"; done
newest_kv=$(ls -t "$BACKING"/kv/*/*/*.bin 2>/dev/null | head -n 1)
[ -z "$newest_kv" ] || assert_exists "$newest_kv" "the newest block stored before the crash went before older ones"
bfs_unmount
log PASS
