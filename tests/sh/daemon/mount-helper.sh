#!/usr/bin/env bash
# mount(8) and fstab: `mount -t fuse.boundfs BACKING MNT -o ...` and an fstab
# line (`mount -T FILE MNT`) run the helper /sbin/mount.fuse.boundfs (a
# symlink to the binary); mount(8) returns once the mount is live, with
# mount(8)'s generic options accepted; `umount` ends the daemon with exit 0;
# a bad option is one line on stderr, a non-zero exit and nothing mounted;
# `ro` is refused; `-f` (fake) mounts nothing; `-s` drops unknown options.
#
# The helper must be in /sbin, where mount(8) looks (no override exists):
# the scenario runs in a private mount namespace with an overlay on /usr/sbin
# that adds it, so the host's /sbin is never touched.
if [ -z "${BFS_IN_MNTNS:-}" ]; then
    if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
        exec unshare --mount --propagation private env BFS_IN_MNTNS=1 bash "$0" "$@"
    fi
fi
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../lib-daemon.sh"
[ -n "${BFS_IN_MNTNS:-}" ] || skip "needs unshare(1) for a private mount namespace"
command -v mount >/dev/null || skip "mount(8) is absent"

# ---- without the helper, mount(8) fails with a message README's
# Troubleshooting names (fuse3's generic mount.fuse, when installed, says
# "boundfs: not found"; without it mount(8) says "unknown filesystem type")
if [ ! -e /sbin/mount.fuse.boundfs ]; then
    msg=$(timeout 10 mount -t fuse.boundfs "$BACKING" "$MNT" -o max_size=8M 2>&1); rc=$?
    log "without the helper: exit $rc: $msg"
    ! bfs_is_mounted "$MNT" || fail "mounted without the helper"
    case "$msg" in
        *"boundfs: not found"*) key="boundfs: not found" ;;
        *"unknown filesystem type 'fuse.boundfs'"*) key="unknown filesystem type 'fuse.boundfs'" ;;
        *) key=$msg ;;
    esac
    sed -n '/^## Troubleshooting/,/^## /p' "$BFS_REPO/README.md" | grep -F -- "$key" >/dev/null ||
        fail_later "README's Troubleshooting does not explain what mount(8) says without the helper: $msg"
fi

SBIN=$(readlink -f /sbin)
extra="$BFS_TMP/sbin-extra"; mkdir "$extra"
ln -s "$BOUNDFS" "$extra/mount.fuse.boundfs"
mount -t overlay overlay -o "lowerdir=$extra:$SBIN" "$SBIN" 2>/dev/null ||
    skip "cannot put an overlay on $SBIN in a private mount namespace"
[ "$(readlink /sbin/mount.fuse.boundfs)" = "$BOUNDFS" ] || fail "helper not visible in /sbin"

mkdir -p "$BACKING/pre"; mkblock "$BACKING/pre/a.bin" 4096

# ---- mount -t fuse.boundfs, with mount(8)'s generic options
bfs_run_reaped mount -t fuse.boundfs "$BACKING" "$MNT" \
    -o defaults,max_size=64M,nofail,_netdev,noatime,nodev,nosuid,x-systemd.requires=/,x-systemd.automount
bfs_is_mounted "$MNT" fuse.boundfs || fail "not mounted right after mount(8) returned (rc $BFS_CMD_RC)"
assert_eq 0 "$BFS_CMD_RC" "mount -t fuse.boundfs exit status"
[ -n "$BFS_DAEMON" ] || fail "no daemon left serving the mount"
assert_eq 4096 "$(stat -c %s "$MNT/pre/a.bin")" "a pre-existing file through the mount"
echo hi >"$MNT/hello" && assert_eq hi "$(cat "$BACKING/hello")" "write through the mount"
src=$(awk -v m="$MNT" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 2); exit } }' /proc/self/mountinfo)
assert_eq "$BACKING" "$src" "mount source shown in mountinfo"
umount "$MNT" || fail "umount $MNT"
bfs_expect_daemon_exit 0 "after umount"
log "mount -t fuse.boundfs: live on return, umount -> daemon exit 0"

# ---- an fstab line, mount -T FILE MOUNTPOINT
fstab="$BFS_TMP/fstab"
printf '# test fstab\n%s  %s  fuse.boundfs  max_size=32M,high_watermark=0.8,low_watermark=0.7,allow_other,nofail,x-systemd.requires-mounts-for=/  0 0\n' \
    "$BACKING" "$MNT" >"$fstab"
bfs_run_reaped mount -T "$fstab" "$MNT"
bfs_is_mounted "$MNT" fuse.boundfs || fail "fstab mount: not mounted right after mount(8) returned (rc $BFS_CMD_RC)"
assert_eq 0 "$BFS_CMD_RC" "mount -T fstab exit status"
assert_eq $((32 * MiB)) "$(stats_field max_size)" "max_size from the fstab line"
assert_eq 0.8 "$($PY -c "print(float('$(stats_field high_watermark)'))")" "high_watermark from the fstab line"
grep -q allow_other < <(awk -v m="$MNT" '$5 == m' /proc/self/mountinfo) || fail "allow_other not applied"
umount "$MNT" || fail "umount $MNT (fstab)"
bfs_expect_daemon_exit 0 "after umount (fstab)"
log "fstab line: mounted, options applied, umount -> exit 0"

# ---- ro is refused (boundfs itself evicts and stamps in BACKING)
mount -r -t fuse.boundfs -o max_size=32M "$BACKING" "$MNT" 2>"$BFS_TMP/ro.err"; rc=$?
assert_ne 0 "$rc" "mount -r"
grep -q "ro is not supported" "$BFS_TMP/ro.err" || fail "mount -r: $(cat "$BFS_TMP/ro.err")"
! bfs_is_mounted "$MNT" || fail "mounted with -r"

# ---- a bad option: one line on stderr, non-zero, nothing mounted, no daemon
err="$BFS_TMP/bad.err"
mount -t fuse.boundfs -o max_size=64M,bogus=1 "$BACKING" "$MNT" 2>"$err"; rc=$?
assert_ne 0 "$rc" "mount with a bad option"
grep -q "unknown option 'bogus'" "$err" || fail "bad option: stderr lacks the reason: $(cat "$err")"
! bfs_is_mounted "$MNT" || fail "mounted despite a bad option"
mount -t fuse.boundfs -o max_size=lots "$BACKING" "$MNT" 2>"$err"; rc=$?
assert_ne 0 "$rc" "mount with a bad max_size"
grep -q "max_size: 'lots' is not a size" "$err" || fail "bad max_size: stderr lacks the reason: $(cat "$err")"
! bfs_is_mounted "$MNT" || fail "mounted despite a bad max_size"
log "bad options via mount(8): $(head -n 1 "$err")"

# ---- a glob with braces in an fstab-style option list stays one pattern
bfs_run_reaped mount -t fuse.boundfs -o 'max_size=16M,pattern=*.{bin,pt}' "$BACKING" "$MNT"
assert_eq 0 "$BFS_CMD_RC" "mount -o pattern=*.{bin,pt} ($(cat "$BFS_LOG"))"
echo x >"$MNT/b.pt"
poll_until 5 "b.pt counted as a block file (pattern=*.{bin,pt})" test "$(stats_field block_files)" = 2
umount "$MNT"; bfs_expect_daemon_exit 0 "after umount (braces)"

# ---- -f (fake) checks and mounts nothing; -s (sloppy) drops unknown options
mount -f -t fuse.boundfs -o max_size=64M "$BACKING" "$MNT" || fail "mount -f"
! bfs_is_mounted "$MNT" || fail "mount -f mounted"
bfs_run_reaped mount -s -t fuse.boundfs -o max_size=64M,bogus "$BACKING" "$MNT"
assert_eq 0 "$BFS_CMD_RC" "mount -s with an unknown option"
umount "$MNT"; bfs_expect_daemon_exit 0 "after umount (sloppy)"
bfs_done
