//! The filesystem core: passthrough operations on BACKING that return plain
//! values or an errno, testable without a mount. `crate::fuse` adapts them to
//! the kernel protocol.
//!
//! Lock order (outer to inner), written here where the locks live:
//! 1. directory stripes ([`dirlock::DirLocks`], ascending stripe index);
//! 2. the ledger mutex inside `Core::accounts` ([`accounts::Accounts`];
//!    bookkeeping only: never held across a syscall);
//! 3. leaf locks, never held while taking another: the inode table (with the
//!    reaper's request counts: LOOKUP's, MKDIR's and the reaper's check under
//!    the parent's stripe, FORGET's in the table lock), the handle tables, the
//!    invalidation queue, the stamp queue, the evictor's wake flag, the
//!    empty-directory list, the own-removal notes.

pub mod accounts;
pub mod clock;
mod config;
mod context;
mod control;
mod creds;
mod data;
mod direct;
pub mod dirlock;
pub mod emptied;
mod evict;
pub mod handed;
pub mod handles;
pub mod held;
pub mod inflight;
pub mod inode;
mod meta;
mod namespace;
pub mod own_removals;
mod owner;
pub mod pagecache;
mod parts;
pub mod passthrough;
pub mod privs;
mod reap;
pub mod recover;
mod recreate;
pub mod shared;
pub mod stamps;
mod statfs;
pub mod unevictable;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::{BackingId, Errno, FileAttr, FileType, INodeNo};
use globset::GlobSet;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::key::{FileKey, key_of};
use crate::ledger::Kind;
use crate::ledger::policy::Policy;
use crate::notify::Invalidator;
use crate::stats::Stats;
use crate::status::ScanReport;
use crate::sys;
use crate::wake::Signal;
use accounts::{Accounts, Attempt};
use dirlock::DirLocks;
pub use handles::{Handle, Opened};
use inode::{Inode, InodeTable};
use passthrough::IoModes;
use stamps::Stamper;

pub use config::Config;
#[cfg(test)]
pub(crate) use config::Started;
pub use context::Target;
pub use control::{MAX_SIZE_XATTR, STATS_XATTR, UPGRADE_XATTR, set_upgrade_hook};
pub use data::{DirStream, SetAttr, backing_flags, write_growth};
pub use evict::INVAL_WAIT;
pub(crate) use evict::Kept;
pub use meta::Xattr;
pub use statfs::{Space, StatFs};

/// Result of a core operation: a value or the errno to answer.
pub type OpResult<T> = Result<T, Errno>;

/// How long a write that would fail with ENOSPC waits for RELEASEs in flight.
pub const RELEASE_WAIT: Duration = Duration::from_millis(100);

/// Who is asking, from the FUSE request header: for ownership of new
/// objects and for the privileges a change takes away (`privs`).
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    /// Requesting uid (the caller's fsuid).
    pub uid: u32,
    /// Requesting gid (the caller's fsgid).
    pub gid: u32,
    /// Requesting thread id, in the daemon's pid namespace; 0 when unknown
    /// (the daemon's own work): its supplementary groups are then none.
    pub pid: u32,
}

/// The shared state of one mount.
pub struct Core {
    /// Canonical BACKING path (to turn /proc/self/fd links into relative paths).
    root_path: PathBuf,
    /// FUSE inodes ↔ backing objects.
    inodes: InodeTable,
    /// Usage, LRU, pins, reservations, the budget: the one door to the ledger.
    accounts: Accounts,
    /// Namespace serialisation per backing directory.
    dirlocks: DirLocks,
    /// Selects block files by name.
    matcher: GlobSet,
    /// Counters.
    stats: Stats,
    /// Kernel cache invalidations.
    inval: Invalidator,
    /// Pending mtime stamps.
    stamper: Stamper,
    /// The wall clock stamps are written and compared in (see [`clock`]).
    clock: clock::Clock,
    /// Wakes the background evictor (work pending, or stop).
    evict_wake: Signal,
    /// Directories eviction may have left empty, and when stores last
    /// arrived; see [`Core::reap_empty_dirs`].
    empty_dirs: reap::EmptyDirs,
    /// What eviction can't remove: non-block usage, files matching no pattern.
    unevictable: unevictable::Unevictable,
    /// Wakes the reconcile thread (stop, or an early pass).
    reconcile: crate::wake::Waker,
    /// Top entries of BACKING the daemon removed itself, for the watch.
    own_removals: own_removals::OwnRemovals,
    /// Thread id of the daemon's own thread warming the kernel's entries
    /// (`workers::warm`), 0 when none: its LOOKUPs are no use of a block.
    warm_tid: std::sync::atomic::AtomicI32,
    /// `-o shared`: the shared tier (journal, sweeper lease, cross-node
    /// locks; see [`shared`]); `None` on a local mount, which never enters
    /// it. Set once, before the mount serves.
    shared: Option<shared::SharedTier>,
    /// FLUSH closes a duplicate of the backing fd (see [`Core::flush`]). Set
    /// once, before the mount serves.
    flush_backing: bool,
    /// Extra open(2) flags for the backing files and directories the daemon
    /// opens on a client's behalf: O_NOATIME under `noatime` (both) and
    /// `nodiratime` (directories), so that neither the daemon's reads nor
    /// kernel passthrough reads update BACKING's atime. Set once, before the
    /// mount serves.
    open_extra: (i32, i32),
    /// `drop_cache=release` (see [`pagecache`]). Set once, before the mount serves.
    drop_cache: bool,
    /// `noacl`: no POSIX ACLs through the mount (`Core::acl`, `meta`).
    noacl: bool,
    /// The start-up index's report once it is complete (`None` while it runs).
    index: (Mutex<Option<ScanReport>>, Condvar),
    /// The one handle table: fh → handle (fd, key, inode, I/O mode).
    handles: RwLock<HashMap<u64, Arc<Handle>>>,
    /// Per-inode I/O modes of the open handles (kernel passthrough).
    io: IoModes<BackingId>,
    dirs: RwLock<HashMap<u64, Arc<Mutex<DirStream>>>>,
    next_fh: AtomicU64,
    start: Instant,
    stamp_secs: u32,
    euid: u32,
    /// How long a write that would fail with ENOSPC waits for a RELEASE
    /// ([`RELEASE_WAIT`]; tests lengthen it).
    release_wait: Duration,
}

impl Core {
    /// The budget and watermarks now (a copy: `max_size` may change live).
    pub fn policy(&self) -> Policy {
        self.accounts.policy()
    }

    /// The one door to the ledger.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// Waits at most `timeout` for [`Core::wake_evictor`]; returns whether
    /// it was called (the background evictor's sleep).
    pub fn evictor_wait(&self, timeout: Duration) -> bool {
        self.evict_wake.wait_for(timeout)
    }

    /// The counters (relaxed atomics; see [`Stats`]).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The kernel invalidation queue, for its thread (`run`, `stop`) and
    /// the session's notifier (`set_notifier`); events go through
    /// [`Core::invalidate_entry`] and [`Core::stamped`].
    pub fn invalidator(&self) -> &Invalidator {
        &self.inval
    }

    /// Takes the stripes of directories `dirs` (lock order: see the module
    /// docs), for a worker that checks names in them against the ledger.
    pub fn lock_dirs(&self, dirs: &[FileKey]) -> dirlock::DirGuard<'_> {
        self.dirlocks.lock(dirs)
    }

    /// The inode the kernel holds for backing object `key`, if any.
    pub fn inode_of_key(&self, key: &FileKey) -> Option<Arc<Inode>> {
        self.inodes.ino_of(key).and_then(|ino| self.inodes.get(ino))
    }

    /// FORGET: the kernel dropped `nlookup` references to `ino`.
    pub fn forget(&self, ino: INodeNo, nlookup: u64) {
        self.inodes.forget(ino.0, nlookup);
    }

    /// Queues the kernel invalidation of `name` in the directory `dir`, if
    /// the kernel holds that directory. Returns the ticket to wait on.
    pub fn invalidate_entry(&self, dir: &FileKey, name: &OsStr) -> Option<u64> {
        self.inodes.ino_of(dir).map(|pino| self.inval.push(pino, name.to_os_string()))
    }

    /// The stamp writer stamped `keys` with the mtime `mtime_ns` (ns since
    /// the epoch): counts them, remembers the mtime as this node's own in
    /// shared mode (see [`crate::ledger::Ledger::known_mtime`]), and has the
    /// kernel drop the cached attributes (it caches them for attr_timeout) of
    /// those it holds.
    pub fn stamped(&self, keys: &[FileKey], mtime_ns: i64) {
        Stats::add(&self.stats.stamps, keys.len() as u64);
        if self.shared.is_some() && !keys.is_empty() {
            self.accounts.know_mtimes(keys, mtime_ns);
        }
        keys.iter().filter_map(|k| self.inodes.ino_of(k)).for_each(|ino| {
            self.inval.push_attrs(ino);
        });
    }

    /// The BACKING root's `O_PATH` fd.
    pub fn root(&self) -> Arc<Inode> {
        // The root is inserted at construction and never forgotten.
        self.inodes.get(inode::ROOT_INO).expect("root inode is permanent")
    }

    /// The inode the kernel names. Errors: ESTALE for one it does not hold.
    pub fn inode(&self, ino: INodeNo) -> OpResult<Arc<Inode>> {
        self.inodes.get(ino.0).ok_or(Errno::ESTALE)
    }

    /// Seconds since the mount started (the ledger's clock).
    pub fn now(&self) -> u32 {
        self.start.elapsed().as_secs().min(u32::MAX as u64 - 1) as u32
    }

    /// Whether a file name selects a block file.
    pub fn is_block_name(&self, name: &OsStr) -> bool {
        self.matcher.is_match(Path::new(name))
    }

    /// Path of `name` in directory `dir`, relative to BACKING: from the
    /// ledger's path of the directory (kept by every rename through the
    /// mount, corrected by reconcile passes), so the request path makes no
    /// syscall for it; only a directory the ledger has no path for is asked
    /// of the kernel (`readlink /proc/self/fd/N`). None if the directory is
    /// no longer reachable from BACKING.
    pub fn rel_path(&self, dir: &Inode, name: &OsStr) -> Option<PathBuf> {
        if dir.ino == inode::ROOT_INO {
            return Some(PathBuf::from(name));
        }
        let known = self.accounts.path_of(dir.key).map(|p| p.join(name));
        known.or_else(|| {
            let abs = sys::fd_path(dir.fd())?;
            let rel = abs.strip_prefix(&self.root_path).ok()?;
            Some(rel.join(name))
        })
    }

    /// Minimum seconds between two mtime stamps of one file (`stamp_interval`).
    pub fn stamp_interval_secs(&self) -> u64 {
        u64::from(self.stamp_secs)
    }

    /// Marks `key` most recent; queues an mtime stamp when one is due.
    pub fn touch(&self, key: FileKey) {
        let stamp = self.accounts.touch(key, self.now(), self.stamp_secs);
        self.stamp_due(key, stamp);
    }

    /// Block files used since their last mtime stamp (a use within
    /// `stamp_interval` of it), least recently used first: `(key, path
    /// relative to BACKING, seconds since the latest stamp before it in the
    /// LRU)`, for the last stamps at unmount
    /// (`crate::workers::stamp::flush_unstamped`).
    pub fn unstamped_uses(&self) -> Vec<(FileKey, PathBuf, u32)> {
        let now = self.now();
        let uses = self.accounts.unstamped_uses();
        uses.into_iter().map(|(k, p, t)| (k, p, now.saturating_sub(t))).collect()
    }

    /// Queues the stamp an event found due.
    fn stamp_due(&self, key: FileKey, stamp: Option<PathBuf>) {
        if let Some(path) = stamp {
            self.stamper.push(key, path);
        }
    }

    /// Re-reads the allocated size of `key` from `fd` into the ledger.
    pub fn refresh_size(&self, key: FileKey, fd: BorrowedFd<'_>) {
        if let Ok(st) = sys::fstat(fd) {
            self.accounts.set_size(key, sys::allocated(&st));
        }
    }

    /// Wakes the background evictor if usage is above the high watermark.
    pub fn maybe_wake_evictor(&self) {
        if self.accounts.should_wake() {
            self.wake_evictor();
        }
    }

    /// Wakes the background evictor.
    pub fn wake_evictor(&self) {
        self.evict_wake.raise();
    }

    /// Marks the start-up index complete with its `report`: usage is exact,
    /// waiting writes and the evictor go on.
    pub fn index_done(&self, report: ScanReport) {
        self.accounts.indexed();
        *self.index.0.lock() = Some(report);
        self.index.1.notify_all();
        self.wake_evictor();
    }

    /// The start-up index's report, or `None` while it is being built.
    pub fn index_report(&self) -> Option<ScanReport> {
        self.index.0.lock().clone()
    }

    /// Blocks until the start-up index is complete.
    pub fn wait_indexed(&self) {
        let mut done = self.index.0.lock();
        while done.is_none() {
            self.index.1.wait(&mut done);
        }
    }

    /// Waits at most `timeout` for the start-up index; returns whether it is complete.
    pub fn wait_indexed_for(&self, timeout: Duration) -> bool {
        let mut done = self.index.0.lock();
        if done.is_none() {
            self.index.1.wait_for(&mut done, timeout);
        }
        done.is_some()
    }

    /// Reserves `bytes` of budget for a change about to happen, evicting
    /// inline when needed. `wait`: see [`Core::evict`]; while the start-up
    /// index is incomplete and its usage bound leaves no room, a request that
    /// may wait waits for the index (one that may not is checked against the
    /// usage indexed so far). Errors: ENOSPC when nothing evictable makes room.
    pub fn reserve(&self, bytes: u64, wait: bool) -> OpResult<Reservation<'_>> {
        if bytes == 0 {
            return Ok(Reservation { core: self, bytes: 0 });
        }
        let mut waited = false;
        let mut journal_read = false;
        let (mut took, mut forced, mut force_take) = (false, false, false);
        for _ in 0..16 {
            // close(2) returns before the kernel's RELEASE reaches us: a file
            // just closed may still look open. The first time the room is
            // short, pending releases get a moment before ENOSPC.
            let release_wait = (wait && !waited).then_some(self.release_wait);
            let (short, evictable) = match self.accounts.try_reserve(bytes, wait, release_wait) {
                Attempt::Reserved => return Ok(Reservation { core: self, bytes }),
                Attempt::WaitedForRelease => {
                    waited = true;
                    continue;
                }
                Attempt::Indexing => {
                    self.wait_indexed();
                    continue;
                }
                Attempt::Short { short, evictable } => (short, evictable),
                Attempt::NeedGrant { short } => {
                    // The shared budget: take grant and try again (the
                    // shortfall may have moved meanwhile); still short, this
                    // node makes room by evicting (its net goes down), and
                    // with nothing to evict asks the record again at once.
                    if !took {
                        took = true;
                        if let Some(t) = &self.shared {
                            self.grant_take(t, short, forced || force_take);
                        }
                        force_take = false;
                        continue;
                    }
                    took = false;
                    // Nothing to evict is known before the start-up index is
                    // done (a node just mounted or upgraded): wait, bounded
                    // for a request that may not wait ([`evict::INDEX_WAIT`]).
                    if self.index_report().is_none() && (wait || self.wait_indexed_for(evict::INDEX_WAIT)) {
                        self.wait_indexed();
                        continue;
                    }
                    // Blocks of this node's that another node removed are
                    // in the record's pool already (and out of this grant
                    // once read from the journals): take them rather than
                    // evict more for them, which would sweep twice.
                    if !journal_read {
                        journal_read = true;
                        if self.shared.as_ref().is_some_and(|t| self.journal_apply(t, true) > 0) {
                            force_take = true;
                            continue;
                        }
                    }
                    // With nothing of its own left (a node just come or
                    // counting from zero again), the least recently used
                    // blocks of any node: their bytes leave the record's
                    // drift at this node's next take (see
                    // fs/shared/grants.rs, "Removals across nodes").
                    if self.evict_own(short, wait) == 0 {
                        if self.evict(short, wait) > 0 {
                            force_take = true;
                            continue;
                        }
                        if forced {
                            break;
                        }
                        forced = true;
                    }
                    continue;
                }
            };
            // Shared tier: blocks other nodes evicted since this node last
            // read their journals are free already (see fs/shared/journal.rs). The
            // first time a request needs an eviction, read them even within
            // READ_GAP of the last read: the evictor loop reads them once a
            // second, and a sweep published in between would otherwise be
            // evicted for again here (two nodes evicting the same room).
            if self.shared.as_ref().is_some_and(|t| self.journal_apply(t, !journal_read) > 0) {
                journal_read = true;
                continue;
            }
            journal_read = true;
            // What can never fit fails at once, without evicting anything.
            if short > evictable || self.evict(short, wait) == 0 {
                break;
            }
        }
        Stats::add(&self.stats.enospc, 1);
        Err(Errno::ENOSPC)
    }

    /// The handle behind `fh`. Errors: EBADF.
    pub fn handle(&self, fh: u64) -> OpResult<Arc<Handle>> {
        self.handles.read().get(&fh).cloned().ok_or(Errno::EBADF)
    }

    fn add_handle(&self, h: Handle) -> (u64, Arc<Handle>) {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let h = Arc::new(h);
        self.record_open(fh, h.ino, h.fd.as_fd());
        self.handles.write().insert(fh, h.clone());
        (fh, h)
    }

    fn take_handle(&self, fh: u64) -> Option<Arc<Handle>> {
        self.record_close(fh);
        self.handles.write().remove(&fh)
    }

    /// Registers an object found or made under `parent` as `name`, gives the
    /// kernel an inode for it, and returns its attributes.
    fn publish(&self, parent: &Inode, name: &OsStr, fd: OwnedFd, st: &libc::stat, touch: bool) -> FileAttr {
        let key = key_of(st);
        let fmt = st.st_mode & libc::S_IFMT;
        let known = self.accounts.knows(key);
        if !known {
            let block = fmt == libc::S_IFREG && self.is_block_name(name);
            let path = self.rel_path(parent, name);
            let kind = Kind::of_mode(st.st_mode);
            if self.accounts.found(key, sys::allocated(st), block, path, kind, self.now()) {
                self.wake_evictor();
            }
        } else if touch {
            self.touch(key);
        }
        let inode = self.inodes.insert(fd, key, fmt);
        attr(inode.ino, st)
    }

    /// Re-reads a directory's own size after entries were added or removed.
    fn refresh_dir(&self, dir: &Inode) {
        self.refresh_size(dir.key, dir.fd());
    }
}

/// A budget reservation; returned to the ledger on drop or [`Reservation::commit`].
pub struct Reservation<'a> {
    core: &'a Core,
    bytes: u64,
}

impl Reservation<'_> {
    /// Records the new allocated size of `key` and returns the reservation,
    /// atomically; wakes the background evictor when usage is above the
    /// high watermark.
    pub fn commit(self, key: FileKey, size: u64) {
        let core = self.core;
        if core.accounts.commit(key, size, self.settle()) {
            core.wake_evictor();
        }
    }

    /// As [`Reservation::commit`] for a WRITE: the recorded size only grows
    /// (see [`Accounts::commit_write`]).
    pub fn commit_write(self, key: FileKey, size: u64) {
        let core = self.core;
        if core.accounts.commit_write(key, size, self.settle()) {
            core.wake_evictor();
        }
    }

    /// Hands the reserved bytes to the caller, which returns them to the
    /// ledger with its own event (see [`Accounts::created`]).
    pub fn settle(self) -> u64 {
        let bytes = self.bytes;
        std::mem::forget(self);
        bytes
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.core.accounts.release(self.bytes);
        }
    }
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

/// FUSE attributes of a backing stat, under FUSE inode number `ino`.
pub fn attr(ino: u64, st: &libc::stat) -> FileAttr {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    };
    FileAttr {
        ino: INodeNo(ino),
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: UNIX_EPOCH,
        kind,
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

/// Attributes of `i` for a GETATTR or SETATTR reply: as [`attr`], except
/// that the root reports the backing root's `st_ino` like every other inode
/// (its node id is fixed at 1 by the protocol, but these replies carry no
/// node id, and readdir's `d_ino` of "." is the backing number).
pub fn attr_of(i: &Inode, st: &libc::stat) -> FileAttr {
    let mut a = attr(i.ino, st);
    if i.ino == inode::ROOT_INO {
        a.ino = INodeNo(st.st_ino);
    }
    a
}

/// The `AsFd` of a handle, for brevity at call sites.
impl AsFd for Handle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Wall-clock time now, nanoseconds since the epoch (0 before it).
pub fn unix_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64)
}
