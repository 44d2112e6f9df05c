#!/usr/bin/env bash
# One mount per BACKING on a machine: while a live boundfs serves BACKING, a
# second mount of the same BACKING (also through another path to it), of a
# directory inside it, or of a directory above it is refused with one line
# naming the mount that serves it, exit 1, nothing mounted, and the first
# mount's held blocks untouched. Once the first daemon is gone (unmounted,
# or killed: its flock dies with it and its dead mount no longer counts),
# BACKING can be mounted again.
. "$(dirname "$0")/../lib.sh"

OPTS=max_size=32M,reconcile_interval=1s
MNT2="$BFS_TMP/mnt2"; mkdir -p "$MNT2" "$BACKING/kv"
ln -s "$BACKING" "$BFS_TMP/backing-alias"
bfs_mount "$OPTS"
kv_store "$MNT/kv" 8 first 2M 2 >/dev/null || fail "stores on the first mount"
held=$(find "$BACKING/kv" -name '*.bin' | head -n 1)
exec {h}<"$MNT/${held#"$BACKING"/}"

# refused: CASE-NAME BACKING-ARG (each mounts at MNT2, daemon mode and -f)
refused() {
    local what=$1 b=$2 fg rc lines
    for fg in "" -f; do
        timeout 10 "$BOUNDFS" $fg "$b" "$MNT2" -o "$OPTS" >"$BFS_TMP/out" 2>"$BFS_TMP/err" </dev/null
        rc=$?
        lines=$(grep -c '' "$BFS_TMP/err")
        [ "$rc" -eq 3 ] || fail "$what ${fg:-(daemon mode)}: exit $rc, want 3 (already served): $(cat "$BFS_TMP/err")"
        [ "$lines" -eq 1 ] || fail "$what ${fg:-(daemon mode)}: $lines lines on stderr, want 1: $(cat "$BFS_TMP/err")"
        grep -q "mounted at $MNT" "$BFS_TMP/err" || fail "$what: the refusal does not name $MNT: $(cat "$BFS_TMP/err")"
        ! bfs_is_mounted "$MNT2" || fail "$what: mounted at $MNT2 although refused"
    done
    log "refused, $what: $(cat "$BFS_TMP/err")"
}
refused "the same BACKING" "$BACKING"
refused "the same BACKING through a symlink" "$BFS_TMP/backing-alias"
refused "a directory inside BACKING" "$BACKING/kv"
# the flock alone: in a mount namespace where the first mount is not
# visible (detached there), BACKING is still refused
if command -v unshare >/dev/null; then
    unshare -m --propagation private sh -c 'umount -l "$1" && exec "$2" -f "$3" "$4" -o "$5"' \
        sh "$MNT" "$BOUNDFS" "$BACKING" "$MNT2" "$OPTS" >"$BFS_TMP/out" 2>"$BFS_TMP/err" </dev/null
    rc=$?
    assert_eq 3 "$rc" "exit status (already served) in another mount namespace ($(cat "$BFS_TMP/err"))"
    grep -q "already served by a live boundfs mounted elsewhere" "$BFS_TMP/err" || fail "flock refusal: $(cat "$BFS_TMP/err")"
    # the mount is not visible there: the refusal names the daemon to stop
    grep -q "its daemon is pid $BFS_DPID: unmount it, or stop it (kill -TERM $BFS_DPID;" "$BFS_TMP/err" ||
        fail "the flock refusal does not name the daemon's pid $BFS_DPID: $(cat "$BFS_TMP/err")"
    log "refused, from another mount namespace (flock): $(cat "$BFS_TMP/err")"
fi
assert_eq 8 "$(find "$BACKING/kv" -name '*.bin' | wc -l)" "blocks of the first mount after the refusals"
assert_eq $((2 * MiB)) "$(wc -c <&$h)" "bytes read from the block held open"
exec {h}<&-
# a directory above BACKING (BFS_TMP holds the mountpoints: use a BACKING
# one level down for this case)
bfs_unmount
mkdir -p "$BFS_TMP/up/b"; BACKING="$BFS_TMP/up/b"
bfs_mount "$OPTS"
refused "a directory above BACKING" "$BFS_TMP/up"

# unmounted, then mounted again at once: umount returns before the daemon
# has exited (it joins its threads first), and the new claim waits for it
# instead of refusing BACKING as served by a live boundfs
for i in 1 2 3; do
    old=$BFS_DPID; BFS_DPID=""
    umount "$MNT" || fail "umount before remount $i"
    bfs_mount "$OPTS" || fail "remount $i right after umount"
    wait "$old"; rc=$?
    assert_eq 0 "$rc" "exit status of the unmounted daemon $i"
done
log "mounted again right after umount, 3 of 3"

# the first daemon killed (its mount dead, not yet detached): the claim is
# gone with it, so the same BACKING mounts elsewhere at once
kill -KILL "$BFS_DPID"; wait "$BFS_DPID" 2>/dev/null; BFS_DPID=""
bfs_is_mounted "$MNT" fuse.boundfs || fail "the dead mount should still be attached"
"$BOUNDFS" "$BACKING" "$MNT2" -o "$OPTS" 2>"$BFS_TMP/err" || fail "mount after the first daemon died: $(cat "$BFS_TMP/err")"
bfs_is_mounted "$MNT2" fuse.boundfs || fail "not mounted at $MNT2"
umount -l "$MNT"
umount "$MNT2" || fail "umount $MNT2"
log PASS
