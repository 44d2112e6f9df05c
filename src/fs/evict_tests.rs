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
    let (key, path) = c.accounts().lock().take_victim().unwrap();
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
    let (key, path) = c.accounts().lock().take_victim().unwrap();
    let fh = c.open(ino, libc::O_RDONLY).unwrap().fh;
    assert!(c.evict_victim(key, &path).is_none(), "an open file is never evicted");
    assert_eq!(c.read(fh, 0, 16, 0).unwrap(), b"data");
    c.release(fh);
    assert!(d.path().join("k.bin").exists());
}

#[test]
fn open_after_the_eviction_gets_enoent_not_a_doomed_fd() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "k.bin", b"data");
    let ino = c.lookup(ROOT, OsStr::new("k.bin")).unwrap().ino;
    let (key, path) = c.accounts().lock().take_victim().unwrap();
    assert!(c.evict_victim(key, &path).is_some());
    // The kernel still had the inode cached: the open must say ENOENT.
    assert_eq!(c.open(ino, libc::O_RDONLY).err(), Some(Errno::ENOENT));
    assert!(c.accounts().lock().get(&key).is_none(), "the late open left no placeholder behind");
    assert!(!d.path().join("k.bin").exists());
}

#[test]
fn full_budget_with_everything_open_answers_enospc_and_disturbs_nothing() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 64 << 10);
    store(&c, "a.bin", &[1u8; 16 << 10]);
    let ino = c.lookup(ROOT, OsStr::new("a.bin")).unwrap().ino;
    let held = c.open(ino, libc::O_RDONLY).unwrap().fh;
    let (_, fh) = c.create(ROOT, OsStr::new("b.tmp"), 0o644, libc::O_WRONLY, ME).map(|(a, o)| (a, o.fh)).unwrap();
    assert_eq!(c.write(fh, 0, &[2u8; 128 << 10], None, false).err(), Some(Errno::ENOSPC));
    c.release(fh);
    assert_eq!(std::fs::read(d.path().join("a.bin")).unwrap(), vec![1u8; 16 << 10]);
    c.release(held);
    // With the handle closed, a.bin is evictable and a write that needs its room fits.
    let (_, fh) = c.create(ROOT, OsStr::new("c.tmp"), 0o644, libc::O_WRONLY, ME).map(|(a, o)| (a, o.fh)).unwrap();
    assert!(c.write(fh, 0, &[3u8; 48 << 10], None, false).is_ok());
    c.release(fh);
    assert!(!d.path().join("a.bin").exists());
}

#[test]
fn a_request_that_can_never_fit_evicts_nothing() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 64 << 10);
    store(&c, "a.bin", &[1u8; 16 << 10]);
    let (_, fh) = c.create(ROOT, OsStr::new("big.bin"), 0o644, libc::O_WRONLY, ME).map(|(a, o)| (a, o.fh)).unwrap();
    assert_eq!(c.fallocate(fh, 0, 1 << 20, 0).err(), Some(Errno::ENOSPC));
    c.release(fh);
    assert!(d.path().join("a.bin").exists(), "nothing may be evicted for a request that cannot fit");
}

/// Another node's open, as the distributed filesystem shows it here: a
/// second open file description of the backing file holding `LOCK_SH`.
fn held_elsewhere(path: &std::path::Path) -> std::fs::File {
    let f = std::fs::File::open(path).unwrap();
    crate::sys::flock(std::os::fd::AsFd::as_fd(&f), libc::LOCK_SH).unwrap();
    f
}

#[test]
fn shared_a_file_open_on_another_node_is_never_evicted() {
    let d = tempfile::tempdir().unwrap();
    let mut c = core(d.path(), 1 << 30);
    c.shared = Some(Default::default());
    store(&c, "k.bin", b"data");
    let other = held_elsewhere(&d.path().join("k.bin"));
    let (key, path) = c.accounts().lock().take_victim().unwrap();
    assert!(c.evict_victim(key, &path).is_none(), "a file another node holds open is skipped");
    assert_eq!(std::fs::read(d.path().join("k.bin")).unwrap(), b"data", "and not truncated");
    assert_eq!(c.evict(1, false), 0, "evict() gives up once every candidate was tried");
    drop(other);
    assert!(c.evict(1, false) > 0, "evictable again once the other node closed it");
    assert!(!d.path().join("k.bin").exists());
}

#[test]
fn single_node_mode_takes_no_lock() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "k.bin", b"data");
    let _other = held_elsewhere(&d.path().join("k.bin"));
    let (key, path) = c.accounts().lock().take_victim().unwrap();
    assert!(c.evict_victim(key, &path).is_some(), "without -o shared, flocks are not looked at");
}

#[test]
fn shared_open_of_a_file_another_node_evicted_is_enoent() {
    let d = tempfile::tempdir().unwrap();
    let mut c = core(d.path(), 1 << 30);
    c.shared = Some(Default::default());
    store(&c, "k.bin", b"data");
    let ino = c.lookup(ROOT, OsStr::new("k.bin")).unwrap().ino;
    // Node 2's eviction: LOCK_EX, unlink, truncate, close; our kernel still
    // has the inode, so the open arrives for an unlinked file.
    let f = std::fs::OpenOptions::new().write(true).open(d.path().join("k.bin")).unwrap();
    crate::sys::flock(std::os::fd::AsFd::as_fd(&f), libc::LOCK_EX).unwrap();
    std::fs::remove_file(d.path().join("k.bin")).unwrap();
    f.set_len(0).unwrap();
    drop(f);
    assert_eq!(c.open(ino, libc::O_RDONLY).err(), Some(Errno::ENOENT));
}

#[test]
fn a_daemon_killed_mid_eviction_leaves_the_block_whole_or_gone() {
    // Found by faults/kill-daemon in CI: killed between truncate and unlink, the
    // daemon left an empty file under a block's final name (a short load
    // for an engine, and a fresh mtime that ranked it most recent).
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "k.bin", &[7u8; 8192]);
    let path = d.path().join("k.bin");
    let seen = std::rc::Rc::new(std::cell::Cell::new(0));
    let s2 = seen.clone();
    crate::testing::at_crash_points(Some(Box::new(move || {
        s2.set(s2.get() + 1);
        match std::fs::read(&path) {
            Ok(b) => assert_eq!(b, [7u8; 8192], "a crash here leaves a partial block under its name"),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
        }
    })));
    let (key, victim) = c.accounts().lock().take_victim().unwrap();
    assert!(c.evict_victim(key, &victim).is_some());
    crate::testing::at_crash_points(None);
    assert!(seen.get() >= 2, "the removal passes its crash points");
    assert!(!d.path().join("k.bin").exists());
}

#[test]
fn remove_verified_keeps_what_the_check_or_the_ledger_refuses() {
    use super::Kept;
    use crate::key::key_of;
    use crate::ledger::Removal;
    use std::path::Path;

    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "a.bin", &[1u8; 8192]);
    let rel = Path::new("a.bin");
    let block = |st: Result<&libc::stat, Errno>| Ok((key_of(st.map_err(|_| Kept::Missing)?), Removal::Block));
    assert!(matches!(c.remove_verified(rel, |_| Err(Kept::Replaced)), Err(Kept::Replaced)));
    assert!(matches!(c.remove_verified(Path::new("no/a.bin"), block), Err(Kept::DirGone)));
    assert!(matches!(c.remove_verified(Path::new("b.bin"), block), Err(Kept::Missing)));
    // An open file is never removed.
    let ino = c.lookup(ROOT, OsStr::new("a.bin")).unwrap().ino;
    let fh = c.open(ino, libc::O_RDONLY).unwrap().fh;
    assert!(matches!(c.remove_verified(rel, block), Err(Kept::Busy)));
    assert!(d.path().join("a.bin").exists());
    c.release(fh);
    let before = c.accounts().lock().usage();
    let done = c.remove_verified(rel, block).unwrap();
    assert!(done.freed >= 8192);
    assert!(!d.path().join("a.bin").exists());
    assert_eq!(c.accounts().lock().usage(), before - done.freed);
    // An empty directory, even one the ledger never saw.
    std::fs::create_dir(d.path().join("e")).unwrap();
    c.remove_verified(Path::new("e"), |st| Ok((key_of(st.unwrap()), Removal::Dir))).unwrap();
    assert!(!d.path().join("e").exists());
}

#[test]
fn victims_deleted_behind_the_daemon_pay_for_the_write_not_live_blocks() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 64 << 10);
    for n in ["a.bin", "b.bin", "c.bin"] {
        store(&c, n, &[1u8; 16 << 10]);
    }
    let m = std::fs::metadata(d.path().join("a.bin")).unwrap();
    let key_a = {
        use std::os::unix::fs::MetadataExt;
        crate::key::FileKey { dev: m.dev(), ino: m.ino() }
    };
    // An operator removes the two oldest behind the daemon.
    std::fs::remove_file(d.path().join("a.bin")).unwrap();
    std::fs::remove_file(d.path().join("b.bin")).unwrap();
    // 24K more does not fit by the stale count: the ghosts pay for it.
    store(&c, "d.bin", &[2u8; 24 << 10]);
    assert!(d.path().join("c.bin").exists(), "a live block was evicted to pay for bytes already free");
    assert_eq!(crate::stats::Stats::get(&c.stats.evictions), 0, "nothing live was evicted");
    assert!(c.accounts().lock().get(&key_a).is_none(), "the vanished victim still counts");
}

#[test]
fn a_victim_whose_directory_is_gone_stops_counting_at_once() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 64 << 10);
    let sub = c.mkdir(ROOT, OsStr::new("h"), 0o755, ME).unwrap().ino;
    let fh = c.create(sub, OsStr::new("a.bin"), 0o644, libc::O_WRONLY, ME).unwrap().1.fh;
    c.write(fh, 0, &[1u8; 16 << 10], None, false).unwrap();
    c.release(fh);
    store(&c, "c.bin", &[1u8; 16 << 10]);
    std::fs::remove_dir_all(d.path().join("h")).unwrap(); // rm -rf behind the daemon
    let (key, path) = c.accounts().lock().take_victim().unwrap();
    assert_eq!(path, std::path::Path::new("h/a.bin"));
    let freed = c.evict_victim(key, &path).map(|(n, _)| n);
    assert_eq!(freed, Some(16 << 10), "its bytes count as freed");
    assert!(c.accounts().lock().get(&key).is_none());
    assert!(d.path().join("c.bin").exists());
}

#[test]
fn a_victim_moved_behind_the_daemon_keeps_counting() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 64 << 10);
    store(&c, "a.bin", &[1u8; 16 << 10]);
    // The kernel holds the inode (a lookup), so its fd shows it still linked.
    c.lookup(ROOT, OsStr::new("a.bin")).unwrap();
    std::fs::rename(d.path().join("a.bin"), d.path().join("moved.bin")).unwrap();
    let before = c.accounts().lock().usage();
    let (key, path) = c.accounts().lock().take_victim().unwrap();
    assert!(c.evict_victim(key, &path).is_none());
    assert_eq!(c.accounts().lock().usage(), before, "a file still in BACKING keeps counting");
    assert!(d.path().join("moved.bin").exists());
}

#[test]
fn an_emptied_directory_goes_only_after_a_whole_pass_forgotten() {
    // A vLLM store's race with the reaper: the client's LOOKUP of its hash
    // directory (`os.makedirs` answered EEXIST) lands just before the kernel
    // acts on the reaper's earlier request to drop that entry, so the FORGET
    // follows at once; the create that comes next must still find it.
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("h")).unwrap();
    std::fs::write(d.path().join("h/k.bin"), b"data").unwrap();
    let c = core(d.path(), 1 << 30);
    // the quiet time the reaper also waits (REAP_QUIET) is not what this checks
    c.set_reap_quiet(std::time::Duration::ZERO);
    let h = c.lookup(ROOT, OsStr::new("h")).unwrap().ino;
    let (key, path) = c.accounts().lock().take_victim().unwrap();
    assert!(c.evict_victim(key, &path).is_some());
    c.reap_empty_dirs(); // the kernel holds h: asked to drop it
    assert!(d.path().join("h").exists());
    c.lookup(ROOT, OsStr::new("h")).unwrap(); // the client's makedirs
    c.forget(h, 2); // the kernel drops the entry as asked
    c.reap_empty_dirs();
    assert!(d.path().join("h").exists(), "removed between the client's lookup and its create");
    c.reap_empty_dirs(); // forgotten for a whole pass: now it goes
    assert!(!d.path().join("h").exists());
}
