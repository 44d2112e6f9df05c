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
//! 3. `fstatat` the name: still the same `(dev, ino)` with one link? In
//!    shared mode, an mtime newer than the newest one this node knows for it
//!    means another node used it since: it is re-ranked at that mtime instead
//!    (one LRU across nodes; `Core::stamped_elsewhere`);
//! 4. ledger: `begin_removal` (fails if an open pinned it meanwhile; an open
//!    that comes after sees `Evicting` and answers ENOENT);
//! 5. open it; in shared mode (`-o shared`) check it is still the chosen
//!    file and take `LOCK_EX | LOCK_NB` (another node's open holds
//!    `LOCK_SH`: then skip it, made most recent; see `fs::shared`);
//!    `unlinkat`, then truncate to 0 through the fd (the kernel may still hold
//!    an fd-backed inode; a daemon killed between the two leaves nothing
//!    under the name), ledger `finish_removal`; emptied directories are queued for removal;
//! 6. release the stripe, queue the kernel invalidation of the name.
//!
//! Steps 2–6 are [`Core::remove_verified`], the one removal protocol, which
//! stale temporaries and emptied directories use too. Eviction's step 3 is
//! its check, run under the stripe: a victim that vanished behind the daemon
//! has its bytes taken out there (`Core::vanished`), and the outcome
//! ([`Kept`]) says what the caller does next (re-rank, park, count as freed).

use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use fuser::Errno;

use super::Core;
use crate::key::{FileKey, key_of};
use crate::ledger::Removal;
use crate::stats::Stats;
use crate::sys;

/// How long an inline eviction waits for its invalidations to reach the kernel.
pub const INVAL_WAIT: Duration = Duration::from_millis(200);

/// Files created in one directory through the mount from which on eviction
/// never removes that directory once it is empty (see
/// [`Core::reap_empty_dirs`]): an engine's flat store. A fan-out leaf (vLLM's
/// `abc/de_g0/`, one of 2^20) holds a block or two.
pub const FLAT_STORE_FILES: u8 = 16;

/// Shared mode: how long a reservation that may not wait for the start-up
/// index (an entry operation: CREATE, MKDIR …, under the kernel's lock of
/// the parent) waits for it anyway when the budget record has no grant
/// left and nothing evictable is known yet, before ENOSPC. Right after an
/// upgrade the record still holds the old daemon's grant, and the new one
/// knows nothing of its own to evict until its index is done (about a
/// second on a tree of a few thousand blocks on JuiceFS).
pub const INDEX_WAIT: Duration = Duration::from_secs(2);

impl Core {
    /// Evicts least recently used blocks until `bytes` are freed or none is
    /// left. Returns the bytes freed. With `wait`, waits (bounded) until the
    /// kernel has been told, so a stat right after says ENOENT. Namespace
    /// operations must not wait: their client holds a directory lock in the
    /// kernel that the invalidation may need.
    pub fn evict(&self, bytes: u64, wait: bool) -> u64 {
        self.evict_from(bytes, wait, false)
    }

    /// [`Core::evict`] of blocks this node made only: what frees its grant
    /// of the shared budget (`super::shared::grants`).
    pub(crate) fn evict_own(&self, bytes: u64, wait: bool) -> u64 {
        self.evict_from(bytes, wait, true)
    }

    fn evict_from(&self, bytes: u64, wait: bool, own: bool) -> u64 {
        // A request's wait for inline eviction (the evictor forgets its own).
        let t0 = self.stats.latency.start();
        let freed = self.evict_untimed(bytes, wait, own);
        self.stats.latency.inline_since(t0);
        freed
    }

    fn evict_untimed(&self, bytes: u64, wait: bool, own: bool) -> u64 {
        let mut freed = 0;
        let mut ticket = None;
        // A victim another node holds open goes back to the LRU as most
        // recent (shared mode): meeting one again means every candidate left
        // was tried. One re-ranked at another node's newer mtime since it was
        // tried (its known mtime moved) is checked again: each re-rank needs
        // a newer stamp, so this ends.
        let mut tried = std::collections::HashMap::new();
        while freed < bytes {
            let Some((key, path, known)) = self.accounts.choose_victim(own) else { break };
            if tried.insert(key, known) == Some(known) {
                self.touch(key);
                break;
            }
            let t0 = self.stats.latency.start();
            let victim = self.evict_victim(key, &path);
            self.stats.latency.victim_since(t0);
            if let Some((n, t)) = victim {
                freed += n;
                ticket = t.or(ticket);
            }
        }
        // Shared tier: tell the other nodes at once (fs/shared/journal.rs),
        // once what this freed of theirs is in the budget record's pool.
        if let Some(t) = &self.shared {
            self.grant_settle(t);
            self.journal_publish(t);
        }
        if let Some(t) = ticket.filter(|_| wait) {
            self.inval.wait(t, INVAL_WAIT);
        }
        freed
    }

    /// Steps 2–6 for one victim taken with `Ledger::take_victim`, through
    /// [`Core::remove_verified`]. Returns bytes freed and the invalidation
    /// ticket, or None when it was skipped.
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
        // Step 3, under the stripe.
        let check = |st: Result<&libc::stat, Errno>| match st {
            Ok(st) if key_of(st) == key && st.st_nlink == 1 => match self.stamped_elsewhere(key, st) {
                Some(mtime) => Err(Kept::Reranked(mtime)),
                None => Ok((key, Removal::Block)),
            },
            Ok(st) if key_of(st) == key => {
                self.accounts.park(key);
                Err(Kept::Linked)
            }
            Ok(_) => Err(self.vanished(key, rel)),
            Err(e) if vanished_errno(e) => Err(self.vanished(key, rel)),
            Err(_) => {
                self.accounts.park(key);
                Err(Kept::Unreadable)
            }
        };
        match self.remove_verified(rel, check) {
            Ok(done) => {
                // Shared tier: published to the other nodes (fs/shared/journal.rs).
                if let Some(t) = &self.shared {
                    t.journal_record(key.ino, rel);
                }
                Stats::add(&self.stats.evictions, 1);
                Stats::add(&self.stats.evicted_bytes, done.freed);
                if let Some(dir_rel) = rel.parent() {
                    self.queue_emptied(dir_rel.to_path_buf());
                }
                Some((done.freed, done.ticket))
            }
            // The directory is gone behind the daemon (rm -rf in BACKING):
            // so is the victim's name. Its bytes stop counting now.
            Err(Kept::DirGone) => match self.vanished(key, rel) {
                Kept::Vanished { freed, .. } => (freed > 0).then_some((freed, None)),
                _ => None,
            },
            Err(Kept::Vanished { freed, ticket }) => (freed > 0).then_some((freed, ticket)),
            Err(Kept::Moved) => None,
            Err(Kept::NoParent) => {
                self.accounts.forget_path(key);
                skip("directory unreadable, or not beneath BACKING")
            }
            Err(Kept::Reranked(mtime)) => {
                // One LRU across nodes: another node used it after every use
                // this node knew. Placed at that use, not evicted.
                self.accounts.rerank_at(key, mtime, self.future_cap());
                Stats::add(&self.stats.evict_reranked, 1);
                skip("used on another node since this node last knew its mtime")
            }
            Err(Kept::Linked) => skip("has another hard link"),
            Err(Kept::Unreadable) => skip("name unreadable"),
            Err(Kept::Busy) => skip_open(),
            Err(Kept::HeldElsewhere) => {
                self.touch(key);
                skip_open()
            }
            // Removed by another node, or by someone else between the check
            // and the unlink: its bytes are free, and pay for the write as a
            // vanished victim's do.
            Err(Kept::AlreadyGone(n)) => {
                log::debug!("eviction found {} removed elsewhere: {n} bytes stop counting", rel.display());
                (n > 0).then_some((n, None))
            }
            Err(Kept::Failed(e)) => {
                crate::warn_limited!("eviction could not remove {}: {e:?}; skipping it", rel.display());
                skip("unlink failed")
            }
            Err(Kept::Missing | Kept::Replaced | Kept::NotYet) => skip("replaced"),
        }
    }

    /// The one protocol by which the daemon removes an object of BACKING
    /// (eviction, stale temporaries, emptied directories): opens `rel`'s
    /// directory beneath BACKING (no symlink followed), takes its stripe,
    /// `fstatat`s the name and lets `check` decide on the result, still
    /// under the stripe (it returns the key and what is removed, or why to
    /// keep it; it may update the ledger for what it found); then ledger
    /// `begin_removal` (refused for an open file; an open after it answers
    /// ENOENT); for a block in shared mode, the opened file must still be the
    /// chosen one and take `LOCK_EX | LOCK_NB` (see `fs::shared`); truncate a
    /// `unlinkat` (`AT_REMOVEDIR` for a directory), truncate a file to 0
    /// through the fd (the kernel may still hold an fd-backed inode), ledger `finish_removal` or
    /// `abort_removal`; releases the stripe and queues the kernel invalidation
    /// of the name (also when `check` found the name [`Kept::Vanished`]).
    /// Errors: [`Kept`], why nothing was removed.
    pub(crate) fn remove_verified(
        &self,
        rel: &Path,
        check: impl FnOnce(Result<&libc::stat, Errno>) -> Result<(FileKey, Removal), Kept>,
    ) -> Result<Removed, Kept> {
        let Parent { dir, key: dkey, name, c, .. } = match self.parent_of_checked(rel) {
            Ok(p) => p,
            Err(Some(_)) => return Err(Kept::DirGone),
            Err(None) => return Err(Kept::NoParent),
        };
        let guard = self.dirlocks.lock(&[dkey]);
        let (key, what) = match check(sys::fstatat(dir.as_fd(), &c).as_ref().map_err(|e| *e)) {
            Ok(v) => v,
            Err(Kept::Vanished { freed, .. }) => {
                drop(guard);
                let ticket = self.invalidate_entry(&dkey, name);
                return Err(Kept::Vanished { freed, ticket });
            }
            Err(k) => return Err(k),
        };
        // Reserved before the ledger refuses opens: an OPEN refused from now
        // on answers ENOENT only once this name's invalidation is sent.
        let place = self.inval.reserve();
        // An emptied directory is removed even if the ledger does not know it.
        let (begun, files_made) = self.accounts.begin_removal_in(key, what, dkey);
        if !begun && what != Removal::Dir {
            return Err(Kept::Busy);
        }
        let (flags, victim) = if what == Removal::Dir {
            (libc::AT_REMOVEDIR, None)
        } else {
            // Nothing through the mount has it open (checked just above), so
            // its bytes can go now and usage stays exact.
            (0, Some(sys::openat(dir.as_fd(), &c, libc::O_WRONLY, 0)))
        };
        if self.shared.is_some() && what == Removal::Block {
            // Another node's opens hold LOCK_SH (fs::shared): take LOCK_EX on
            // the chosen file, or leave it, before truncating or unlinking.
            match victim.as_ref() {
                Some(Ok(fd))
                    if sys::fstat(fd.as_fd()).is_ok_and(|st| key_of(&st) == key) && self.lock_victim(fd.as_fd()) => {}
                Some(Err(e)) if *e == Errno::ENOENT => {
                    return Err(Kept::AlreadyGone(self.accounts.removal_found_gone(key)));
                }
                _ => {
                    self.accounts.abort_removal(key);
                    return Err(Kept::HeldElsewhere);
                }
            }
        }
        if rel.parent().is_some_and(|p| p.as_os_str().is_empty()) {
            // A top entry: the watch on BACKING must not take it for a removal behind the daemon.
            self.own_removals.note(name);
        }
        // Unlink first, then truncate through the fd still held: the kernel
        // may still hold an fd-backed inode, and the truncate frees its bytes
        // now. In this order a daemon killed between the two leaves no empty
        // file under a block's name (the inode goes with the daemon's fds).
        let freed = match sys::unlinkat(dir.as_fd(), &c, flags) {
            Ok(()) => {
                let top = rel.parent().is_some_and(|p| p.as_os_str().is_empty());
                if !top && files_made < FLAT_STORE_FILES {
                    // Under the stripe: the mtime this removal left (a crash
                    // before the reaper's rmdir leaves the mark behind). An
                    // engine's flat store is never reaped, so never marked.
                    super::emptied::mark(dir.as_fd());
                }
                crash_point();
                if let Some(Ok(fd)) = &victim {
                    let _ = sys::ftruncate(std::os::fd::AsRawFd::as_raw_fd(fd), 0);
                    crash_point();
                }
                self.accounts.finish_removal(key)
            }
            Err(e) if e == Errno::ENOENT && what != Removal::Dir => {
                return Err(Kept::AlreadyGone(self.accounts.removal_found_gone(key)));
            }
            Err(e) => {
                self.accounts.abort_removal(key);
                return Err(Kept::Failed(e));
            }
        };
        // The lock (shared mode) is held until the name is gone.
        drop(victim);
        drop(guard);
        let ticket = self.inodes.ino_of(&dkey).map(|pino| place.fill(pino, name.to_os_string()));
        Ok(Removed { freed, ticket })
    }

    /// Shared mode: the victim's mtime (ns since the epoch) when `st` shows
    /// one newer than every mtime this node knows the file had
    /// ([`crate::ledger::Ledger::known_mtime`]: read by a walk, written by its
    /// own stamp, bounded at its own RELEASE, or re-ranked at), or when it
    /// knows none. Then another node used it since (recency stamps are the
    /// only writes to a stored block's mtime) and this node's LRU does not
    /// rank that use yet. Exact: no time window, no walk's start time.
    /// Every node stamps in the sweeper's reference time
    /// ([`super::clock`]), so nodes' clocks need not agree: two uses more
    /// than [`super::clock::SKEW_BOUND`] apart are ordered whatever they
    /// say. While the known mtime is a stamp from the future, any other
    /// value is new ([`crate::ledger::Ledger::is_new_mtime`]). Always None
    /// without `-o shared`.
    pub(crate) fn stamped_elsewhere(&self, key: FileKey, st: &libc::stat) -> Option<i64> {
        if self.shared.is_none() {
            return None;
        }
        let mtime = st.st_mtime.saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec);
        self.accounts.is_new_mtime(key, mtime).then_some(mtime)
    }

    /// Opens the directory holding `rel` (beneath BACKING, no symlink
    /// followed) and returns it with its identity and `rel`'s last name.
    /// None: `rel` has no name, or its directory is gone or not beneath BACKING.
    pub(crate) fn parent_of<'a>(&self, rel: &'a Path) -> Option<Parent<'a>> {
        self.parent_of_checked(rel).ok()
    }

    /// [`Core::parent_of`], telling why not. Errors: `Some(errno)` when the
    /// directory is gone from BACKING (ENOENT); `None` for anything else (no
    /// name, a symlink swapped in on the way, EACCES, EMFILE …).
    pub(crate) fn parent_of_checked<'a>(&self, rel: &'a Path) -> Result<Parent<'a>, Option<Errno>> {
        let (Some(name), Some(dir_rel)) = (rel.file_name(), rel.parent()) else { return Err(None) };
        let dir = match sys::open_beneath(self.root().fd(), dir_rel, libc::O_PATH | libc::O_DIRECTORY) {
            Ok(d) => d,
            Err(e) if vanished_errno(e) => return Err(Some(e)),
            Err(_) => return Err(None),
        };
        let key = key_of(&sys::fstat(dir.as_fd()).map_err(|_| None)?);
        let c = CString::new(name.as_bytes()).map_err(|_| None)?;
        Ok(Parent { dir, key, name, c })
    }

    /// The victim `key` is no longer at `rel` in BACKING: deleted, replaced
    /// or moved behind the daemon (an operator's `rm -rf`, a reaper). Its
    /// bytes stop counting at once, so an inline eviction never removes a live
    /// block to pay for bytes already free; the caller counts them as freed
    /// ([`Kept::Vanished`], whose name [`Core::remove_verified`] then has the
    /// kernel forget). Kept instead ([`Kept::Moved`]: parked, and only its
    /// path forgotten) if the kernel's fd on it shows it still has a name
    /// elsewhere. Called under the stripe of the directory the name was
    /// checked in when there is one (so no create or rename through the mount
    /// can race the check). Asks for an early reconcile pass, which adopts the
    /// file again if it was only moved.
    fn vanished(&self, key: FileKey, rel: &Path) -> Kept {
        self.reconcile.request();
        Stats::add(&self.stats.evict_skipped, 1);
        let linked_elsewhere = self
            .inodes
            .ino_of(&key)
            .and_then(|ino| self.inodes.get(ino))
            .is_some_and(|i| sys::fstat(i.fd()).is_ok_and(|st| st.st_nlink > 0));
        if linked_elsewhere {
            log::debug!("eviction skipped {}: moved behind the daemon", rel.display());
            self.accounts.forget_path(key);
            return Kept::Moved;
        }
        // Only an entry still naming `rel` (a rename through the mount
        // after the choice gave it another name, under another stripe).
        let Some(freed) = self.accounts.vanished(key, rel) else { return Kept::Moved };
        // An index entry corrected, as a reconcile pass would have.
        Stats::add(&self.stats.reconcile_fixes, 1);
        log::debug!("eviction found {} gone behind the daemon: {freed} bytes stop counting", rel.display());
        Kept::Vanished { freed, ticket: None }
    }
}

/// Errnos meaning a name (or a directory on its path) is gone from BACKING:
/// ENOENT only. Not ENOTDIR/ELOOP/EXDEV: something else (a symlink) swapped
/// in for a directory usually means the directory was moved (`mv d d.moved;
/// ln -s … d`), and its files still take space that `du` counts
/// (tests/sh/posix/symlink-nofollow.sh); those keep counting until a reconcile
/// pass finds where they went.
pub(crate) fn vanished_errno(e: Errno) -> bool {
    e.code() == libc::ENOENT
}

/// Why [`Core::remove_verified`] kept an object (or, for the last few, why
/// eviction found nothing to remove).
#[derive(Debug)]
pub(crate) enum Kept {
    /// Its directory is unreadable, or not beneath BACKING.
    NoParent,
    /// Its directory is gone from BACKING (ENOENT on the way).
    DirGone,
    /// The name is gone.
    Missing,
    /// The name holds another object, or one not to remove (the check said).
    Replaced,
    /// It is open, or (for a directory) still known to the kernel.
    Busy,
    /// A directory the kernel forgot since the last reap pass: removed on
    /// the next one if it stays forgotten (`Core::reap_empty_dirs`).
    NotYet,
    /// Someone else removed it between the check and the unlink (or another
    /// node did, in shared mode): these bytes stopped counting.
    AlreadyGone(u64),
    /// The unlink failed with this errno.
    Failed(Errno),
    /// Eviction: the victim vanished behind the daemon and `freed` bytes
    /// stopped counting; `ticket` is the invalidation of its name.
    Vanished {
        /// Bytes taken out of usage.
        freed: u64,
        /// The kernel invalidation queued for the name, if the kernel holds its directory.
        ticket: Option<u64>,
    },
    /// Eviction: the victim was moved behind the daemon; it keeps counting.
    Moved,
    /// Eviction, shared mode: another node used it at this mtime (ns), after
    /// every use this node knew.
    Reranked(i64),
    /// Eviction: it has another hard link (parked).
    Linked,
    /// Eviction: its name could not be read (parked).
    Unreadable,
    /// Eviction, shared mode: another node holds it open (its flock).
    HeldElsewhere,
}

/// What [`Core::remove_verified`] removed.
pub(crate) struct Removed {
    /// Bytes returned to the budget.
    pub(crate) freed: u64,
    /// The kernel invalidation queued for the name, if the kernel holds its directory.
    pub(crate) ticket: Option<u64>,
}

/// The directory of a path relative to BACKING, opened: see [`Core::parent_of`].
pub(crate) struct Parent<'a> {
    pub(crate) dir: std::os::fd::OwnedFd,
    pub(crate) key: FileKey,
    pub(crate) name: &'a std::ffi::OsStr,
    pub(crate) c: CString,
}

#[cfg(test)]
#[path = "evict_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "shared/recency_tests.rs"]
mod shared_recency_tests;

/// A point where a daemon killed mid-removal leaves BACKING as it is now
/// (after each destructive syscall); tests look at BACKING there
/// (`testing::at_crash_points`). Nothing outside tests.
fn crash_point() {
    #[cfg(test)]
    crate::testing::crash_point();
}
