//! Open file handles: the one handle table's entries carry the backing fd,
//! the backing key, the FUSE inode and the I/O mode the kernel was told.
//! The core plans the mode of each OPEN and CREATE ([`Opened`]); the adapter
//! only registers a backing id with the kernel when the plan needs one, and
//! hands the result to [`Core::backing_made`]. RELEASE is one call,
//! [`Core::release`], which returns the backing id to drop after the reply.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use fuser::{BackingId, Errno};
use parking_lot::Mutex;

use super::passthrough::{Mode, Plan};
use super::{Core, OpResult};
use crate::key::FileKey;
use crate::stats::Stats;

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
}

impl Handle {
    /// A handle of `fd` on inode `ino` (backing `key`), its mode not yet planned.
    pub fn new(fd: OwnedFd, key: FileKey, ino: u64) -> Self {
        Handle { fd, direct: None, key, ino, mode: Mutex::new(None) }
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

    /// Plans the I/O mode of the fresh handle `fh` opened with `flags`
    /// (open(2) bits; see [`super::passthrough::IoModes::plan_open`]). Errors:
    /// ETXTBSY when the inode is in passthrough mode and no backing id can be
    /// had (the handle is closed).
    pub(super) fn plan_io(&self, fh: u64, handle: Arc<Handle>, flags: i32) -> OpResult<Opened> {
        let plan = self.io.plan_open(handle.ino, flags);
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
        let (key, ino, mode) = (h.key, h.ino, h.mode.lock().take());
        self.drop_released(&h);
        drop(h);
        if self.shared {
            // Every write through this handle (daemon or kernel passthrough)
            // is done: now bounds the mtime they gave the file, so eviction
            // does not take this node's own writes for another node's use.
            self.accounts.lock().know_mtime(key, super::unix_ns());
        }
        let backing = mode.and_then(|m| self.io.release(ino, m));
        if self.accounts.released(key) {
            self.wake_evictor();
        }
        backing
    }
}

#[cfg(test)]
#[path = "handles_tests.rs"]
mod tests;
