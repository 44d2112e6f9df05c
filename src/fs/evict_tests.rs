//! The races of eviction against open and rename, forced step by step on a
//! real backing directory (no mount): the victim is taken from the ledger,
//! the competing operation runs, then the evictor continues.

use std::ffi::OsStr;

use fuser::Errno;

use crate::testing::{ME, ROOT, core, store};

#[test]
fn rename_into_the_victims_place_is_never_deleted() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "k.bin", b"old");
    let (key, path) = c.ledger.lock().take_victim().unwrap();
    // A store publishes a new k.bin between the evictor's choice and its check.
    store(&c, "k.bin_1.tmp", b"new");
    c.rename(ROOT, OsStr::new("k.bin_1.tmp"), ROOT, OsStr::new("k.bin"), 0).unwrap();
    assert!(c.evict_victim(key, &path).is_none(), "the evictor must skip a replaced name");
    assert_eq!(std::fs::read(d.path().join("k.bin")).unwrap(), b"new");
}

#[test]
fn open_before_the_check_keeps_the_file() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "k.bin", b"data");
    let ino = c.lookup(ROOT, OsStr::new("k.bin")).unwrap().ino;
    let (key, path) = c.ledger.lock().take_victim().unwrap();
    let fh = c.open(ino, libc::O_RDONLY).unwrap();
    assert!(c.evict_victim(key, &path).is_none(), "an open file is never evicted");
    assert_eq!(c.read(fh, 0, 16).unwrap(), b"data");
    c.release(fh);
    assert!(d.path().join("k.bin").exists());
}

#[test]
fn open_after_the_eviction_gets_enoent_not_a_doomed_fd() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "k.bin", b"data");
    let ino = c.lookup(ROOT, OsStr::new("k.bin")).unwrap().ino;
    let (key, path) = c.ledger.lock().take_victim().unwrap();
    assert!(c.evict_victim(key, &path).is_some());
    // The kernel still had the inode cached: the open must say ENOENT.
    assert_eq!(c.open(ino, libc::O_RDONLY).err(), Some(Errno::ENOENT));
    assert!(c.ledger.lock().get(&key).is_none(), "the late open left no placeholder behind");
    assert!(!d.path().join("k.bin").exists());
}

#[test]
fn full_budget_with_everything_open_answers_enospc_and_disturbs_nothing() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 64 << 10);
    store(&c, "a.bin", &[1u8; 16 << 10]);
    let ino = c.lookup(ROOT, OsStr::new("a.bin")).unwrap().ino;
    let held = c.open(ino, libc::O_RDONLY).unwrap();
    let (_, fh) = c.create(ROOT, OsStr::new("b.tmp"), 0o644, libc::O_WRONLY, ME).unwrap();
    assert_eq!(c.write(fh, 0, &[2u8; 128 << 10], false).err(), Some(Errno::ENOSPC));
    c.release(fh);
    assert_eq!(std::fs::read(d.path().join("a.bin")).unwrap(), vec![1u8; 16 << 10]);
    c.release(held);
    // With the handle closed, a.bin is evictable and a write that needs its room fits.
    let (_, fh) = c.create(ROOT, OsStr::new("c.tmp"), 0o644, libc::O_WRONLY, ME).unwrap();
    assert!(c.write(fh, 0, &[3u8; 48 << 10], false).is_ok());
    c.release(fh);
    assert!(!d.path().join("a.bin").exists());
}

#[test]
fn a_request_that_can_never_fit_evicts_nothing() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 64 << 10);
    store(&c, "a.bin", &[1u8; 16 << 10]);
    let (_, fh) = c.create(ROOT, OsStr::new("big.bin"), 0o644, libc::O_WRONLY, ME).unwrap();
    assert_eq!(c.fallocate(fh, 0, 1 << 20, 0).err(), Some(Errno::ENOSPC));
    c.release(fh);
    assert!(d.path().join("a.bin").exists(), "nothing may be evicted for a request that cannot fit");
}
