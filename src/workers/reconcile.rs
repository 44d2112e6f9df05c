//! Periodic reconcile: re-walks BACKING and brings the ledger back to what is
//! really there after changes made behind the daemon's back (an external
//! reaper, an operator's `rm` or `cp`, a second boundfs mount over the same
//! BACKING), and removes stale engine temporaries.
//!
//! One pass (every `reconcile_interval`, default 60 s; 0 disables):
//! 1. snapshot the keys of live, unopened entries (only these may be dropped:
//!    an entry created during the walk is never a candidate);
//! 2. walk BACKING with the start-up index's walk ([`super::walk`]:
//!    subdirectories opened with `openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)`),
//!    each name `fstatat(AT_SYMLINK_NOFOLLOW)`: a symlink is indexed as a
//!    symlink and never followed;
//! 3. drop: a snapshot key the walk did not see is verified under its
//!    directory's stripe (the lock create, rename and eviction take): if its
//!    name no longer holds it, it leaves usage (never with an open handle).
//!    Entries without a path (only block files and directories keep one) go when the
//!    kernel's fd says the object has no link left, or after two passes in a
//!    row did not see them;
//! 4. adopt: a file the ledger does not know is verified the same way and
//!    indexed; a block file takes its place in the LRU by its mtime; the
//!    kernel's cached entry for an adopted or dropped name is invalidated
//!    (it may cache a miss for `attr_timeout`);
//!    In shared mode every block file read is placed by the newest mtime
//!    this node knows for it (the one just read, or its own later stamp),
//!    so recency stamped by other nodes reaches this node's LRU;
//! 5. fix sizes (re-read with `fstat` just before) and give block files
//!    and directories that lost their name the one the walk found;
//! 6. remove stale temporaries: regular files named like an engine's
//!    temporary ([`TMP_PATTERNS`]), with one link, mtime and ctime both
//!    older than `stale_tmp` (default 1 h; 0 disables; the ctime because an
//!    archive extracted just now carries old mtimes) and no open handle through the
//!    mount, with eviction's protocol: name verified under the stripe, ledger
//!    `begin_removal` (an open racing it answers ENOENT), unlink, truncate
//!    (`Core::remove_verified`, the protocol eviction uses).
//!    Until then they count toward usage like every file.
//!
//! In shared mode step 2 re-reads only the directories that changed since
//! the pass that last read them (their own mtime, ctime, size, inode), and
//! every [`super::dircache::FULL_EVERY`]th pass reads them all: see
//! [`super::dircache`] for what that loses and how it is covered.
//!
//! Then the evictor is woken if usage is above the high watermark, so two
//! mounts over one BACKING see each other's files within one interval. No
//! pass runs while the start-up index is still being built.

use std::collections::HashSet;
use std::ffi::{CString, OsStr};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::Errno;
use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::fs::accounts::walks::Known;
use crate::fs::{Core, Kept};
use crate::key::FileKey;
use crate::key::key_of;
use crate::ledger::Removal;
use crate::stats::Stats;
use crate::sys;

/// Names of engine temporaries, from the engines' store paths (see
/// ENGINES.md): vLLM and llm-d write `<dest>_<random>.tmp` (and vLLM's
/// O_DIRECT probe `.o_direct_probe_<random>.tmp`), SGLang HiCache writes
/// `<path>.tmp.<pid>.<tid>.<uuid>`.
pub const TMP_PATTERNS: &[&str] = &["*.tmp", "*.tmp.*"];

/// What one pass found and changed (counts of files, sizes in bytes).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// Objects seen by the walk, BACKING included.
    pub objects: u64,
    /// Files indexed that the ledger did not know.
    pub adopted: u64,
    /// Bytes they added to usage.
    pub adopted_bytes: u64,
    /// Entries whose file was gone.
    pub dropped: u64,
    /// Bytes they took out of usage.
    pub dropped_bytes: u64,
    /// Entries whose allocated size was corrected.
    pub resized: u64,
    /// Entries that got back a name eviction can use.
    pub restored: u64,
    /// Stale temporaries removed.
    pub stale_removed: u64,
    /// Bytes they freed.
    pub stale_bytes: u64,
    /// Directories that could not be read (permissions, a symlink swapped in, races).
    pub unreadable: u64,
    /// Directories read (getdents and an fstatat per entry), BACKING included.
    pub dirs_read: u64,
    /// Directories skipped as unchanged (shared mode, [`super::dircache`]).
    pub dirs_skipped: u64,
}

impl PassReport {
    /// Whether the pass changed the ledger or BACKING.
    pub fn changed(&self) -> bool {
        self.adopted + self.dropped + self.resized + self.restored + self.stale_removed > 0
    }
}

/// A file the walk found, with what the ledger needs to index it.
struct Found {
    key: FileKey,
    mtime: i128,
    block: bool,
    /// A directory (keeps its path, as blocks do: `Core::rel_path`).
    dir: bool,
    path: PathBuf,
}

/// The walk's findings, classified against the ledger.
#[derive(Default)]
struct Walk {
    /// Every key read with its mtime (ns), sorted by key after the walk.
    seen: Vec<(FileKey, i128)>,
    /// Keys of the directories skipped as unchanged, with the mtimes (ns)
    /// last read; sorted by key after the walk.
    kept: Vec<(FileKey, i128)>,
    /// Unknown to the ledger.
    new: Vec<Found>,
    /// Known, with another size (key, path).
    resize: Vec<(FileKey, PathBuf)>,
    /// Known live block files without a path (key, path, is a block).
    restore: Vec<(FileKey, PathBuf, bool)>,
    /// Stale temporary candidates (key, path).
    stale: Vec<(FileKey, PathBuf)>,
    objects: u64,
    unreadable: u64,
}

/// The reconcile state kept between passes.
pub struct Reconciler {
    tmp: GlobSet,
    stale_after: Option<Duration>,
    /// Tests: how far this reconciler's clock runs ahead of the real one for
    /// the stale-temporary age (ctime cannot be set back to fake an old file).
    clock_ahead: Duration,
    /// Path-less entries the previous pass did not see (dropped when missed twice).
    missed: HashSet<FileKey>,
    /// Shared mode: the directories read by earlier passes.
    dirs: super::dircache::DirCache,
}

fn mtime_ns(st: &libc::stat) -> i128 {
    i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec)
}

/// Nanoseconds since the epoch of the later of the mtime and the ctime: the
/// age of a temporary. The ctime counts too because `tar`, `rsync -a` and
/// `cp -p` give a file they make just now an old mtime, and only the kernel
/// sets the ctime (`inode(7)`).
fn changed_ns(st: &libc::stat) -> i128 {
    let ctime = i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec);
    mtime_ns(st).max(ctime)
}

impl Reconciler {
    /// A reconciler removing temporaries older than `stale_tmp` (zero: never).
    pub fn new(stale_tmp: Duration) -> Self {
        let mut b = GlobSetBuilder::new();
        for p in TMP_PATTERNS {
            if let Ok(g) = Glob::new(p) {
                b.add(g);
            }
        }
        Reconciler {
            tmp: b.build().unwrap_or_else(|_| GlobSet::empty()),
            stale_after: (!stale_tmp.is_zero()).then_some(stale_tmp),
            clock_ahead: Duration::ZERO,
            missed: HashSet::new(),
            dirs: super::dircache::DirCache::new(),
        }
    }

    /// Tests: runs this reconciler's stale-temporary clock `d` ahead.
    #[cfg(test)]
    pub(crate) fn with_clock_ahead(mut self, d: Duration) -> Self {
        self.clock_ahead = d;
        self
    }

    /// Whether `name` looks like an engine temporary (see [`TMP_PATTERNS`]).
    pub fn is_tmp_name(&self, name: &OsStr) -> bool {
        self.tmp.is_match(Path::new(name))
    }

    /// One reconcile pass over `core`'s BACKING (see the module docs).
    pub fn pass(&mut self, core: &Core) -> PassReport {
        // None while the start-up index is still being built: it will count
        // everything; a pass now would only race it.
        let Some(mut snapshot) = core.accounts().unused_keys() else {
            return PassReport::default();
        };
        let now = SystemTime::now() + self.clock_ahead;
        let cutoff = self.stale_after.and_then(|d| now.checked_sub(d)).map(|t| {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            d.as_nanos() as i128
        });
        self.dirs.begin(i128::from(crate::fs::unix_ns()));
        let mut w = self.walk(core, cutoff);
        self.dirs.end();
        w.seen.sort_unstable_by_key(|(k, _)| *k);
        w.kept.sort_unstable_by_key(|(k, _)| *k);
        let mut r = PassReport { objects: w.objects, unreadable: w.unreadable, ..Default::default() };
        (r.dirs_read, r.dirs_skipped) = (self.dirs.read, self.dirs.skipped);
        snapshot.sort_unstable();
        let find = |v: &[(FileKey, i128)], k: &FileKey| v.binary_search_by_key(k, |(k2, _)| *k2).ok().map(|i| v[i].1);
        let seen = |k: &FileKey| find(&w.seen, k).or_else(|| find(&w.kept, k));

        let mut missed_now = HashSet::new();
        for key in snapshot.into_iter().filter(|k| seen(k).is_none()) {
            let n = self.drop_if_gone(core, key, &mut missed_now);
            if n.is_some() {
                r.dropped += 1;
                r.dropped_bytes += n.unwrap_or(0);
            }
        }
        self.missed = missed_now;

        let mut placed = Vec::new();
        for f in &w.new {
            if let Some((size, dkey)) = verify(core, f.key, &f.path) {
                // Like the start-up index, only block files and directories
                // keep a path (memory).
                if core.accounts().adopt(f.key, size, f.block, (f.block || f.dir).then(|| f.path.clone())) {
                    r.adopted += 1;
                    r.adopted_bytes += size;
                    if f.block {
                        placed.push((f.key, f.mtime));
                    }
                    // The kernel may cache a miss for this name (attr_timeout).
                    invalidate(core, dkey, &f.path);
                }
            }
        }
        if core.shared() {
            // One LRU across nodes: other nodes' uses reach this node only as
            // the mtimes they stamp, so every block takes its place by the
            // mtime just read (this node's own uses since are stamped too,
            // at most `stamp_interval` late).
            // (Only evictable blocks are in the LRU; place_by_mtime skips the rest.)
            // Only mtimes read by this pass (a skipped directory's are old);
            // they become known ones (eviction re-ranks a victim only for a
            // newer one: `Core::stamped_elsewhere`, which also catches the
            // stamps in skipped directories).
            core.accounts().place_by_known(&w.seen, core.future_cap());
        } else if !placed.is_empty() {
            core.accounts().place_by_mtime(&placed, seen);
        }
        for (key, path) in &w.resize {
            let Some(size) = stat_beneath(core, *key, path) else { continue };
            if core.accounts().resized(*key, size) {
                r.resized += 1;
            }
        }
        for (key, path, block) in &w.restore {
            if stat_beneath(core, *key, path).is_some() && core.accounts().restore_path(*key, path.clone(), *block) {
                r.restored += 1;
            }
        }
        if let Some(cutoff) = cutoff {
            for (key, path) in &w.stale {
                if let Some(n) = remove_stale(core, *key, path, cutoff) {
                    r.stale_removed += 1;
                    r.stale_bytes += n;
                }
            }
        }
        if r.changed() {
            core.maybe_wake_evictor();
        }
        // Counted here, not by the thread: the shared tier's sweeper waits
        // for a pass to adopt what a left node listed (`fs::shared::orphans`).
        Stats::add(&core.stats().reconciles, 1);
        r
    }

    /// Drops `key` (not seen by the walk) if its file is really gone.
    /// Returns the bytes dropped, or None when it was kept.
    fn drop_if_gone(&self, core: &Core, key: FileKey, missed_now: &mut HashSet<FileKey>) -> Option<u64> {
        let path = core.accounts().unused_path(&key)?;
        let Some(rel) = path else {
            // No name to check: gone if the kernel's fd says so, or if two
            // passes in a row did not see it.
            let gone = match core.inode_of_key(&key) {
                Some(i) => sys::fstat(i.fd()).is_ok_and(|st| st.st_nlink == 0),
                None => self.missed.contains(&key),
            };
            if !gone {
                missed_now.insert(key);
                return None;
            }
            return core.accounts().drop_unused_at(key, None);
        };
        // Gone: no such name (or directory), another file under the name, or
        // a symlink swapped in for a directory on the way (du no longer
        // reaches it either). Any other error (EACCES …) keeps the entry.
        let gone = |e: Errno| [libc::ENOENT, libc::ENOTDIR, libc::ELOOP, libc::EXDEV].contains(&e.code());
        let (Some(name), Some(dir_rel)) = (rel.file_name(), rel.parent()) else { return None };
        let c = CString::new(name.as_bytes()).ok()?;
        let dir = match sys::open_beneath(core.root().fd(), dir_rel, libc::O_PATH | libc::O_DIRECTORY) {
            Ok(d) => d,
            Err(e) if gone(e) => return core.accounts().drop_unused_at(key, Some(&rel)),
            Err(_) => return None,
        };
        let dkey = key_of(&sys::fstat(dir.as_fd()).ok()?);
        let _g = core.lock_dirs(&[dkey]);
        let dropped = match sys::fstatat(dir.as_fd(), &c) {
            Ok(st) if key_of(&st) == key => None,
            Ok(_) => core.accounts().drop_unused_at(key, Some(&rel)),
            Err(e) if gone(e) => core.accounts().drop_unused_at(key, Some(&rel)),
            Err(_) => None,
        };
        if dropped.is_some() {
            // The kernel may still cache the name (attr_timeout).
            invalidate(core, dkey, &rel);
        }
        dropped
    }

    /// Walks BACKING ([`super::walk`]), classifying every object against
    /// the ledger, one chunk of a directory per ledger lock.
    /// In shared mode only the directories [`super::dircache`] does not
    /// find unchanged are read.
    fn walk(&mut self, core: &Core, cutoff: Option<i128>) -> Walk {
        let mut w = Walk::default();
        let root = core.root();
        if let Ok(st) = sys::fstat(root.fd()) {
            classify(&self.tmp, core, &mut w, cutoff, vec![(st, PathBuf::new())]);
        }
        // The walk's three callbacks share the directory cache and the findings.
        let shared = core.shared();
        let state = std::cell::RefCell::new((&mut w, &mut self.dirs));
        let tmp = &self.tmp;
        let unreadable = super::walk::walk_changed(
            root.fd(),
            |rel, st| {
                let (w, dirs) = &mut *state.borrow_mut();
                if shared {
                    dirs.enter(rel, st, &mut w.kept)
                } else {
                    dirs.read += 1;
                    None
                }
            },
            |_| state.borrow_mut().1.failed(),
            |chunk| {
                let mut objs = Vec::with_capacity(chunk.names.len());
                for n in chunk.names {
                    let Ok(c) = CString::new(n.as_slice()) else { continue };
                    let Ok(st) = sys::fstatat(chunk.dir, &c) else { continue };
                    objs.push((st, chunk.rel.join(OsStr::from_bytes(n))));
                }
                let (w, dirs) = &mut *state.borrow_mut();
                if shared {
                    for (st, path) in &objs {
                        dirs.entry(key_of(st), mtime_ns(st), path, st.st_mode & libc::S_IFMT == libc::S_IFDIR);
                    }
                }
                classify(tmp, core, w, cutoff, objs);
                true
            },
        );
        w.unreadable = unreadable;
        w
    }
}

/// Classifies what the walk read (`objs`: each object's stat and path
/// relative to BACKING) against the ledger into `w`.
fn classify(tmp: &GlobSet, core: &Core, w: &mut Walk, cutoff: Option<i128>, objs: Vec<(libc::stat, PathBuf)>) {
    let walked: Vec<(FileKey, u64)> = objs.iter().map(|(st, _)| (key_of(st), sys::allocated(st))).collect();
    let known = core.accounts().compare_walked(&walked);
    for ((st, path), known) in objs.into_iter().zip(known) {
        w.objects += 1;
        let (key, mtime) = (key_of(&st), mtime_ns(&st));
        let fmt = st.st_mode & libc::S_IFMT;
        let name = path.file_name().unwrap_or_default();
        let block = fmt == libc::S_IFREG && core.is_block_name(name);
        w.seen.push((key, mtime));
        match known {
            Known::New => w.new.push(Found { key, mtime, block, dir: fmt == libc::S_IFDIR, path: path.clone() }),
            Known::Counted { resized, pathless, block: was_block } => {
                if resized {
                    w.resize.push((key, path.clone()));
                }
                // Only block files and directories keep a path (as the
                // start-up index gives them): a block's lost by a rename
                // behind the daemon, or a file now or formerly named as a
                // block, is a fix; another file's missing path is no error.
                let keeps_path = block || was_block || fmt == libc::S_IFDIR;
                if pathless && keeps_path && !path.as_os_str().is_empty() {
                    w.restore.push((key, path.clone(), block));
                }
            }
        }
        let stale = cutoff.is_some_and(|c| changed_ns(&st) < c);
        if stale && fmt == libc::S_IFREG && !block && st.st_nlink == 1 && tmp.is_match(Path::new(name)) {
            w.stale.push((key, path));
        }
    }
}

/// The allocated size of `rel` if it (resolved beneath BACKING, no symlink
/// followed) is still the object `key`.
fn stat_beneath(core: &Core, key: FileKey, rel: &Path) -> Option<u64> {
    let fd = sys::open_beneath(core.root().fd(), rel, libc::O_PATH).ok()?;
    let st = sys::fstat(fd.as_fd()).ok()?;
    (key_of(&st) == key).then(|| sys::allocated(&st))
}

/// Like [`stat_beneath`], under the stripe of `rel`'s directory, so the
/// answer holds against a concurrent unlink or rename through the mount.
/// Returns the allocated size and the directory's key.
fn verify(core: &Core, key: FileKey, rel: &Path) -> Option<(u64, FileKey)> {
    if rel.as_os_str().is_empty() {
        return stat_beneath(core, key, rel).map(|n| (n, key));
    }
    let p = core.parent_of(rel)?;
    let _g = core.lock_dirs(&[p.key]);
    let st = sys::fstatat(p.dir.as_fd(), &p.c).ok()?;
    (key_of(&st) == key).then(|| (sys::allocated(&st), p.key))
}

/// Asks the kernel to drop its cached entry for `rel`'s name, if it holds
/// the directory `dkey`.
fn invalidate(core: &Core, dkey: FileKey, rel: &Path) {
    if let Some(name) = rel.file_name() {
        core.invalidate_entry(&dkey, name);
    }
}

/// Removes the stale temporary `rel` with eviction's protocol (see the
/// module docs). Returns the bytes freed, or None when it was kept (renamed,
/// replaced, touched, opened, or could not be removed).
fn remove_stale(core: &Core, key: FileKey, rel: &Path, cutoff: i128) -> Option<u64> {
    let check = |st: Result<&libc::stat, Errno>| {
        let st = st.map_err(|_| Kept::Missing)?;
        let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
        if key_of(st) != key || !regular || st.st_nlink != 1 || changed_ns(st) >= cutoff {
            return Err(Kept::Replaced);
        }
        Ok((key, Removal::Stale { size: sys::allocated(st) }))
    };
    match core.remove_verified(rel, check) {
        Ok(done) => {
            log::debug!("removed stale temporary {}", rel.display());
            Some(done.freed)
        }
        Err(Kept::Failed(e)) => {
            log::warn!("could not remove stale temporary {}: {e:?}; keeping it", rel.display());
            None
        }
        Err(_) => None,
    }
}

/// Shortest time between the end of one pass and a pass asked for by
/// [`crate::wake::Waker::request`] (a whole-tree walk; seconds per million files).
pub const REQUEST_MIN_GAP: Duration = Duration::from_secs(5);

/// The reconcile thread: one pass every `interval`, or sooner when asked
/// through `core.reconcile`, until stopped.
pub fn run(core: Arc<Core>, mut rec: Reconciler, interval: Duration) {
    // No pass has run yet: the first request is served at once.
    let mut gap = Duration::ZERO;
    while !core.reconcile_waker().sleep(interval, gap) {
        gap = REQUEST_MIN_GAP;
        let t0 = Instant::now();
        let r = rec.pass(&core);
        Stats::add(&core.stats().reconcile_fixes, r.adopted + r.dropped + r.resized + r.restored);
        Stats::add(&core.stats().stale_tmp_removed, r.stale_removed);
        Stats::add(&core.stats().reconcile_dirs_read, r.dirs_read);
        Stats::add(&core.stats().reconcile_dirs_skipped, r.dirs_skipped);
        let (usage, max_size) = core.accounts().usage_and_max();
        let msg = format!(
            "reconcile: {} objects in {:.3}s ({} directories read, {} unchanged skipped); adopted {} ({} bytes), dropped {} ({} bytes), resized {}, \
             renamed {}, stale temporaries removed {} ({} bytes), unreadable dirs {}; usage now {} of {}",
            r.objects,
            t0.elapsed().as_secs_f64(),
            r.dirs_read,
            r.dirs_skipped,
            r.adopted,
            r.adopted_bytes,
            r.dropped,
            r.dropped_bytes,
            r.resized,
            r.restored,
            r.stale_removed,
            r.stale_bytes,
            r.unreadable,
            usage,
            max_size,
        );
        if r.changed() {
            log::info!("{msg}");
        } else {
            log::debug!("{msg}");
        }
    }
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
