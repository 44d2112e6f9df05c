#!/usr/bin/env bash
# Builds the Debian package: target/debian/boundfs_VERSION-1_ARCH.deb
# (VERSION from Cargo.toml), with cargo-deb (scripts/install-deps.sh --tests
# installs it; or `cargo install --locked cargo-deb --version 3.8.0`).
#
#   scripts/package-deb.sh [--no-build]
#
# What goes where is [package.metadata.deb] in Cargo.toml: /usr/bin/boundfs,
# the mount(8) helper /usr/sbin/mount.fuse.boundfs (a symlink to it),
# /usr/lib/systemd/system/boundfs@.service, docs and examples in
# /usr/share/doc/boundfs, debug info in /usr/lib/debug. --no-build packages
# the target/release/boundfs already built instead of running cargo build
# --release first. Prints the .deb's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
for a in "$@"; do
    case "$a" in
        --no-build) build=0 ;;
        -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "package-deb.sh: unknown argument $a (see --help)" >&2; exit 2 ;;
    esac
done
cargo deb --version >/dev/null 2>&1 ||
    { echo "package-deb.sh: cargo-deb is missing: scripts/install-deps.sh --tests (or cargo install --locked cargo-deb --version 3.8.0)" >&2; exit 1; }
if [ "$build" -eq 0 ] && ! [ -x target/release/boundfs ]; then
    echo "package-deb.sh: target/release/boundfs is missing; run cargo build --release or drop --no-build" >&2
    exit 1
fi
# the unit names the packaged binary (the repository's names /usr/local/bin,
# where scripts/install.sh puts it by default)
mkdir -p target/deb-assets
sed 's|/usr/local/bin/boundfs|/usr/bin/boundfs|g' mount/boundfs@.service >target/deb-assets/boundfs@.service
grep -q '^ExecStart=/usr/bin/boundfs ' target/deb-assets/boundfs@.service ||
    { echo "package-deb.sh: mount/boundfs@.service has no ExecStart=/usr/local/bin/boundfs line to point at /usr/bin" >&2; exit 1; }
args=(--locked)
[ "$build" -eq 1 ] || args+=(--no-build)
# cargo-deb prints the .deb's path last
out=$(cargo deb "${args[@]}")
deb=$(printf '%s\n' "$out" | tail -n 1)
[ -f "$deb" ] || { echo "package-deb.sh: cargo deb printed no package path: $out" >&2; exit 1; }
echo "$deb"
