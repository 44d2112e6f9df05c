#!/usr/bin/env bash
# Installs boundfs: builds it in release mode, then installs
#
#   $PREFIX/bin/boundfs                       the daemon and the status/set commands
#   $SBINDIR/mount.fuse.boundfs -> ../bin ... the mount(8) helper: a symlink to the
#                                             binary (mount -t fuse.boundfs, fstab)
#   $UNITDIR/boundfs@.service                 systemd service template (Type=notify)
#   $PREFIX/share/doc/boundfs/                README, docs/ and examples (mnt-kv.mount,
#                                             boundfs.conf.example)
#
#   scripts/install.sh [--uninstall] [--no-build]
#
# Environment: PREFIX (default /usr/local), SBINDIR (default /sbin, where
# mount(8) looks for helpers), UNITDIR (default $PREFIX/lib/systemd/system),
# DESTDIR (a staging root prepended to every path, for packaging and tests).
# Run it again to update: every step replaces what is there (idempotent).
# --uninstall removes exactly what it installs, and the directories it made
# (listed in $PREFIX/share/doc/boundfs/installed-dirs) once they are empty;
# directories that were there before are left. --no-build installs the
# binary already in target/release (e.g. built as a user, installed as root).
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-/usr/local}
SBINDIR=${SBINDIR:-/sbin}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
DESTDIR=${DESTDIR:-}
BIN="$PREFIX/bin/boundfs"
DOC="$PREFIX/share/doc/boundfs"
DIRS_MADE="$DOC/installed-dirs"   # one path (without DESTDIR) a line

uninstall=0; build=1
for a in "$@"; do
    case "$a" in
        --uninstall) uninstall=1 ;;
        --no-build) build=0 ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown argument $a (see --help)" >&2; exit 2 ;;
    esac
done

reload_systemd() {
    # only on a live system managed by systemd, never into a staging root
    if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
        systemctl daemon-reload || echo "install.sh: systemctl daemon-reload failed (continuing)" >&2
    fi
}

if [ "$uninstall" -eq 1 ]; then
    helper="$DESTDIR$SBINDIR/mount.fuse.boundfs"
    if [ -L "$helper" ] && [ "$(readlink "$helper")" = "$BIN" ]; then
        rm -f "$helper"; echo "removed $helper"
    elif [ -e "$helper" ] || [ -L "$helper" ]; then
        echo "install.sh: left $helper alone: it does not point to $BIN" >&2
    fi
    for f in "$DESTDIR$BIN" "$DESTDIR$UNITDIR/boundfs@.service"; do
        if [ -e "$f" ]; then rm -f "$f"; echo "removed $f"; fi
    done
    made=()
    [ -f "$DESTDIR$DIRS_MADE" ] && mapfile -t made <"$DESTDIR$DIRS_MADE"
    if [ -d "$DESTDIR$DOC" ]; then rm -rf "$DESTDIR$DOC"; echo "removed $DESTDIR$DOC"; fi
    # the directories this script made, deepest first, each only if empty
    # (rmdir refuses otherwise: another install may still use it)
    printf '%s\n' "${made[@]}" | awk 'length($0) { print length($0) " " $0 }' | sort -rn | cut -d' ' -f2- |
        while IFS= read -r d; do
            if [ -d "$DESTDIR$d" ] && rmdir "$DESTDIR$d" 2>/dev/null; then echo "removed $DESTDIR$d/"; fi
        done
    reload_systemd
    exit 0
fi

if [ "$build" -eq 1 ]; then
    command -v cargo >/dev/null ||
        { echo "install.sh: cargo not found; build first (cargo build --release) and rerun with --no-build" >&2; exit 1; }
    cargo build --release
fi
[ -x target/release/boundfs ] ||
    { echo "install.sh: target/release/boundfs is missing; run cargo build --release" >&2; exit 1; }

# directories: note each one this run makes (and its missing parents), so
# that --uninstall can remove them again; earlier runs' notes are kept
new_dirs=()
for d in "$PREFIX/bin" "$SBINDIR" "$UNITDIR" "$DOC"; do
    while [ "$d" != / ] && [ -n "$d" ] && [ ! -d "$DESTDIR$d" ]; do
        new_dirs+=("$d"); d=$(dirname "$d")
    done
done
install -d "$DESTDIR$PREFIX/bin" "$DESTDIR$SBINDIR" "$DESTDIR$UNITDIR" "$DESTDIR$DOC"
if ((${#new_dirs[@]})) || [ ! -f "$DESTDIR$DIRS_MADE" ]; then
    { [ -f "$DESTDIR$DIRS_MADE" ] && cat "$DESTDIR$DIRS_MADE"; printf '%s\n' "${new_dirs[@]}"; } |
        grep -v '^$' | sort -u >"$DESTDIR$DIRS_MADE.new"
    mv -f "$DESTDIR$DIRS_MADE.new" "$DESTDIR$DIRS_MADE"
fi
# binary: copy beside, then rename over (a running daemon keeps its old file)
install -m 0755 target/release/boundfs "$DESTDIR$BIN.new"
mv -f "$DESTDIR$BIN.new" "$DESTDIR$BIN"
echo "installed $DESTDIR$BIN"
ln -sfn "$BIN" "$DESTDIR$SBINDIR/mount.fuse.boundfs"
echo "installed $DESTDIR$SBINDIR/mount.fuse.boundfs -> $BIN"
sed "s|/usr/local/bin/boundfs|$BIN|g" mount/boundfs@.service >"$DESTDIR$UNITDIR/boundfs@.service.new"
chmod 0644 "$DESTDIR$UNITDIR/boundfs@.service.new"
mv -f "$DESTDIR$UNITDIR/boundfs@.service.new" "$DESTDIR$UNITDIR/boundfs@.service"
echo "installed $DESTDIR$UNITDIR/boundfs@.service"
install -m 0644 README.md mount/mnt-kv.mount mount/boundfs.conf.example "$DESTDIR$DOC/"
install -d "$DESTDIR$DOC/docs" "$DESTDIR$DOC/docs/design"
install -m 0644 docs/*.md "$DESTDIR$DOC/docs/"
install -m 0644 docs/design/*.md "$DESTDIR$DOC/docs/design/"
echo "installed $DESTDIR$DOC/"
reload_systemd
