//! Ledger lock acquisitions per request, counted on a core over a tempdir.

use std::ffi::OsStr;

use crate::testing::{ME, ROOT, core};

#[test]
fn create_and_open_each_take_the_ledger_lock_at_most_twice() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    let before = c.accounts().acquisitions();
    let (attr, fh) = c.create(ROOT, OsStr::new("a.bin"), 0o644, libc::O_WRONLY, ME).map(|(a, o)| (a, o.fh)).unwrap();
    let create = c.accounts().acquisitions() - before;
    c.release(fh);
    let before = c.accounts().acquisitions();
    let fh = c.open(attr.ino, libc::O_RDONLY).unwrap().fh;
    let open = c.accounts().acquisitions() - before;
    c.release(fh);
    assert!(create <= 2, "CREATE took the ledger lock {create} times");
    assert!(open <= 2, "OPEN took the ledger lock {open} times");
}
