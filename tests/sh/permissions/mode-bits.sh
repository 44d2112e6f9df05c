#!/usr/bin/env bash
# Permissions: the kernel checks them (default_permissions is in the mount
# options), other users are kept out unless allow_other is asked for, and
# with allow_other a user can do through the mount exactly what the mode bits
# let them do, although the daemon runs as root.
. "$(dirname "$0")/../lib.sh"
bfs_user

opts_of() { awk -v d="$MNT" '$2 == d { print $4 }' /proc/mounts; }
mkdir -p "$BACKING/ro" "$BACKING/shared"
chmod 755 "$BACKING/ro"; chmod 1777 "$BACKING/shared"
printf 'root data' > "$BACKING/ro/root.bin"; chmod 644 "$BACKING/ro/root.bin"
printf 'secret' > "$BACKING/ro/private.bin"; chmod 600 "$BACKING/ro/private.bin"
OP_U="$BFS_USER_PY $BFS_HELPERS/op.py"
user_errno() { as_user $OP_U "$@" 2>&1 | head -n 1 | cut -d' ' -f1; }

bfs_mount max_size=16M
o=$(opts_of); log "mount options: $o"
[[ ,$o, == *,default_permissions,* ]] || fail "default_permissions missing from the mount options: $o"
[[ ,$o, != *,allow_other,* ]] || fail "allow_other is on although not asked for: $o"
assert_eq EACCES "$(user_errno stat "$MNT/ro/root.bin")" "another user without allow_other"
bfs_unmount

bfs_mount max_size=16M,allow_other
o=$(opts_of); log "mount options with allow_other: $o"
[[ ,$o, == *,allow_other,* ]] || fail "allow_other asked for but missing: $o"
[[ ,$o, == *,default_permissions,* ]] || fail "default_permissions missing: $o"
assert_eq OK "$(user_errno readall "$MNT/ro/root.bin")" "user reads a 0644 file"
assert_eq EACCES "$(user_errno readall "$MNT/ro/private.bin")" "user reads a 0600 root file"
assert_eq EACCES "$(user_errno writefile "$MNT/ro/root.bin" 1K)" "user writes a 0644 root file"
assert_eq EACCES "$(user_errno writefile "$MNT/ro/new.bin" 1K)" "user creates in a 0755 root directory"
assert_eq EACCES "$(user_errno unlink "$MNT/ro/root.bin")" "user unlinks in a 0755 root directory"
assert_eq EPERM "$(user_errno chmod "$MNT/ro/root.bin" 666)" "user chmods a root file"
assert_eq 'root data' "$(cat "$BACKING/ro/root.bin")" "root's file unchanged"
assert_missing "$BACKING/ro/new.bin"
assert_eq OK "$(user_errno writefile "$MNT/shared/mine.bin" 4K)" "user creates in a 1777 directory"
assert_eq "$BFS_UID:$BFS_GID" "$(stat -c %u:%g "$BACKING/shared/mine.bin")" "owner of the user's new file in BACKING"
printf 'x' > "$MNT/shared/roots.bin"
assert_eq EPERM "$(user_errno unlink "$MNT/shared/roots.bin")" "sticky directory: user removes root's file"
bfs_unmount
log PASS
