#!/usr/bin/env bash
# After a mount the kernel's entries of the most recently used block files
# are warmed (warm_entries): an engine reloading them after
# a restart pays no LOOKUP (GETATTR, OPEN and RELEASE per block). The warming
# is no use of the blocks: their backing mtimes (the persisted LRU) stay as
# they were; a client's first use after it is (stamped). Control: with
# warm_entries=0 the same loads LOOKUP every component.
. "$(dirname "$0")/../lib.sh"

N=40
paths=()
for i in $(seq 0 $((N - 1))); do
    h=$(printf '%s' "warm$i" | sha256sum | cut -c1-64)
    p="${h:0:3}/${h:3:2}/$h.bin"
    mkblock_old "$BACKING/$p" 64K "$i"
    paths+=("$p")
done
mtimes() { (cd "$BACKING" && stat -c '%n %.9Y' "${paths[@]}"); }
before=$(mtimes)

lookups() { stats_json | $PY -c 'import json,sys; print(json.load(sys.stdin)["requests"].get("LOOKUP", 0))'; }
warm_logged() { grep -q "warmed the kernel's entries of $N most recently used block files" "$BFS_LOG"; }
load_all() { for p in "${paths[@]}"; do checkblock "$MNT/$p" 64K >/dev/null || fail "load $p"; done; }

# default: warmed once the index is complete, without stamping recency
# (the daemon writes its pending stamps before it exits)
bfs_mount "max_size=64M"
poll_until 10 "the daemon logs that it warmed $N entries" warm_logged
bfs_unmount
assert_eq "$before" "$(mtimes)" "backing mtimes after warming (warming is no use of a block)"

# the loads after the warming LOOKUP nothing
bfs_mount "max_size=64M"
poll_until 10 "the daemon logs that it warmed $N entries" warm_logged
l0=$(lookups)
load_all
l1=$(lookups)
assert_eq 0 $((l1 - l0)) "LOOKUPs for $N loads after the entries were warmed"
# a warmed block's first use still reaches the daemon (one GETATTR) and is
# stamped as a use, as its LOOKUP would be on a cold mount
used() { [ "$(stat -c %Y "$BACKING/${paths[0]}")" -gt "$(date -d '2021-01-01' +%s)" ]; }
poll_until 5 "the first load of a warmed block stamped in BACKING" used
bfs_unmount

# control: warm_entries=0 warms nothing; each load LOOKUPs its path
bfs_mount "max_size=64M,warm_entries=0"
l0=$(lookups)
load_all
l1=$(lookups)
assert_ge $((l1 - l0)) "$N" "LOOKUPs for $N loads on a cold mount (warm_entries=0)"
grep -q "warmed the kernel" "$BFS_LOG" && fail "warm_entries=0 still warmed"
bfs_unmount

# bad input: one line saying what to give
out=$("$BOUNDFS" "$BACKING" "$MNT" -o max_size=64M,warm_entries=lots 2>&1) && fail "warm_entries=lots accepted"
case $out in *"warm_entries: 'lots' must be a whole number from 0 (off)"*) ;; *) fail "unclear error: $out" ;; esac
log PASS
