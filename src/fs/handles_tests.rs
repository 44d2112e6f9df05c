//! The core plans each open's I/O mode and one RELEASE undoes all of it.

use std::ffi::OsStr;

use fuser::Errno;

use super::super::passthrough::Plan;
use crate::testing::{ROOT, core, store};

#[test]
fn the_core_plans_the_mode_and_one_release_undoes_it() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "a.bin", b"block");
    let ino = c.lookup(ROOT, OsStr::new("a.bin")).unwrap().ino;

    // A core without an adapter serves every open itself.
    let o = c.open(ino, libc::O_RDONLY).unwrap();
    assert!(matches!(o.plan, Plan::Cached));
    assert!(c.release(o.fh).is_none());

    // With passthrough on, a reader needs a backing id from the kernel.
    c.enable_passthrough(true);
    let o = c.open(ino, libc::O_RDONLY).unwrap();
    let reader = o.fh;
    assert!(matches!(o.plan, Plan::NeedBacking { direct: false }));
    // The kernel refuses: the reader falls back to cached, passthrough is off.
    let o = c.backing_made(o, Err(std::io::Error::from_raw_os_error(libc::EPERM))).unwrap();
    assert!(matches!(o.plan, Plan::Cached));
    assert!(!c.passthrough_enabled());
    drop(o);
    // A writer beside it is cached too.
    let w = c.open(ino, libc::O_WRONLY).unwrap().fh;

    // RELEASE is one call: the handle is gone from the one table.
    assert!(c.release(reader).is_none());
    assert_eq!(c.handle(reader).err(), Some(Errno::EBADF));
    assert!(c.release(w).is_none());
    assert_eq!(c.accounts().lock().counts().open_handles, 0);
}

/// Bytes reserved in the ledger now.
fn reserved(c: &crate::fs::Core) -> u64 {
    let l = c.accounts().lock();
    l.committed() - l.usage()
}

/// A passthrough writer's bytes never reach the core: what it holds is
/// reserved at CREATE, the check reserves what it grows past that, and
/// RELEASE replaces both by the file's real size.
#[test]
fn a_passthrough_writer_holds_the_learned_size_until_its_release() {
    use std::os::fd::AsRawFd;
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    c.enable_passthrough(true);
    c.allow_pass_writers(true);
    let block = vec![7u8; 1 << 20];
    // The first block is written through the core, which learns its size.
    store(&c, "a.bin", &block);
    let (usage, committed) = {
        let l = c.accounts().lock();
        (l.usage(), l.committed())
    };
    assert_eq!(usage, committed, "nothing reserved at rest");

    let (_, o) =
        c.create(ROOT, OsStr::new("b.bin_1.tmp"), 0o644, libc::O_WRONLY | libc::O_EXCL, crate::testing::ME).unwrap();
    assert!(matches!(o.plan, Plan::NeedBacking { direct: false }), "a passthrough writer: {:?}", o.plan);
    let held = reserved(&c);
    assert!(held >= 1 << 20, "the learned size is reserved at CREATE ({held})");
    // The kernel writes twice that straight to the backing file.
    let big = vec![9u8; 2 << 20];
    // SAFETY: the handle's fd is open and the pointer and length describe `big`.
    assert_eq!(unsafe { libc::pwrite(o.handle.fd.as_raw_fd(), big.as_ptr().cast(), big.len(), 0) }, big.len() as isize);
    let over = c.check_writers().expect("a passthrough writer is open");
    assert!(over >= 1 << 20, "the check finds the overrun ({over})");
    assert_eq!(crate::stats::Stats::get(&c.stats().writer_overruns), 1);
    let held = reserved(&c);
    assert!(held >= 2 << 20, "the overrun is reserved too ({held})");

    c.release(o.fh);
    let l = c.accounts().lock();
    assert_eq!(l.committed(), l.usage(), "RELEASE returns the reservation");
    assert!(l.usage() >= 3 << 20, "usage counts both files ({})", l.usage());
    drop(l);
    assert!(c.check_writers().is_none(), "no passthrough writer left");
}

/// A core whose start-up index has not run: its ledger knows only BACKING's
/// root, and `bound` bytes is what BACKING's filesystem said it used (as
/// `Core::start` leaves it until `workers::scan::index` completes).
fn indexing_core(dir: &std::path::Path, max: u64, bound: u64) -> crate::fs::Core {
    use std::os::fd::AsFd;
    let config = crate::fs::Config::new(dir.canonicalize().unwrap(), max);
    let c = std::ffi::CString::new(config.backing.as_os_str().as_encoded_bytes()).unwrap();
    let root = crate::sys::open(&c, libc::O_PATH | libc::O_DIRECTORY).unwrap();
    let root_key = crate::key::key_of(&crate::sys::fstat(root.as_fd()).unwrap());
    let mut ledger = crate::ledger::Ledger::with_policy(config.policy);
    ledger.start_indexing(bound);
    crate::fs::Core::new(config, crate::fs::Started { root, root_key, ledger }).unwrap()
}

/// While the start-up index is incomplete (a new daemon just took the mount
/// over), a CREATE, which may not wait for the index, is no passthrough
/// writer: the ledger's usage is only what was indexed so far, and the
/// bytes of a passthrough writer admitted against it would be in no count
/// (faults/upgrade-cap peaked 4-10 MiB over max_size). Its WRITEs go
/// through the daemon, which waits for the index when the bound is tight.
#[test]
fn no_passthrough_writer_before_the_start_up_index() {
    let d = tempfile::tempdir().unwrap();
    // BACKING holds 62 MiB of a 64 MiB budget, not indexed yet.
    let c = indexing_core(d.path(), 64 << 20, 62 << 20);
    c.enable_passthrough(true);
    c.allow_pass_writers(true);
    c.io.learn(4 << 20);
    assert_eq!(c.io.writer_reservation(), Some(4 << 20));
    let (_, o) =
        c.create(ROOT, OsStr::new("b.bin_1.tmp"), 0o644, libc::O_WRONLY | libc::O_EXCL, crate::testing::ME).unwrap();
    assert!(!matches!(o.plan, Plan::NeedBacking { direct: false }), "a passthrough writer: {:?}", o.plan);
    assert_eq!(reserved(&c), 0, "nothing held for it");
    c.release(o.fh);
}

/// A passthrough writer's FALLOCATE is covered by what it holds: within it
/// no more budget, past it only the difference; one that sizes the file
/// from offset 0 gives back the rest of the learned size at once. Before,
/// the FALLOCATE reserved its whole length on top of the reservation and
/// the file counted twice (ENOSPC here at 13 MiB: 6 + 8 + 13 > 20 MiB).
#[test]
fn a_passthrough_writers_fallocate_uses_its_own_reservation() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 20 << 20);
    c.enable_passthrough(true);
    c.allow_pass_writers(true);
    c.io.learn(8 << 20);
    let (_, o) =
        c.create(ROOT, OsStr::new("big.bin"), 0o644, libc::O_WRONLY | libc::O_EXCL, crate::testing::ME).unwrap();
    assert!(matches!(o.plan, Plan::NeedBacking { direct: false }), "a passthrough writer: {:?}", o.plan);
    assert_eq!(reserved(&c), 8 << 20);
    c.fallocate(o.fh, 0, 6 << 20, 0).expect("within what the writer holds");
    assert_eq!(reserved(&c), 6 << 20, "the file's size is what it holds now");
    c.fallocate(o.fh, 0, 13 << 20, 0).expect("the difference fits");
    assert_eq!(reserved(&c), 13 << 20, "past it, the difference is reserved");
    c.fallocate(o.fh, 13 << 20, 4 << 20, libc::FALLOC_FL_KEEP_SIZE).expect("the difference fits");
    assert_eq!(reserved(&c), 17 << 20);
    assert_eq!(c.fallocate(o.fh, 0, 24 << 20, 0), Err(Errno::ENOSPC), "what cannot fit");
    c.release(o.fh);
    let l = c.accounts().lock();
    assert_eq!(l.committed(), l.usage(), "RELEASE returns the reservation");
    assert!(l.usage() >= 17 << 20 && l.usage() <= 20 << 20, "and counts the file ({})", l.usage());
}
