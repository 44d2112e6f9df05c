#!/usr/bin/env bash
# Set-ID bits after a truncate go by the caller's CAP_FSETID, not by its uid
# (setattr_should_drop_suidgid() in fs/attr.c asks capable(CAP_FSETID)):
# root without CAP_FSETID loses them (6777 -> 777), a user with CAP_FSETID
# (ambient) keeps them (6777 stays). The daemon used to decide by uid 0 and
# got both backwards. Each case runs on a plain directory beside the mount
# and through the mount, and must agree.
. "$(dirname "$0")/../lib.sh"
bfs_user

PLAIN="$BFS_TMP/plain"
mkdir -p "$PLAIN" "$BACKING/shared"
chmod 1777 "$PLAIN" "$BACKING/shared"
bfs_mount max_size=16M,allow_other

root_nofsetid() { setpriv --inh-caps=-fsetid --bounding-set=-fsetid -- "$@"; }
user_fsetid() {
    setpriv --reuid="$BFS_UID" --regid="$BFS_GID" --init-groups --inh-caps=-all,+fsetid --ambient-caps=+fsetid -- "$@"
}
# check NAME RUNNER EXPECTED: a 6777 file of the test user, truncated by RUNNER
check() {
    local name=$1 runner=$2 want=$3 d got=()
    for d in "$PLAIN" "$MNT/shared"; do
        local f="$d/$name"
        echo data > "$f" && chown "$BFS_UID:$BFS_GID" "$f" && chmod 6777 "$f" || fail "$name: make $f"
        "$runner" truncate -s 1 "$f" || fail "$name: truncate $f as $runner"
        got+=("$(stat -c %a "$BACKING/shared/$name" 2>/dev/null || echo -)")
        [ "$d" = "$PLAIN" ] && got[-1]=$(stat -c %a "$f")
    done
    log "$name: plain ${got[0]}, mount ${got[1]}"
    assert_eq "$want" "${got[0]}" "$name: mode on a plain directory"
    [ "${got[1]}" = "${got[0]}" ] || fail_later "$name: the mount leaves ${got[1]}, a plain directory ${got[0]}"
}
check root-without-fsetid root_nofsetid 777
check user-with-fsetid user_fsetid 6777
bfs_done
