#!/bin/bash
# SPIKE: fstat() round trip (one GETATTR, attr_timeout 0) through the toy
# filesystem, FUSE over io_uring against the classic /dev/fuse loop, in
# alternating rounds. Usage: bench.sh [ROUNDS] [CALLS]   (root, enable_uring=Y)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${SPIKE_BIN:-/tmp/uring_spike}
gcc -O2 -Wall -o "$bin" "$here/uring_spike.c" -luring -lpthread
rounds=${1:-3} calls=${2:-20000}
mnt=$(mktemp -d /tmp/uring-spike-bench.XXXXXX)
trap 'umount "$mnt" 2>/dev/null || true; rmdir "$mnt"' EXIT
for r in $(seq "$rounds"); do
	for mode in ring classic; do
		coproc SRV { exec "$bin" serve "$mnt" "$mode" 2>/dev/null; }
		read -r line <&"${SRV[0]}"   # "ready": INIT answered (and ring registered)
		[ "$line" = ready ]
		for pin in unpinned cpu0 cpu1; do
			case $pin in unpinned) pre=() ;; cpu0) pre=(taskset -c 0) ;; cpu1) pre=(taskset -c 1) ;; esac
			printf 'round %s %-7s %-8s ' "$r" "$mode" "$pin"
			"${pre[@]}" "$bin" bench "$mnt/hello" "$calls"
		done
		printf 'round %s %-7s served: %s' "$r" "$mode" "$(cat "$mnt/stats")"
		echo
		kill "$SRV_PID"; wait "$SRV_PID" 2>/dev/null || true
		umount "$mnt"
	done
done
