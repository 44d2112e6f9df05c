//! The adapter's side of `fs::inflight`: MKDIR, MKNOD, SYMLINK, LINK,
//! UNLINK, RMDIR, RENAME, OPEN and CREATE are journaled while in flight,
//! and after a crash a resend of one the dead daemon had done is answered
//! as done instead of with EEXIST or ENOENT (see `fs::inflight` for why,
//! and for the windows where it is not known).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use fuser::{FileAttr, Generation, INodeNo, ReplyEmpty, ReplyEntry, Request};

use super::{BoundFs, errors};
use crate::fs::inflight::{self, RESEND, Ticket};
use crate::fs::{OpResult, Target};
use crate::stats::Op;

impl BoundFs {
    /// MKDIR, MKNOD, SYMLINK and LINK (`op`) making `parent`/`name`: runs
    /// `make` journaled and answers its entry. A resend of one a dead
    /// daemon had done is not run again: it is answered with the entry
    /// found there. Errors: `make`'s, as the backing call gave them (the
    /// lookup's for a resend).
    pub(super) fn made(
        &self,
        req: &Request,
        op: Op,
        (parent, name): (INodeNo, &OsStr),
        reply: ReplyEntry,
        make: impl FnOnce() -> OpResult<FileAttr>,
    ) {
        let _timer = self.begin(op);
        let unique = u64::from(req.unique());
        let ticket = inflight::begin(unique);
        let made = if inflight::done_before(unique).is_some() {
            ticket.done(0);
            self.core.lookup(parent, name)
        } else {
            make().inspect(|_| {
                ticket.done(0);
                crash_point(unique, name);
            })
        };
        match made {
            Ok(a) => reply.entry(&self.ttl, &a, Generation(0)),
            Err(e) => reply.error(errors::failed(&self.core, op, Target::Entry(parent, name), e)),
        }
    }

    /// UNLINK, RMDIR and RENAME (`op`) of `name` (the source, in `target`):
    /// runs `remove` journaled and answers success. A resend of one a dead
    /// daemon had done is not run again (a RENAME_EXCHANGE run twice undoes
    /// itself): it is answered with success. Errors: `remove`'s, as the
    /// backing call gave them.
    pub(super) fn removed(
        &self,
        req: &Request,
        op: Op,
        (target, name): (Target<'_>, &OsStr),
        reply: ReplyEmpty,
        remove: impl FnOnce() -> OpResult<()>,
    ) {
        let _timer = self.begin(op);
        let unique = u64::from(req.unique());
        let ticket = inflight::begin(unique);
        if inflight::done_before(unique).is_some() {
            ticket.done(0);
            return reply.ok();
        }
        match remove() {
            Ok(()) => {
                ticket.done(0);
                crash_point(unique, name);
                reply.ok()
            }
            Err(e) => reply.error(errors::failed(&self.core, op, target, e)),
        }
    }

    /// OPEN and CREATE, before they run: journals the request, and for a
    /// resend of one the dead daemon had done releases the handle it had
    /// opened (taken over under its fh, never known to the kernel, so never
    /// released: its file would stay pinned). Returns the ticket to mark
    /// with the new fh ([`Opening::opened`]) and whether the request had been
    /// done (a CREATE with O_EXCL then opens the file it made).
    pub(super) fn opening(&self, req: &Request) -> Opening {
        let unique = u64::from(req.unique());
        let before = inflight::done_before(unique);
        if let Some(fh) = before.filter(|&fh| fh != 0) {
            drop(self.core.release(fh));
        }
        Opening { ticket: inflight::begin(unique), unique, done_before: before.is_some() }
    }
}

/// A journaled OPEN or CREATE (see [`BoundFs::opening`]).
pub(super) struct Opening {
    ticket: Ticket,
    unique: u64,
    /// The dead daemon had done this request.
    pub done_before: bool,
}

impl Opening {
    /// The open succeeded with handle `fh` (`name`: CREATE's).
    pub fn opened(&self, fh: u64, name: Option<&OsStr>) {
        self.ticket.done(fh);
        if let Some(name) = name {
            crash_point(self.unique, name);
        }
    }
}

/// `BOUNDFS_TEST_CRASH_AFTER=NAME[,NAME...]` (tests only, not an option):
/// the daemon SIGKILLs itself once a journaled request on one of these
/// names is done and before its reply, the moment after which the request
/// comes back as a resend of something already done. A resend never
/// crashes again.
fn crash_point(unique: u64, name: &OsStr) {
    static AT: OnceLock<Vec<OsString>> = OnceLock::new();
    let at = AT.get_or_init(|| {
        std::env::var_os("BOUNDFS_TEST_CRASH_AFTER")
            .map(|v| v.as_bytes().split(|&b| b == b',').map(|n| OsStr::from_bytes(n).to_owned()).collect())
            .unwrap_or_default()
    });
    if unique & RESEND == 0 && at.iter().any(|n| n == name) {
        log::warn!("BOUNDFS_TEST_CRASH_AFTER: killed after {} was done", name.to_string_lossy());
        // SAFETY: a signal to this process.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}
