#!/usr/bin/env bash
# Live status and control: `boundfs status MNT` prints the table and
# `--json` one line of JSON that agrees with du and find on BACKING;
# `boundfs status MNT/sub` is the status of the mount, named;
# `boundfs set MNT max_size=SIZE` (or setfattr -n user.boundfs.max_size)
# changes the budget live: usage falls to the new low watermark at once,
# the watermarks keep their fractions; only root or the mount's owner may
# set it (EPERM otherwise); the control names are not listed by listxattr,
# on the root or on files; bad input is a one-line error.
. "$(dirname "$0")/../lib.sh"

MAX=$((128 * MiB))
chmod 755 "$BFS_TMP"; chmod 777 "$BACKING"
bfs_mount max_size=128M,high_watermark=0.9,low_watermark=0.8,allow_other
mkdir -p "$MNT/kv/a" "$MNT/kv/b" "$MNT/cfg"
for i in $(seq 0 24); do mkblock "$MNT/kv/$i.bin" 2M "$i"; done
for i in $(seq 0 9); do mkblock "$MNT/kv/a/$i.bin" 2M "a$i"; done
mkblock "$MNT/cfg/config.json" 64K
ln -s ../cfg/config.json "$MNT/kv/link"
mkfifo "$MNT/kv/fifo"

# ---- status --json agrees with du and find
json_agrees() {
    local j u d
    j=$("$BOUNDFS" status "$MNT" --json) || fail "boundfs status --json failed"
    u=$(json_get "$j" usage); d=$(du_backing)
    [ "$u" = "$d" ] || { log "usage $u vs du $d"; return 1; }
    [ "$(json_get "$j" files)" = "$(find "$BACKING" -type f | wc -l)" ] || { log "files: $j"; return 1; }
    [ "$(json_get "$j" dirs)" = "$(find "$BACKING" -type d | wc -l)" ] || { log "dirs: $j"; return 1; }
    [ "$(json_get "$j" others)" = "$(find "$BACKING" ! -type f ! -type d | wc -l)" ] || { log "others: $j"; return 1; }
    [ "$(json_get "$j" block_files)" = "$(find "$BACKING" -type f -name '*.bin' | wc -l)" ] || { log "blocks: $j"; return 1; }
}
poll_until 5 "status --json agrees with du and find" json_agrees
j=$("$BOUNDFS" status "$MNT" --json)
[ "$(printf '%s\n' "$j" | wc -l)" -eq 1 ] || fail "status --json is not one line"
assert_eq 36 "$(json_get "$j" files)" "regular files (35 blocks and config.json)"
assert_eq 2 "$(json_get "$j" others)" "others (a symlink and a fifo)"

# ---- the table
table=$("$BOUNDFS" status "$MNT") || fail "boundfs status failed"
log "boundfs status:"; printf '%s\n' "$table" | sed 's/^/    /'
for row in mount usage watermarks files "block files" "open handles" evictions ENOSPC "block hits" stamps uptime; do
    grep -q "^$row " <<<"$table" || fail "status table lacks the '$row' row"
done
grep -q "of 128.0 MiB  \[#" <<<"$table" || fail "usage row lacks max_size and the bar"
grep -q "high 115.2 MiB (90%), low 102.4 MiB (80%)" <<<"$table" || fail "watermarks row"

# ---- the daemon's pid and absolute paths, also when given a relative path
grep -qx "daemon       pid $BFS_DPID" <<<"$table" || fail "status table lacks 'daemon pid $BFS_DPID'"
rel=$(cd "$BFS_TMP" && "$BOUNDFS" status mnt) || fail "boundfs status with a relative path"
grep -qx "mount        $BACKING on $MNT (boundfs .*)" <<<"$rel" || fail "mount row not absolute: $(head -n 1 <<<"$rel")"
j=$(cd "$BFS_TMP" && "$BOUNDFS" status ./mnt --json)
assert_eq "$BFS_DPID" "$(json_get "$j" pid)" "status --json pid"
assert_eq "$MNT" "$(json_get "$j" mountpoint)" "status --json mountpoint (absolute)"
assert_eq "$BACKING" "$(json_get "$j" backing)" "status --json backing"
# a path inside the mount: the status of the mount that holds it, named
# (it used to read the directory's own xattr: "not a boundfs mount")
sub=$("$BOUNDFS" status "$MNT/kv/a" 2>&1) || fail "boundfs status of a directory inside the mount: $sub"
grep -qx "mount        $BACKING on $MNT (boundfs .*)" <<<"$sub" || fail "status of $MNT/kv/a: $(head -n 1 <<<"$sub")"
assert_eq "$MNT" "$(json_get "$("$BOUNDFS" status "$MNT/kv/a" --json)" mountpoint)" "status --json of a path inside: mountpoint"
for cmd in status set; do
    "$BOUNDFS" "$cmd" --help | grep -q "^Usage: boundfs $cmd " || fail "boundfs $cmd --help: $("$BOUNDFS" "$cmd" --help | grep Usage)"
done

# ---- hits and misses: opens of blocks vs lookups of missing block names
# (creating a block looked its name up first: those count as misses too)
o0=$(stats_field block_opens); m0=$(stats_field lookup_misses)
cat "$MNT/kv/a/1.bin" >/dev/null; cat "$MNT/kv/a/2.bin" >/dev/null
assert_errno ENOENT stat "$MNT/kv/a/missing.bin"
assert_errno ENOENT stat "$MNT/kv/a/missing.json"
assert_eq $((o0 + 2)) "$(stats_field block_opens)" "block_opens after two reads"
assert_eq $((m0 + 1)) "$(stats_field lookup_misses)" "lookup_misses count block names only"

# ---- control names are not listed
for p in "$MNT" "$MNT/kv/a/1.bin" "$MNT/cfg"; do
    ! getfattr --absolute-names -d -m - "$p" 2>/dev/null | grep -q boundfs || fail "listxattr of $p shows boundfs names"
done
assert_errno ENODATA getxattr "$MNT/kv/a/1.bin" user.boundfs.stats
assert_eq "$MAX" "$($OP getxattr "$MNT" user.boundfs.max_size | cut -d' ' -f2)" "user.boundfs.max_size reads the budget"

# ---- only root or the owner may set; bad values refused
got=$(setpriv --reuid=65534 --regid=65534 --clear-groups setfattr -n user.boundfs.max_size -v 1M "$MNT" 2>&1)
grep -q "Operation not permitted" <<<"$got" || fail "setfattr user.boundfs.max_size by another user: '$got'"
err=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$BOUNDFS" set "$MNT" max_size=1M 2>&1); rc=$?
assert_eq 1 "$rc" "boundfs set by another user"
grep -q "not permitted" <<<"$err" || fail "boundfs set by another user: '$err'"
assert_eq "$MAX" "$(stats_field max_size)" "budget unchanged by refused sets"
assert_errno EINVAL setxattr "$MNT" user.boundfs.max_size lots
assert_errno EINVAL setxattr "$MNT" user.boundfs.max_size 0
assert_errno EPERM setxattr "$MNT" user.boundfs.stats 1
assert_errno EPERM removexattr "$MNT" user.boundfs.max_size
assert_errno EINVAL setxattr "$MNT" user.boundfs.max_size 1
err=$("$BOUNDFS" set "$MNT" max_size=8M max_size=9M 2>&1); rc=$?
assert_eq 2 "$rc" "boundfs set with max_size twice ($err)"
for bad in "max_size=lots" "max_size=0" "max_size=1" "high_watermark=0.5" "max_size"; do
    err=$("$BOUNDFS" set "$MNT" "$bad" 2>&1); rc=$?
    assert_eq 2 "$rc" "boundfs set $bad exit status"
    [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "boundfs set $bad: more than one line: $err"
done
err=$("$BOUNDFS" status "$BFS_TMP" 2>&1); rc=$?
assert_eq 1 "$rc" "boundfs status of a directory that is not a mount"
grep -q "is not a boundfs mount" <<<"$err" || fail "status of a non-mount: '$err'"
assert_eq "$MAX" "$(stats_field max_size)" "budget unchanged by bad values"

# ---- shrink: usage falls to the new low watermark, fractions kept
u0=$(du_backing)
NEW=$((40 * MiB)); LOW=$((NEW * 80 / 100)); HIGH=$((NEW * 90 / 100))
assert_ge "$u0" "$HIGH" "usage before the shrink is above the new high watermark"
out=$("$BOUNDFS" set "$MNT" max_size=40M) || fail "boundfs set max_size=40M"
log "$out"
# it reports usage once its own eviction has settled, not a reading taken while it runs
said=$($PY -c 'import re,sys; m=re.findall(r"usage ([0-9.]+) MiB", sys.argv[1]); print(int(float(m[-1]) * 1048576) if m else -1)' "$out")
assert_le 0 "$said" "boundfs set names the usage ($out)"
assert_le "$said" $((LOW + 64 * 1024)) "the usage boundfs set reports is past its eviction (low watermark $LOW): $out"
grep -q "evicted [0-9]* files" <<<"$out" || fail "boundfs set does not say what its eviction removed: $out"
assert_eq "$NEW" "$(stats_field max_size)" "max_size after set"
assert_eq "$HIGH" "$(stats_field high_watermark_bytes)" "high watermark keeps its fraction"
assert_eq "$LOW" "$(stats_field low_watermark_bytes)" "low watermark keeps its fraction"
poll_until 10 "usage at or below the new low watermark" usage_at_most "$LOW"
u1=$(du_backing)
assert_ge "$u1" $((LOW - 2 * MiB - 256 * 1024)) "eviction stopped near the low watermark (usage $u1)"
assert_ge "$(stats_field evictions)" 1 "evictions after the shrink"
read -r total < <(df -B1 --output=size "$MNT" | tail -n 1)
assert_eq "$NEW" "$total" "df shows the new budget"

# ---- grow back: nothing more is evicted
ev=$(stats_field evictions)
setfattr -n user.boundfs.max_size -v 128M "$MNT" || fail "setfattr -n user.boundfs.max_size"
assert_eq "$MAX" "$(stats_field max_size)" "max_size after setfattr"
for i in 0 1 2 3 4; do mkblock "$MNT/kv/b/$i.bin" 2M "b$i"; done
assert_eq "$ev" "$(stats_field evictions)" "no eviction below the restored budget"
log "set: shrink to 40M -> usage $u0 -> $u1 (low watermark $LOW); grow back to 128M"

# ---- shrink below what eviction can free: the answer says so, not "evicting"
head -c $((6 * MiB)) /dev/urandom >"$MNT/notes.dat" || fail "write a 6 MiB non-block file"
out=$("$BOUNDFS" set "$MNT" max_size=4M) || fail "boundfs set max_size=4M"
log "$out"
grep -q "stays, so writes fail with ENOSPC until usage is below max_size" <<<"$out" ||
    fail "boundfs set below the unevictable usage does not say what stays: '$out'"
# the status WARNING names the high watermark in force, also after another set
warned() { stats_field nonblock_warning | grep -qF "above the high watermark ($1)"; }
poll_until 10 "a WARNING naming the high watermark of max_size=4M" warned "3.6 MiB"
"$BOUNDFS" set "$MNT" max_size=5M >/dev/null || fail "boundfs set max_size=5M"
poll_until 10 "the WARNING naming the new high watermark (4.5 MiB) after set max_size=5M" warned "4.5 MiB"
# the WARNING's amount is the live one: shrinking the non-block file shows in it
amount() { stats_field nonblock_warning | $PY -c 'import re,sys; m=re.match(r"([0-9.]+) MiB of files", sys.stdin.read()); print(int(float(m.group(1)) * 1048576) if m else -1)'; }
a0=$(amount)
assert_ge "$a0" $((6 * MiB)) "the WARNING's amount with a 6 MiB non-block file"
truncate -s 5M "$MNT/notes.dat" || fail "truncate notes.dat"
smaller() { [ "$(amount)" -le $((a0 - 900 * 1024)) ]; }
poll_until 10 "the WARNING's amount following the non-block file from 6 to 5 MiB (was $a0)" smaller
log "WARNING: $(stats_field nonblock_warning | cut -c1-100)..."

# ---- eviction_sweeps counts passes that evicted: above the high watermark
# with nothing evictable the evictor wakes every second and evicts nothing
sw=$(stats_field eviction_sweeps); ev=$(stats_field evictions)
sleep 3
assert_eq "$ev" "$(stats_field evictions)" "evictions while nothing is evictable"
assert_eq "$sw" "$(stats_field eviction_sweeps)" "eviction_sweeps over 3 s in which nothing was evicted"
assert_le "$sw" "$ev" "eviction_sweeps (each evicted at least one file) against evictions"
bfs_unmount
bfs_done
