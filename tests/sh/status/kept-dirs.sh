#!/usr/bin/env bash
# Directories eviction empties, as a user sees them in BACKING: a fan-out
# leaf (vLLM's h[0:3]/h[3:5]/) goes once eviction empties it, but the level
# above it (h[0:3]/, which held directories) is kept while stores keep
# arriving, so the next store under it needs no LOOKUP and MKDIR of it
# again; once stores stop it goes too. A writer stores 64 KiB blocks into
# new leaves under 16 fan-out directories all along (the budget is 8 MiB, so
# eviction runs all along and up to 128 emptied directories may be kept);
# kv/a/b/x.bin is the oldest block. The proof that the reaper
# has run past kv/a: a leaf directory emptied after kv/a/b (mark/, stored
# after kv/a/b was reaped) is gone, which takes the reaper the same passes
# as kv/a would (the kernel holds both entries: drop, wait, remove).
. "$(dirname "$0")/../lib.sh"

bfs_mount max_size=8M
mkdir -p "$MNT/kv/a/b" || fail "mkdir kv/a/b"
mkblock "$MNT/kv/a/b/x.bin" 64K 1
STOP="$BFS_TMP/writer.stop"
$PY - "$MNT/w" "$STOP" <<'PYEOF' &
import hashlib, os, sys
root, stop = sys.argv[1], sys.argv[2]
i = 0
while not os.path.exists(stop):
    h = hashlib.sha256(b"w%d" % i).hexdigest()
    d = os.path.join(root, h[0:1], h[1:5])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, h + ".bin"), "wb") as f:
        f.write(b"w" * (64 << 10))
    i += 1
PYEOF
WRITER=$!; bfs_bg "$WRITER"

poll_until 30 "kv/a/b/x.bin evicted and its leaf kv/a/b reaped" test ! -e "$BACKING/kv/a/b"
mkdir "$MNT/mark" || fail "mkdir mark"
mkblock "$MNT/mark/y.bin" 64K 2
poll_until 30 "the later leaf mark/ reaped" test ! -e "$BACKING/mark"
kill -0 "$WRITER" 2>/dev/null || fail "the writer stopped early"
[ -d "$BACKING/kv/a" ] || fail "kv/a (it held directories) was removed while stores kept arriving"
# the next store under kv/a finds it, through the mount and in BACKING
ino=$(stat -c %i "$BACKING/kv/a")
mkdir -p "$MNT/kv/a/c" || fail "mkdir -p kv/a/c"
mkblock "$MNT/kv/a/c/z.bin" 64K 3
assert_eq "$ino" "$(stat -c %i "$BACKING/kv/a")" "kv/a's inode after the next store under it"

# stores stop: the kept directories go (z.bin is evicted by the writer first)
poll_until 30 "kv/a/c/z.bin evicted" test ! -e "$BACKING/kv/a/c/z.bin"
touch "$STOP"
wait "$WRITER" || fail "the writer failed"
poll_until 20 "kv/ reaped once stores stopped" test ! -e "$BACKING/kv"
no_empty_dirs() { [ -z "$(find "$BACKING/w" -mindepth 1 -type d -empty)" ]; }
poll_until 20 "no emptied directory left once stores stopped" no_empty_dirs
bfs_unmount
bfs_done
