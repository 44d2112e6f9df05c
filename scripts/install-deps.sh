#!/usr/bin/env bash
# Installs what boundfs's demo and tests use from Debian: getfattr (attr) to
# read the status xattr, fuse3 for fusermount3 (non-root mounts), and
# prometheus_client's parser (a second opinion on the metrics file). Idempotent.
set -euo pipefail
need=()
command -v getfattr >/dev/null || need+=(attr)
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v python3 >/dev/null || need+=(python3)
python3 -c 'import prometheus_client' 2>/dev/null || need+=(python3-prometheus-client)
if ((${#need[@]})); then
    echo "installing: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
