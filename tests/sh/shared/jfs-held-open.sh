#!/usr/bin/env bash
# Shared tier over JuiceFS: two nodes, each its own JuiceFS client of one
# volume (Redis metadata, in network namespaces where possible) and its own
# boundfs -o shared. A block file held open on node 2 is never evicted by
# node 1 (flock crosses the JuiceFS clients), under 3x its budget of stores.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

shared_juicefs 2
held_open_case
node_unmount 1
node_unmount 2
bfs_done
