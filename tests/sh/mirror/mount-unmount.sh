#!/usr/bin/env bash
# Lifecycle: mounts as fuse.boundfs with -o options or long flags; umount,
# SIGTERM and SIGINT all unmount and make the daemon exit 0; a killed daemon
# makes the mount fail fast with ENOTCONN instead of hanging.
. "$(dirname "$0")/../lib.sh"

bfs_mount max_size=64M,high_watermark=0.95,low_watermark=0.90,pattern=*.bin,stamp_interval=60s,threads=2
t=$(bfs_fstype "$MNT")
[ "$t" = fuse.boundfs ] || fail_later "fstype in /proc/self/mountinfo is '$t', expected 'fuse.boundfs'"
echo hi > "$MNT/f" && assert_eq hi "$(cat "$BACKING/f")" "write through mount"
# a second mount on the same mountpoint is refused in one line, nothing stacked
out=$("$BOUNDFS" -f "$BACKING" "$MNT" -o max_size=8M 2>&1); rc=$?
assert_eq 3 "$rc" "exit status of a second mount on $MNT (already served: 3) ($out)"
assert_eq 1 "$(printf '%s\n' "$out" | wc -l)" "one-line error: $out"
[[ $out == *"already a boundfs mount"*"umount $MNT"* ]] || fail "the error should say how to unmount: $out"
assert_eq 1 "$(bfs_count_mounts "$MNT")" "mounts on $MNT after the refused second mount"
bfs_unmount
log "umount -> exit 0"

bfs_mount max_size=64M
kill -TERM "$BFS_DPID"
bfs_expect_exit 0 "after SIGTERM"
log "SIGTERM -> unmounted, exit 0"

bfs_mount max_size=64M
kill -INT "$BFS_DPID"
bfs_expect_exit 0 "after SIGINT"
log "SIGINT -> unmounted, exit 0"

# long flags
bfs_start --max-size 32M --high-watermark 0.8 --low-watermark 0.7 --pattern '*.kv' --stamp-interval 5s "$BACKING" "$MNT"
assert_eq $((32 * MiB)) "$(stats_field max_size)" "max_size from --max-size"
assert_eq 0.8 "$($PY -c "print(float('$(stats_field high_watermark)'))")" "--high-watermark"
assert_eq 0.7 "$($PY -c "print(float('$(stats_field low_watermark)'))")" "--low-watermark"
bfs_unmount
bfs_start -f "$BACKING" "$MNT" --max-size 16M
assert_eq $((16 * MiB)) "$(stats_field max_size)" "max_size with -f and a trailing flag"
bfs_unmount
log "long flags accepted"

# size suffixes
for s in "1G:1073741824" "512MiB:536870912" "100M:104857600"; do
    bfs_mount "max_size=${s%%:*}"
    assert_eq "${s##*:}" "$(stats_field max_size)" "max_size=${s%%:*}"
    bfs_unmount
done

# the atime family is applied: the mount shows what was asked (the kernel's
# default is relatime; last of atime/relatime/noatime/strictatime wins;
# strictatime alone is refused over a relatime BACKING: posix/atime)
mount_opts() { awk -v d="$MNT" '$5 == d { print $6 }' /proc/self/mountinfo; }
for c in ":relatime" "noatime:noatime" "noatime,relatime:relatime" "strictatime,relatime:relatime" "noatime,nodiratime:noatime,nodiratime"; do
    opt=${c%%:*}; want=${c#*:}
    bfs_mount "max_size=64M${opt:+,$opt}"
    got=$(mount_opts | tr ',' '\n' | grep -E '^(no|rel)atime$|^nodiratime$' | paste -sd,)
    assert_eq "$want" "$got" "atime flags of a mount with -o '$opt' ($(mount_opts))"
    bfs_unmount
done

# a dead daemon must not hang clients
bfs_mount max_size=64M
kill -KILL "$BFS_DPID"; wait "$BFS_DPID" 2>/dev/null; BFS_DPID=""
got=$(timeout 10 $OP stat "$MNT/f"); rc=$?
[ "$rc" -ne 124 ] || fail "stat on the mount of a killed daemon hung"
assert_eq ENOTCONN "${got%% *}" "stat on the mount of a killed daemon"
umount -l "$MNT"

# a mountpoint with a quote and parentheses in its name: the unmount command the
# refusal of a second mount suggests works when pasted into a shell
MNT="$BFS_TMP/it's(kv)"; mkdir -p "$MNT"
bfs_mount max_size=64M
out=$("$BOUNDFS" -f "$BACKING" "$MNT" -o max_size=8M 2>&1)
cmd=${out##*unmount it first: }
log "suggested: $cmd"
sh -c "$cmd" || fail "the suggested command failed: $cmd"
bfs_expect_exit 0 "after the suggested umount"
bfs_done
