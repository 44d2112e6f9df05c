#!/usr/bin/env bash
# TIMEOUT: 600
# Real programs, CPython's own file-system tests: `python -m test` runs the
# modules below once with its working directory and TMPDIR in a plain
# directory and once with both under the mount; no case may fail under the
# mount that passes in the plain directory (helpers/regrtest_diff.py; the
# known differences, with their reasons, are in helpers/regrtest_known.txt).
# The tests come from the python's own `test` package: pyenv and python.org
# builds ship it, Debian's python3 needs libpython3.X-testsuite (installed by
# scripts/install-deps.sh).  About 30 s per run on 2 idle cores.
. "$(dirname "$0")/../lib.sh"

MODULES=(test_os test_shutil test_tarfile test_tempfile test_glob test_pathlib test_fileio
    test_posix test_mmap test_fcntl test_sqlite3 test_genericpath test_filecmp test_fileinput)
# left out, for time: test_tarfile's command-line tests (each starts a python)
# and three of the four NoneInfoExtractTests variants (the same extraction
# under other filters): half of test_tarfile's time, no other file operations
IGNORE=(-i '*.CommandLineTest.*' -i '*.NoneInfoExtractTests_Tar.*' -i '*.NoneInfoExtractTests_FullyTrusted.*'
    -i '*.NoneInfoExtractTests_Data.*')
TPY=""
for cand in "$PY" /usr/bin/python3; do
    if command -v "$cand" >/dev/null && "$cand" -c 'import test.libregrtest, test.test_os' 2>/dev/null; then
        TPY=$cand; break
    fi
done
[ -n "$TPY" ] || skip "no python3 with its test package (run scripts/install-deps.sh: libpython3.X-testsuite)"
log "$($TPY --version) from $(command -v "$TPY"): ${MODULES[*]}"

bfs_mount max_size=4G

# regrtest SIDE DIR: one run with cwd and TMPDIR in DIR; junit XML kept
regrtest() {
    local side=$1 dir=$2 rc t0=$SECONDS
    mkdir -p "$dir"
    (cd "$dir" && TMPDIR=$dir timeout -k 10 "${RP_PY_TIMEOUT:-270}" "$TPY" -m test --tempdir "$dir" \
        --junit-xml "$BFS_TMP/$side.xml" "${IGNORE[@]}" "${MODULES[@]}") >"$BFS_TMP/$side.out" 2>&1 </dev/null
    rc=$?
    log "$side: python -m test exit $rc in $((SECONDS - t0))s: $(grep -E '^Total tests:' "$BFS_TMP/$side.out")"
    if [ ! -s "$BFS_TMP/$side.xml" ]; then
        tail -n 30 "$BFS_TMP/$side.out"
        fail "python -m test left no results on the $side side (exit $rc)"
    fi
}
regrtest plain "$RP_PLAIN"
regrtest mount "$MNT/py"
$PY "$BFS_HELPERS/regrtest_diff.py" "$BFS_TMP/plain.xml" "$BFS_TMP/mount.xml" \
    --known "$BFS_HELPERS/regrtest_known.txt" > "$BFS_TMP/diff.txt"
rc=$?
cat "$BFS_TMP/diff.txt"
[ "$rc" -eq 0 ] || fail "$(tail -n 1 "$BFS_TMP/diff.txt")"
rm -rf "$MNT/py"
bfs_unmount
log PASS
