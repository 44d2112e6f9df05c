#!/usr/bin/env bash
# O_DIRECT kept: a client's O_DIRECT writes reach the backing file with
# O_DIRECT, so blocks stored that way (vLLM's store pattern) leave no pages in
# the page cache, as on a plain directory; a buffered store through the mount
# still caches its pages (the control).
. "$(dirname "$0")/../lib.sh"

PLAIN="$BFS_TMP/plain"; mkdir -p "$PLAIN"
# resident bytes of the files given (fincore, util-linux)
resident() { fincore -b -n -o RES "$@" | awk '{ s += $1 } END { print s + 0 }'; }
command -v fincore >/dev/null || skip "fincore (util-linux) is missing"
probe="$PLAIN/probe.bin"
[ "$($OP writedirect "$probe" 64K | cut -d' ' -f1)" = OK ] || skip "the backing filesystem refuses O_DIRECT"

bfs_mount max_size=64M
N=8
for i in $(seq 1 $N); do
    r=$($OP writedirect "$PLAIN/d$i.bin" 1M | cut -d' ' -f1); [ "$r" = OK ] || fail "plain O_DIRECT store $i: $r"
    r=$($OP writedirect "$MNT/d$i.bin" 1M | cut -d' ' -f1); [ "$r" = OK ] || fail "O_DIRECT store $i through the mount: $r"
    r=$($OP writefile "$MNT/b$i.bin" 1M | cut -d' ' -f1); [ "$r" = OK ] || fail "buffered store $i through the mount: $r"
done
plain=$(resident "$PLAIN"/d*.bin)
direct=$(resident "$BACKING"/d*.bin)
buffered=$(resident "$BACKING"/b*.bin)
log "page cache after $N MiB stored: plain O_DIRECT $plain B, mount O_DIRECT $direct B, mount buffered $buffered B"
assert_le "$direct" "$((plain + 64 * 1024))" "bytes of O_DIRECT-stored blocks left in the page cache (plain directory: $plain)"
assert_ge "$buffered" "$((N * 1024 * 1024 / 2))" "control: buffered stores do cache their pages"
for i in $(seq 1 $N); do checkblock "$MNT/d$i.bin" 1M "d$i" >/dev/null || fail "content of d$i.bin"; done
bfs_unmount
bfs_done
