//! The one place a failed request is logged, just before its error reply:
//! the FUSE operation, the path (relative to the mountpoint) or handle it
//! named, the errno by name and number, and what the core knows of why, e.g.
//! `WRITE fh=12 kv/ab/cd.bin: ENOSPC (28) budget 64.0 MiB has no room: 64.0 MiB
//! used, 0 B evictable, 3 open handles pin the rest`.
//!
//! Answers that are part of normal traffic ([`expected`]: a LOOKUP of a name
//! that does not exist, a MKDIR of one that does, an xattr that is not set)
//! are logged at debug level. Real failures are logged at warn level, at most
//! once per [`crate::ratelimit::INTERVAL`] per operation, the next line
//! saying how many were held back (as `warn_limited!`).

use std::time::Instant;

use fuser::Errno;
use log::Level;

use crate::fs::{Core, Target};
use crate::ratelimit::RateLimit;
use crate::stats::{OPS, Op};

/// One limiter per FUSE operation, indexed by [`Op`].
static LIMITS: [RateLimit; OPS.len()] = [const { RateLimit::new() }; OPS.len()];

/// Whether `e` is an ordinary answer to `op` rather than a failure: the
/// client asked a question and this is the answer (ENOENT: no such name, or
/// a file eviction removed; EEXIST; ENODATA and ERANGE from the xattr calls'
/// probe protocol, `getxattr(2)`; ENOTEMPTY from rmdir; ENOSYS and ENOTTY for
/// what boundfs does not implement; EOPNOTSUPP for an xattr namespace BACKING
/// lacks; EINTR for an interrupted request), or any answer to ACCESS (it
/// exists to ask "may I?", `access(2)`).
pub fn expected(op: Op, e: Errno) -> bool {
    const ANSWERS: [i32; 9] = [
        libc::ENOENT,
        libc::EEXIST,
        libc::ENODATA,
        libc::ENOTEMPTY,
        libc::ERANGE,
        libc::ENOSYS,
        libc::ENOTTY,
        libc::EOPNOTSUPP,
        libc::EINTR,
    ];
    op == Op::Access || ANSWERS.contains(&e.code())
}

/// The symbolic name of errno `code` (`ENOSPC`), or `errno` for one not in
/// the table. Names from Linux `include/uapi/asm-generic/errno-base.h` and
/// `errno.h`.
pub fn errno_name(code: i32) -> &'static str {
    const NAMES: &[(i32, &str)] = &[
        (libc::EPERM, "EPERM"),
        (libc::ENOENT, "ENOENT"),
        (libc::EINTR, "EINTR"),
        (libc::EIO, "EIO"),
        (libc::ENXIO, "ENXIO"),
        (libc::E2BIG, "E2BIG"),
        (libc::EBADF, "EBADF"),
        (libc::EAGAIN, "EAGAIN"),
        (libc::ENOMEM, "ENOMEM"),
        (libc::EACCES, "EACCES"),
        (libc::EFAULT, "EFAULT"),
        (libc::EBUSY, "EBUSY"),
        (libc::EEXIST, "EEXIST"),
        (libc::EXDEV, "EXDEV"),
        (libc::ENODEV, "ENODEV"),
        (libc::ENOTDIR, "ENOTDIR"),
        (libc::EISDIR, "EISDIR"),
        (libc::EINVAL, "EINVAL"),
        (libc::ENFILE, "ENFILE"),
        (libc::EMFILE, "EMFILE"),
        (libc::ENOTTY, "ENOTTY"),
        (libc::ETXTBSY, "ETXTBSY"),
        (libc::EFBIG, "EFBIG"),
        (libc::ENOSPC, "ENOSPC"),
        (libc::ESPIPE, "ESPIPE"),
        (libc::EROFS, "EROFS"),
        (libc::EMLINK, "EMLINK"),
        (libc::EPIPE, "EPIPE"),
        (libc::ERANGE, "ERANGE"),
        (libc::EDEADLK, "EDEADLK"),
        (libc::ENAMETOOLONG, "ENAMETOOLONG"),
        (libc::ENOLCK, "ENOLCK"),
        (libc::ENOSYS, "ENOSYS"),
        (libc::ENOTEMPTY, "ENOTEMPTY"),
        (libc::ELOOP, "ELOOP"),
        (libc::ENODATA, "ENODATA"),
        (libc::EOVERFLOW, "EOVERFLOW"),
        (libc::EOPNOTSUPP, "EOPNOTSUPP"),
        (libc::ESTALE, "ESTALE"),
        (libc::EDQUOT, "EDQUOT"),
        (libc::ECANCELED, "ECANCELED"),
    ];
    NAMES.iter().find(|(c, _)| *c == code).map_or("errno", |(_, n)| n)
}

/// Logs the failure of `op` on `target` with `e` (see the module docs) and
/// returns `e` for the reply.
pub fn failed(core: &Core, op: Op, target: Target<'_>, e: Errno) -> Errno {
    let c = e.code();
    if c == libc::EMFILE || c == libc::ENFILE {
        crate::warn_limited!("out of file descriptors; raise the daemon's open file limit (LimitNOFILE=)");
    }
    if expected(op, e) {
        if log::log_enabled!(Level::Debug) {
            log::debug!("{}", line(core, op, target, e));
        }
    } else if let Some(held) = LIMITS[op as usize].allow(Instant::now()) {
        let l = line(core, op, target, e);
        if held > 0 {
            log::warn!("{l} ({held} more {} failures in the last minute)", OPS[op as usize]);
        } else {
            log::warn!("{l}");
        }
    }
    e
}

/// `WRITE fh=12 kv/ab/cd.bin: ENOSPC (28) budget ...` (the core's
/// explanation, else the C library's text for the errno).
fn line(core: &Core, op: Op, target: Target<'_>, e: Errno) -> String {
    let c = e.code();
    let why = core.explain(e).unwrap_or_else(|| {
        let text = std::io::Error::from_raw_os_error(c).to_string();
        // "Permission denied (os error 13)" → "Permission denied"
        text.split(" (os error").next().unwrap_or(&text).to_string()
    });
    format!("{} {}: {} ({c}) {why}", OPS[op as usize], core.describe(target), errno_name(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_expected_answers() {
        assert_eq!(errno_name(libc::ENOSPC), "ENOSPC");
        assert_eq!(errno_name(libc::EACCES), "EACCES");
        assert_eq!(errno_name(4095), "errno");
        assert!(expected(Op::Lookup, Errno::ENOENT));
        assert!(expected(Op::Mkdir, Errno::EEXIST));
        assert!(expected(Op::Access, Errno::EACCES));
        assert!(!expected(Op::Write, Errno::ENOSPC));
        assert!(!expected(Op::Open, Errno::EACCES));
        assert!(!expected(Op::Write, Errno::EIO));
    }
}
