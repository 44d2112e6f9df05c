#!/usr/bin/env bash
# Shared tier over JuiceFS with three nodes:
# 95's checks (one budget within N x block + (N-1) x rate x lag, no
# over-eviction beyond the low watermark minus one block, stores in flight
# counted, one sweeper, one
# LRU, held blocks intact, no store error) with N=3, each JuiceFS client in
# its own network namespace. BOUNDFS_LONG=1: 5 minutes.
BFS_SHARED_NODES=3
. "$(dirname "$0")/jfs-one-budget.sh"
