#!/bin/sh
# boundfs-start BACKING MOUNTPOINT [boundfs options...]
#
# The container's start command (Dockerfile, mount/boundfs-daemonset.yaml):
# recovers from a crash, then runs boundfs in the foreground as the
# container's main process. After a crash (SIGKILL, OOM) of the previous
# container the kernel still holds its mount at MOUNTPOINT, which answers
# ENOTCONN and makes a new boundfs refuse to mount (exit 4); like
# boundfs@.service's ExecStopPost, this detaches such a dead boundfs mount
# (and only that: a live one is left to boundfs, which refuses it with
# exit 3), then execs `boundfs -f BACKING MOUNTPOINT [options...]`.
# boundfs is looked for beside this script (the image installs both in
# /usr/local/bin), else in PATH.
set -eu
if [ "$#" -lt 2 ]; then
    echo "usage: boundfs-start BACKING MOUNTPOINT [boundfs options...]" >&2
    exit 2
fi
here=$(dirname "$0")
if [ -x "$here/boundfs" ]; then boundfs="$here/boundfs"; else boundfs=boundfs; fi
mnt=$2
# The mountpoint as /proc/self/mountinfo shows it (absolute, no symlinks).
case "$mnt" in /*) dir=$(dirname "$mnt") ;; *) dir=$(pwd)/$(dirname "$mnt") ;; esac
abs=$(cd "$dir" 2>/dev/null && pwd -P)/$(basename "$mnt")
fstype=$(awk -v m="$abs" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") { t = $(i + 1); break } }
                          END { print t }' /proc/self/mountinfo)
if [ "$fstype" = fuse.boundfs ]; then
    # boundfs status exits 4 when the daemon behind the mount is gone
    # (ENOTCONN). It does not answer at all (timeout: 124) when the daemon
    # was killed together with its watchdog (the container's cgroup killed
    # at once) while one of its threads was stuck in the kernel: the FUSE
    # connection was never closed, so it is aborted first, as the unit's
    # ExecStopPost does.
    rc=0
    timeout 10 "$boundfs" status "$abs" >/dev/null 2>&1 || rc=$?
    if [ "$rc" -eq 124 ]; then
        echo "boundfs-start: $abs does not answer in 10 s (its daemon died with a thread stuck in the kernel); aborting its FUSE connection" >&2
        c=/sys/fs/fuse/connections
        mountpoint -q "$c" || mount -t fusectl fusectl "$c" || true
        d=$(awk -v m="$abs" '$5 == m { print $3 }' /proc/self/mountinfo)
        [ -n "$d" ] && echo 1 >"$c/${d#*:}/abort" || true
        rc=4
    fi
    if [ "$rc" -eq 4 ]; then
        echo "boundfs-start: $abs is a dead boundfs mount (its daemon died); detaching it (umount -l)" >&2
        umount -l "$abs"
    fi
fi
exec "$boundfs" -f "$@"
