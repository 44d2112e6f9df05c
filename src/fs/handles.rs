//! Open file handles: the one handle table's entries carry the backing fd,
//! the backing key, the FUSE inode and the I/O mode the kernel was told.
//! The core plans the mode of each OPEN and CREATE ([`Opened`]); the adapter
//! only registers a backing id with the kernel when the plan needs one, and
//! hands the result to [`Core::backing_made`]. RELEASE is one call,
//! [`Core::release`], which returns the backing id to drop after the reply.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fuser::{BackingId, Errno};
use parking_lot::Mutex;

use super::accounts::Attempt;
use super::passthrough::{Mode, Plan};
use super::{Core, OpResult, Reservation};
use crate::key::FileKey;
use crate::stats::Stats;
use crate::sys;

/// An open file handle: the backing fd and the object it belongs to.
pub struct Handle {
    /// Backing file opened with the client's flags (O_DIRECT stripped).
    pub fd: OwnedFd,
    /// The same file with O_DIRECT, for a client that opened it O_DIRECT to
    /// write (aligned WRITEs go through it; see `super::direct`).
    pub direct: Option<OwnedFd>,
    /// Backing identity, for the ledger.
    pub key: FileKey,
    /// FUSE inode the handle was opened on.
    pub ino: u64,
    /// The I/O mode counted for this handle in the core's `IoModes` (None:
    /// not counted yet, or the open was refused).
    mode: Mutex<Option<Mode>>,
    /// Bytes of budget a passthrough writer holds (0 for any other handle):
    /// its writes never reach the daemon, so what they may add is reserved
    /// at the open and trued up at RELEASE or by [`Core::check_writers`].
    held: AtomicU64,
    /// A handle that may write a block file or engine temporary: its file's
    /// size at RELEASE teaches what passthrough writers reserve.
    learns: AtomicBool,
}

impl Handle {
    /// A handle of `fd` on inode `ino` (backing `key`), its mode not yet planned.
    pub fn new(fd: OwnedFd, key: FileKey, ino: u64) -> Self {
        Handle {
            fd,
            direct: None,
            key,
            ino,
            mode: Mutex::new(None),
            held: AtomicU64::new(0),
            learns: AtomicBool::new(false),
        }
    }

    /// Its counted I/O mode, the budget bytes it holds and whether it
    /// learns sizes (for a hand-over, `super::handed`).
    pub fn parts(&self) -> (Option<Mode>, u64, bool) {
        (*self.mode.lock(), self.held.load(Ordering::Relaxed), self.learns.load(Ordering::Relaxed))
    }

    /// A handle a previous daemon opened (a hand-over), with its
    /// [`Handle::parts`].
    pub fn handed(h: Handle, mode: Option<Mode>, held: u64, learns: bool) -> Self {
        *h.mode.lock() = mode;
        h.held.store(held, Ordering::Relaxed);
        h.learns.store(learns, Ordering::Relaxed);
        h
    }

    /// The handle with `direct` as its O_DIRECT twin.
    pub fn with_direct(mut self, direct: Option<OwnedFd>) -> Self {
        self.direct = direct;
        self
    }
}

/// A successful OPEN or CREATE: the file handle and what to answer.
pub struct Opened {
    /// The file handle for the kernel.
    pub fh: u64,
    /// The handle itself (its fd is what a backing id is made from).
    pub handle: Arc<Handle>,
    /// `Passthrough` (answer with this backing id; FOPEN_DIRECT_IO when
    /// `direct`), `Cached`, `Direct` (FOPEN_DIRECT_IO alone), or `NeedBacking` (register `handle.fd` with the
    /// kernel, then call [`Core::backing_made`]). Never `Busy`.
    pub plan: Plan<BackingId>,
}

impl Core {
    /// Turns kernel passthrough for read-only opens on or off (the adapter's
    /// setting; a core without an adapter never plans passthrough).
    pub fn enable_passthrough(&self, on: bool) {
        self.io.enable(on);
    }

    /// Writers of block files and engine temporaries get kernel passthrough
    /// (with a reservation; see [`Core::plan_io`]) when passthrough is on.
    pub fn allow_pass_writers(&self, on: bool) {
        self.io.allow_pass_writers(on);
    }

    /// Write-only opens get FOPEN_DIRECT_IO alone from now on (the adapter
    /// negotiated FUSE_HANDLE_KILLPRIV_V2).
    pub fn allow_direct_writers(&self) {
        self.io.allow_direct_writers();
    }

    /// Whether read-only opens currently get passthrough.
    pub fn passthrough_enabled(&self) -> bool {
        self.io.enabled()
    }

    /// Turns passthrough off after `why`, logging it once.
    pub fn no_passthrough(&self, why: &str) {
        if self.io.disable() {
            log::warn!("kernel passthrough unavailable ({why}); reads are served by the daemon");
        }
    }

    /// Reserves what a passthrough writer of a block file or engine
    /// temporary that the open creates or truncates (`candidate`) opened
    /// with `flags` will hold, before the
    /// open (see [`Core::plan_io`]); `wait` as for [`Core::reserve`]. `None`
    /// when the open does not write, is no candidate, no size has been
    /// learned yet, there is no room for it below max_size while usage is at
    /// or below the high watermark (it never evicts there), or there is no
    /// room now for it and as much again (the
    /// daemon path then answers its writes, ENOSPC included), and, for a
    /// request that may not wait, while the start-up index is incomplete.
    pub(super) fn writer_room(&self, candidate: bool, flags: i32, wait: bool) -> Option<Reservation<'_>> {
        if !candidate || flags & libc::O_ACCMODE == libc::O_RDONLY {
            return None;
        }
        if !wait && self.index_report().is_none() {
            // Until the index is complete the ledger knows only part of the
            // tree, and a request that may not wait is checked against that
            // part (`Core::reserve`): enough for the daemon's own exact
            // writes, not for bytes the daemon will never see. After every
            // upgrade the new daemon's CREATEs came here while the old
            // daemon's writers still wrote: usage peaked 5-13 MiB over
            // max_size (faults/upgrade-cap). Its WRITEs wait for the index.
            return None;
        }
        let bytes = self.io.writer_reservation()?;
        // The reservation is speculative (bytes not written yet): it evicts
        // nothing while usage (bytes on disk) is at or below the high
        // watermark, where an application that sizes its own cache from df
        // keeps its files. It is taken when it fits below
        // max_size as is; else, above the high watermark, eviction makes room
        // inline as for any write; else the daemon path reserves each write
        // exactly and evicts only when real bytes would cross max_size.
        let room = match self.accounts.try_reserve(bytes, wait, None) {
            Attempt::Reserved => Reservation { core: self, bytes },
            Attempt::Short { .. } if !self.accounts.should_wake() => return None,
            _ => self.reserve(bytes, wait).ok()?,
        };
        // Admitted only while eviction could cover as much again: a writer
        // storing more than it reserved is then found by the next check
        // with room to make (`Core::check_writers`). When the budget is
        // that tight, the daemon path keeps every byte exact.
        let (headroom, reserved) = self.accounts.headroom();
        // And only while BACKING's own filesystem has room for every
        // reservation held (this one included) and this one again: it may
        // be fuller than the budget (smaller than max_size, or holding other
        // data), and a passthrough write meeting its ENOSPC fails in the
        // client, where the daemon's WRITE evicts and writes the rest.
        let free = sys::fstatvfs(self.root().fd()).map_or(0, |v| sys::avail_bytes(&v));
        (headroom >= bytes && free >= reserved.saturating_add(bytes)).then_some(room)
    }

    /// Plans the I/O mode of the fresh handle `fh` opened with `flags`
    /// (open(2) bits; see [`super::passthrough::IoModes::plan_open`]). With
    /// `room` (from [`Core::writer_room`]) the open becomes a passthrough
    /// writer holding it, when the kernel's I/O modes allow; else `room` is
    /// given back. `candidate`: it opens a block file or engine temporary
    /// for writing. Errors: ETXTBSY when the inode is in passthrough mode
    /// and no backing id can be had (the handle is closed).
    pub(super) fn plan_io(
        &self,
        fh: u64,
        handle: Arc<Handle>,
        flags: i32,
        candidate: bool,
        room: Option<Reservation<'_>>,
    ) -> OpResult<Opened> {
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY;
        handle.learns.store(candidate && writes, Ordering::Relaxed);
        if super::held::mode_unknown(handle.ino) {
            // An inode with a handle a dead daemon left open in a mode not
            // known (`held`): FOPEN_DIRECT_IO alone is always accepted.
            return self.settle(Opened { fh, handle, plan: Plan::Direct });
        }
        let pass = room.and_then(|r| Some((self.io.plan_pass_writer(handle.ino)?, r)));
        let plan = match pass {
            Some((plan, r)) => {
                handle.held.store(r.settle(), Ordering::Relaxed);
                plan
            }
            None => self.io.plan_open(handle.ino, flags),
        };
        self.settle(Opened { fh, handle, plan })
    }

    /// The adapter's answer to [`Plan::NeedBacking`]: the backing id the
    /// kernel gave for the handle's fd, or why it refused. Errors: ETXTBSY
    /// as for `Core::plan_io`.
    pub fn backing_made(&self, o: Opened, made: std::io::Result<BackingId>) -> OpResult<Opened> {
        let Plan::NeedBacking { direct } = o.plan else {
            return Ok(o);
        };
        let plan = match made {
            Ok(id) => {
                let (id, spare) = self.io.install(o.handle.ino, id);
                drop(spare);
                Plan::Passthrough { id, direct }
            }
            Err(e) => {
                self.no_passthrough(&format!("FUSE_DEV_IOC_BACKING_OPEN: {e}"));
                self.io.abandon(o.handle.ino, direct)
            }
        };
        self.settle(Opened { plan, ..o })
    }

    /// Records the counted mode of a planned handle; closes it on `Busy`.
    fn settle(&self, o: Opened) -> OpResult<Opened> {
        let mode = match &o.plan {
            Plan::Passthrough { .. } => {
                Stats::add(&self.stats.passthrough_opens, 1);
                Mode::Passthrough
            }
            // Counted as passthrough until the backing id is made or abandoned.
            Plan::NeedBacking { .. } => Mode::Passthrough,
            Plan::Cached => Mode::Cached,
            Plan::Direct => Mode::Direct,
            Plan::Busy => {
                // Nothing is counted for a refused open.
                *o.handle.mode.lock() = None;
                drop(o.handle);
                self.release(o.fh);
                return Err(Errno::ETXTBSY);
            }
        };
        let writer = matches!(o.plan, Plan::Passthrough { direct: false, .. } | Plan::NeedBacking { direct: false });
        let held = o.handle.held.load(Ordering::Relaxed);
        if !writer && held > 0 {
            // The kernel refused the backing id: the daemon answers this
            // writer's WRITEs, which reserve for themselves.
            self.accounts.release(o.handle.held.swap(0, Ordering::Relaxed));
        } else if writer && matches!(o.plan, Plan::Passthrough { .. }) && held > 0 {
            Stats::add(&self.stats.passthrough_writers, 1);
        }
        let id = if let Plan::Passthrough { id, .. } = &o.plan { Some(&**id) } else { None };
        self.record_mode(o.fh, mode, id, o.handle.held.load(Ordering::Relaxed));
        *o.handle.mode.lock() = Some(mode);
        Ok(o)
    }

    /// RELEASE: closes the backing fd and unpins the file (the last close of
    /// a file unlinked while open returns its bytes to the budget), and
    /// uncounts its I/O mode; in shared mode the file's known mtime is raised
    /// to now. Returns the inode's backing id when this was
    /// its last passthrough open: drop it after replying (an ioctl).
    pub fn release(&self, fh: u64) -> Option<Arc<BackingId>> {
        let h = self.take_handle(fh)?;
        let wrote = h.learns.load(Ordering::Relaxed);
        self.true_up(&h);
        let (key, ino, mode) = (h.key, h.ino, h.mode.lock().take());
        self.drop_released(&h);
        drop(h);
        if self.shared.is_some() {
            // Every write through this handle (daemon or kernel passthrough)
            // is done: now bounds the mtime they gave the file, so eviction
            // does not take this node's own writes for another node's use.
            // The client set that mtime by this node's own clock, stamps
            // are in the reference time (`super::clock`): within its bound
            // the later of the two bounds it; beyond, the file is restamped.
            let now = self.clock.now_ns();
            let bound = if wrote && !self.restamp_if_clock_off(key) { now.max(self.clock.local_ns()) } else { now };
            self.accounts.know_mtimes(&[key], bound);
        }
        let backing = mode.and_then(|m| self.io.release(ino, m));
        self.close_orphans();
        if self.accounts.released(key) {
            self.wake_evictor();
        }
        backing
    }
}

impl Core {
    /// A handle that may have written a block file or engine temporary is
    /// being released: its file's allocated size teaches what passthrough
    /// writers reserve, and a passthrough writer's reservation is replaced
    /// by that size (the ledger's size of the file only grows here, as for
    /// a WRITE; see `Accounts::commit_write`).
    fn true_up(&self, h: &Handle) {
        let learns = h.learns.load(Ordering::Relaxed);
        let held = h.held.swap(0, Ordering::Relaxed);
        if !learns && held == 0 {
            return;
        }
        // (A writer a dead daemon left open holds a reservation but does
        // not learn: its reservation is returned here too.)
        let size = sys::fstat(h.fd.as_fd()).map(|st| sys::allocated(&st)).unwrap_or(0);
        if learns {
            self.io.learn(size);
        }
        if held > 0 && self.accounts.commit_write(h.key, size, held) {
            self.wake_evictor();
        }
    }

    /// FALLOCATE through a passthrough writer's handle (one holding a
    /// reservation; `None` for any other, which reserves as a WRITE does).
    /// Its file's bytes are covered by what it holds, not by the ledger's
    /// size of the file, so a FALLOCATE within that needs no more budget,
    /// and one past it reserves only the difference (ENOSPC when no room
    /// can be made, as for a WRITE). One that sizes the file (mode 0 from
    /// offset 0, as posix_fallocate(fd, 0, size) does) sets what the
    /// writer holds to the file's allocated size: the rest of the learned
    /// size is given back at once, not at RELEASE. Before, the file counted
    /// twice (its reservation and its fallocated size) and the writers'
    /// unused reservations made other stores fail ENOSPC with the budget
    /// 30 % empty (budget/bigfile-enospc).
    pub(super) fn writer_fallocate(&self, h: &Handle, off: u64, len: u64, mode: i32) -> Option<OpResult<()>> {
        let held = h.held.load(Ordering::Relaxed);
        if held == 0 {
            return None;
        }
        let grows = mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_COLLAPSE_RANGE) == 0;
        let end = off.saturating_add(len).div_ceil(4096) * 4096;
        let extra = if grows { end.saturating_sub(held) } else { 0 };
        let room = match self.reserve(extra, true) {
            Ok(r) => r.settle(),
            Err(e) => return Some(Err(e)),
        };
        let r = sys::fallocate(h.fd.as_raw_fd(), mode, off, len);
        let sizes = r.is_ok() && mode == 0 && off == 0;
        let after = sys::fstat(h.fd.as_fd()).map(|st| sys::allocated(&st)).ok();
        let mut cur = held;
        loop {
            if cur == 0 {
                // RELEASE trued the handle up meanwhile.
                self.accounts.release(room);
                break;
            }
            let total = cur + room;
            let new = match after {
                Some(a) if sizes => a.max(1).min(total),
                _ => total,
            };
            match h.held.compare_exchange(cur, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    self.accounts.release(total - new);
                    break;
                }
                Err(now) => cur = now,
            }
        }
        Some(r)
    }

    /// Checks the open passthrough writers: one whose file grew past what
    /// it holds reserves the difference (evicting inline, never waiting), so
    /// that what is stored beyond a reservation is unaccounted only until
    /// the next check. Returns `None` when no passthrough writer is open,
    /// else the bytes found unaccounted (over all writers), which stay over
    /// the budget until a RELEASE when no room could be made.
    pub fn check_writers(&self) -> Option<u64> {
        let writers: Vec<Arc<Handle>> =
            self.handles.read().values().filter(|h| h.held.load(Ordering::Relaxed) > 0).cloned().collect();
        if writers.is_empty() {
            return None;
        }
        let mut over = 0;
        for h in writers {
            let Ok(st) = sys::fstat(h.fd.as_fd()) else { continue };
            let (size, held) = (sys::allocated(&st), h.held.load(Ordering::Relaxed));
            if size <= held || held == 0 {
                continue;
            }
            over += size - held;
            Stats::add(&self.stats.writer_overruns, 1);
            let grow = (size - held).div_ceil(1 << 20) << 20;
            if let Ok(r) = self.reserve(grow, false) {
                // A RELEASE may have trued the handle up meanwhile.
                if h.held.compare_exchange(held, held + grow, Ordering::Relaxed, Ordering::Relaxed).is_err() {
                    drop(r);
                } else {
                    r.settle();
                }
            }
        }
        Some(over)
    }
}

#[cfg(test)]
#[path = "handles_tests.rs"]
mod tests;
