//! The backing id an OPEN answers with: a new one, or one a previous
//! daemon registered on this connection (after an upgrade,
//! `crate::fs::handed`).

use std::os::fd::OwnedFd;

use fuser::{BackingId, INodeNo, ReplyOpen};

use super::BoundFs;

impl BoundFs {
    /// The backing id for an open of `ino` through `fd`: the handed-over
    /// one of `ino` if there is one (the kernel refuses a second backing
    /// file on an inode that still has passthrough opens), else a new one.
    /// Errors: as `FUSE_DEV_IOC_BACKING_OPEN`.
    pub(super) fn backing(&self, reply: &ReplyOpen, ino: INodeNo, fd: &OwnedFd) -> std::io::Result<BackingId> {
        match self.core.handed_backing(ino.0) {
            // SAFETY: an id the previous daemon registered on this connection
            // and exited without closing; from now on owned by this wrapper
            // (kept in the core's I/O modes, closed with the last open).
            Some(raw) => Ok(unsafe { reply.wrap_backing(raw) }),
            None => reply.open_backing(fd),
        }
    }
}
