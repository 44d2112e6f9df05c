#!/usr/bin/env bash
# fsx (the File System eXerciser, crate `fsx`, installed by
# scripts/install-deps.sh) runs random reads, writes, truncates, fallocates,
# punch holes, copy_file_range, sendfile, fsync and mmap reads and writes
# (MAP_SHARED + msync) on one file on the mount, checking every byte read
# against its own model: 20,000 operations (100,000 with --long /
# BOUNDFS_LONG=1), once with default options and, if this boundfs has the
# passthrough option, once with -o passthrough=off (daemon-side I/O).
. "$(dirname "$0")/../lib.sh"

FSX=$(command -v fsx || echo "$HOME/.cargo/bin/fsx")
if [ ! -x "$FSX" ]; then
    [ -n "${CI:-}" ] && fail "fsx is not installed (scripts/install-deps.sh installs it)"
    skip "fsx is not installed: run scripts/install-deps.sh"
fi
OPS=${BFS_FSX_OPS:-$([ -n "${BOUNDFS_LONG:-}" ] && echo 100000 || echo 20000)}
cat > "$BFS_TMP/fsx.toml" <<'TOML'
flen = 262144
[opsize]
max = 65536
[weights]
close_open = 1
invalidate = 1
read = 10
write = 10
mapread = 10
mapwrite = 10
truncate = 2
fsync = 1
fdatasync = 1
posix_fallocate = 1
punch_hole = 1
sendfile = 1
posix_fadvise = 1
copy_file_range = 1
TOML

runs=("")
if "$BOUNDFS" --help 2>&1 | grep -q passthrough; then
    runs+=("passthrough=off")
else
    log "this boundfs has no passthrough option: one run only"
fi
for extra in "${runs[@]}"; do
    bfs_mount "max_size=64M${extra:+,$extra}"
    mkdir -p "$BFS_TMP/fsx.out"
    seed=$((RANDOM * 32768 + RANDOM))
    t0=$SECONDS
    if ! timeout 600 "$FSX" -f "$BFS_TMP/fsx.toml" -N "$OPS" -S "$seed" -P "$BFS_TMP/fsx.out" "$MNT/fsx.file" \
            >"$BFS_TMP/fsx.log" 2>&1; then
        tail -n 30 "$BFS_TMP/fsx.log"
        fail "fsx failed (${extra:-default options}, seed $seed, $OPS ops)"
    fi
    grep -q 'All operations completed A-OK' "$BFS_TMP/fsx.log" || { tail "$BFS_TMP/fsx.log"; fail "fsx did not report A-OK"; }
    log "fsx: $OPS operations, seed $seed, ${extra:-default options}: A-OK in $((SECONDS - t0))s"
    bfs_unmount
    rm -f "$BACKING/fsx.file"
done
log PASS
