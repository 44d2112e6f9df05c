#!/usr/bin/env bash
# Messages and exit codes a new operator meets: each
# failure is one line that names its cause and the fix, with one exit status
# per kind (README "Exit status": 1 runtime, 2 bad input, 3 already served,
# 4 a dead mount in the way), the same for mount, status and set:
#   * a mistyped or unknown subcommand is named as such (not "max_size is
#     required");
#   * without /dev/fuse, root is told /dev/fuse is missing and how to get it
#     (not "mount at MNT failed: No such file or directory");
#   * the same mountpoint and the same BACKING twice both exit 3; a dead
#     mount in the way exits 4 for mount, status and set;
#   * `-o` takes every value the long option takes: a glob's braces
#     (`pattern=*.{bin,pt}`) and a double-quoted value keep their commas;
#   * `boundfs set MNT max_size=32M,foo` names `foo`, not the units.
. "$(dirname "$0")/../lib.sh"

# one_line WHAT WANT_RC GREP CMD...: CMD exits WANT_RC with one line on
# stderr matching GREP (fixed string)
one_line() {
    local what=$1 want=$2 pat=$3 rc lines; shift 3
    timeout 10 "$@" >"$BFS_TMP/out" 2>"$BFS_TMP/err" </dev/null; rc=$?
    lines=$(grep -c '' "$BFS_TMP/err")
    log "$what: exit $rc: $(cat "$BFS_TMP/err")"
    [ "$rc" -eq "$want" ] || fail_later "$what: exit $rc, want $want"
    [ "$lines" -eq 1 ] || fail_later "$what: $lines lines on stderr, want 1"
    grep -qF -- "$pat" "$BFS_TMP/err" || fail_later "$what: stderr lacks '$pat'"
}

# ---- unknown subcommands
cd "$BFS_TMP" || fail "cd"
one_line "typo statu" 2 "unknown command 'statu'; did you mean \`boundfs status\`?" "$BOUNDFS" statu "$MNT"
one_line "typo sett" 2 "unknown command 'sett'; did you mean \`boundfs set\`?" "$BOUNDFS" sett "$MNT" max_size=1G
one_line "unknown show" 2 "unknown command 'show'" "$BOUNDFS" show "$MNT"
# a backing directory that happens to be named like a typo still mounts as ./NAME
mkdir "$BFS_TMP/statu"
one_line "existing dir statu, no max_size" 2 "max_size is required" "$BOUNDFS" statu "$MNT"
cd / || fail "cd /"

# ---- no /dev/fuse (a private mount namespace whose /dev lacks it)
if command -v unshare >/dev/null; then
    one_line "no /dev/fuse" 1 "/dev/fuse does not exist: load the FUSE module (modprobe fuse)" \
        unshare -m --propagation private sh -c \
        'mount -t tmpfs none /dev && mknod -m 666 /dev/null c 1 3 && exec "$0" "$@"' \
        "$BOUNDFS" "$BACKING" "$MNT" -o max_size=8M
    ! bfs_is_mounted "$MNT" || fail "mounted without /dev/fuse"
else
    log "unshare(1) is missing: the no-/dev/fuse case is not checked"
fi

# ---- -o takes the values --pattern and --log-file take
logf="$BFS_TMP/kv,1.log"
bfs_mount 'max_size=16M,pattern=*.{bin,pt},log_file="'"$logf"'"'
for f in a.bin b.pt c.txt; do echo x >"$MNT/$f"; done
poll_until 5 "two block files (*.bin and *.pt) of three" test "$(stats_field block_files)" = 2
[ -s "$logf" ] || fail "log_file with a comma in its name was not written: $(ls "$BFS_TMP")"

# ---- boundfs set: the item after a comma is named
one_line "set max_size=32M,foo" 2 "'foo' is not key=value" "$BOUNDFS" set "$MNT" max_size=32M,foo
assert_eq $((16 * MiB)) "$(stats_field max_size)" "budget unchanged by a refused set"

# ---- already served: 3, whichever way
mkdir -p "$BFS_TMP/mnt2"
one_line "same mountpoint" 3 "is already a boundfs mount" "$BOUNDFS" "$BACKING" "$MNT" -o max_size=8M
one_line "same backing" 3 "is already served by the boundfs mounted at $MNT" \
    "$BOUNDFS" "$BACKING" "$BFS_TMP/mnt2" -o max_size=8M
mkdir -p "$MNT/sub"
"$BOUNDFS" "$MNT/sub" "$BFS_TMP/mnt2" -o max_size=8M 2>"$BFS_TMP/stacked.err" || fail "stacked mount: $(cat "$BFS_TMP/stacked.err")"
grep -q "warning: backing directory $MNT/sub is on the boundfs mounted at $MNT: a budget inside a budget.*give its own backing path $BACKING/sub" \
    "$BFS_TMP/stacked.err" || fail "no warning for a BACKING on a boundfs mount: $(cat "$BFS_TMP/stacked.err")"
umount "$BFS_TMP/mnt2" || fail "umount the stacked mount"
one_line "bad input while mounted" 2 "max_size" "$BOUNDFS" "$BACKING" "$BFS_TMP/mnt2" -o max_size=lots

# ---- a dead mount in the way: 4 for mount, status and set
kill -KILL "$BFS_DPID"; bfs_wait_exit "$BFS_DPID" 5 || fail "the killed daemon did not go"; BFS_DPID=""
one_line "mount on a dead mount" 4 "umount -l $MNT" "$BOUNDFS" "$BACKING" "$MNT" -o max_size=8M
one_line "status of a dead mount" 4 "umount -l $MNT" "$BOUNDFS" status "$MNT"
one_line "set on a dead mount" 4 "umount -l $MNT" "$BOUNDFS" set "$MNT" max_size=8M
one_line "status of a path inside a dead mount" 4 "umount -l $MNT\`" "$BOUNDFS" status "$MNT/sub"
umount -l "$MNT" || fail "umount -l"
one_line "status of a plain directory" 1 "is not a boundfs mount" "$BOUNDFS" status "$MNT"
one_line "status of a missing path" 2 "does not exist" "$BOUNDFS" status "$BFS_TMP/nope"

# ---- README documents each exit status
for code in 1 2 3 4; do
    grep -qF "| \`$code\` |" "$BFS_REPO/README.md" || fail_later "README's exit status table lacks $code"
done
bfs_done
