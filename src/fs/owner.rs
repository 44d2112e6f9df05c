//! Ownership of objects the daemon makes for no caller of its own: a
//! directory recreated after it was removed behind the daemon gets the
//! removed one's owner (recreate.rs). Objects a client creates are made
//! with the client's credentials in the first place (`creds`).

use std::os::fd::{AsRawFd, BorrowedFd};

use super::{Caller, Core};
use crate::sys;

impl Core {
    /// Changes the owner of a new object to `who` when the daemon runs as root
    /// (it made the object with its own credentials). Failures are logged at
    /// debug level and leave the object as the daemon made it.
    pub(super) fn chown_new(&self, fd: BorrowedFd<'_>, who: Caller) {
        if self.euid == 0 && (who.uid != 0 || who.gid != 0) {
            sys::tick();
            // SAFETY: an open O_PATH fd and an empty NUL-terminated path with AT_EMPTY_PATH.
            let r = unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), who.uid, who.gid, libc::AT_EMPTY_PATH) };
            if r != 0 {
                log::debug!("chown of a new object to {}:{} failed", who.uid, who.gid);
            }
        }
    }
}
