#!/usr/bin/env bash
# Installs what boundfs's demo and tests use from Debian: getfattr (attr) to
# read the status xattr, setfacl (acl) for default-ACL modes (tests/sh/55),
# fuse3 for fusermount3 (non-root mounts), and prometheus_client's parser (a second opinion on the metrics file); and from
# crates.io the File System eXerciser (fsx, pinned) that tests/sh/65-fsx.sh
# runs.  Idempotent: what is already there (same fsx version) is skipped.
set -euo pipefail
FSX_VERSION=0.3.2
need=()
command -v getfattr >/dev/null || need+=(attr)
command -v setfacl >/dev/null || need+=(acl)
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v python3 >/dev/null || need+=(python3)
if ((${#need[@]})); then
    echo "installing: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# prometheus_client's parser cross-checks the metrics file (tests/sh/63); pip,
# so that it lands in the python3 the tests run (which may not be Debian's).
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
    echo "installing prometheus-client (pip)"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "prometheus-client==0.21.1" ||
        echo "prometheus-client not installed: tests/sh/63 checks the format with its own validator only" >&2
fi
fsx=$(command -v fsx || echo "${CARGO_HOME:-$HOME/.cargo}/bin/fsx")
if ! [ -x "$fsx" ] || [ "$("$fsx" --version 2>/dev/null)" != "fsx $FSX_VERSION" ]; then
    # about 45 s of compiling on 2 idle cores (100 s on busy ones), once per machine
    echo "installing fsx $FSX_VERSION (cargo install)"
    cargo install --quiet --locked fsx --version "$FSX_VERSION"
fi
