#!/usr/bin/env bash
# Shared tier, quick form: two boundfs mounts (-o shared) over one local
# directory. A block file held open through one mount is never evicted by
# the other mount, under 3x its budget of stores.
. "$(dirname "$0")/../lib.sh"
. "$BFS_SH_DIR/lib-shared.sh"

shared_local 2
held_open_case
node_unmount 1
node_unmount 2
bfs_done
