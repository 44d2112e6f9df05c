//! Inline eviction (a `Core` method; the background sweeps that call it live
//! in `crate::workers::evictor`): choose the least recently used block under the ledger lock,
//! verify and unlink it under its directory's stripe, commit, invalidate.
//!
//! One victim, step by step (the race the seed design's reviewer found, a
//! store replacing the file between a snapshot of protected keys and the
//! unlink, cannot happen: the check and the unlink are one step with respect
//! to open, create and rename through the mount):
//! 1. ledger: pop the LRU tail (never a file with an open handle: those are
//!    not in the LRU);
//! 2. open its directory beneath BACKING without following symlinks, take the
//!    directory's stripe;
//! 3. `fstatat` the name: still the same `(dev, ino)` with one link?
//! 4. ledger: `begin_evict` (fails if an open pinned it meanwhile; an open
//!    that comes after sees `Evicting` and answers ENOENT);
//! 5. truncate to 0 (the kernel may still hold an fd-backed inode), `unlinkat`,
//!    ledger `finish_evict`; emptied directories are queued for removal;
//! 6. release the stripe, queue the kernel invalidation of the name.

use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use fuser::Errno;

use super::Core;
use crate::key::{FileKey, key_of};
use crate::stats::Stats;
use crate::sys;

/// How long an inline eviction waits for its invalidations to reach the kernel.
pub const INVAL_WAIT: Duration = Duration::from_millis(200);

impl Core {
    /// Evicts least recently used blocks until `bytes` are freed or none is
    /// left. Returns the bytes freed. With `wait`, waits (bounded) until the
    /// kernel has been told, so a stat right after says ENOENT. Namespace
    /// operations must not wait: their client holds a directory lock in the
    /// kernel that the invalidation may need.
    pub fn evict(&self, bytes: u64, wait: bool) -> u64 {
        let mut freed = 0;
        let mut ticket = None;
        while freed < bytes {
            let Some((key, path)) = self.ledger.lock().take_victim() else {
                break;
            };
            if let Some((n, t)) = self.evict_victim(key, &path) {
                freed += n;
                ticket = t.or(ticket);
            }
        }
        if let Some(t) = ticket.filter(|_| wait) {
            self.inval.wait(t, INVAL_WAIT);
        }
        freed
    }

    /// Steps 2–6 for one victim taken with `Ledger::take_victim`. Returns
    /// bytes freed and the invalidation ticket, or None when it was skipped.
    pub(crate) fn evict_victim(&self, key: FileKey, rel: &Path) -> Option<(u64, Option<u64>)> {
        let skip = |why: &str| {
            log::debug!("eviction skipped {}: {why}", rel.display());
            Stats::add(&self.stats.evict_skipped, 1);
            None
        };
        let skip_open = || {
            Stats::add(&self.stats.evict_skipped_open, 1);
            skip("opened meanwhile")
        };
        let Some(Parent { dir, key: dkey, dir_rel, name, c }) = self.parent_of(rel) else {
            self.ledger.lock().forget_path(key);
            return skip("directory gone, or not beneath BACKING");
        };
        let guard = self.dirlocks.lock(&[dkey]);
        match sys::fstatat(dir.as_fd(), &c) {
            Ok(st) if key_of(&st) == key && st.st_nlink == 1 => {}
            Ok(st) if key_of(&st) == key => {
                self.ledger.lock().park(key);
                return skip("has another hard link");
            }
            _ => {
                // Removed or replaced behind the daemon: its bytes may still
                // be counted. Keep the name (the reconcile pass verifies it
                // and drops the entry at once), stop choosing it, and ask for
                // that pass soon.
                self.ledger.lock().park(key);
                self.reconcile.request();
                return skip("name now holds another file");
            }
        }
        if !self.ledger.lock().begin_evict(key) {
            return skip_open();
        }
        // Truncate first: the kernel may still hold the inode (our O_PATH fd
        // lives until its FORGET), and an unlinked inode keeps its blocks while
        // any fd refers to it. Nothing through the mount has it open (checked
        // just above), so its bytes can go now and usage stays exact.
        if let Ok(fd) = sys::openat(dir.as_fd(), &c, libc::O_WRONLY, 0) {
            let _ = sys::ftruncate(std::os::fd::AsRawFd::as_raw_fd(&fd), 0);
        }
        let freed = match sys::unlinkat(dir.as_fd(), &c, 0) {
            Ok(()) => self.ledger.lock().finish_evict(key),
            Err(e) if e == Errno::ENOENT => {
                self.ledger.lock().finish_evict(key);
                return skip("already removed");
            }
            Err(e) => {
                self.ledger.lock().abort_evict(key);
                crate::warn_limited!("eviction could not remove {}: {e:?}; skipping it", rel.display());
                return skip("unlink failed");
            }
        };
        Stats::add(&self.stats.evictions, 1);
        Stats::add(&self.stats.evicted_bytes, freed);
        drop(guard);
        self.empty_dirs.lock().push((dir_rel.to_path_buf(), 0));
        let last = self.inodes.ino_of(&dkey).map(|pino| self.inval.push(pino, name.to_os_string()));
        Some((freed, last))
    }

    /// Opens the directory holding `rel` (beneath BACKING, no symlink
    /// followed) and returns it with its identity and `rel`'s last name.
    /// None: `rel` has no name, or its directory is gone or not beneath BACKING.
    pub(crate) fn parent_of<'a>(&self, rel: &'a Path) -> Option<Parent<'a>> {
        let (name, dir_rel) = (rel.file_name()?, rel.parent()?);
        let dir = sys::open_beneath(self.root().fd(), dir_rel, libc::O_PATH | libc::O_DIRECTORY).ok()?;
        let key = key_of(&sys::fstat(dir.as_fd()).ok()?);
        let c = CString::new(name.as_bytes()).ok()?;
        Some(Parent { dir, key, dir_rel, name, c })
    }

    /// Removes directories that eviction left empty, up to but not including
    /// BACKING. A directory is removed only once the kernel has forgotten its
    /// inode (no client has it as a cwd, an open directory or a resolved
    /// parent of an operation in flight), checked under its parent's stripe,
    /// which lookup also takes: so a client that just resolved it (say
    /// between the `mkdir -p` of its parent and the create inside it) keeps
    /// it. Until then the kernel is asked to drop its entry, and it is retried
    /// on later passes (for a minute at most).
    pub fn reap_empty_dirs(&self) {
        let batch = std::mem::take(&mut *self.empty_dirs.lock());
        let mut retry = Vec::new();
        for (rel, tries) in batch {
            let Some(Parent { dir: parent, key: pkey, dir_rel: parent_rel, name, c }) = self.parent_of(&rel) else {
                continue;
            };
            let g = self.dirlocks.lock(&[pkey]);
            let Ok(st) = sys::fstatat(parent.as_fd(), &c) else { continue };
            if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_nlink > 2 {
                continue;
            }
            let dkey = key_of(&st);
            if self.inodes.ino_of(&dkey).is_some() {
                drop(g);
                if tries < 60 {
                    if let Some(pino) = self.inodes.ino_of(&pkey) {
                        self.inval.push(pino, name.to_os_string());
                    }
                    retry.push((rel.clone(), tries + 1));
                }
                continue;
            }
            self.ledger.lock().begin_remove_dir(dkey);
            if sys::unlinkat(parent.as_fd(), &c, libc::AT_REMOVEDIR).is_err() {
                self.ledger.lock().abort_evict(dkey);
            } else {
                self.ledger.lock().finish_evict(dkey);
                drop(g);
                if !parent_rel.as_os_str().is_empty() {
                    retry.push((parent_rel.to_path_buf(), 0));
                }
            }
        }
        retry.sort();
        retry.dedup_by(|a, b| a.0 == b.0);
        self.empty_dirs.lock().extend(retry);
    }
}

/// The directory of a path relative to BACKING, opened: see [`Core::parent_of`].
pub(crate) struct Parent<'a> {
    pub(crate) dir: std::os::fd::OwnedFd,
    pub(crate) key: FileKey,
    pub(crate) dir_rel: &'a Path,
    pub(crate) name: &'a std::ffi::OsStr,
    pub(crate) c: CString,
}

#[cfg(test)]
#[path = "evict_tests.rs"]
mod tests;
