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

/// Ledger lock acquisitions of one call of `f` on `c`.
fn locks<T>(c: &crate::fs::Core, f: impl FnOnce() -> T) -> (u64, T) {
    let before = c.accounts().acquisitions();
    let r = f();
    (c.accounts().acquisitions() - before, r)
}

#[test]
fn create_and_rename_below_the_root_each_take_the_ledger_lock_twice() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    let dir = c.mkdir(ROOT, OsStr::new("a00"), 0o755, ME).unwrap().ino;
    let sub = c.mkdir(dir, OsStr::new("b00"), 0o755, ME).unwrap().ino;
    let (create, (_, o)) = locks(&c, || c.create(sub, OsStr::new("x.bin_1.tmp"), 0o644, libc::O_WRONLY, ME).unwrap());
    c.release(o.fh);
    let (rename, r) = locks(&c, || c.rename(sub, OsStr::new("x.bin_1.tmp"), sub, OsStr::new("x.bin"), 0));
    r.unwrap();
    let (across, r) = locks(&c, || c.rename(sub, OsStr::new("x.bin"), dir, OsStr::new("y.bin"), 0));
    r.unwrap();
    assert!(create <= 2, "CREATE below the root took the ledger lock {create} times");
    assert!(rename <= 2, "RENAME in one directory below the root took the ledger lock {rename} times");
    assert!(across <= 2, "RENAME across directories took the ledger lock {across} times");
    let f = std::fs::File::open(d.path().join("a00/y.bin")).unwrap();
    let key = crate::key::key_of(&crate::sys::fstat(std::os::fd::AsFd::as_fd(&f)).unwrap());
    let l = c.accounts().lock();
    let e = l.get(&key).expect("the renamed block is in the ledger");
    assert!(e.block, "y.bin is a block file");
    assert_eq!(e.path.as_deref(), Some(std::path::Path::new("a00/y.bin")), "its path follows the renames");
}

/// The six: the reservation tried, the victim chosen, its removal begun
/// (under its directory's stripe, after the name was checked) and finished,
/// the reservation again, and the write's commit.
#[test]
fn a_write_with_one_inline_eviction_takes_the_ledger_lock_six_times() {
    let d = tempfile::tempdir().unwrap();
    let block = vec![7u8; 1 << 20];
    let c = core(d.path(), (3 << 20) + (64 << 10));
    let dir = c.mkdir(ROOT, OsStr::new("a00"), 0o755, ME).unwrap().ino;
    for n in ["a.bin", "b.bin", "c.bin"] {
        let (_, o) = c.create(dir, OsStr::new(n), 0o644, libc::O_WRONLY, ME).unwrap();
        c.write(o.fh, 0, &block, None, false).unwrap();
        c.release(o.fh);
    }
    let (_, o) = c.create(dir, OsStr::new("d.bin"), 0o644, libc::O_WRONLY, ME).unwrap();
    let evicted = c.stats().evictions.load(std::sync::atomic::Ordering::Relaxed);
    let (write, r) = locks(&c, || c.write(o.fh, 0, &block, None, false));
    assert_eq!(r.unwrap(), 1 << 20);
    c.release(o.fh);
    let evicted = c.stats().evictions.load(std::sync::atomic::Ordering::Relaxed) - evicted;
    assert_eq!(evicted, 1, "the write evicted one block inline");
    assert!(!d.path().join("a00/a.bin").exists(), "the least recently used block went");
    assert!(write <= 6, "a WRITE with one inline eviction took the ledger lock {write} times");
}
