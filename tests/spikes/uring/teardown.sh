#!/bin/bash
# SPIKE: what happens to a request held in a ring entry (sent to userspace,
# not committed) when the ring's owner dies. Prints observations, asserts
# nothing. Usage: teardown.sh [KIND MODE [GAP_CPU]]   (root, enable_uring=Y)
#   solo     MODE: the owner holds the only /dev/fuse file; SIGKILL it.
#   handover MODE: a successor holds the same /dev/fuse file (as boundfs'
#                  supervisor does); SIGKILL the owner, then the successor sends
#                  FUSE_NOTIFY_RESEND, registers its own ring (ring mode) and serves.
#   handover-adopt ring: as handover, and the successor answers the requests
#                  left in the dead owner's ring entries (shared buffers at the
#                  same address, COMMIT_AND_FETCH with their commit_id); the
#                  successor is a new program image (exec) mapping the passed
#                  memfd, and it primes each queue with a STATFS from that CPU.
#   handover-adopt-noprime ring: the same without priming.
#   planned ring: as handover-adopt, but first the owner closes its io_urings
#                  while alive (SIGUSR2); the gap request comes after that,
#                  before the owner is killed.
# The gap request (after the death, before the successor) runs on CPU 0 (where
# the parked request's entry is) or CPU 1 (no entry to adopt there).
# Each bounded wait below waits for an event (a line from the server, a client
# exiting) and gives up after a few seconds to call it a hang; nothing sleeps
# to order a race.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${SPIKE_BIN:-/tmp/uring_spike}
gcc -O2 -Wall -o "$bin" "$here/uring_spike.c" -luring -lpthread || exit 1
mnt=$(mktemp -d /tmp/uring-spike-td.XXXXXX)
logs=$(mktemp -d /tmp/uring-spike-td-logs.XXXXXX)

# client NAME CPU CMD...: run CMD in the background pinned to CPU, record rc and errors.
client() {
	local name=$1 cpu=$2; shift 2
	( taskset -c "$cpu" "$@" >"$logs/$name.out" 2>"$logs/$name.err"; echo $? >"$logs/$name.rc" ) &
	eval "pid_$name=$!"
}
# outcome NAME SECS: wait for the client to end (up to SECS), describe what it got.
outcome() {
	local name=$1 secs=$2 p; eval "p=\$pid_$name"
	local t=0
	while [ ! -e "$logs/$name.rc" ] && [ "$t" -lt $((secs * 10)) ]; do
		sleep 0.1; t=$((t + 1))   # polling for an exit, not ordering anything
	done
	if [ -e "$logs/$name.rc" ]; then
		echo "$name: returned rc=$(cat "$logs/$name.rc") out='$(tr -d '\n' <"$logs/$name.out")' err='$(tr -d '\n' <"$logs/$name.err")'"
	else
		echo "$name: still blocked after ${secs}s (state $(awk '{print $3}' /proc/"$p"/stat 2>/dev/null), wchan $(cat /proc/$(pgrep -P "$p" | head -1)/wchan 2>/dev/null))"
	fi
}
expect_line() { # expect_line PREFIX: wait (up to 10 s) for a server stdout line starting with PREFIX
	local t=0
	until grep -q "^$1" "$logs/server.out" 2>/dev/null; do
		[ "$t" -ge 100 ] && { echo "no '$1' line from the server" >&2; return 1; }
		sleep 0.1; t=$((t + 1))
	done
	grep "^$1" "$logs/server.out" | head -1
}

scenario() {
	local kind=$1 mode=$2 gapcpu=${3:-0} succ=
	rm -f "$logs"/*; touch "$logs/server.out"
	echo "== $kind $mode (gap request on CPU $gapcpu)"
	local arg=$kind; [ "$kind" = planned ] && arg=handover-adopt
	"$bin" serve "$mnt" "$mode" $([ "$kind" != solo ] && echo "$arg") >"$logs/server.out" 2>"$logs/server.err" &
	local owner=$!
	if [ "$kind" != solo ]; then succ=$(expect_line successor= | cut -d= -f2); fi
	expect_line ready >/dev/null || return
	client held 0 cat "$mnt/hang"
	expect_line parked || return            # the READ sits in a ring entry / on the processing list
	if [ "$kind" = planned ]; then          # the owner closes its io_urings and stays alive
		kill -USR2 "$owner"
		expect_line rings-closed || return
		client gap "$gapcpu" stat -c %s "$mnt/hello"
		outcome gap 2
	fi
	kill -KILL "$owner"
	wait "$owner" 2>/dev/null   # owner gone (its fds closed)
	if [ "$kind" = solo ]; then
		outcome held 5
		client after 0 stat -c %s "$mnt/hello"; outcome after 5
	else
		if [ "$kind" != planned ]; then
			client gap "$gapcpu" stat -c %s "$mnt/hello"    # issued with no live ring entry
			outcome gap 2
		fi
		kill -USR1 "$succ"
		expect_line successor-ready >/dev/null
		outcome held 3
		outcome gap 3
		client new1 1 stat -c %s "$mnt/hello"; outcome new1 3
		client new0 0 stat -c %s "$mnt/hello"; outcome new0 3
		outcome gap 1
		outcome held 1
		client stats 1 cat "$mnt/stats"; outcome stats 3
	fi
	local blocked=
	for c in held gap after new0 new1 stats; do
		[ -e "$logs/$c.out" ] && [ ! -e "$logs/$c.rc" ] && blocked="$blocked $c"
	done
	umount -f "$mnt" 2>/dev/null || umount -l "$mnt"   # MNT_FORCE aborts the connection
	for c in $blocked; do outcome "$c" 3 | sed 's/^/after umount -f: /'; done
	[ -n "$succ" ] && kill "$succ" 2>/dev/null
	wait 2>/dev/null
	sed 's/^/server: /' "$logs/server.err"
}

if [ $# -ge 2 ]; then
	scenario "$@"
else
	for kind in solo handover; do
		for mode in ring classic; do scenario "$kind" "$mode"; done
	done
	scenario handover-adopt ring 0
	scenario handover-adopt ring 1
	scenario handover-adopt-noprime ring 1
	scenario planned ring 0
	scenario planned ring 1
fi
rmdir "$mnt"; rm -rf "$logs"
