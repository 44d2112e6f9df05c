#!/usr/bin/env bash
# Shared tier over JuiceFS, close-to-open: when close(2)
# returns on node 1, node 2 reads the whole block. JuiceFS commits a file's
# data when the client's file is flushed; boundfs's FLUSH (flush=auto, on for
# a FUSE BACKING) closes a dup of the backing fd before close(2) returns.
# The helper keeps each file description alive in a child, so the kernel's
# RELEASE (the only other moment boundfs closes the backing fd) cannot come
# first: the interleaving the issue saw 1 time in 100 happens every time.
# Control: the same with node 1 mounted flush=off must read short.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"
C2O="$PY $BFS_HELPERS/close_to_open.py"

shared_juicefs 2
node_mount 1 "max_size=64M"
grep -q "FLUSH closes the backing file" "$BFS_LOG" || fail "node 1 did not detect that BACKING (JuiceFS) commits at close"
node_mount 2 "max_size=64M"
out=$($C2O --count 8 "$MNT1" "$MNT2") || fail "close-to-open broken with flush=auto: $out"
log "flush=auto: $out"
# the other direction too
out=$($C2O --count 4 "$MNT2" "$MNT1") || fail "close-to-open broken from node 2 to node 1: $out"

node_unmount 1
node_mount 1 "max_size=64M,flush=off"
out=$($C2O --count 4 "$MNT1" "$MNT2") && fail "control: with flush=off node 2 still read every block whole ($out): the test no longer forces the case"
log "flush=off (control): $out"
node_unmount 1
node_unmount 2
bfs_done
