#!/usr/bin/env bash
# df reads right: in every state df's Size, Used, Avail and
# Use% add up (Used + Avail = Size, Use% = Used / Size rounded up) and agree
# with `boundfs status` (the df_size/df_used/df_avail fields, and the `df`
# row of the table), and they mean what the README says:
#   Size  = max_size, or what BACKING's filesystem can hold for the mount
#           (usage + its free space) when that is less;
#   Avail = what a write can get before background eviction begins
#           (f_bfree = f_bavail): min(Size - held, high_watermark x max_size
#           - usage - reserved + evictable_bytes), at least 0 (issue 32 item 5);
#   Used  = Size - Avail: what no write can get (held = usage + reserved -
#           evictable_bytes) plus the headroom above the high watermark.
# States: an empty mount; one 88 % full of evictable blocks; the same blocks
# all held open; max_size above the disk (64M on a 32 MiB tmpfs), empty; and
# that disk smaller than the budget, full of evictable blocks, then held open.
. "$(dirname "$0")/../lib.sh"

MAX=$((64 * MiB))

# df_check LABEL EXPECT: compares df, statvfs of BACKING and the status JSON
# (read until two df readings around them agree); EXPECT is a Python
# expression over size, used, avail, pct (df's Use%) and st (the status) that
# names what the state must show. Failures are recorded, not fatal.
df_check() {
    local out
    out=$($PY - "$MNT" "$BACKING" "$BOUNDFS" "$2" <<'PY'
import json, math, os, subprocess, sys
mnt, backing, bfs, expect = sys.argv[1:5]

def df():
    r = subprocess.run(["df", "-B1", "--output=size,used,avail,pcent", mnt],
                       capture_output=True, text=True, check=True)
    size, used, avail, pct = r.stdout.splitlines()[1].split()
    return int(size), int(used), int(avail), (None if pct == "-" else int(pct.rstrip("%")))

for _ in range(20):
    a = df()
    st = json.loads(os.getxattr(mnt, "user.boundfs.stats"))
    v = os.statvfs(backing)
    table = subprocess.run([bfs, "status", mnt], capture_output=True, text=True).stdout
    if df() == a:
        break
size, used, avail, pct = a
bsize = os.statvfs(mnt).f_frsize
problems = []
def want(what, got, exp):
    if got != exp:
        problems.append("%s: df %s, expected %s" % (what, got, exp))

# df's columns agree with each other
want("Used + Avail", used + avail, size)
want("Use%", pct, math.ceil(used * 100 / size) if size else None)
# ... with the status JSON
want("Size vs status df_size", size, st.get("df_size"))
want("Used vs status df_used", used, st.get("df_used"))
want("Avail vs status df_avail", avail, st.get("df_avail"))
# ... with the status table's df row
row = [l for l in table.splitlines() if l.startswith("df ")]
want("Use% in the status table's df row", (row[0].split("Use% ")[1].split("%")[0] if row else None),
     str(pct))
# ... and with what they mean, from usage, reserved, evictable and BACKING's free space
committed = st["usage"] + st["reserved"]
backing_free = v.f_bavail * v.f_frsize
exp_size = min(st["max_size"], committed + backing_free) // bsize * bsize
held = max(committed - st["evictable_bytes"], 0)
high = st["high_watermark_bytes"]
exp_avail = max(min(exp_size - held, high + st["evictable_bytes"] - committed), 0) // bsize * bsize
want("Size = min(max_size, usage + BACKING free)", size, exp_size)
want("Avail = min(Size - held, high watermark - usage - reserved + evictable)", avail, exp_avail)
want("Used = Size - Avail", used, exp_size - exp_avail)
if not eval(expect):
    problems.append("state expectation %s does not hold" % expect)
print(json.dumps({"size": size, "used": used, "avail": avail, "pct": pct, "usage": st["usage"],
                  "evictable": st["evictable_bytes"], "backing_free": backing_free,
                  "problems": problems}))
PY
) || { fail_later "df check ($1) crashed"; return; }
    case "$out" in *'"problems": []'*) log "df ($1): $out" ;; *) fail_later "df ($1): $out" ;; esac
}

# ---- BACKING on a large disk, max_size 64M
bfs_mount max_size=64M
wait_indexed
df_check empty "size == $MAX and pct <= 6 and avail >= 60 * 2**20"
mkdir -p "$MNT/kv"
res=$(kv_store "$MNT/kv" 28 full 2M 2) || fail "writer crashed"   # 56 MiB, below the high watermark
assert_eq 28 "$(json_get "$res" stored)" "blocks stored ($res)"
assert_eq 0 "$(stats_field evictions)" "evictions below the high watermark"
df_check "88% full of evictable blocks" \
    "size == $MAX and st['usage'] >= 56 * 2**20 and pct <= 10 and avail >= 56 * 2**20"
fds=()
while read -r f; do exec {fd}<"$f"; fds+=("$fd"); done < <(find "$MNT/kv" -name '*.bin')
assert_eq 28 "$(stats_field open_handles)" "every block held open"
df_check "88% full of open files" \
    "size == $MAX and st['evictable_bytes'] == 0 and pct >= 88 and avail <= $MAX - st['usage']"
for fd in "${fds[@]}"; do exec {fd}<&-; done
poll_until 5 "the blocks are evictable again" test "$(stats_field open_handles)" = 0
bfs_unmount

# ---- a disk smaller than the budget: a 32 MiB tmpfs, max_size 64M
SMALL="$BFS_TMP/small"; mkdir "$SMALL"
mount -t tmpfs -o size=32M,mode=0755 boundfs-df "$SMALL" || fail "cannot mount a 32 MiB tmpfs"
BACKING="$SMALL"
bfs_mount max_size=64M
wait_indexed
df_check "max_size above the disk, empty" "size == 32 * 2**20 and used == 0 and pct == 0"
res=$(kv_store "$MNT/kv" 14 small 2M 2) || fail "writer crashed"  # 28 MiB of the 32
assert_eq 14 "$(json_get "$res" stored)" "blocks stored on the small disk ($res)"
df_check "disk smaller than the budget, 88% full of evictable blocks" \
    "size == 32 * 2**20 and st['usage'] >= 28 * 2**20 and pct <= 1 and avail == size"
fds=()
while read -r f; do exec {fd}<"$f"; fds+=("$fd"); done < <(find "$MNT/kv" -name '*.bin')
df_check "disk smaller than the budget, 88% full of open files" \
    "size == 32 * 2**20 and pct >= 88 and used == st['usage']"
for fd in "${fds[@]}"; do exec {fd}<&-; done
bfs_unmount
umount "$SMALL" || fail "umount the small tmpfs"
bfs_done
