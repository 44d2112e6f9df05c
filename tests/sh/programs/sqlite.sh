#!/usr/bin/env bash
# Real programs, SQLite: the sqlite3 shell creates, fills, closes and reopens
# a database (integrity_check); a rollback that must leave no trace, VACUUM
# and VACUUM INTO; a lock held by one process is seen by another ("database
# is locked"); a WAL database with a reader in another process
# (helpers/sqlite_wal.py).  Each check runs on a plain directory and on the
# mount with the same expected result (lib.sh rp_*).
. "$(dirname "$0")/../lib.sh"
command -v sqlite3 >/dev/null || skip "sqlite3 is missing (run scripts/install-deps.sh)"
$PY -c 'import sqlite3' 2>/dev/null || skip "$PY has no sqlite3 module"

bfs_mount max_size=1G

# create, insert, close; reopen: integrity_check and the rows
sqlite_reopen() {
    sqlite3 t.db "create table t(a integer primary key, b text);
        with recursive n(i) as (select 1 union all select i + 1 from n where i < 1000)
        insert into t(b) select printf('row %05d', i) from n;"
    rp_want "ok|1000|500500" "$(sqlite3 t.db 'pragma integrity_check; select count(*), sum(a) from t;' | tr '\n' '|' | sed 's/|$//')" "reopen: integrity_check, count, sum"
    sqlite3 t.db "update t set b = b || '!' where a % 2 = 0; delete from t where a > 900;"
    rp_want "ok|900|450" "$(sqlite3 t.db "pragma integrity_check; select count(*) from t; select count(*) from t where b like '%!';" | tr '\n' '|' | sed 's/|$//')" "third open after update and delete"
}
# a rolled-back transaction leaves nothing; VACUUM; VACUUM INTO a new file
sqlite_journal() {
    sqlite3 t.db "create table t(a integer primary key, b blob);
        with recursive n(i) as (select 1 union all select i + 1 from n where i < 300)
        insert into t(b) select randomblob(4000) from n;"
    sqlite3 t.db "begin; delete from t; insert into t(b) values (zeroblob(10)); rollback;"
    rp_want "ok|300" "$(sqlite3 t.db 'pragma integrity_check; select count(*) from t;' | tr '\n' '|' | sed 's/|$//')" "after a rollback"
    rp_want "" "$(ls t.db-journal 2>/dev/null)" "no hot journal left behind"
    sqlite3 t.db "delete from t where a % 3 = 0; vacuum; vacuum into 'copy.db';"
    rp_want "ok|200" "$(sqlite3 t.db 'pragma integrity_check; select count(*) from t;' | tr '\n' '|' | sed 's/|$//')" "after VACUUM"
    rp_want "ok|200" "$(sqlite3 copy.db 'pragma integrity_check; select count(*) from t;' | tr '\n' '|' | sed 's/|$//')" "the VACUUM INTO copy"
}
# one process holds the write lock; another is refused at once, then
# succeeds after the commit (POSIX byte-range locks on the database file)
sqlite_lock() {
    sqlite3 t.db "create table t(a); insert into t values (1);"
    coproc HOLDER { sqlite3 t.db; }
    echo "begin exclusive; insert into t values (2); select 'held';" >&"${HOLDER[1]}"
    read -r line <&"${HOLDER[0]}"
    rp_want held "$line" "the first process holds the exclusive lock"
    local err
    err=$(sqlite3 t.db 'select count(*) from t;' 2>&1) && rp_want "database is locked" "$err" "a second process reads while the lock is held"
    case $err in *"database is locked"*) ;; *) rp_want "database is locked" "$err" "the second process's error" ;; esac
    echo "commit; select 'done';" >&"${HOLDER[1]}"
    read -r line <&"${HOLDER[0]}"
    rp_want done "$line" "the first process commits"
    rp_want 2 "$(sqlite3 t.db 'select count(*) from t;')" "the second process reads after the commit"
    exec {HOLDER[1]}>&-
    wait "$HOLDER_PID"
}
sqlite_wal() { $PY "$BFS_HELPERS/sqlite_wal.py" "$1/wal.db"; }

rp_check sqlite-reopen sqlite_reopen
rp_check sqlite-journal sqlite_journal
rp_check sqlite-lock sqlite_lock
rp_check sqlite-wal-reader sqlite_wal
rp_report
bfs_unmount
log PASS
