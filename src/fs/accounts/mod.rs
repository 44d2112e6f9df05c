//! The one door to the ledger: [`Accounts`] owns the ledger (with its
//! policy, the one home of `max_size`) behind its mutex, and the condvar
//! that a RELEASE signals. Each request event is one method taking the lock
//! once, so a CREATE takes it twice (reserve, [`Accounts::created`]; twice
//! more for a passthrough writer's reservation and its headroom), an OPEN twice
//! ([`Accounts::pin`], [`Accounts::opened`]) and a RENAME twice
//! ([`Accounts::paths_in`], [`Accounts::renamed`]), at the root or below it,
//! and a WRITE that evicts one block inline six times
//! ([`Accounts::try_reserve`], [`Accounts::choose_victim`],
//! [`Accounts::begin_removal`], [`Accounts::finish_removal`],
//! [`Accounts::try_reserve`] again, [`Accounts::commit_write`]);
//! `accounts_tests.rs` counts them. The walks' events (start-up index,
//! reconcile, other nodes' removals) are in [`walks`], one lock per batch.
//! The raw [`Accounts::lock`] is left for the status snapshot and df.
//!
//! Lock order: the ledger mutex comes after the directory stripes and before
//! the leaf locks (see `crate::fs`); it is never held across a syscall.

use std::path::PathBuf;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::key::FileKey;
use crate::ledger::policy::Policy;
use crate::ledger::{Gone, Kind, Ledger, Refused};

pub mod grant;
pub mod removal;
pub mod walks;

/// The ledger and its release signal. See the module docs.
pub struct Accounts {
    ledger: Mutex<Ledger>,
    /// Signalled (with the ledger lock) when an open handle is released.
    released: Condvar,
    /// Lock acquisitions so far (tests count them per operation).
    #[cfg(test)]
    acquired: std::sync::atomic::AtomicU64,
    /// Waits for a RELEASE begun so far (tests force the interleaving on it).
    #[cfg(test)]
    waits: std::sync::atomic::AtomicU64,
}

/// A file a CREATE made or opened, for [`Accounts::created`].
pub struct Created {
    /// The file's backing identity.
    pub key: FileKey,
    /// True when the CREATE made it (false: it existed, no O_EXCL).
    pub fresh: bool,
    /// Allocated bytes of the file.
    pub size: u64,
    /// The name matches the block pattern.
    pub block: bool,
    /// Path relative to BACKING, when known; else it is the parent's (from
    /// the ledger, `dir`) joined with `name`.
    pub path: Option<PathBuf>,
    /// The file's name in its parent directory.
    pub name: std::ffi::OsString,
    /// The parent directory's key and its allocated bytes after the create.
    pub dir: Option<(FileKey, u64)>,
    /// Bytes of the reservation the CREATE held, returned here.
    pub reserved: u64,
}

/// A name that a removal or a RENAME takes away.
#[derive(Debug)]
pub enum NameGone {
    /// The object's last name (or a directory): it leaves usage (at its last
    /// RELEASE if open).
    Unlinked(FileKey),
    /// One of several hard links, by its path relative to BACKING.
    Name(FileKey, PathBuf),
}

impl NameGone {
    fn apply(self, l: &mut Ledger) {
        match self {
            NameGone::Unlinked(key) => l.mark_unlinked(key),
            NameGone::Name(key, path) => l.name_removed(key, &path),
        }
    }
}

/// An object a RENAME moved, for [`Accounts::renamed`].
#[derive(Debug)]
pub struct Moved {
    /// Its backing identity.
    pub key: FileKey,
    /// Allocated bytes.
    pub size: u64,
    /// The new name makes it a block file.
    pub block: bool,
    /// What kind of object it is.
    pub kind: Kind,
    /// New and old paths relative to BACKING, when known.
    pub to: Option<PathBuf>,
    /// See `to`.
    pub from: Option<PathBuf>,
}

/// What one RENAME changes in the ledger, for [`Accounts::renamed`].
#[derive(Debug, Default)]
pub struct Renamed {
    /// The target it replaced, unless exchanged.
    pub replaced: Option<NameGone>,
    /// The source, and with RENAME_EXCHANGE the target too.
    pub moved: Vec<Moved>,
    /// The directories involved and their allocated bytes after it.
    pub dirs: Vec<(FileKey, u64)>,
}

/// How one [`Accounts::try_reserve`] went.
#[derive(Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The bytes are reserved.
    Reserved,
    /// Short of room with handles open: it waited for a RELEASE; try again.
    WaitedForRelease,
    /// The start-up index must finish before the answer is known.
    Indexing,
    /// Shared budget: the node's grant lacks `short` bytes (take more, or
    /// evict to lower the node's net).
    NeedGrant {
        /// Bytes missing within the grant.
        short: u64,
    },
    /// Short by `short` bytes; eviction could free `evictable` now.
    Short {
        /// Bytes missing below `max_size`.
        short: u64,
        /// Bytes of evictable block files.
        evictable: u64,
    },
}

/// What a recorded event asks of the caller.
#[derive(Debug, Default)]
pub struct After {
    /// A recency stamp due for this path.
    pub stamp: Option<PathBuf>,
    /// Usage is above the high watermark: wake the background evictor.
    pub wake: bool,
    /// The file is a block file.
    pub block: bool,
    /// The object's path could not be had from the ledger (a parent it has
    /// no path for): the caller finds it otherwise.
    pub unnamed: bool,
}

impl Accounts {
    /// Accounts over `ledger`.
    pub fn new(ledger: Ledger) -> Self {
        Accounts {
            ledger: Mutex::new(ledger),
            released: Condvar::new(),
            #[cfg(test)]
            acquired: Default::default(),
            #[cfg(test)]
            waits: Default::default(),
        }
    }

    /// Every acquisition of the ledger mutex goes through here.
    fn guard(&self) -> MutexGuard<'_, Ledger> {
        #[cfg(test)]
        self.acquired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.ledger.lock()
    }

    /// Ledger lock acquisitions since the start.
    #[cfg(test)]
    pub fn acquisitions(&self) -> u64 {
        self.acquired.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The raw ledger, for the multi-step protocols and the status snapshot
    /// only: the files allowed to take it are listed, with why, in
    /// `crate::layout_tests` (`RAW_LEDGER_LOCK`); everything else goes
    /// through an event method. Hold it briefly and never across a syscall.
    pub fn lock(&self) -> MutexGuard<'_, Ledger> {
        self.guard()
    }

    /// One attempt to reserve `bytes` of budget (see `Core::reserve`, which
    /// evicts and retries). `wait`: the caller may wait for the start-up
    /// index (when it may not, the usage indexed so far is checked instead).
    /// `release_wait`: when the room is short by more than eviction could
    /// free while handles are open, wait at most this long for a RELEASE,
    /// the ledger lock given up meanwhile.
    pub fn try_reserve(&self, bytes: u64, wait: bool, release_wait: Option<Duration>) -> Attempt {
        let mut l = self.guard();
        let short = l.grant_short(bytes);
        if short > 0 {
            return Attempt::NeedGrant { short };
        }
        let r = match l.reserve_checked(bytes) {
            Err(Refused::Indexing) if !wait => l.reserve(bytes).map_err(|s| Refused::Short(s.0)),
            r => r,
        };
        match r {
            Ok(()) => Attempt::Reserved,
            Err(Refused::Indexing) => Attempt::Indexing,
            Err(Refused::Short(short)) => {
                let evictable = l.evictable_bytes();
                match release_wait {
                    Some(timeout) if short > evictable && l.counts().open_handles > 0 => {
                        #[cfg(test)]
                        self.waits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        self.released.wait_for(&mut l, timeout);
                        Attempt::WaitedForRelease
                    }
                    _ => Attempt::Short { short, evictable },
                }
            }
        }
    }

    /// Waits for a RELEASE begun so far, counted with the ledger lock held:
    /// once it moves, the waiter gives the lock up only by waiting.
    #[cfg(test)]
    pub fn waits(&self) -> u64 {
        self.waits.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The budget and watermarks now (a copy: `max_size` may change live).
    pub fn policy(&self) -> Policy {
        self.guard().policy()
    }

    /// Changes the budget to `max_size` bytes; returns the old one.
    pub fn set_max_size(&self, max_size: u64) -> u64 {
        self.guard().set_max_size(max_size)
    }

    /// Whether usage is above the high watermark.
    pub fn should_wake(&self) -> bool {
        self.guard().should_wake()
    }

    /// Bytes the background evictor should free to reach the low watermark.
    pub fn excess(&self) -> u64 {
        self.guard().excess()
    }

    /// Bytes usage (with reservations) stands above `max_size` itself: what
    /// the evictor frees when the low watermark can't be reached (non-block
    /// usage alone above the high one, see `fs/unevictable.rs`).
    pub fn over_max(&self) -> u64 {
        let l = self.guard();
        l.committed().saturating_sub(l.policy().max_size)
    }

    /// `(headroom, reserved)`: the bytes a write could still get beside the
    /// reservations held (the room below `max_size` plus what eviction can
    /// free now), and the bytes those reservations hold.
    pub fn headroom(&self) -> (u64, u64) {
        let l = self.guard();
        let room = l.policy().max_size.saturating_sub(l.committed()) + l.evictable_bytes();
        (room, l.committed() - l.usage())
    }

    /// Holds `bytes` a previous daemon's passthrough writer may still add,
    /// room or not (see [`Ledger::hold`]). Returns whether usage (bytes on
    /// disk, reservations not counted: see [`Ledger::should_wake`]) is above
    /// the high watermark (wake the evictor).
    pub fn hold(&self, bytes: u64) -> bool {
        let mut l = self.guard();
        l.hold(bytes);
        l.should_wake()
    }

    /// Returns a reservation of `bytes`.
    pub fn release(&self, bytes: u64) {
        self.guard().release(bytes);
    }

    /// A write or fallocate finished: `key` now allocates `size` bytes and
    /// its reservation of `reserved` bytes is returned, atomically. Returns
    /// whether to wake the background evictor.
    pub fn commit(&self, key: FileKey, size: u64, reserved: u64) -> bool {
        let mut l = self.guard();
        l.set_size(key, size);
        l.release(reserved);
        l.should_wake()
    }

    /// A WRITE finished: as [`Accounts::commit`], but the recorded size only
    /// grows (a write never frees blocks). Several WRITEs of one file may be
    /// in flight at once (a client's O_DIRECT write larger than max_write is
    /// sent as concurrent requests, FUSE_ASYNC_DIO); each measured the file
    /// after its own write landed, but they may commit in another order, and
    /// the later commit of an earlier, smaller measurement must not undo the
    /// larger one.
    pub fn commit_write(&self, key: FileKey, size: u64, reserved: u64) -> bool {
        let mut l = self.guard();
        let size = l.get(&key).map_or(size, |e| e.size.max(size));
        l.set_size(key, size);
        l.release(reserved);
        l.should_wake()
    }

    /// Records a use of `key` at `now` (seconds); returns the path to stamp
    /// when a stamp is due (`interval` seconds apart).
    pub fn touch(&self, key: FileKey, now: u32, interval: u32) -> Option<PathBuf> {
        self.guard().touch(key, now, interval)
    }

    /// Sets the allocated bytes of `key`.
    pub fn set_size(&self, key: FileKey, size: u64) {
        self.guard().set_size(key, size);
    }

    /// OPEN, first step: pins `key` against eviction. Returns whether the
    /// entry was a placeholder (unknown until now). Errors: [`Gone`] when
    /// eviction is removing it.
    pub fn pin(&self, key: FileKey) -> Result<bool, Gone> {
        self.guard().pin(key)
    }

    /// OPEN failed after [`Accounts::pin`]: unpins, and forgets a placeholder
    /// whose file turned out to be unlinked.
    pub fn open_failed(&self, key: FileKey, placeholder: bool) {
        let mut l = self.guard();
        if placeholder {
            l.mark_unlinked(key);
        }
        l.unpin(key);
    }

    /// OPEN, second step: the file allocates `size` bytes and was used at
    /// `now`. Returns whether it is a block file and any stamp due.
    pub fn opened(&self, key: FileKey, size: u64, now: u32, interval: u32) -> After {
        let mut l = self.guard();
        l.set_size(key, size);
        let block = l.get(&key).is_some_and(|e| e.block);
        let stamp = l.touch(key, now, interval);
        After { stamp, block, ..Default::default() }
    }

    /// CREATE: records the file (new or found), pins it for the handle, makes
    /// it most recent, refreshes the directory's size and returns the
    /// reservation, in one lock. Errors: [`Gone`] when eviction is removing
    /// it (nothing is recorded then but the returned reservation).
    pub fn created(&self, c: Created, now: u32, interval: u32) -> Result<After, Gone> {
        let mut l = self.guard();
        l.release(c.reserved);
        if c.fresh {
            l.fresh(c.key);
        }
        l.pin(c.key)?;
        let path = c.path.or_else(|| Some(l.get(&c.dir?.0)?.path.as_deref()?.join(&c.name)));
        let unnamed = path.is_none();
        l.upsert(c.key, c.size, c.block, path, now);
        if c.fresh {
            // Created here: this node's part of a shared tier's usage.
            l.mark_local(c.key);
        }
        let stamp = l.touch(c.key, now, interval);
        if let Some((dkey, dsize)) = c.dir {
            l.set_size(dkey, dsize);
            if c.fresh {
                l.files_made_in(dkey, 1);
            }
        }
        Ok(After { stamp, wake: l.should_wake(), block: c.block, unnamed })
    }

    /// A new object from a namespace operation (mkdir, mknod, symlink, or
    /// one first seen by a lookup): records it with its kind. Returns whether
    /// it was unknown (and then whether to wake the evictor).
    pub fn found(&self, key: FileKey, size: u64, block: bool, path: Option<PathBuf>, kind: Kind, now: u32) -> bool {
        let mut l = self.guard();
        l.upsert(key, size, block, path, now);
        l.set_kind(key, kind);
        l.should_wake()
    }

    /// The paths relative to BACKING of the names `name` in the
    /// directories `dirs` (key, and whether it is BACKING's root), in one
    /// lock: `None` for a directory the ledger has no path for.
    pub fn paths_in(&self, dirs: &[(FileKey, bool, &std::ffi::OsStr)]) -> Vec<Option<PathBuf>> {
        let l = self.guard();
        dirs.iter()
            .map(|&(key, root, name)| {
                if root {
                    Some(PathBuf::from(name))
                } else {
                    l.get(&key).and_then(|e| e.path.as_deref().map(|p| p.join(name)))
                }
            })
            .collect()
    }

    /// RENAME, in one lock: the replaced object loses its name (`replaced`),
    /// each moved object takes its new one (a directory's subtree follows)
    /// and becomes most recent, and the directories get their new sizes.
    /// Returns the stamps due (key, path).
    pub fn renamed(&self, r: Renamed, now: u32, interval: u32) -> Vec<(FileKey, PathBuf)> {
        let mut l = self.guard();
        if let Some(g) = r.replaced {
            g.apply(&mut l);
        }
        let mut stamps = Vec::new();
        for m in r.moved {
            if let (Some(f), Some(t), Kind::Dir) = (&m.from, &m.to, m.kind) {
                l.rename_prefix(f, t);
            }
            l.upsert(m.key, m.size, m.block, m.to, now);
            l.set_kind(m.key, m.kind);
            if let Some(p) = l.touch(m.key, now, interval) {
                stamps.push((m.key, p));
            }
        }
        for (key, size) in r.dirs {
            l.set_size(key, size);
        }
        stamps
    }

    /// The path relative to BACKING the ledger knows for `key`.
    pub fn path_of(&self, key: FileKey) -> Option<PathBuf> {
        self.guard().get(&key).and_then(|e| e.path.as_deref().map(PathBuf::from))
    }

    /// Whether the ledger has an entry for `key`.
    pub fn knows(&self, key: FileKey) -> bool {
        self.guard().get(&key).is_some()
    }

    /// Files a CREATE made directly in the directory `key` (flat-store
    /// detection, see `super::reap`).
    pub fn files_made_in_dir(&self, key: FileKey) -> u8 {
        self.guard().get(&key).map_or(0, |e| e.files_made)
    }

    /// An object is about to be recorded as made through the mount (MKDIR,
    /// MKNOD, SYMLINK): any entry under its key is of a removed object.
    pub fn made(&self, key: FileKey) {
        self.guard().fresh(key);
    }

    /// An object made through the mount has been recorded (after
    /// [`Accounts::made`] and its lookup's [`Accounts::found`]): this node's
    /// own, so its bytes count in its net of a shared budget (JuiceFS counts
    /// 4 KiB per directory: two vLLM hash directories per block are about
    /// 2 % of the tree).
    pub fn made_here(&self, key: FileKey) {
        self.guard().mark_local(key);
    }

    /// A directory the daemon made itself (recreating a removed path,
    /// `super::recreate`), of `size` allocated bytes, at `now`.
    pub fn made_dir(&self, key: FileKey, size: u64, now: u32) {
        let mut l = self.guard();
        l.fresh(key);
        l.upsert(key, size, false, None, now);
        l.set_kind(key, Kind::Dir);
        // Made here: this node's part of a shared tier's usage.
        l.mark_local(key);
    }

    /// The path of a created file whose parent the ledger had no path for
    /// (see [`After::unnamed`]).
    pub fn named(&self, key: FileKey, size: u64, block: bool, path: PathBuf, now: u32) {
        self.guard().upsert(key, size, block, Some(path), now);
    }

    /// LINK of `key` (`size` allocated bytes) to a block-file name at
    /// `path`: a block keeps the name eviction knows (a second link removed
    /// later must not leave it nameless); a file that becomes a block by
    /// this link (vLLM's link(tmp, dest)) takes the new name. The block is
    /// used at `now`; returns the stamp due.
    pub fn linked_block(
        &self,
        key: FileKey,
        size: u64,
        path: Option<PathBuf>,
        now: u32,
        interval: u32,
    ) -> Option<PathBuf> {
        let mut l = self.guard();
        let named_block = l.get(&key).is_some_and(|e| e.block && e.path.is_some());
        l.upsert(key, size, true, if named_block { None } else { path }, now);
        l.touch(key, now, interval)
    }

    /// A removal took away `gone` (UNLINK, RMDIR, a replaced RENAME target).
    pub fn name_gone(&self, gone: NameGone) {
        gone.apply(&mut self.guard());
    }

    /// A directory removed through the mount (RMDIR) leaves the ledger.
    pub fn dir_removed(&self, key: FileKey) {
        self.guard().remove(key);
    }

    /// A directory removed behind the daemon and recreated elsewhere no
    /// longer counts.
    pub fn dir_dropped(&self, key: FileKey) {
        self.guard().drop_unused(key);
    }

    /// Shared tier: `keys` now carry the mtime `ns` (stamped, or written by
    /// this node), which eviction then knows for this node's own.
    pub fn know_mtimes(&self, keys: &[FileKey], ns: i64) {
        let mut l = self.guard();
        keys.iter().for_each(|k| l.know_mtime(*k, ns));
    }

    /// The start-up index is complete: usage is exact from now on.
    pub fn indexed(&self) {
        self.guard().indexed();
    }

    /// Block files used since their last mtime stamp, least recently used
    /// first: (key, path, seconds of the use).
    pub fn unstamped_uses(&self) -> Vec<(FileKey, PathBuf, u32)> {
        self.guard().unstamped_uses()
    }

    /// The paths of the `n` most recently used block files.
    pub fn recent_block_paths(&self, n: usize) -> Vec<PathBuf> {
        self.guard().recent_block_paths(n)
    }

    /// Whether the ledger counts block files under any of the top entries
    /// `names` of BACKING.
    pub fn counts_blocks_under(&self, names: &std::collections::HashSet<std::ffi::OsString>) -> bool {
        self.guard().counts_blocks_under(names)
    }

    /// Usage (bytes) and the ledger's counts, for a log line.
    pub fn usage_and_counts(&self) -> (u64, crate::ledger::LedgerCounts) {
        let l = self.guard();
        (l.usage(), l.counts())
    }

    /// The ledger's counts (objects, block files, open handles …).
    pub fn counts(&self) -> crate::ledger::LedgerCounts {
        self.guard().counts()
    }

    /// Bytes of usage not evictable now (non-block, open or linked twice),
    /// reservations included.
    pub fn unevictable_bytes(&self) -> u64 {
        let l = self.guard();
        l.committed().saturating_sub(l.evictable_bytes())
    }

    /// Bytes of non-block files (a walk of the index: O(entries)).
    pub fn nonblock_bytes(&self) -> u64 {
        self.guard().nonblock_bytes()
    }

    /// RELEASE: unpins `key` and signals writes waiting for room. Returns
    /// whether to wake the background evictor.
    pub fn released(&self, key: FileKey) -> bool {
        let wake = {
            let mut l = self.guard();
            l.unpin(key);
            l.should_wake()
        };
        self.released.notify_all();
        wake
    }
}

#[cfg(test)]
#[path = "accounts_tests.rs"]
mod tests;
