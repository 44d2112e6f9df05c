//! The start-up index of BACKING: every object with its allocated bytes, and
//! block files placed in the LRU in mtime order, so the LRU order of the last
//! run (persisted as mtimes by `stamp`) is restored.
//!
//! [`index`] runs in the background while the mount already serves: each
//! chunk of a directory is stat'ed under that directory's stripe lock, so a
//! concurrent create, unlink or rename in it is seen either before (and the
//! request's own ledger update stands) or after (and the request finds the
//! entry). Usage counts each chunk at once; the LRU order is set at the end.
//! [`scan`] is the same walk into a bare ledger (tests, tools).
//! The walk is [`super::walk`], the one reconcile uses; it never follows a
//! symlink.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Instant;

use globset::GlobSet;

use crate::fs::accounts::walks::{Indexed, record_indexed};
use crate::fs::{Core, emptied};
use crate::key::{FileKey, key_of};
use crate::ledger::{Kind, Ledger};
use crate::status::ScanReport;
use crate::sys;

use super::walk::{walk, walk_noting_empty};

/// Stats `names` in `dir` (relative path `rel`) without following symlinks.
fn stat_chunk(dir: BorrowedFd<'_>, rel: &Path, names: &[Vec<u8>], matcher: &GlobSet) -> Vec<Indexed> {
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        let Ok(c) = CString::new(n.as_slice()) else { continue };
        let Ok(st) = sys::fstatat(dir, &c) else { continue };
        let name = OsStr::from_bytes(n);
        let block = st.st_mode & libc::S_IFMT == libc::S_IFREG && matcher.is_match(Path::new(name));
        let (key, size, mtime, kind) =
            (key_of(&st), sys::allocated(&st), (st.st_mtime, st.st_mtime_nsec), Kind::of_mode(st.st_mode));
        // Block files keep their path (eviction's), and directories theirs
        // (the paths of what is made in them, `Core::rel_path`); other files
        // none (memory). Without it reconcile's first pass gave every
        // directory its path and counted each as a fix.
        let path = (block || kind == Kind::Dir).then(|| rel.join(name));
        out.push(Indexed { key, size, mtime, block, kind, path });
    }
    out
}

/// Sorts `order` newest first, for [`Ledger::order_indexed`].
fn newest_first(mut order: Vec<((i64, i64), FileKey)>) -> Vec<FileKey> {
    order.sort_unstable_by(|a, b| b.cmp(a));
    order.into_iter().map(|(_, k)| k).collect()
}

/// Walks the tree under `root` (an `O_PATH` fd of BACKING) into `ledger`.
pub fn scan(root: &OwnedFd, matcher: &GlobSet, ledger: &mut Ledger) -> ScanReport {
    let t0 = Instant::now();
    let mut report = ScanReport::default();
    let mut order = Vec::new();
    if let Ok(st) = sys::fstat(root.as_fd()) {
        let root_found = Indexed {
            key: key_of(&st),
            size: sys::allocated(&st),
            mtime: (0, 0),
            block: false,
            kind: Kind::Dir,
            path: None,
        };
        record_indexed(ledger, vec![root_found], i64::MAX, &mut report, &mut order);
    }
    let unreadable = walk(root.as_fd(), |c| {
        record_indexed(ledger, stat_chunk(c.dir, c.rel, c.names, matcher), i64::MAX, &mut report, &mut order);
        true
    });
    ledger.order_indexed(&newest_first(order));
    report.unreadable = unreadable;
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// Builds the index of a mounted `core` in the background (see the module
/// docs); marks the ledger indexed and wakes the evictor when done, or when
/// `stop` returns true (shutdown: the index is then partial).
pub fn index(core: &Core, root: &OwnedFd, stop: impl Fn() -> bool) -> ScanReport {
    let t0 = Instant::now();
    let mut report = ScanReport::default();
    let mut order = Vec::new();
    // A block stamped less than one stamp interval ago needs no stamp yet.
    let unix_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let stamped_after = unix_now.saturating_sub(core.stamp_interval_secs()) as i64;
    // Directories the daemon's own removals emptied and a crash left (the
    // mark: fs::emptied) go back to the reaper; not in shared mode, where
    // another node's clients may be using them unseen by this kernel.
    let shared = core.shared();
    let emptied = |dir: BorrowedFd<'_>, rel: &Path, st: &libc::stat| match emptied::found(dir, st) {
        _ if shared => {}
        emptied::Found::Unchanged => core.queue_emptied(rel.to_path_buf()),
        emptied::Found::Stale => emptied::unmark(dir),
        emptied::Found::None => {}
    };
    let unreadable = walk_noting_empty(root.as_fd(), emptied, |c| {
        let _stripe = core.lock_dirs(&[c.key]);
        let found = stat_chunk(c.dir, c.rel, c.names, core.matcher());
        // Block files found in a directory count as files made in it, so a
        // flat store holding 16 or more outlives a restart (Core::reap_empty_dirs).
        core.accounts().index_chunk(c.key, found, stamped_after, &mut report, &mut order);
        !stop()
    });
    if core.shared() {
        // Shared mode: what eviction compares a victim's mtime with.
        core.accounts().know_indexed_mtimes(&order, core.future_cap());
        // A stamp from the future (a node whose clock is ahead) is not
        // ranked hottest: see `crate::fs::clock`.
        let cap = core.future_cap();
        let cap = (cap.div_euclid(1_000_000_000), cap.rem_euclid(1_000_000_000));
        order.iter_mut().for_each(|(t, _)| *t = (*t).min(cap));
    }
    let keys = newest_first(order);
    for chunk in keys.chunks(4096) {
        core.accounts().order_indexed(chunk);
    }
    report.unreadable = unreadable;
    report.seconds = t0.elapsed().as_secs_f64();
    core.index_done(report.clone());
    if let Some(t) = core.shared_tier() {
        core.grant_book(t);
    }
    report
}
