#!/usr/bin/env bash
# The daemon as a non-root user: it mounts through fusermount3 (which must be
# setuid root), stores and loads work with eviction, other users (root
# included) are kept out, `fusermount3 -u` and SIGTERM unmount it with exit
# 0, and allow_other without user_allow_other in /etc/fuse.conf is refused
# (exit 1, a last line saying what to set).  If this boundfs has kernel
# passthrough (root only), its default falls back cleanly: no error in the
# log, the data path works.
. "$(dirname "$0")/../lib.sh"
bfs_user
FM=$(command -v fusermount3) || skip "fusermount3 is missing (scripts/install-deps.sh installs fuse3)"
[ -u "$FM" ] || skip "$FM is not setuid root, so non-root users cannot mount"
# Distributions ship /dev/fuse as 0666; some containers make it 0600, which
# keeps every non-root FUSE daemon out (fuser, like libfuse, opens it before
# calling fusermount3).  Give it the usual mode for this test, then restore.
DEV_MODE=$(stat -c %a /dev/fuse)
if ! as_user test -r /dev/fuse -a -w /dev/fuse; then
    log "/dev/fuse is $DEV_MODE here; 0666 (the usual mode) for this test"
    chmod 666 /dev/fuse || skip "/dev/fuse is not usable by other users and cannot be made so"
    trap 'rc=$?; chmod "$DEV_MODE" /dev/fuse; (exit $rc); bfs_cleanup' EXIT
fi

# the user's copy of the daemon and tools (the checkout may not be reachable)
mkdir -p "$BFS_TMP/bin"
cp "$BOUNDFS" "$BFS_TMP/bin/boundfs"; cp "$BFS_REPO/scripts/kvblocks.py" "$BFS_HELPERS/op.py" "$BFS_TMP/bin/"
chmod -R a+rX "$BFS_TMP/bin"
chown "$BFS_UID:$BFS_GID" "$BACKING" "$MNT"
KV="$BFS_USER_PY $BFS_TMP/bin/kvblocks.py"

start_as_user() { # OPTS
    BFS_MOUNTS=$((BFS_MOUNTS + 1)); BFS_LOG="$BFS_TMP/daemon.$BFS_MOUNTS.log"
    # setpriv itself (not a shell function) in the background: $! is the daemon
    setpriv --reuid="$BFS_UID" --regid="$BFS_GID" --init-groups --inh-caps=-all -- \
        "$BFS_TMP/bin/boundfs" -f "$BACKING" "$MNT" -o "$1" 2>"$BFS_LOG" </dev/null &
    BFS_DPID=$!
    poll_until 10 "non-root mount at $MNT" bfs_is_mounted "$MNT" fuse
}

start_as_user max_size=16M
o=$(awk -v d="$MNT" '$2 == d { print $3, $4 }' /proc/mounts); log "non-root mount: $o"
[[ $o == *user_id=$BFS_UID* ]] || fail "mount is not owned by $BFS_USER: $o"
[[ $o == *default_permissions* ]] || fail "default_permissions missing: $o"
[[ $o != *allow_other* ]] || fail "allow_other on although not asked for: $o"
res=$(as_user $KV store "$MNT/kv" --count 16 --seed nr --size 2M --threads 2 | tail -n 1) || fail "store as $BFS_USER: $res"
log "store 16 x 2 MiB as $BFS_USER into max_size=16M: $res"
assert_eq 0 "$(json_get "$res" errors)" "store errors"
assert_eq 16 "$(json_get "$res" stored)" "blocks stored"
ld=$(as_user $KV load "$MNT/kv" --count 16 --seed nr --last 4 | tail -n 1)
assert_eq 4 "$(json_get "$ld" loaded)" "newest blocks load ($ld)"
assert_le "$(du_backing)" $((17 * MiB)) "du of BACKING"
assert_eq "$BFS_UID" "$(stat -c %u "$(find "$BACKING/kv" -name '*.bin' | head -n 1)")" "owner of stored blocks"
assert_errno EACCES stat "$MNT/kv"        # root is another user here
if grep -q ' ERROR ' "$BFS_LOG"; then grep ' ERROR ' "$BFS_LOG" | head -3; fail "errors in the non-root daemon's log"; fi
if "$BOUNDFS" --help 2>&1 | grep -q passthrough; then
    # default passthrough=auto: not root, so reads fall back to the daemon
    # (the loads above went through it), and that is said once at most
    n=$(grep -c 'passthrough unavailable' "$BFS_LOG")
    log "passthrough as non-root: $(grep -i 'passthrough' "$BFS_LOG" | sed 's/^.*\] //' | tr '\n' ';' | cut -c1-220)"
    assert_le "$n" 1 "log lines saying passthrough is unavailable"
    ! grep -q 'kernel passthrough on' "$BFS_LOG" || fail "a non-root daemon claims kernel passthrough"
fi
as_user "$FM" -u "$MNT" || fail "fusermount3 -u as $BFS_USER"
bfs_expect_exit 0 "after fusermount3 -u"

start_as_user max_size=16M
kill -TERM "$BFS_DPID"
bfs_expect_exit 0 "after SIGTERM (non-root unmount through fusermount3)"

if grep -q '^[[:space:]]*user_allow_other' /etc/fuse.conf 2>/dev/null; then
    log "/etc/fuse.conf has user_allow_other: the refusal case does not apply here"
else
    as_user timeout 10 "$BFS_TMP/bin/boundfs" -f "$BACKING" "$MNT" -o max_size=16M,allow_other >"$BFS_TMP/ao.out" 2>"$BFS_TMP/ao.err"
    rc=$?
    last=$(tail -n 1 "$BFS_TMP/ao.err")
    log "allow_other as non-root without user_allow_other: exit $rc: $last"
    assert_eq 1 "$rc" "exit status of a refused mount"
    [[ $last == "boundfs: error: "*user_allow_other* ]] || fail "the refusal does not end with a one-line error naming user_allow_other"
    # fusermount3's reason, then the fix; not a hint about /dev/fuse, which is usable here
    [[ $last == *"add the line user_allow_other to /etc/fuse.conf"* ]] || fail "the refusal does not say how to allow it: $last"
    [[ $last != *"/dev/fuse"* ]] || fail "the refusal blames /dev/fuse, which this user can open: $last"
    ! bfs_is_mounted "$MNT" || fail "mounted although refused"
fi
log PASS
