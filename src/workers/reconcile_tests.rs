//! Reconcile passes on a real backing directory (no mount): files changed
//! behind the daemon, stale temporaries, symlinks, open handles.

use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use filetime::FileTime;
use fuser::Errno;

use super::Reconciler;
use crate::fs::Core;
use crate::testing::{ROOT, core, store};

const HOUR: Duration = Duration::from_secs(3600);

/// du of the tree, as the ledger should count it.
fn du(p: &Path) -> u64 {
    let out = std::process::Command::new("du").args(["-s", "--block-size=1"]).arg(p).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().parse().unwrap()
}

fn set_age(p: &Path, secs_ago: u64) {
    let t = SystemTime::now() - Duration::from_secs(secs_ago);
    filetime::set_symlink_file_times(p, FileTime::from_system_time(t), FileTime::from_system_time(t)).unwrap();
}

/// A reconciler whose clock runs two hours ahead for the stale-temporary
/// age: a file made now has an old ctime there (a ctime cannot be set back).
fn two_hours_on() -> Reconciler {
    Reconciler::new(HOUR).with_clock_ahead(2 * HOUR)
}

/// Sets `p`'s times to now on [`two_hours_on`]'s clock (fresh there).
fn fresh_two_hours_on(p: &Path) {
    let t = FileTime::from_system_time(SystemTime::now() + 2 * HOUR);
    filetime::set_symlink_file_times(p, t, t).unwrap();
}

fn victims(c: &Core) -> Vec<String> {
    let mut l = c.accounts().lock();
    std::iter::from_fn(|| l.take_victim().map(|(_, p)| p.display().to_string())).collect()
}

#[test]
fn files_added_and_removed_behind_the_daemon_are_counted_again() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "mine.bin", &[1u8; 8192]);
    std::fs::create_dir(d.path().join("ext")).unwrap();
    std::fs::write(d.path().join("ext/a.bin"), [2u8; 64 << 10]).unwrap();
    std::fs::write(d.path().join("ext/cfg.json"), b"{}").unwrap();
    std::fs::write(d.path().join("gone.json"), [3u8; 8192]).unwrap();
    std::fs::remove_file(d.path().join("mine.bin")).unwrap();
    assert_ne!(c.accounts().lock().usage(), du(d.path()));
    let mut rec = Reconciler::new(HOUR);
    let r = rec.pass(&c);
    assert_eq!((r.adopted, r.dropped), (4, 1), "{r:?}");
    assert_eq!(c.accounts().lock().usage(), du(d.path()));
    // a file that is not a block keeps no path: gone for two passes in a row, it goes
    std::fs::remove_file(d.path().join("gone.json")).unwrap();
    assert_eq!(rec.pass(&c).dropped, 0);
    assert_eq!(rec.pass(&c).dropped, 1);
    assert_eq!(c.accounts().lock().usage(), du(d.path()));
    // the adopted block is evictable, the other files are not
    assert_eq!(victims(&c), vec!["ext/a.bin".to_string()]);
    // a further pass finds nothing to do
    let r = rec.pass(&c);
    assert!(!r.changed(), "{r:?}");
}

#[test]
fn a_size_changed_behind_the_daemon_is_corrected() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "k.bin", &[1u8; 4096]);
    std::fs::write(d.path().join("k.bin"), vec![3u8; 256 << 10]).unwrap();
    let r = Reconciler::new(HOUR).pass(&c);
    assert_eq!(r.resized, 1, "{r:?}");
    assert_eq!(c.accounts().lock().usage(), du(d.path()));
}

#[test]
fn adopted_blocks_are_evicted_in_mtime_order_among_known_ones() {
    let d = tempfile::tempdir().unwrap();
    for (name, age) in [("k1.bin", 300), ("k2.bin", 200), ("k3.bin", 100)] {
        std::fs::write(d.path().join(name), b"x").unwrap();
        set_age(&d.path().join(name), age);
    }
    let c = core(d.path(), 1 << 30);
    for (name, age) in [("e_old.bin", 1000), ("e_mid.bin", 150), ("e_new.bin", 0)] {
        std::fs::write(d.path().join(name), b"y").unwrap();
        set_age(&d.path().join(name), age);
    }
    Reconciler::new(HOUR).pass(&c);
    assert_eq!(victims(&c), ["e_old.bin", "k1.bin", "k2.bin", "e_mid.bin", "k3.bin", "e_new.bin"]);
}

#[test]
fn stale_temporaries_go_unless_open_fresh_linked_or_not_regular() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("target.tmp"), b"outside").unwrap();
    set_age(&outside.path().join("target.tmp"), 7200);
    for name in ["a.bin_1f2e.tmp", "h.bin.tmp.12.34.5678", "open.tmp", "fresh.tmp", "linked.tmp", "old.bin"] {
        std::fs::write(p.join(name), [7u8; 8192]).unwrap();
    }
    std::fs::hard_link(p.join("linked.tmp"), p.join("linked-too")).unwrap();
    std::fs::create_dir(p.join("dir.tmp")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("target.tmp"), p.join("link.tmp")).unwrap();
    for name in ["a.bin_1f2e.tmp", "h.bin.tmp.12.34.5678", "open.tmp", "linked.tmp", "old.bin", "dir.tmp", "link.tmp"] {
        set_age(&p.join(name), 7200);
    }
    fresh_two_hours_on(&p.join("fresh.tmp"));
    let c = core(p, 1 << 30);
    let ino = c.lookup(ROOT, OsStr::new("open.tmp")).unwrap().ino;
    let fh = c.open(ino, libc::O_RDONLY).unwrap().fh;
    let r = two_hours_on().pass(&c);
    assert_eq!(r.stale_removed, 2, "{r:?}");
    for gone in ["a.bin_1f2e.tmp", "h.bin.tmp.12.34.5678"] {
        assert!(!p.join(gone).exists(), "{gone} should be removed");
    }
    for kept in ["open.tmp", "fresh.tmp", "linked.tmp", "old.bin", "dir.tmp"] {
        assert!(p.join(kept).exists(), "{kept} must stay");
    }
    assert!(p.join("link.tmp").symlink_metadata().is_ok(), "a symlink is never removed as a temporary");
    assert_eq!(std::fs::read(outside.path().join("target.tmp")).unwrap(), b"outside");
    assert_eq!(c.accounts().lock().usage(), du(p));
    // the open one goes once closed, by a later pass
    c.release(fh);
    assert_eq!(two_hours_on().pass(&c).stale_removed, 1);
    assert!(!p.join("open.tmp").exists());
    // and an open arriving after the removal says ENOENT
    assert_eq!(c.open(ino, libc::O_RDONLY).err(), Some(Errno::ENOENT));
    // stale_tmp = 0 removes nothing
    std::fs::write(p.join("b.tmp"), b"z").unwrap();
    set_age(&p.join("b.tmp"), 7200);
    assert_eq!(Reconciler::new(Duration::ZERO).with_clock_ahead(2 * HOUR).pass(&c).stale_removed, 0);
    assert!(p.join("b.tmp").exists());
}

#[test]
fn a_temporary_made_now_with_an_old_mtime_is_not_stale() {
    // tar, rsync -a and cp -p set an old mtime on what they make now: the
    // ctime says the file is new, and it stays until it is old by both.
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("notes.tmp"), b"kept").unwrap();
    set_age(&p.join("notes.tmp"), 7200);
    let c = core(p, 1 << 30);
    assert_eq!(Reconciler::new(HOUR).pass(&c).stale_removed, 0);
    assert_eq!(std::fs::read(p.join("notes.tmp")).unwrap(), b"kept");
    // an hour on, unchanged: stale by both times
    assert_eq!(Reconciler::new(HOUR).with_clock_ahead(HOUR + Duration::from_secs(60)).pass(&c).stale_removed, 1);
    assert!(!p.join("notes.tmp").exists());
}

#[test]
fn an_open_file_unlinked_behind_the_daemon_stays_counted_until_closed() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "k.bin", &[1u8; 64 << 10]);
    let ino = c.lookup(ROOT, OsStr::new("k.bin")).unwrap().ino;
    let fh = c.open(ino, libc::O_RDONLY).unwrap().fh;
    let before = c.accounts().lock().usage();
    std::fs::remove_file(d.path().join("k.bin")).unwrap();
    let r = Reconciler::new(HOUR).pass(&c);
    assert_eq!(r.dropped, 0, "an entry with an open handle is never dropped");
    assert_eq!(c.accounts().lock().usage(), before);
    assert_eq!(c.read(fh, 0, 4, 0).unwrap(), vec![1u8; 4]);
    c.release(fh);
    // closed: its kernel-held inode has no link left, so the next pass drops it
    let r = Reconciler::new(HOUR).pass(&c);
    assert_eq!(r.dropped, 1, "{r:?}");
    assert_eq!(c.accounts().lock().usage(), du(d.path()));
}

#[test]
fn a_directory_swapped_for_a_symlink_is_not_walked() {
    let d = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.bin"), [1u8; 64 << 10]).unwrap();
    std::fs::write(outside.path().join("y.tmp"), b"old").unwrap();
    set_age(&outside.path().join("y.tmp"), 7200);
    std::fs::create_dir(d.path().join("sub")).unwrap();
    let c = core(d.path(), 1 << 30);
    std::fs::remove_dir(d.path().join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), d.path().join("sub")).unwrap();
    let mut rec = two_hours_on();
    assert_eq!(rec.pass(&c).stale_removed, 0);
    // the old directory has no path in the ledger (only blocks keep one):
    // it goes once two passes in a row did not see it
    assert_eq!(rec.pass(&c).stale_removed, 0);
    assert!(outside.path().join("y.tmp").exists());
    assert_eq!(c.accounts().lock().usage(), du(d.path()), "the outside files are not counted");
}

#[test]
fn shared_passes_read_only_the_directories_that_changed_and_all_every_full_pass() {
    use crate::workers::dircache::FULL_EVERY;
    let d = tempfile::tempdir().unwrap();
    let mut config = crate::fs::Config::new(d.path().canonicalize().unwrap(), 1 << 30);
    config.shared = true;
    let c = crate::testing::core_with(config);
    for dir in ["a", "b"] {
        std::fs::create_dir(d.path().join(dir)).unwrap();
        for i in 0..3 {
            std::fs::write(d.path().join(format!("{dir}/{i}.bin")), [1u8; 4096]).unwrap();
        }
    }
    let mut rec = Reconciler::new(HOUR);
    // Directories changed within the margin are re-read: the tree is new.
    let r = rec.pass(&c);
    assert_eq!((r.dirs_read, r.dirs_skipped, r.adopted), (3, 0, 8), "first pass reads all: {r:?}");
    assert_eq!(rec.pass(&c).dirs_skipped, 0, "changed within 2 s of the pass: read again");
    rec.dirs.margin_ns = 0;
    let r = rec.pass(&c);
    assert_eq!((r.dirs_read, r.dirs_skipped, r.objects), (0, 3, 1), "nothing changed: {r:?}");
    // A store in b and a removal in a: both directories read, the root not.
    std::fs::write(d.path().join("b/new.bin"), [2u8; 8192]).unwrap();
    std::fs::remove_file(d.path().join("a/0.bin")).unwrap();
    let r = rec.pass(&c);
    assert_eq!((r.dirs_read, r.dirs_skipped, r.adopted, r.dropped), (2, 1, 1, 1), "{r:?}");
    assert_eq!(c.accounts().lock().usage(), du(d.path()));
    // A rewrite in place changes no directory: seen by the next full pass.
    std::fs::write(d.path().join("a/1.bin"), [3u8; 64 << 10]).unwrap();
    let mut passes = 4;
    loop {
        let r = rec.pass(&c);
        passes += 1;
        if passes % FULL_EVERY == 1 {
            assert_eq!((r.dirs_read, r.resized), (3, 1), "the full pass: {r:?}");
            break;
        }
        assert_eq!((r.dirs_read, r.resized), (0, 0), "pass {passes}: {r:?}");
    }
    assert_eq!(c.accounts().lock().usage(), du(d.path()));
}

#[test]
fn single_node_passes_read_every_directory() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    std::fs::create_dir(d.path().join("a")).unwrap();
    let mut rec = Reconciler::new(HOUR);
    rec.dirs.margin_ns = 0;
    for _ in 0..3 {
        let r = rec.pass(&c);
        assert_eq!((r.dirs_read, r.dirs_skipped), (2, 0), "{r:?}");
    }
}

#[test]
fn a_pass_after_the_start_up_index_fixes_nothing() {
    // reconcile_fixes grew by the number of directories after
    // every mount: the index gave only block files a path, and the first
    // pass "restored" every directory's (and every other file's) path,
    // counting each as a fix.
    let d = tempfile::tempdir().unwrap();
    for i in 0..5 {
        std::fs::create_dir_all(d.path().join(format!("h{i}/sub"))).unwrap();
        std::fs::write(d.path().join(format!("h{i}/sub/k.bin")), [1u8; 4096]).unwrap();
        std::fs::write(d.path().join(format!("h{i}/cfg.json")), b"{}").unwrap();
    }
    let c = core(d.path(), 1 << 30);
    let r = Reconciler::new(HOUR).pass(&c);
    assert!(!r.changed(), "a pass over a tree just indexed changed something: {r:?}");
    // a directory keeps its path: what is made in it is named without asking the kernel
    let h0 = c.accounts().lock().get(&key_at(&d.path().join("h0"))).and_then(|e| e.path.clone());
    assert_eq!(h0.as_deref(), Some(Path::new("h0")));
}

/// The backing identity of the object at `p`.
fn key_at(p: &Path) -> crate::key::FileKey {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap();
    crate::key::FileKey { dev: m.dev(), ino: m.ino() }
}
