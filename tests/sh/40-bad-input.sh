#!/usr/bin/env bash
# Bad input (table-driven): each case must print exactly one line on stderr,
# exit with status 2 within 10 s, and leave nothing mounted.
. "$(dirname "$0")/lib.sh"

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
max_size=0                    | -f "$B" "$M" -o max_size=0
max_size=0M                   | -f "$B" "$M" -o max_size=0M
max_size negative             | -f "$B" "$M" -o max_size=-5M
max_size unparseable          | -f "$B" "$M" -o max_size=lots
max_size empty                | -f "$B" "$M" -o max_size=
--max-size 0                  | -f "$B" "$M" --max-size 0
--max-size garbage            | -f "$B" "$M" --max-size 12QB
high_watermark=0              | -f "$B" "$M" -o "$OK,high_watermark=0"
high_watermark=1.5            | -f "$B" "$M" -o "$OK,high_watermark=1.5"
high_watermark=-0.5           | -f "$B" "$M" -o "$OK,high_watermark=-0.5"
high_watermark=abc            | -f "$B" "$M" -o "$OK,high_watermark=abc"
low_watermark=0               | -f "$B" "$M" -o "$OK,low_watermark=0"
low_watermark=1.01            | -f "$B" "$M" -o "$OK,low_watermark=1.01,high_watermark=1"
low > high                    | -f "$B" "$M" -o "$OK,high_watermark=0.8,low_watermark=0.9"
low == high                   | -f "$B" "$M" -o "$OK,high_watermark=0.8,low_watermark=0.8"
low >= default high 0.95      | -f "$B" "$M" -o "$OK,low_watermark=0.96"
--low-watermark > --high      | -f "$B" "$M" --max-size 64M --high-watermark 0.5 --low-watermark 0.6
unknown -o option             | -f "$B" "$M" -o "$OK,bogus=1"
unknown -o flag               | -f "$B" "$M" -o "$OK,frobnicate"
unknown long flag             | -f "$B" "$M" -o "$OK" --bogus
empty pattern                 | -f "$B" "$M" -o "$OK,pattern="
empty --pattern               | -f "$B" "$M" --max-size 64M --pattern ''
bad stamp_interval            | -f "$B" "$M" -o "$OK,stamp_interval=soon"
TABLE
)

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

# and the boundary values that are valid still mount
bfs_mount max_size=64M,high_watermark=1,low_watermark=0.99
bfs_unmount
bfs_mount max_size=1,high_watermark=0.01,low_watermark=0.005
bfs_unmount
log PASS
