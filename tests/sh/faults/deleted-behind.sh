#!/usr/bin/env bash
# Blocks deleted directly in BACKING while mounted (an external reaper), with
# the default 60 s reconcile interval: the evictor finds their names gone and
# asks for an early reconcile pass, so the stale usage goes within seconds
# and the blocks written next are not evicted to make room for ghosts.
# (Found by the fresh-user check: before, 3 of the 4 new blocks were evicted.)
. "$(dirname "$0")/../lib.sh"

bfs_mount max_size=32M
mkdir -p "$MNT/kv"
for i in $(seq 1 14); do mkblock "$MNT/kv/n$i.bin" 2M; done
find "$BACKING/kv" -name 'n*.bin' ! -name n14.bin -delete    # 26 MiB gone behind the daemon
for i in 1 2 3 4; do mkblock "$MNT/kv/p$i.bin" 2M; done        # 28 + 8 > 32 by the stale count
counted_right() { [ "$(stats_field usage)" -le $(( $(du_backing) + 64 * 1024 )) ]; }
poll_until 15 "usage to match du again (early reconcile)" counted_right
for i in 1 2 3 4; do mkblock "$MNT/kv/q$i.bin" 2M; done
for i in 1 2 3 4; do
    assert_exists "$BACKING/kv/q$i.bin" "q$i.bin evicted although the budget had room"
done
log "reconcile passes: $(stats_field reconciles), usage $(stats_field usage), du $(du_backing)"
bfs_unmount

# BACKING itself removed while mounted: new files fail with ENOENT, as in a
# deleted directory, and status says so (before, nothing did).
bfs_mount max_size=32M
assert_eq "" "$(stats_field backing_warning)" "a warning while BACKING is there"
rm -rf "$BACKING"
assert_errno ENOENT writefile "$MNT/new.bin" 4K
w=$(stats_field backing_warning)
log "status: $w"
case "$w" in *"was removed while mounted"*"recreate it and mount again"*) ;;
    *) fail "status does not say BACKING was removed: '$w'" ;; esac
"$BOUNDFS" status "$MNT" | grep -q '^WARNING .*was removed while mounted' || fail "boundfs status shows no WARNING row"
bfs_unmount
mkdir -p "$BACKING"
log PASS
