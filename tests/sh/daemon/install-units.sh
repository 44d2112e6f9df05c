#!/usr/bin/env bash
# Packaging: scripts/install.sh installs the binary, the mount(8) helper
# symlink, the service template and the docs; a second run changes nothing;
# --uninstall removes all of it (staged under DESTDIR: the host is not
# touched). The shipped systemd units pass `systemd-analyze verify` (when
# available) with no complaint.
. "$(dirname "$0")/../lib.sh"

# ---- install.sh, staged
ROOT="$BFS_TMP/root"
snapshot() { (cd "$ROOT" && find . -printf '%p %y %m %l\n' | sort && find . -type f -exec md5sum {} + | sort); }
DESTDIR=$ROOT "$BFS_REPO/scripts/install.sh" --no-build >/dev/null || fail "install.sh failed"
for f in usr/local/bin/boundfs usr/local/lib/systemd/system/boundfs@.service usr/local/share/doc/boundfs/mnt-kv.mount \
    usr/local/share/doc/boundfs/boundfs.conf.example usr/local/share/doc/boundfs/README.md; do
    [ -f "$ROOT/$f" ] || fail "install.sh did not install /$f"
done
assert_eq /usr/local/bin/boundfs "$(readlink "$ROOT/sbin/mount.fuse.boundfs")" "mount helper symlink"
cmp -s "$BOUNDFS" "$ROOT/usr/local/bin/boundfs" || fail "installed binary differs from the build"
grep -q '^ExecStart=/usr/local/bin/boundfs -f ' "$ROOT/usr/local/lib/systemd/system/boundfs@.service" ||
    fail "service ExecStart does not name the installed binary"
first=$(snapshot)
DESTDIR=$ROOT "$BFS_REPO/scripts/install.sh" --no-build >/dev/null || fail "second install.sh failed"
assert_eq "$first" "$(snapshot)" "a second install changed something"
# another PREFIX is substituted into the unit and the helper
DESTDIR=$ROOT PREFIX=/opt/bfs "$BFS_REPO/scripts/install.sh" --no-build >/dev/null || fail "install.sh PREFIX=/opt/bfs"
grep -q '^ExecStart=/opt/bfs/bin/boundfs -f ' "$ROOT/opt/bfs/lib/systemd/system/boundfs@.service" || fail "PREFIX in the unit"
assert_eq /opt/bfs/bin/boundfs "$(readlink "$ROOT/sbin/mount.fuse.boundfs")" "helper follows PREFIX"
DESTDIR=$ROOT PREFIX=/opt/bfs "$BFS_REPO/scripts/install.sh" --uninstall >/dev/null || fail "uninstall PREFIX=/opt/bfs"
# the helper now points elsewhere than /usr/local: uninstalling /usr/local leaves it alone
DESTDIR=$ROOT PREFIX=/opt/bfs "$BFS_REPO/scripts/install.sh" --no-build >/dev/null
DESTDIR=$ROOT "$BFS_REPO/scripts/install.sh" --uninstall >/dev/null 2>&1 || fail "uninstall /usr/local"
assert_eq /opt/bfs/bin/boundfs "$(readlink "$ROOT/sbin/mount.fuse.boundfs")" "uninstall removed another install's helper"
DESTDIR=$ROOT PREFIX=/opt/bfs "$BFS_REPO/scripts/install.sh" --uninstall >/dev/null || fail "uninstall PREFIX=/opt/bfs"
left=$(find "$ROOT" ! -type d)
assert_eq "" "$left" "files left after --uninstall"
# the directories it made go too, once empty; those that were there stay
R2="$BFS_TMP/root2"; mkdir -p "$R2/usr/local/bin"
DESTDIR=$R2 "$BFS_REPO/scripts/install.sh" --no-build >/dev/null || fail "install.sh into $R2"
[ -f "$R2/usr/local/share/doc/boundfs/docs/reference.md" ] || fail "docs/ not installed"
[ -f "$R2/usr/local/share/doc/boundfs/docs/design/upgrade.md" ] || fail "docs/design/ not installed"
DESTDIR=$R2 "$BFS_REPO/scripts/install.sh" --no-build >/dev/null || fail "second install.sh into $R2"
DESTDIR=$R2 "$BFS_REPO/scripts/install.sh" --uninstall >/dev/null || fail "uninstall from $R2"
assert_eq "./usr ./usr/local ./usr/local/bin" "$(cd "$R2" && find . -mindepth 1 | sort | paste -sd' ')" \
    "what --uninstall left (only the directories that were there before)"
log "install.sh: installs, idempotent, PREFIX honoured, --uninstall leaves nothing, not even its directories"

# ---- a service whose config is missing fails its start, naming the file:
# a Condition would skip it silently (systemctl start prints nothing, mounts nothing)
grep -qx 'AssertPathExists=/etc/boundfs/%i.conf' "$BFS_REPO/mount/boundfs@.service" ||
    fail "boundfs@.service does not assert that /etc/boundfs/%i.conf exists"
grep -q '^Condition' "$BFS_REPO/mount/boundfs@.service" && fail "boundfs@.service skips silently on a Condition"

# ---- the example config mounts as shipped: boundfs@.service's ExecStart with
# its OPTIONS (its BACKING and MOUNTPOINT replaced by this test's directories)
conf="$BFS_REPO/mount/boundfs.conf.example"
opts=$(. "$conf" && printf '%s' "$OPTIONS") || fail "cannot read OPTIONS from $conf"
[ -n "$opts" ] || fail "$conf sets no OPTIONS"
exec_start=$(sed -n 's/^ExecStart=//p' "$BFS_REPO/mount/boundfs@.service")
[[ $exec_start == *'-f ${BACKING} ${MOUNTPOINT} -o ${OPTIONS}'* ]] || fail "the unit's ExecStart no longer passes OPTIONS as -o: $exec_start"
bfs_mount "$opts"
log "the example config's OPTIONS mount: $opts"
bfs_unmount

# ---- systemd-analyze verify
command -v systemd-analyze >/dev/null || skip "systemd-analyze is absent (install.sh checks passed)"
U="$BFS_TMP/units"; mkdir "$U"
sed "s|/usr/local/bin/boundfs|$BOUNDFS|g" "$BFS_REPO/mount/boundfs@.service" >"$U/boundfs@.service"
cp "$U/boundfs@.service" "$U/boundfs@kv.service"
cp "$BFS_REPO/mount/mnt-kv.mount" "$U/"
out=$(cd "$U" && timeout 60 systemd-analyze verify --man=no ./mnt-kv.mount ./boundfs@kv.service 2>&1); rc=$?
[ "$rc" -eq 0 ] || fail "systemd-analyze verify failed ($rc): $out"
[ -z "$out" ] || fail "systemd-analyze verify complained: $out"
# the check has teeth: a broken unit is reported
sed 's/^Type=notify/Type=notfy/' "$U/boundfs@kv.service" >"$U/boundfs@bad.service"
out=$(cd "$U" && timeout 60 systemd-analyze verify --man=no ./boundfs@bad.service 2>&1)
[ -n "$out" ] || fail "systemd-analyze verify did not notice a bad Type="
log "systemd-analyze verify: mnt-kv.mount, boundfs@.service clean"
bfs_done
