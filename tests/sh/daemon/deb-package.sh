#!/usr/bin/env bash
# The Debian package (scripts/package-deb.sh, cargo-deb) on this machine:
# `dpkg -i` puts every file where `dpkg -L` says; an /etc/fstab line of type
# fuse.boundfs mounts with `mount MOUNTPOINT` through the packaged mount
# helper (/usr/sbin/mount.fuse.boundfs -> /usr/bin/boundfs) and serves
# reads and writes; `boundfs status` answers; umount ends the daemon with 0;
# `dpkg -r` then `dpkg -P` leave nothing the package installed, and the
# package's directories (and /etc) are as they were before the install,
# purge also removing the `systemctl enable boundfs@NAME` link.
#
# The package is installed on the host (that is the point). Whatever
# happens, the EXIT trap purges it and restores /etc/fstab. It SKIPs
# where it would destroy an install of the developer's: a boundfs package
# already installed, or a mount helper not from this package in /usr/sbin
# (scripts/install.sh's).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../lib-daemon.sh"
command -v dpkg >/dev/null && command -v dpkg-deb >/dev/null || skip "dpkg is absent (not a Debian system)"
if dpkg-query -W -f='${db:Status-Status}' boundfs 2>/dev/null | grep -qv '^not-installed$'; then
    skip "a boundfs package is installed here ($(dpkg-query -W -f='${Version} ${db:Status-Abbrev}' boundfs)); this scenario would remove it"
fi
for f in /usr/sbin/mount.fuse.boundfs /sbin/mount.fuse.boundfs; do
    if [ -e "$f" ] || [ -L "$f" ]; then skip "$f is there (scripts/install.sh?); the package would replace it"; fi
done

# ---- the trap: unmount, purge the package, restore /etc/fstab, drop the
# enable link and the directory systemctl made for it; then lib.sh's cleanup
FSTAB_SAVED=""; INSTALLED=0; WANTS_MADE=""; UNIT_LINK=""
# /etc/fstab as it was (content and inode kept); none if there was none
restore_fstab() {
    case "$FSTAB_SAVED" in
        "") ;;
        none) rm -f /etc/fstab ;;
        *) cat "$FSTAB_SAVED" >/etc/fstab ;;
    esac
    FSTAB_SAVED=""
}
deb_cleanup() {
    if bfs_is_mounted "$MNT"; then umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null; fi
    if [ "$INSTALLED" -eq 1 ]; then dpkg -P boundfs >/dev/null 2>&1 || echo "[$BFS_NAME] dpkg -P boundfs failed in cleanup" >&2; fi
    restore_fstab
    if [ -n "$UNIT_LINK" ]; then rm -f "$UNIT_LINK"; fi
    if [ -n "$WANTS_MADE" ]; then rmdir "$WANTS_MADE" 2>/dev/null; fi
}
trap 'rc=$?; set +e; deb_cleanup; (exit $rc); bfs_cleanup' EXIT

# ---- build the .deb from the release binary already built
deb=$(cd "$BFS_REPO" && timeout 60 scripts/package-deb.sh --no-build 2>"$BFS_TMP/package.err" | tail -n 1) ||
    fail "scripts/package-deb.sh failed (scripts/install-deps.sh --tests installs cargo-deb): $(tail -n 5 "$BFS_TMP/package.err")"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$BFS_REPO/Cargo.toml" | head -n 1)
assert_eq "boundfs $version-1" "$(dpkg-deb -f "$deb" Package Version | cut -d' ' -f2 | paste -sd' ')" "the package's name and version (Cargo.toml's)"
log "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

# ---- what is there before: the package's directories and /etc
DIRS=(/usr/bin /usr/sbin /usr/lib/systemd/system /usr/lib/debug /usr/share/doc /etc)
snapshot() { find "${DIRS[@]}" -xdev -printf '%p %y %m %l\n' 2>/dev/null | sort; }
etc_sums() { find /etc -xdev -type f -exec md5sum {} + 2>/dev/null | sort; }
before=$(snapshot); before_sums=$(etc_sums)
# the package's directories that exist already (dpkg -r must leave these)
pre_dirs=$(dpkg-deb -c "$deb" | awk '$1 ~ /^d/ { p = substr($6, 2); sub(/\/$/, "", p); if (p != "") print p }' |
    while read -r d; do [ -d "$d" ] && echo "$d"; done)

# this machine's dpkg path filters (path-exclude keeps a shipped file out of
# the file system though dpkg -L still lists it); empty when there are none
excludes=$(cat /etc/dpkg/dpkg.cfg /etc/dpkg/dpkg.cfg.d/* 2>/dev/null | grep -E '^[[:space:]]*path-(ex|in)clude' | paste -sd' ')

# ---- dpkg -i: the files are where the package says
INSTALLED=1
dpkg -i "$deb" >"$BFS_TMP/dpkg-i.log" 2>&1 || fail "dpkg -i $deb: $(tail -n 5 "$BFS_TMP/dpkg-i.log")"
assert_eq "install ok installed" "$(dpkg-query -W -f='${Status}' boundfs)" "dpkg status after dpkg -i"
mapfile -t listed < <(dpkg -L boundfs | grep -v '^/\.$')
[ "${#listed[@]}" -gt 10 ] || fail "dpkg -L boundfs lists only ${#listed[@]} paths"
for p in "${listed[@]}"; do
    [ -e "$p" ] || [ -L "$p" ] || [ -n "$excludes" ] || fail "dpkg -L lists $p but it is not there"
done
# what the package ships (its own table of contents), then what dpkg
# installed of it: a dpkg path-exclude (/etc/dpkg/dpkg.cfg.d, as minimal
# images set for /usr/share/doc) keeps a shipped doc off the disk, which is
# the machine's choice, not a fault of the package
shipped=$(dpkg-deb -c "$deb" | awk '{ print substr($6, 2) }')
for p in /usr/bin/boundfs /usr/sbin/mount.fuse.boundfs /usr/lib/systemd/system/boundfs@.service \
    /usr/share/doc/boundfs/copyright /usr/share/doc/boundfs/README.md /usr/share/doc/boundfs/docs/reference.md \
    /usr/share/doc/boundfs/docs/design/upgrade.md \
    /usr/share/doc/boundfs/examples/boundfs.conf.example /usr/share/doc/boundfs/examples/mnt-kv.mount; do
    grep -qxF "$p" <<<"$shipped" || fail "the package does not ship $p (dpkg-deb -c $deb)"
    if [ -e "$p" ] || [ -L "$p" ]; then
        # dpkg -r must then take it away: the snapshot after the purge checks
        printf '%s\n' "${listed[@]}" | grep -qxF "$p" ||
            log "dpkg -L does not list $p, which is installed (listed under /usr/share/doc/boundfs: $(printf '%s\n' "${listed[@]}" | grep -c '^/usr/share/doc/boundfs/'))"
        continue
    fi
    case "$p" in
        /usr/share/doc/*) [ -n "$excludes" ] && { log "dpkg did not install $p (this machine's dpkg filters: $excludes)"; continue; } ;;
    esac
    fail "dpkg -i did not install $p, which the package ships (dpkg filters: ${excludes:-none})"
done
assert_eq /usr/bin/boundfs "$(readlink -f /sbin/mount.fuse.boundfs)" "mount(8)'s /sbin/mount.fuse.boundfs resolves to"
assert_eq "boundfs $version" "$(/usr/bin/boundfs --version)" "the packaged binary's version"
grep -q '^ExecStart=/usr/bin/boundfs -f ' /usr/lib/systemd/system/boundfs@.service ||
    fail "the packaged unit does not start /usr/bin/boundfs: $(grep ExecStart= /usr/lib/systemd/system/boundfs@.service)"
log "dpkg -i: ${#listed[@]} paths, all there; helper -> /usr/bin/boundfs; unit runs /usr/bin/boundfs"

# ---- an /etc/fstab line; `mount MOUNTPOINT` goes through the packaged helper
if [ -e /etc/fstab ]; then cp -p /etc/fstab "$BFS_TMP/fstab.saved"; FSTAB_SAVED="$BFS_TMP/fstab.saved"; else FSTAB_SAVED=none; fi
printf '%s  %s  fuse.boundfs  max_size=32M,allow_other,nofail  0 0\n' "$BACKING" "$MNT" >>/etc/fstab
bfs_run_reaped mount "$MNT"
assert_eq 0 "$BFS_CMD_RC" "mount $MNT (fstab) exit status ($(cat "$BFS_LOG"))"
bfs_is_mounted "$MNT" fuse.boundfs || fail "mount $MNT returned 0 but nothing is mounted"
[ -n "$BFS_DAEMON" ] || fail "no daemon left serving the mount"
assert_eq /usr/bin/boundfs "$(readlink "/proc/$BFS_DAEMON/exe")" "the daemon's executable"
# mount(8) ran the packaged helper, not fuse3's generic mount.fuse (which,
# when installed, would run `boundfs` from PATH: argv[0] "boundfs")
argv0=$(tr '\0' '\n' <"/proc/$BFS_DAEMON/cmdline" | head -n 1)
assert_eq mount.fuse.boundfs "$(basename "$argv0")" "the daemon's argv[0] (what mount(8) ran)"
echo "through the package" >"$MNT/hello" || fail "write through the mount"
assert_eq "through the package" "$(cat "$BACKING/hello")" "the file in BACKING"
assert_eq "through the package" "$(cat "$MNT/hello")" "the file read through the mount"
/usr/bin/boundfs status "$MNT" >"$BFS_TMP/status" 2>&1 || fail "boundfs status $MNT: $(cat "$BFS_TMP/status")"
assert_eq $((32 * MiB)) "$(stats_field max_size)" "max_size from the fstab line"
umount "$MNT" || fail "umount $MNT"
bfs_expect_daemon_exit 0 "after umount"
restore_fstab
log "fstab line: mount $MNT ran /usr/bin/boundfs, write/read/status fine, umount -> exit 0"

# ---- an enabled instance (systemctl enable works without a running systemd)
if command -v systemctl >/dev/null; then
    inst="boundfs@debtest$$.service"
    wants=/etc/systemd/system/multi-user.target.wants
    [ -d "$wants" ] || WANTS_MADE=$wants
    UNIT_LINK="$wants/$inst"
    systemctl enable "$inst" >"$BFS_TMP/enable.log" 2>&1 || fail "systemctl enable $inst: $(cat "$BFS_TMP/enable.log")"
    [ -L "$UNIT_LINK" ] || fail "systemctl enable made no $UNIT_LINK"
fi

# ---- dpkg -r, then dpkg -P: nothing of the package's is left
dpkg -r boundfs >"$BFS_TMP/dpkg-r.log" 2>&1 || fail "dpkg -r boundfs: $(tail -n 5 "$BFS_TMP/dpkg-r.log")"
for p in "${listed[@]}"; do
    if [ -L "$p" ] || [ -f "$p" ]; then fail "dpkg -r left $p"; fi
    if [ -d "$p" ] && ! grep -qxF -- "$p" <<<"$pre_dirs"; then
        fail "dpkg -r left the directory $p (not there before)"
    fi
done
dpkg -P boundfs >"$BFS_TMP/dpkg-p.log" 2>&1 || fail "dpkg -P boundfs: $(tail -n 5 "$BFS_TMP/dpkg-p.log")"
INSTALLED=0
st=$(dpkg-query -W -f='${db:Status-Status}' boundfs 2>/dev/null) || st=not-installed
assert_eq not-installed "$st" "dpkg status after dpkg -P"
if [ -n "$UNIT_LINK" ]; then
    ! [ -L "$UNIT_LINK" ] || fail "dpkg -P left the enable link $UNIT_LINK"
    UNIT_LINK=""
    # systemctl made the .wants directory, not the package
    if [ -n "$WANTS_MADE" ]; then rmdir "$WANTS_MADE" || fail "$WANTS_MADE is not empty"; WANTS_MADE=""; fi
fi
after=$(snapshot)
[ "$before" = "$after" ] || fail "the package's directories differ from before the install: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -n 10 | paste -sd' ')"
after_sums=$(etc_sums)
[ "$before_sums" = "$after_sums" ] || fail "/etc changed: $(diff <(echo "$before_sums") <(echo "$after_sums") | grep '^[<>]' | head -n 5 | paste -sd' ')"
log "dpkg -r, dpkg -P: nothing left in ${DIRS[*]}; the enable link went with the purge"
bfs_done
