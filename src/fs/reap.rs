//! The reaper of emptied directories (a `Core` method, run by the evictor
//! thread about once a second): directories that eviction left empty are
//! removed once the kernel has forgotten them, up to but not including
//! BACKING; an engine's flat store (`FLAT_STORE_FILES`) stays; and a
//! directory that held directories (a fan-out level: vLLM's `abc/` above
//! its `abc/de_g0/` leaves) is kept while stores keep arriving, because the
//! next store into its subtree would make it again.
//!
//! What a kept directory saves: removing `abc/` makes the kernel drop its
//! entry (a FORGET), and the next store under it pays `makedirs`' LOOKUP of
//! the missing name, the LOOKUP the kernel sends again for the MKDIR itself
//! (`fuse_dentry_revalidate` never trusts a negative entry for LOOKUP_EXCL),
//! the MKDIR, and a GETATTR of the parent the MKDIR changed: 5 requests.
//! Under eviction a hash directory of the first level empties and fills
//! again every few seconds.
//!
//! What it costs: a kept directory counts in usage as any directory does
//! (4 KiB on ext4 and xfs), so at most `max_size / KEPT_SHARE` of the
//! budget, at 4 KiB a directory ([`kept_max`]), goes to kept directories;
//! beyond it the longest kept go first. Leaves (directories emptied by the
//! eviction of a file) are not kept: vLLM's 2^20 leaves hold a block or two
//! each and are rarely wanted again.

use std::cell::Cell;
use std::collections::HashSet;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fuser::Errno;
use parking_lot::Mutex;

use super::Core;
use super::evict::{FLAT_STORE_FILES, Kept};
use crate::key::{FileKey, key_of};
use crate::ledger::Removal;
use crate::stats::Op;
use crate::sys;

/// How long an emptied directory that held directories is kept at most
/// while stores arrive (seconds). At the bench trace's store rate a
/// first-level hash directory of vLLM's layout (one of 4,096) gets a store
/// every 4 to 10 s.
pub const KEEP_EMPTY: Duration = Duration::from_secs(30);

/// Stores are idle (kept directories go as any other) once no CREATE or
/// MKDIR request came for this long.
pub const STORES_IDLE: Duration = Duration::from_secs(2);

/// How long an emptied directory must go without a request (no LOOKUP,
/// no MKDIR answered EEXIST, no FORGET) and unheld by the kernel before the
/// reaper removes it. Passes run whenever the evictor wakes (tens a second
/// under stores), so the wait is timed, not counted in passes: a client
/// between its `os.makedirs` and its create inside (milliseconds, longer on
/// a loaded machine) keeps the directory.
pub const REAP_QUIET: Duration = Duration::from_secs(1);

/// The wait instead of [`REAP_QUIET`] while more emptied directories wait
/// than [`kept_max`] allows (4 KiB each, `max_size / KEPT_SHARE`): stores
/// that make a directory each (vLLM's leaves) under a small budget would
/// otherwise fill it with directories for a second and get ENOSPC. About
/// a pass of the evictor under stores.
pub const REAP_QUIET_PRESSED: Duration = Duration::from_millis(50);

/// Kept directories take at most `max_size / KEPT_SHARE` of the budget.
pub const KEPT_SHARE: u64 = 16;

/// Most directories kept at once, whatever the budget.
pub const MAX_KEPT: usize = 4096;

/// Bytes a directory is assumed to take when bounding the kept ones (what
/// ext4 and xfs give a small directory).
const DIR_BYTES: u64 = 4096;

/// How many emptied directories may be kept under a budget of `max_size`
/// bytes: `max_size / KEPT_SHARE` at 4 KiB each, at most [`MAX_KEPT`].
pub fn kept_max(max_size: u64) -> usize {
    ((max_size / KEPT_SHARE / DIR_BYTES) as usize).min(MAX_KEPT)
}

/// A directory eviction may have left empty, waiting in the reaper's queue.
#[derive(Clone, Debug)]
struct Emptied {
    /// Path relative to BACKING.
    rel: PathBuf,
    /// Passes that found the kernel holding it or a request to it since
    /// the pass before.
    tries: u32,
    /// The directory's identity, the count of requests to it
    /// ([`crate::fs::inode::InodeTable::watch`]) a pass found, and since
    /// when passes have found that count; None before the first pass.
    mark: Option<(FileKey, u64, Instant)>,
    /// Emptied by the removal of a subdirectory (a fan-out level).
    interior: bool,
    /// When it was (last) found emptied: an interior one is kept
    /// [`KEEP_EMPTY`] from then.
    since: Instant,
}

/// The reaper's state: the queue, and when a store last arrived.
#[derive(Default)]
pub struct EmptyDirs {
    queue: Mutex<Vec<Emptied>>,
    /// CREATE + MKDIR requests counted, and when that count last moved.
    stores: Mutex<(u64, Option<Instant>)>,
    /// [`REAP_QUIET`] (tests change it).
    quiet: Mutex<Option<Duration>>,
}

impl Core {
    /// Queues `rel` (relative to BACKING), whose last entry eviction just
    /// removed, for [`Core::reap_empty_dirs`].
    pub(crate) fn queue_emptied(&self, rel: PathBuf) {
        let e = Emptied { rel, tries: 0, mark: None, interior: false, since: Instant::now() };
        self.empty_dirs.queue.lock().push(e);
    }

    /// The directories waiting in the queue (relative to BACKING), for a
    /// hand-over to pass on (`fs::handed`).
    pub(crate) fn emptied_queued(&self) -> Vec<PathBuf> {
        self.empty_dirs.queue.lock().iter().map(|e| e.rel.clone()).collect()
    }

    /// Removes directories that eviction left empty, up to but not including
    /// BACKING. A directory is removed only when, at this pass and at
    /// passes for at least [`REAP_QUIET`] before it (passes run whenever the
    /// evictor wakes, at least once a second), the kernel held no reference
    /// to its inode (no client has it as a cwd, an open directory or a
    /// resolved parent of an operation in flight) and no request reached it
    /// in between: no LOOKUP of it, no MKDIR answered EEXIST for it, no
    /// reference taken and dropped again (FORGET), so nothing by its node id
    /// either ([`super::inode::InodeTable::watch`] counts them). The check
    /// and the rmdir are one step under its parent's stripe, which LOOKUP and
    /// MKDIR in the parent take too; FORGET counts in the lock that forgets
    /// the inode. Requests by node id need the kernel's reference: after an
    /// entry invalidation a process holding the directory (a cwd, an open
    /// directory, a path walk in flight) keeps it held, and after the FORGET
    /// nothing names it without a LOOKUP (READDIRPLUS and NFS export, which
    /// could hand one out otherwise, are not offered). So a client that saw
    /// the directory (an `os.makedirs` answered EEXIST, then its create
    /// inside) keeps it for at least [`REAP_QUIET`] after it last used it
    /// ([`REAP_QUIET_PRESSED`] while more emptied directories wait than a
    /// share of the budget holds); one that pauses longer between the two
    /// may find it gone, as nothing in the protocol tells. While the kernel holds it, the kernel is asked
    /// to drop its entry, and it is retried on later passes (60 at most that
    /// find it held or reached since the pass before). In a session recovered after a crash (`recover`), a node id
    /// the kernel kept but has not named since is unknown to the daemon; a
    /// CREATE or MKDIR by it in a reaped directory makes it again
    /// (`recreate.rs`). A directory in which
    /// `FLAT_STORE_FILES` or more files were created through the mount is
    /// kept: it is an engine's flat store, made once at start-up (SGLang's
    /// HiCacheFile `file_path`, LMCache's local disk path), whose next store
    /// would fail with ENOENT without it; engines with fan-out directories
    /// (vLLM, llm-d) make them before each store, a block or two in each.
    /// A directory emptied by the removal of its last subdirectory is left
    /// alone (neither checked nor its entry dropped) while stores arrive
    /// (a CREATE or MKDIR within [`STORES_IDLE`]), for [`KEEP_EMPTY`] at
    /// most and [`kept_max`] of them at once (see the module docs); then it
    /// goes as above.
    pub fn reap_empty_dirs(&self) {
        self.reap_pass(false);
    }

    /// Tests: the reaper's [`REAP_QUIET`] becomes `d`.
    #[cfg(test)]
    pub(crate) fn set_reap_quiet(&self, d: Duration) {
        *self.empty_dirs.quiet.lock() = Some(d);
    }

    /// After the FUSE session has ended (no client can reach the mount any
    /// more, so the kernel holds none of its directories): removes every
    /// directory still waiting in [`Core::reap_empty_dirs`]'s queue, kept
    /// ones included, and the parents that leaves empty, at once. Without it
    /// the last second's emptied directories stayed in BACKING for good:
    /// after a restart nothing tells them from a user's empty directories.
    pub fn reap_empty_dirs_at_unmount(&self) {
        // one pass per directory level (a pass queues the parents it empties)
        for _ in 0..64 {
            if self.empty_dirs.queue.lock().is_empty() {
                break;
            }
            self.reap_pass(true);
        }
    }

    /// Takes the crash mark ([`super::emptied`]) off the directory `rel`
    /// (relative to BACKING), under its own stripe.
    fn unmark_emptied(&self, rel: &Path) {
        let Ok(dir) = sys::open_beneath(self.root().fd(), rel, libc::O_PATH | libc::O_DIRECTORY) else { return };
        let Ok(st) = sys::fstat(dir.as_fd()) else { return };
        let _stripe = self.dirlocks.lock(&[key_of(&st)]);
        super::emptied::unmark(dir.as_fd());
    }

    /// Whether a CREATE or MKDIR request came within [`STORES_IDLE`]
    /// (measured at the reaper's passes).
    fn stores_arriving(&self) -> bool {
        let r = &self.stats.requests;
        let n = r.received(Op::Create) + r.received(Op::Mkdir);
        let mut s = self.empty_dirs.stores.lock();
        if s.0 != n {
            *s = (n, Some(Instant::now()));
        }
        s.1.is_some_and(|t| t.elapsed() < STORES_IDLE)
    }

    /// One pass over the queue; `unmounted`: the session has ended, so the
    /// kernel's hold, the pass of waiting and the keeping do not apply.
    fn reap_pass(&self, unmounted: bool) {
        let mut batch = std::mem::take(&mut *self.empty_dirs.queue.lock());
        let mut retry = Vec::new();
        if !unmounted && self.stores_arriving() {
            // The most recently emptied first, up to the bound.
            batch.sort_by_key(|e| std::cmp::Reverse(e.since));
            let mut room = kept_max(self.policy().max_size);
            batch.retain(|e| {
                let keep = e.interior && room > 0 && e.since.elapsed() < KEEP_EMPTY;
                if keep {
                    room -= 1;
                    retry.push(Emptied { mark: None, ..e.clone() });
                }
                !keep
            });
        }
        let mut quiet = self.empty_dirs.quiet.lock().unwrap_or(REAP_QUIET);
        if batch.len() > kept_max(self.policy().max_size) {
            quiet = quiet.min(REAP_QUIET_PRESSED);
        }
        for e in batch {
            // What the check found: the directory and its count of requests.
            let seen = Cell::new(None);
            let check = |st: Result<&libc::stat, Errno>| {
                let st = st.map_err(|_| Kept::Missing)?;
                if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_nlink > 2 {
                    return Err(Kept::Replaced);
                }
                let dkey = key_of(st);
                if self.accounts.files_made_in_dir(dkey) >= FLAT_STORE_FILES {
                    return Err(Kept::Replaced);
                }
                if unmounted {
                    return Ok((dkey, Removal::Dir));
                }
                let (held, n) = self.inodes.watch(dkey);
                seen.set(Some((dkey, n)));
                if held {
                    return Err(Kept::Busy);
                }
                match e.mark {
                    Some((k, m, at)) if (k, m) == (dkey, n) && at.elapsed() >= quiet => Ok((dkey, Removal::Dir)),
                    _ => Err(Kept::NotYet),
                }
            };
            let outcome = self.remove_verified(&e.rel, check);
            // The count found, dated by the first pass that found it.
            let same = |k: FileKey, n: u64| e.mark.filter(|&(k0, n0, _)| (k0, n0) == (k, n));
            let mark = seen.get().map(|(k, n)| same(k, n).unwrap_or((k, n, Instant::now())));
            let waiting = seen.get().is_some_and(|(k, n)| same(k, n).is_some());
            match outcome {
                Ok(_) => {
                    if let Some(parent_rel) = e.rel.parent().filter(|p| !p.as_os_str().is_empty()) {
                        let p = parent_rel.to_path_buf();
                        retry.push(Emptied { rel: p, tries: 0, mark: None, interior: true, since: Instant::now() });
                    }
                }
                // Not held and no request since the mark: removed once quiet.
                Err(Kept::NotYet) if waiting => retry.push(Emptied { mark, ..e }),
                // Not held, but a request came since the last pass.
                Err(Kept::NotYet) if e.tries < 60 => retry.push(Emptied { tries: e.tries + 1, mark, ..e }),
                Err(Kept::Busy) if e.tries < 60 => {
                    // The kernel still holds the directory: ask it to drop the entry.
                    if let Some(p) = self.parent_of(&e.rel) {
                        self.invalidate_entry(&p.key, p.name);
                    }
                    retry.push(Emptied { tries: e.tries + 1, mark, ..e });
                }
                // Given up while empty (held or reached for 60 passes): its
                // crash mark goes, under its own stripe (eviction's marks
                // are made under it), or a restart would reap it. A mark on
                // a directory that is not empty, a flat store or replaced
                // stays: the start-up hand-back looks only at empty
                // directories whose mtime has not moved since the mark.
                Err(Kept::NotYet) | Err(Kept::Busy) => self.unmark_emptied(&e.rel),
                Err(_) => {}
            }
        }
        // One entry per directory, either kind, dated by its latest
        // emptying: one that keeps filling and emptying stays kept.
        retry.sort_by(|a, b| a.rel.cmp(&b.rel).then(b.since.cmp(&a.since)));
        retry.dedup_by(|later, first| {
            let same = later.rel == first.rel;
            if same {
                first.interior |= later.interior;
            }
            same
        });
        // The counts of directories no entry waits on any more go.
        let mut queue = self.empty_dirs.queue.lock();
        queue.extend(retry);
        let waiting: HashSet<FileKey> = queue.iter().filter_map(|e| e.mark.map(|m| m.0)).collect();
        drop(queue);
        self.inodes.watch_only(|k| waiting.contains(k));
    }
}

#[cfg(test)]
#[path = "reap_tests.rs"]
mod tests;
