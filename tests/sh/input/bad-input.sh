#!/usr/bin/env bash
# Bad input (table-driven, every option of src/daemon/cli.rs, both spellings): empty,
# zero, negative, overflow, wrong unit, garbage after a number, unknown key,
# duplicated key, bad paths.  Each case must print exactly one line on
# stderr, exit with status 2 within 10 s, and leave nothing mounted.  Then
# boundary values that are valid must mount.
. "$(dirname "$0")/../lib.sh"

B="$BACKING"; M="$MNT"
printf x > "$BFS_TMP/plainfile"
mkdir -p "$B/inner" "$M/inner2" "$BFS_TMP/ro"
ln -s "$B" "$BFS_TMP/backing-alias"
mount --bind "$BFS_TMP/ro" "$BFS_TMP/ro" && mount -o remount,bind,ro "$BFS_TMP/ro" || fail "ro bind mount"
OK="max_size=64M"

# description | arguments (eval'ed)
CASES=$(cat <<'TABLE'
backing missing               | -f "$BFS_TMP/nope" "$M" -o "$OK"
backing is a file             | -f "$BFS_TMP/plainfile" "$M" -o "$OK"
backing not writable (ro fs)  | -f "$BFS_TMP/ro" "$M" -o "$OK"
mountpoint missing            | -f "$B" "$BFS_TMP/nope" -o "$OK"
mountpoint is a file          | -f "$B" "$BFS_TMP/plainfile" -o "$OK"
mountpoint == backing         | -f "$B" "$B" -o "$OK"
mountpoint == backing/        | -f "$B" "$B/" -o "$OK"
mountpoint == alias of backing| -f "$BFS_TMP/backing-alias" "$B" -o "$OK"
mountpoint inside backing     | -f "$B" "$B/inner" -o "$OK"
backing inside mountpoint     | -f "$M/inner2" "$M" -o "$OK"
no arguments                  |
only backing                  | -f "$B"
no options at all             | -f "$B" "$M"
max_size missing              | -f "$B" "$M" -o high_watermark=0.9
max_size empty                | -f "$B" "$M" -o max_size=
max_size=0                    | -f "$B" "$M" -o max_size=0
max_size=0M                   | -f "$B" "$M" -o max_size=0M
max_size below 1M             | -f "$B" "$M" -o max_size=1
max_size 1023K                | -f "$B" "$M" -o max_size=1023K
max_size negative             | -f "$B" "$M" -o max_size=-5M
max_size overflow (2^64)      | -f "$B" "$M" -o max_size=18446744073709551616
max_size overflow (16E)       | -f "$B" "$M" -o max_size=16E
max_size wrong unit           | -f "$B" "$M" -o max_size=24Q
max_size garbage after        | -f "$B" "$M" -o max_size=24Gx
max_size unparseable          | -f "$B" "$M" -o max_size=lots
max_size hex                  | -f "$B" "$M" -o max_size=0x10
max_size twice                | -f "$B" "$M" -o max_size=1M,max_size=2M
max_size -o and --max-size    | -f "$B" "$M" -o max_size=1M --max-size 2M
--max-size twice              | -f "$B" "$M" --max-size 1M --max-size 2M
--max-size empty              | -f "$B" "$M" --max-size ''
--max-size 0                  | -f "$B" "$M" --max-size 0
--max-size garbage            | -f "$B" "$M" --max-size 12QB
high_watermark empty          | -f "$B" "$M" -o "$OK,high_watermark="
high_watermark=0              | -f "$B" "$M" -o "$OK,high_watermark=0"
high_watermark negative       | -f "$B" "$M" -o "$OK,high_watermark=-0.5"
high_watermark=1.5            | -f "$B" "$M" -o "$OK,high_watermark=1.5"
high_watermark overflow       | -f "$B" "$M" -o "$OK,high_watermark=1e999"
high_watermark=nan            | -f "$B" "$M" -o "$OK,high_watermark=nan"
high_watermark percent        | -f "$B" "$M" -o "$OK,high_watermark=95%"
high_watermark garbage after  | -f "$B" "$M" -o "$OK,high_watermark=0.9x"
high_watermark=abc            | -f "$B" "$M" -o "$OK,high_watermark=abc"
high_watermark twice          | -f "$B" "$M" -o "$OK,high_watermark=0.9,high_watermark=0.95"
--high-watermark empty        | -f "$B" "$M" --max-size 1M --high-watermark ''
low_watermark empty           | -f "$B" "$M" -o "$OK,low_watermark="
low_watermark=0               | -f "$B" "$M" -o "$OK,low_watermark=0"
low_watermark negative        | -f "$B" "$M" -o "$OK,low_watermark=-0.1"
low_watermark=1.01            | -f "$B" "$M" -o "$OK,low_watermark=1.01,high_watermark=1"
low_watermark overflow        | -f "$B" "$M" -o "$OK,low_watermark=1e999"
low_watermark percent         | -f "$B" "$M" -o "$OK,low_watermark=90%"
low_watermark garbage after   | -f "$B" "$M" -o "$OK,low_watermark=0.5x"
low_watermark twice           | -f "$B" "$M" -o "$OK,low_watermark=0.5,low_watermark=0.6"
low > high                    | -f "$B" "$M" -o "$OK,high_watermark=0.8,low_watermark=0.9"
low == high                   | -f "$B" "$M" -o "$OK,high_watermark=0.8,low_watermark=0.8"
low >= default high 0.95      | -f "$B" "$M" -o "$OK,low_watermark=0.96"
--low-watermark > --high      | -f "$B" "$M" --max-size 64M --high-watermark 0.5 --low-watermark 0.6
pattern empty                 | -f "$B" "$M" -o "$OK,pattern="
--pattern empty               | -f "$B" "$M" --max-size 64M --pattern ''
pattern with a slash          | -f "$B" "$M" -o "$OK,pattern=kv/*.bin"
pattern invalid glob          | -f "$B" "$M" -o "$OK,pattern=[abc"
pattern one of two empty      | -f "$B" "$M" -o "$OK,pattern=*.bin,pattern="
pattern trailing space        | -f "$B" "$M" -o "$OK,pattern=*.pt "
--pattern leading space       | -f "$B" "$M" --max-size 64M --pattern ' *.pt'
stamp_interval empty          | -f "$B" "$M" -o "$OK,stamp_interval="
stamp_interval negative       | -f "$B" "$M" -o "$OK,stamp_interval=-1s"
stamp_interval overflow       | -f "$B" "$M" -o "$OK,stamp_interval=99999999999999999999999s"
stamp_interval wrong unit     | -f "$B" "$M" -o "$OK,stamp_interval=5x"
stamp_interval garbage after  | -f "$B" "$M" -o "$OK,stamp_interval=60sx"
stamp_interval unparseable    | -f "$B" "$M" -o "$OK,stamp_interval=soon"
stamp_interval twice          | -f "$B" "$M" -o "$OK,stamp_interval=1s,stamp_interval=2s"
--stamp-interval empty        | -f "$B" "$M" --max-size 1M --stamp-interval ''
threads empty                 | -f "$B" "$M" -o "$OK,threads="
threads=0                     | -f "$B" "$M" -o "$OK,threads=0"
threads negative              | -f "$B" "$M" -o "$OK,threads=-1"
threads too many              | -f "$B" "$M" -o "$OK,threads=257"
threads overflow              | -f "$B" "$M" -o "$OK,threads=99999999999999999999"
threads with a unit           | -f "$B" "$M" -o "$OK,threads=2k"
threads fraction              | -f "$B" "$M" -o "$OK,threads=1.5"
threads twice                 | -f "$B" "$M" -o "$OK,threads=1,threads=2"
--threads 0                   | -f "$B" "$M" --max-size 1M --threads 0
reconcile_interval empty      | -f "$B" "$M" -o "$OK,reconcile_interval="
reconcile_interval negative   | -f "$B" "$M" -o "$OK,reconcile_interval=-1s"
reconcile_interval too short  | -f "$B" "$M" -o "$OK,reconcile_interval=500ms"
reconcile_interval overflow   | -f "$B" "$M" -o "$OK,reconcile_interval=99999999999999999999999s"
reconcile_interval wrong unit | -f "$B" "$M" -o "$OK,reconcile_interval=5x"
reconcile_interval garbage    | -f "$B" "$M" -o "$OK,reconcile_interval=60sx"
reconcile_interval twice      | -f "$B" "$M" -o "$OK,reconcile_interval=1s,reconcile_interval=2s"
--reconcile-interval short    | -f "$B" "$M" --max-size 1M --reconcile-interval 1ms
stale_tmp empty               | -f "$B" "$M" -o "$OK,stale_tmp="
stale_tmp negative            | -f "$B" "$M" -o "$OK,stale_tmp=-1h"
stale_tmp too short           | -f "$B" "$M" -o "$OK,stale_tmp=10ms"
stale_tmp overflow            | -f "$B" "$M" -o "$OK,stale_tmp=99999999999999999999999h"
stale_tmp wrong unit          | -f "$B" "$M" -o "$OK,stale_tmp=1hr2"
stale_tmp garbage after       | -f "$B" "$M" -o "$OK,stale_tmp=1h!"
stale_tmp twice               | -f "$B" "$M" -o "$OK,stale_tmp=1h,stale_tmp=2h"
--stale-tmp empty             | -f "$B" "$M" --max-size 1M --stale-tmp ''
allow_other with a value      | -f "$B" "$M" -o "$OK,allow_other=1"
allow_other empty value       | -f "$B" "$M" -o "$OK,allow_other="
allow_other twice             | -f "$B" "$M" -o "$OK,allow_other,allow_other"
allow_other -o and flag       | -f "$B" "$M" -o "$OK,allow_other" --allow-other
--allow-other twice           | -f "$B" "$M" -o "$OK" --allow-other --allow-other
unknown -o option             | -f "$B" "$M" -o "$OK,bogus=1"
unknown -o flag               | -f "$B" "$M" -o "$OK,frobnicate"
unknown key, dash spelling    | -f "$B" "$M" -o "max-size=64M"
unknown key, upper case       | -f "$B" "$M" -o "MAX_SIZE=64M"
unknown long flag             | -f "$B" "$M" -o "$OK" --bogus
long flag with underscore     | -f "$B" "$M" --max_size 64M
-f twice                      | -f -f "$B" "$M" -o "$OK"
extra positional argument     | -f "$B" "$M" extra -o "$OK"
max_size decimal unit 10GB    | -f "$B" "$M" -o max_size=10GB
max_size lowercase 10g        | -f "$B" "$M" -o max_size=10g
max_size lowercase 10gb       | -f "$B" "$M" -o max_size=10gb
max_size decimal unit 64MB    | -f "$B" "$M" -o max_size=64MB
max_size decimal unit 10kB    | -f "$B" "$M" -o max_size=10kB
max_size fraction of a byte   | -f "$B" "$M" -o max_size=1048576.5
--max-size lowercase 64m      | -f "$B" "$M" --max-size 64m
pattern without wildcard      | -f "$B" "$M" -o "$OK,pattern=bin"
--pattern without wildcard    | -f "$B" "$M" -o "$OK" --pattern kv.pt
log_file is a directory       | -f "$B" "$M" -o "$OK,log_file=$BFS_TMP"
log_file directory missing    | -f "$B" "$M" -o "$OK,log_file=$BFS_TMP/nope/b.log"
log_file inside backing       | -f "$B" "$M" -o "$OK,log_file=$B/b.log"
log_file empty                | -f "$B" "$M" -o "$OK,log_file="
TABLE
)

if "$BOUNDFS" --help 2>&1 | grep -q passthrough; then
    CASES+=$'\n''passthrough empty             | -f "$B" "$M" -o "$OK,passthrough="'
    CASES+=$'\n''passthrough unknown value     | -f "$B" "$M" -o "$OK,passthrough=maybe"'
    CASES+=$'\n''passthrough=0                 | -f "$B" "$M" -o "$OK,passthrough=0"'
    CASES+=$'\n''passthrough twice             | -f "$B" "$M" -o "$OK,passthrough=off,passthrough=auto"'
fi
if "$BOUNDFS" --help 2>&1 | grep -q attr.timeout; then
    CASES+=$'\n''attr_timeout empty            | -f "$B" "$M" -o "$OK,attr_timeout="'
    CASES+=$'\n''attr_timeout negative         | -f "$B" "$M" -o "$OK,attr_timeout=-1s"'
    CASES+=$'\n''attr_timeout overflow         | -f "$B" "$M" -o "$OK,attr_timeout=99999999999999999999999s"'
    CASES+=$'\n''attr_timeout wrong unit       | -f "$B" "$M" -o "$OK,attr_timeout=5x"'
    CASES+=$'\n''attr_timeout garbage after    | -f "$B" "$M" -o "$OK,attr_timeout=60sx"'
    CASES+=$'\n''attr_timeout twice            | -f "$B" "$M" -o "$OK,attr_timeout=1s,attr_timeout=2s"'
fi

mounts_before=$(bfs_count_mounts)
failures=0; n=0
while IFS='|' read -r desc args; do
    desc=$(echo "$desc" | sed 's/ *$//')
    [ -n "$desc" ] || continue
    n=$((n + 1))
    eval "set -- $args"
    timeout 10 "$BOUNDFS" "$@" >"$BFS_TMP/out" 2>"$BFS_TMP/err" </dev/null
    rc=$?
    lines=$(grep -c '' "$BFS_TMP/err")
    problems=""
    [ "$rc" -eq 2 ] || problems+=" exit=$rc (want 2)"
    [ "$lines" -eq 1 ] || problems+=" stderr has $lines lines (want 1)"
    [ "$rc" -ne 124 ] || problems+=" (timed out: it probably mounted)"
    if [ "$(bfs_count_mounts)" != "$mounts_before" ]; then
        problems+=" left a FUSE mount"
        awk '{ for (i = 7; i <= NF; i++) if ($i == "-") break; if ($(i + 1) ~ /^fuse/) print $5 }' /proc/self/mountinfo |
            while read -r m; do case "$m" in "$BFS_TMP"/*) umount -l "$m" ;; esac; done
    fi
    if [ -n "$problems" ]; then
        failures=$((failures + 1))
        printf '  BAD  %-30s:%s\n       stderr: %s\n' "$desc" "$problems" "$(head -c 300 "$BFS_TMP/err" | tr '\n' '|')"
    else
        printf '  ok   %-30s: %s\n' "$desc" "$(head -c 120 "$BFS_TMP/err")"
    fi
done <<< "$CASES"
log "$n bad-input cases, $failures wrong"
[ "$failures" -eq 0 ] || fail "$failures of $n bad-input cases were not rejected properly"

# A BACKING on a read-only filesystem says so and what to do, rather than
# calling root a user who may not write.
timeout 10 "$BOUNDFS" -f "$BFS_TMP/ro" "$M" -o "$OK" 2>"$BFS_TMP/err" </dev/null
grep -q "is on a read-only filesystem; remount that filesystem read-write" "$BFS_TMP/err" ||
    fail "read-only BACKING: the error does not name the read-only filesystem: $(cat "$BFS_TMP/err")"

# and the boundary values that are valid still mount; sizes are powers of
# 1024 with fractions; a non-empty mountpoint is warned about (one line)
bfs_mount max_size=1.5G
assert_eq $((3 << 29)) "$(stats_field max_size)" "max_size=1.5G in bytes"
grep -qx "boundfs: warning: mountpoint $M is not empty (inner2): hidden while boundfs is mounted over it" "$BFS_LOG" ||
    fail "no warning about the non-empty mountpoint: $(cat "$BFS_LOG")"
bfs_unmount
chattr -i "$M"   # the guard keeps the bare mountpoint as it was: clear it, as an operator would
rmdir "$M/inner2"
bfs_mount max_size=64MiB
assert_eq $((64 << 20)) "$(stats_field max_size)" "max_size=64MiB in bytes"
! grep -q "warning: mountpoint" "$BFS_LOG" || fail "warned about an empty mountpoint"
bfs_unmount
bfs_mount max_size=64M,high_watermark=1,low_watermark=0.99
bfs_unmount
bfs_mount max_size=1M,high_watermark=0.01,low_watermark=0.005
bfs_unmount
bfs_mount max_size=1M,stamp_interval=0,reconcile_interval=0,stale_tmp=0,threads=256
bfs_unmount
bfs_mount max_size=1M,reconcile_interval=1s,stale_tmp=1s,threads=1,pattern=*.bin,pattern=*.pt,rw,nofail,x-systemd.automount
bfs_unmount
log PASS
