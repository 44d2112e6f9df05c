//! Ownership of new objects. A root daemon creates every object with its own
//! credentials, then gives it to the requesting user, and must end with what
//! the kernel would have made had that user created it on a plain directory
//! (inode_init_owner(), mode_strip_sgid(), setattr_should_drop_sgid() in
//! fs/inode.c and fs/attr.c):
//! - the group is the parent directory's when the parent is set-group-ID
//!   (a new directory keeps S_ISGID: the backing kernel sets it), the
//!   caller's otherwise;
//! - the S_ISUID and S_ISGID bits the caller asked for in the create mode are
//!   kept on anything but a directory (root's chown clears them), except S_ISGID on a
//!   group-executable file whose group (inherited) is not the caller's, as
//!   the kernel strips it: outside it means neither the caller's fsgid nor
//!   one of its supplementary groups ([`Caller::in_group`]).

use std::os::fd::{AsRawFd, BorrowedFd};

use super::{Caller, Core};
use crate::sys;

impl Core {
    /// Gives the object `fd`, just made in the directory `parent` by the
    /// daemon, to the requesting user (see the module doc). Nothing to do when
    /// the daemon does not run as root (the backing kernel applied the rules
    /// to the daemon's own user) or the caller is root. Failures are logged at
    /// debug level and leave the object as the daemon made it.
    pub(super) fn own_new(&self, parent: BorrowedFd<'_>, fd: BorrowedFd<'_>, who: Caller) {
        if self.euid != 0 || (who.uid == 0 && who.gid == 0) {
            return;
        }
        let gid = match sys::fstat(parent) {
            Ok(p) if p.st_mode & libc::S_ISGID != 0 => p.st_gid,
            _ => who.gid,
        };
        let before = sys::fstat(fd).map(|s| s.st_mode).unwrap_or(0);
        self.chown_new(fd, Caller { gid, ..who });
        let fmt = before & libc::S_IFMT;
        if fmt == libc::S_IFDIR || fmt == libc::S_IFLNK || before & (libc::S_ISUID | libc::S_ISGID) == 0 {
            return;
        }
        let mut keep = before & 0o7777;
        if keep & libc::S_ISGID != 0 && keep & libc::S_IXGRP != 0 && !who.in_group(gid) {
            keep &= !libc::S_ISGID;
        }
        sys::tick();
        let path = sys::proc_path(fd.as_raw_fd());
        if unsafe { libc::chmod(path.as_ptr(), keep) } != 0 {
            log::debug!("restoring mode {keep:o} of a new file after its chown failed");
        }
    }

    /// Changes the owner of a new object to `who` when the daemon runs as root
    /// (the daemon creates everything with its own credentials). Used as is
    /// for directories recreated with a removed one's owner (recreate.rs).
    pub(super) fn chown_new(&self, fd: BorrowedFd<'_>, who: Caller) {
        if self.euid == 0 && (who.uid != 0 || who.gid != 0) {
            sys::tick();
            let r = unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), who.uid, who.gid, libc::AT_EMPTY_PATH) };
            if r != 0 {
                log::debug!("chown of a new object to {}:{} failed", who.uid, who.gid);
            }
        }
    }
}
