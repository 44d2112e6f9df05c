#!/usr/bin/env bash
# f_bavail counts what eviction can free: an engine that gates each store on
# statvfs free space (SGLang HiCacheFile's min_free_space: `set()` is refused
# while f_bavail * f_frsize < min_free_space) keeps storing on a mount full of
# cold, evictable block files, and the budget still holds. Block files held
# open are not evictable, so they are not counted as available.
. "$(dirname "$0")/../lib.sh"

MAX=$((32 * MiB))
bfs_mount max_size=32M
mkdir "$MNT/hicache"
# 28 MiB of cold blocks: ~4 MiB is free room (max_size - usage), below the
# 8 MiB gate; the rest is evictable, so f_bavail (and f_bfree) count it
for i in $(seq 0 27); do mkblock "$MNT/hicache/cold$i.bin" 1M; done

# the gate, SGLang-style: statvfs before each set(); 24 stores of 1 MiB
# (tmp file, one write, rename), 24 MiB more than the free space
res=$($PY - "$MNT/hicache" $((8 * MiB)) 24 <<'PY'
import json, os, sys, uuid
d, min_free, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
stored = refused = 0
first_free = None
for i in range(n):
    v = os.statvfs(d)
    free = v.f_bavail * v.f_frsize
    first_free = free if first_free is None else first_free
    if free < min_free:
        refused += 1
        continue
    tmp = os.path.join(d, "." + uuid.uuid4().hex + ".tmp")
    with open(tmp, "wb") as f:
        f.write(os.urandom(1 << 20))
    os.rename(tmp, os.path.join(d, "new%d.bin" % i))
    stored += 1
print(json.dumps({"stored": stored, "refused": refused, "first_free": first_free}))
PY
) || fail "gated writer crashed"
log "gated stores: $res"
assert_eq 0 "$(json_get "$res" refused)" "stores refused by the min_free_space gate ($res)"
assert_eq 24 "$(json_get "$res" stored)" "stores done"
assert_le "$(du_backing)" $((MAX + MiB)) "usage after the gated stores"
for i in $(seq 0 23); do assert_exists "$MNT/hicache/new$i.bin"; done

# blocks with an open handle are not available: hold every block open
fds=()
for f in "$MNT"/hicache/*.bin; do exec {fd}<"$f"; fds+=("$fd"); done
read -r bsize bfree bavail < <(stat -f -c '%S %f %a' "$MNT")
u=$(du_backing)
assert_le $((bavail * bsize)) $((MAX - u + 2 * bsize + 64 * 1024)) "f_bavail with every block open (du $u)"
assert_eq "$bfree" "$bavail" "f_bavail == f_bfree with nothing evictable"
for fd in "${fds[@]}"; do exec {fd}<&-; done
poll_until 5 "f_bavail counts the closed blocks again" \
    test "$(stat -f -c '%a' "$MNT")" -gt $(( (MAX - u) / bsize + 8 * MiB / bsize ))
bfs_unmount
log PASS
