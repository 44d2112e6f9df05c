#!/usr/bin/env bash
# FUSE requests per vLLM-style store, counted by the daemon itself
# (status JSON `requests`), step by step. What a store costs is set by the
# kernel (Linux fs/fuse/dir.c; docs/performance.md, "FUSE requests per
# stored block"): a LOOKUP of every name a create, mkdir or rename target
# has not looked up yet, or has cached as missing (fuse_dentry_revalidate
# never trusts a negative entry for LOOKUP_EXCL or LOOKUP_RENAME_TARGET),
# and a GETATTR of a directory walked through after a change in it
# (fuse_dir_changed, then fuse_permission under default_permissions).
# This pins that floor: 14 requests for a store that makes its two hash
# directories, 10 for one into a directory that exists, and the engine's
# second exists() of a missing block costs none (the daemon answers a
# missing name with a negative entry the kernel caches). And it pins why
# the GETATTRs stay: with allow_other, a user without search permission on
# a directory is refused a name under it even when root's walk has left
# that name in the kernel's entry cache (without default_permissions the
# kernel would not check that permission on a cached walk at all).
. "$(dirname "$0")/../lib.sh"
bfs_user

N=20
SR="$PY $BFS_HELPERS/store_requests.py"
per() { # JSON KEY OPCODE -> requests per store of OPCODE in steps[KEY] (or per_store)
    $PY -c 'import json,sys; j=json.loads(sys.argv[1]); m=j["per_store"] if sys.argv[2]=="all" else j["steps"].get(sys.argv[2],{}); print("%g" % (m.get(sys.argv[3],0) if sys.argv[3]!="*" else round(sum(m.values()),3)))' "$@"
}
le() { $PY -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$1" "$2"; }

bfs_mount max_size=64M,allow_other
# a first store absorbs what a mount asks once (the first FLUSH, the root's
# attributes) so the counts below are per store in the steady state
$SR "$MNT" 1 warmup >/dev/null || fail "warm-up store"
$SR "$MNT" 1 warmup --same-dir >/dev/null || fail "warm-up store into flat/d"

new=$($SR "$MNT" $N fresh) || fail "stores into new directories"
log "store into new hash directories, per store: $new"
same=$($SR "$MNT" $N flat --same-dir) || fail "stores into one directory"
log "store into an existing directory, per store: $same"

assert_eq 0 "$(per "$new" "exists again" "*")" "requests for the second exists() of a missing block (negative entry)"
assert_eq 0 "$(per "$same" "exists again" "*")" "requests for the second exists() of a missing block, existing directory"
assert_eq 1 "$(per "$new" exists LOOKUP)" "LOOKUPs for the first exists() of a new block"
assert_eq 1 "$(per "$new" rename RENAME)" "RENAMEs per store"
t=$(per "$new" all "*"); le "$t" 14 || fail "requests per store making its two directories: $t > 14"
t=$(per "$same" all "*"); le "$t" 10 || fail "requests per store into an existing directory: $t > 10"

# search permission on a directory is checked for every caller, cached
# entries included: root resolves priv/x.bin (0700 directory) through the
# mount, so the kernel caches the entries; the user is still refused.
mkdir -m 700 "$MNT/priv" || fail "mkdir priv"
$OP writefile "$MNT/priv/x.bin" 4K >/dev/null || fail "root stores priv/x.bin"
assert_errno OK stat "$MNT/priv/x.bin"
OP_U="$BFS_USER_PY $BFS_HELPERS/op.py"
user_errno() { as_user $OP_U "$@" 2>&1 | head -n 1 | cut -d' ' -f1; }
assert_eq EACCES "$(user_errno stat "$MNT/priv/x.bin")" "user stats a cached name under a 0700 root directory"
assert_eq EACCES "$(user_errno access "$MNT/priv/x.bin" f)" "user probes a cached name under a 0700 root directory"
assert_eq EACCES "$(user_errno readall "$MNT/priv/x.bin")" "user reads a cached name under a 0700 root directory"
bfs_unmount
bfs_done
