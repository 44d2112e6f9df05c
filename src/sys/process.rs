//! Process-wide calls outside BACKING's data path: the daemon's ids, the host
//! name, the checks and opens of paths given at start-up, flock and fstatfs.
//! None of them is counted by [`super::tick`]: they are start-up, identity
//! and locking calls, not the data path's syscalls on BACKING.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::{SysResult, last_errno};

/// The effective user id (geteuid(2); never fails).
pub fn euid() -> libc::uid_t {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The parent's process id (getppid(2); never fails): 1 or a subreaper's
/// once the parent died.
pub fn ppid() -> u32 {
    // SAFETY: getppid takes no arguments and cannot fail.
    unsafe { libc::getppid() as u32 }
}

/// The real user id (getuid(2); never fails).
pub fn uid() -> libc::uid_t {
    // SAFETY: getuid takes no arguments and cannot fail.
    unsafe { libc::getuid() }
}

/// The effective group id (getegid(2); never fails).
pub fn egid() -> libc::gid_t {
    // SAFETY: getegid takes no arguments and cannot fail.
    unsafe { libc::getegid() }
}

/// `statvfs(path)`: sizes are in `f_frsize` units. Errors: the errno of
/// statvfs (ENOTCONN on a FUSE mount whose daemon died); errno stays set.
pub fn statvfs(path: &CStr) -> SysResult<libc::statvfs> {
    let mut v = MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is NUL-terminated and `v` is a writable statvfs, both alive for the call.
    if unsafe { libc::statvfs(path.as_ptr(), v.as_mut_ptr()) } != 0 {
        return Err(last_errno());
    }
    // SAFETY: statvfs returned 0, so it filled `v`.
    Ok(unsafe { v.assume_init() })
}

/// `access(path, mode)` (`mode` of `R_OK | W_OK | X_OK`, checked with the
/// real ids). Errors: the errno of access, which stays set for the caller.
pub fn access(path: &CStr, mode: libc::c_int) -> SysResult<()> {
    // SAFETY: `path` is NUL-terminated and alive for the call.
    if unsafe { libc::access(path.as_ptr(), mode) } != 0 { Err(last_errno()) } else { Ok(()) }
}

/// The host name (gethostname(2)) as bytes up to its NUL, at most 256; None
/// if the call fails.
pub fn hostname() -> Option<Vec<u8>> {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`, writable and alive for the call.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(buf[..n].to_vec())
}

/// The calling thread's id (gettid(2); never fails).
pub fn tid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// `open(path, flags | O_CLOEXEC)` of an absolute path given by the operator
/// or the kernel (BACKING or the mountpoint at start-up, `/dev/fuse`, fusectl
/// files), never a path inside BACKING on a client's behalf. Errors: the errno
/// of open, as an `io::Error` for the caller's message.
pub fn open(path: &CStr, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    // SAFETY: `path` is NUL-terminated and alive for the call.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: open returned a new fd (checked >= 0) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `flock(fd, op)` (`LOCK_SH`, `LOCK_EX`, `LOCK_UN`, with `LOCK_NB`).
/// Errors: the errno of flock (EWOULDBLOCK when held and `LOCK_NB`).
pub fn flock(fd: BorrowedFd<'_>, op: libc::c_int) -> SysResult<()> {
    // SAFETY: flock on a borrowed open fd; no pointers.
    if unsafe { libc::flock(fd.as_raw_fd(), op) } != 0 { Err(last_errno()) } else { Ok(()) }
}

/// `fstatfs(fd)`: the filesystem type (`f_type`) and sizes in `f_bsize`
/// units of the filesystem holding `fd`. Errors: the errno of fstatfs.
pub fn fstatfs(fd: BorrowedFd<'_>) -> SysResult<libc::statfs> {
    let mut st = MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: a borrowed open fd and a writable statfs alive for the call.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(last_errno());
    }
    // SAFETY: fstatfs returned 0, so it filled `st`.
    Ok(unsafe { st.assume_init() })
}
