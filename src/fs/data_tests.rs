//! The data path without a mount: a write refused for room waits for a
//! RELEASE and goes on when one frees bytes; a write the backing filesystem
//! cuts short evicts and writes the rest.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::stats::Stats;
use crate::testing::{ME, ROOT, core, store};

#[test]
fn a_reserve_refused_for_room_wakes_when_a_release_frees_bytes() {
    let d = tempfile::tempdir().unwrap();
    let mut c = core(d.path(), 64 << 10);
    // Long enough that only the RELEASE can end the wait within the test.
    c.release_wait = Duration::from_secs(30);
    let c = Arc::new(c);
    store(&c, "a.bin", &[1u8; 48 << 10]);
    let ino = c.lookup(ROOT, OsStr::new("a.bin")).unwrap().ino;
    let fh = c.open(ino, libc::O_RDONLY).unwrap().fh;
    // Nothing is evictable now: a.bin is open.
    let waits = c.accounts().waits();
    let w = {
        let c = c.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let r = c.reserve(32 << 10, true).map(|room| room.settle());
            (r, t0.elapsed())
        })
    };
    // The writer counts its wait with the ledger lock held and gives the
    // lock up only by waiting: the RELEASE below, which takes the lock,
    // lands inside the wait.
    while c.accounts().waits() == waits && !w.is_finished() {
        std::thread::yield_now();
    }
    assert_eq!(c.accounts().waits(), waits + 1, "the writer answered without waiting for the RELEASE");
    c.release(fh);
    let (r, took) = w.join().unwrap();
    assert_eq!(r, Ok(32 << 10), "the write was refused although the RELEASE made a.bin evictable");
    assert!(took < Duration::from_secs(30), "woken by the timeout, not by the RELEASE");
    assert_eq!(Stats::get(&c.stats().evictions), 1, "a.bin paid for the room");
    assert!(!d.path().join("a.bin").exists());
}

/// A tmpfs of `size` mounted over a fresh directory, detached on drop.
struct SmallFs(tempfile::TempDir);

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        let d = tempfile::tempdir().ok()?;
        let path = std::ffi::CString::new(d.path().as_os_str().as_encoded_bytes()).ok()?;
        let opts = std::ffi::CString::new(format!("size={size}")).ok()?;
        // SAFETY: NUL-terminated source, target, type and options strings alive for the call.
        let r = unsafe { libc::mount(c"tmpfs".as_ptr(), path.as_ptr(), c"tmpfs".as_ptr(), 0, opts.as_ptr().cast()) };
        (r == 0).then_some(SmallFs(d))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        if let Ok(p) = std::ffi::CString::new(self.0.path().as_os_str().as_encoded_bytes()) {
            // SAFETY: a NUL-terminated path alive for the call.
            unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

#[test]
fn a_write_the_backing_filesystem_cuts_short_evicts_and_writes_the_rest() {
    // A BACKING smaller than max_size: a 1 MiB tmpfs under a 1 GiB budget.
    let Some(fs) = SmallFs::mount("1m") else {
        eprintln!("skipped: mounting a tmpfs needs CAP_SYS_ADMIN");
        return;
    };
    let c = core(fs.0.path(), 1 << 30);
    for n in ["a.bin", "b.bin", "c.bin"] {
        store(&c, n, &[1u8; 256 << 10]);
    }
    let (_, o) = c.create(ROOT, OsStr::new("d.bin"), 0o644, libc::O_WRONLY, ME).unwrap();
    // About 256 KiB are left: the pwrite stops there (short, or ENOSPC).
    let n = c.write(o.fh, 0, &[2u8; 512 << 10], None, false).unwrap();
    c.release(o.fh);
    assert_eq!(n, 512 << 10, "the write was answered short instead of evicting for the rest");
    assert!(Stats::get(&c.stats().evictions) >= 1);
    assert!(!fs.0.path().join("a.bin").exists(), "the least recently used block paid for it");
    assert_eq!(std::fs::read(fs.0.path().join("d.bin")).unwrap(), vec![2u8; 512 << 10]);
}

/// Two WRITEs of one file in flight at once (FUSE_ASYNC_DIO sends the
/// pieces of one O_DIRECT write concurrently) may commit in the other
/// order than they measured the file: the later commit of the earlier,
/// smaller measurement must leave the ledger at the file's real size.
#[test]
fn concurrent_writes_of_one_file_commit_out_of_order_and_usage_stays_exact() {
    let d = tempfile::tempdir().unwrap();
    let c = Arc::new(core(d.path(), 64 << 20));
    let (_, fh) = c.create(ROOT, OsStr::new("a.bin"), 0o644, libc::O_WRONLY, ME).map(|(a, o)| (a, o.fh)).unwrap();
    let piece = vec![3u8; 1 << 20];
    let base = c.accounts().lock().counts().usage;
    // The first write measured 1 MiB; before it commits, the second write
    // (the next MiB) lands and commits 2 MiB.
    let second = {
        let (c, piece) = (c.clone(), piece.clone());
        let mut done = false;
        Box::new(move || {
            if !std::mem::replace(&mut done, true) {
                let (c, piece) = (c.clone(), piece.clone());
                let w = std::thread::spawn(move || c.write(fh, 1 << 20, &piece, None, false));
                assert_eq!(w.join().unwrap().unwrap(), 1 << 20);
            }
        })
    };
    crate::testing::at_crash_points(Some(second));
    assert_eq!(c.write(fh, 0, &piece, None, false).unwrap(), 1 << 20);
    crate::testing::at_crash_points(None);
    let on_disk =
        std::fs::metadata(d.path().join("a.bin")).map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512).unwrap();
    assert_eq!(on_disk, 2 << 20);
    assert_eq!(c.accounts().lock().counts().usage - base, on_disk, "the ledger lost the second write's bytes");
    c.release(fh);
}
