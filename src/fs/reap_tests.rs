//! The reaper of emptied directories, pass by pass on a real backing
//! directory (no mount): what goes, what is kept while stores arrive.

use crate::stats::Op;
use crate::testing::{ROOT, core};

use super::kept_max;

/// A backing tree `a/b/k.bin` with `k.bin` evicted: `a/b` is queued.
fn evicted_leaf(d: &std::path::Path, max_size: u64) -> crate::fs::Core {
    std::fs::create_dir_all(d.join("a/b")).unwrap();
    std::fs::write(d.join("a/b/k.bin"), b"data").unwrap();
    let c = core(d, max_size);
    let (key, path) = c.accounts().lock().take_victim().unwrap();
    assert!(c.evict_victim(key, &path).is_some());
    // passes back to back stand for passes a REAP_QUIET apart
    c.set_reap_quiet(std::time::Duration::ZERO);
    c
}

/// A store arrives, as the FUSE adapter counts it.
fn store_arrives(c: &crate::fs::Core) {
    c.stats().requests.count(Op::Mkdir);
}

#[test]
fn a_directory_that_held_directories_is_kept_while_stores_arrive() {
    let d = tempfile::tempdir().unwrap();
    let c = evicted_leaf(d.path(), 1 << 30);
    for _ in 0..2 {
        store_arrives(&c);
        c.reap_empty_dirs(); // the leaf: forgotten one pass, then removed
    }
    assert!(!d.path().join("a/b").exists(), "the emptied leaf goes while stores arrive");
    for _ in 0..5 {
        store_arrives(&c);
        c.reap_empty_dirs();
        assert!(d.path().join("a").exists(), "the fan-out level is kept while stores arrive");
    }
    // the next store under it needs no MKDIR of `a`
    std::fs::create_dir(d.path().join("a/c")).unwrap();
    c.reap_empty_dirs_at_unmount();
    assert!(d.path().join("a/c").exists(), "a kept directory that filled again stays");
}

#[test]
fn kept_directories_go_when_stores_stop_or_at_unmount() {
    // no store ever arrived: reaped as before, a pass of waiting per level
    let d = tempfile::tempdir().unwrap();
    let c = evicted_leaf(d.path(), 1 << 30);
    for _ in 0..4 {
        c.reap_empty_dirs();
    }
    assert!(!d.path().join("a").exists(), "with stores idle the emptied tree goes");
    // kept while stores arrive, then the session ends: it goes at once
    let d = tempfile::tempdir().unwrap();
    let c = evicted_leaf(d.path(), 1 << 30);
    for _ in 0..4 {
        store_arrives(&c);
        c.reap_empty_dirs();
    }
    assert!(d.path().join("a").exists());
    c.reap_empty_dirs_at_unmount();
    assert!(!d.path().join("a").exists(), "kept directories go at unmount");
}

#[test]
fn kept_directories_are_bounded_by_a_share_of_the_budget() {
    assert_eq!(kept_max(64 << 20), 1024, "max_size/16 at 4 KiB a directory");
    assert_eq!(kept_max(1 << 40), super::MAX_KEPT);
    // a budget too small to keep one: reaped as if stores were idle
    let d = tempfile::tempdir().unwrap();
    let c = evicted_leaf(d.path(), 32 << 10);
    for _ in 0..4 {
        store_arrives(&c);
        c.reap_empty_dirs();
    }
    assert!(!d.path().join("a").exists(), "nothing kept beyond the bound");
}

/// LOOKUP of `name` in `parent`, as the kernel sends it: the entry's node id.
fn lookup(c: &crate::fs::Core, parent: fuser::INodeNo, name: &str) -> fuser::INodeNo {
    c.lookup(parent, std::ffi::OsStr::new(name)).unwrap().ino
}

#[test]
fn a_directory_a_request_reached_between_two_passes_stays() {
    // The pass that finds `a/b` forgotten is the reaper's check,
    // the next one its rmdir. A client's `os.makedirs("a/b",
    // exist_ok=True)` in between (LOOKUP a, LOOKUP b; mkdir answers EEXIST
    // and the kernel forgets b again, an eviction having invalidated it)
    // is followed by its create inside: the directory must still be there.
    let d = tempfile::tempdir().unwrap();
    let c = evicted_leaf(d.path(), 1 << 30);
    c.reap_empty_dirs(); // the check: not held by the kernel
    let a = lookup(&c, ROOT, "a");
    let b = lookup(&c, a, "b");
    c.forget(b, 1);
    c.reap_empty_dirs();
    assert!(d.path().join("a/b").is_dir(), "a directory looked up since the last pass was removed");
    c.reap_empty_dirs(); // no request since: it goes
    assert!(!d.path().join("a/b").exists(), "an emptied directory left alone for a pass stays");
}

#[test]
fn a_mkdir_answered_eexist_keeps_the_directory_a_pass_more() {
    // The kernel sends MKDIR when its entry is negative or gone: the daemon
    // answers EEXIST, and the client then uses the directory by name.
    let d = tempfile::tempdir().unwrap();
    let c = evicted_leaf(d.path(), 1 << 30);
    c.reap_empty_dirs();
    let a = lookup(&c, ROOT, "a");
    let made = c.mkdir(a, std::ffi::OsStr::new("b"), 0o755, crate::testing::ME);
    assert_eq!(made.err(), Some(fuser::Errno::EEXIST));
    c.reap_empty_dirs();
    assert!(d.path().join("a/b").is_dir(), "a directory a MKDIR found was removed at the next pass");
}

#[test]
fn a_directory_the_kernel_held_stays_a_pass_after_its_forget() {
    let d = tempfile::tempdir().unwrap();
    let c = evicted_leaf(d.path(), 1 << 30);
    let a = lookup(&c, ROOT, "a");
    let b = lookup(&c, a, "b"); // a client's cwd, or a create in flight
    c.reap_empty_dirs(); // held: its entry invalidated
    assert!(d.path().join("a/b").is_dir());
    c.forget(b, 1); // requests by its node id came before this
    c.reap_empty_dirs();
    assert!(d.path().join("a/b").is_dir(), "removed at the pass right after the kernel let it go");
    c.reap_empty_dirs();
    assert!(!d.path().join("a/b").exists());
}

#[test]
fn the_quiet_wait_is_timed_not_counted_in_passes() {
    // Passes run whenever the evictor wakes (tens a second under stores):
    // an emptied directory no request reached goes only once REAP_QUIET has
    // passed since a pass first found it so, however many passes ran.
    let d = tempfile::tempdir().unwrap();
    let c = evicted_leaf(d.path(), 1 << 30);
    c.set_reap_quiet(std::time::Duration::from_secs(3600));
    for _ in 0..100 {
        c.reap_empty_dirs();
    }
    assert!(d.path().join("a/b").is_dir(), "removed after many passes within REAP_QUIET");
    c.set_reap_quiet(std::time::Duration::ZERO); // as if the hour had passed
    c.reap_empty_dirs();
    assert!(!d.path().join("a/b").exists(), "still there after REAP_QUIET with no request");
}

#[test]
fn a_crash_leaves_no_emptied_directory_for_good_and_a_users_stays() {
    use std::os::fd::AsFd;
    let d = tempfile::tempdir().unwrap();
    let (user_empty, changed) = (d.path().join("u"), d.path().join("s"));
    std::fs::create_dir(&user_empty).unwrap();
    std::fs::create_dir(&changed).unwrap();
    std::fs::write(changed.join("k.bin"), b"data").unwrap();
    std::fs::create_dir_all(d.path().join("a/b")).unwrap();
    std::fs::write(d.path().join("a/b/k.bin"), b"data").unwrap();
    let c = core(d.path(), 1 << 30);
    for _ in 0..2 {
        let (key, path) = c.accounts().lock().take_victim().unwrap();
        assert!(c.evict_victim(key, &path).is_some());
    }
    let marked = std::fs::File::open(d.path().join("a/b")).unwrap();
    let st = crate::sys::fstat(marked.as_fd()).unwrap();
    if crate::fs::emptied::found(marked.as_fd(), &st) == crate::fs::emptied::Found::None {
        eprintln!("skipped: no trusted.* xattrs here (not root, or the filesystem has none)");
        return;
    }
    // `s` is used again after the eviction emptied it: no longer boundfs' to remove
    std::fs::write(changed.join("x"), b"1").unwrap();
    std::fs::remove_file(changed.join("x")).unwrap();
    // the crash: no pass ran, the queue dies with the daemon
    drop(c);
    assert!(d.path().join("a/b").exists());
    let c = crate::testing::core(d.path(), 1 << 30);
    c.set_reap_quiet(std::time::Duration::ZERO);
    let root = std::fs::File::open(d.path()).unwrap();
    crate::workers::scan::index(&c, &std::os::fd::OwnedFd::from(root), || false);
    for _ in 0..4 {
        c.reap_empty_dirs();
    }
    assert!(!d.path().join("a").exists(), "the emptied a/b (and then a) went after the restart");
    assert!(user_empty.exists(), "a user's empty directory stays");
    assert!(changed.exists(), "a directory used since boundfs emptied it stays");
}
