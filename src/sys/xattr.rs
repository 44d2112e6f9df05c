//! Extended attributes of the object behind a held fd. The daemon's fds on
//! BACKING are mostly `O_PATH`, which `fgetxattr` and friends refuse
//! (EBADF), so each call names the object as `/proc/self/fd/N`. A
//! directory's own attribute can also be read as `getxattrat(fd, ".")`
//! (Linux 6.13), which skips the walk through procfs: [`get_dir`].

use std::ffi::{CString, OsStr};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use fuser::Errno;

use super::{SysResult, check, check_size, proc_path};

fn c(name: &OsStr) -> SysResult<CString> {
    CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)
}

/// `getxattr`; with an empty `buf` returns the size needed.
pub fn get(fd: RawFd, name: &OsStr, buf: &mut [u8]) -> SysResult<usize> {
    let (p, n) = (proc_path(fd), c(name)?);
    // SAFETY: NUL-terminated path and name; the pointer and length describe `buf`.
    check_size(unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })
}

/// `getxattrat(2)`'s syscall number (Linux 6.13; the same in every table of
/// the generic numbering), where this build knows it.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))]
const SYS_GETXATTRAT: Option<libc::c_long> = Some(464);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
const SYS_GETXATTRAT: Option<libc::c_long> = None;

/// `struct xattr_args` (include/uapi/linux/xattr.h): where the value goes.
#[repr(C)]
struct XattrArgs {
    value: u64,
    size: u32,
    flags: u32,
}

/// Cleared once the kernel answers `getxattrat` with ENOSYS (older than 6.13).
static HAVE_GETXATTRAT: AtomicBool = AtomicBool::new(true);

/// [`get`] for a directory fd (`O_PATH` or not), the same answer by a
/// shorter way: `getxattrat(fd, ".", 0, name)` names the directory itself
/// without a procfs lookup. Only a value or ENODATA is taken from it; any
/// other outcome (ENOSYS before Linux 6.13, EACCES where the daemon may not
/// search the directory, ERANGE, a non-directory) asks [`get`] instead, so
/// the result never differs. Errors: as [`get`].
pub fn get_dir(fd: RawFd, name: &OsStr, buf: &mut [u8]) -> SysResult<usize> {
    match getxattrat_dot(fd, &c(name)?, buf) {
        Some(r) => r,
        None => get(fd, name, buf),
    }
}

/// `getxattrat(fd, ".", 0, name)`: Some(value size or ENODATA), None when
/// the caller must ask the long way (see [`get_dir`]).
fn getxattrat_dot(fd: RawFd, name: &CString, buf: &mut [u8]) -> Option<SysResult<usize>> {
    let nr = SYS_GETXATTRAT.filter(|_| HAVE_GETXATTRAT.load(Relaxed))?;
    let size = u32::try_from(buf.len()).ok()?;
    let mut args = XattrArgs { value: buf.as_mut_ptr() as u64, size, flags: 0 };
    // SAFETY: a held fd, NUL-terminated path and name, and an xattr_args
    // whose value pointer and size describe `buf`, alive for the call; every
    // argument is passed as a full register (long, pointer or usize).
    let r = unsafe {
        libc::syscall(
            nr,
            fd as libc::c_long,
            c".".as_ptr(),
            0 as libc::c_long,
            name.as_ptr(),
            &mut args as *mut XattrArgs,
            std::mem::size_of::<XattrArgs>(),
        )
    };
    match check_size(r as libc::ssize_t) {
        Ok(len) => Some(Ok(len)),
        Err(e) if e == Errno::ENODATA => Some(Err(e)),
        Err(e) => {
            if e == Errno::ENOSYS {
                HAVE_GETXATTRAT.store(false, Relaxed);
            }
            None
        }
    }
}

/// `setxattr`.
pub fn set(fd: RawFd, name: &OsStr, value: &[u8], flags: i32) -> SysResult<()> {
    let (p, n) = (proc_path(fd), c(name)?);
    // SAFETY: NUL-terminated path and name; the pointer and length describe `value`.
    check(unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) }).map(drop)
}

/// `listxattr`; with an empty `buf` returns the size needed.
pub fn list(fd: RawFd, buf: &mut [u8]) -> SysResult<usize> {
    let p = proc_path(fd);
    // SAFETY: a NUL-terminated path; the pointer and length describe `buf`.
    check_size(unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })
}

/// `removexattr`.
pub fn remove(fd: RawFd, name: &OsStr) -> SysResult<()> {
    let (p, n) = (proc_path(fd), c(name)?);
    // SAFETY: NUL-terminated path and name.
    check(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) }).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Through `getxattrat` or not, a directory's attribute reads as
    /// through /proc/self/fd: its size, its value, ENODATA when absent, and
    /// a buffer too small is ERANGE.
    #[test]
    fn get_dir_answers_as_get() {
        let d = std::env::temp_dir().join(format!("boundfs-xattr-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let fd = std::fs::File::open(&d).unwrap();
        let path_fd = super::super::open(&CString::new(d.as_os_str().as_bytes()).unwrap(), libc::O_PATH).unwrap();
        let name = OsStr::new("user.boundfs-test");
        if set(fd.as_raw_fd(), name, b"hello", 0) == Err(Errno::EOPNOTSUPP) {
            return; // no user xattrs on this temp dir's filesystem
        }
        for raw in [fd.as_raw_fd(), path_fd.as_raw_fd()] {
            assert_eq!(get_dir(raw, name, &mut []), get(raw, name, &mut []));
            assert_eq!(get_dir(raw, name, &mut []), Ok(5));
            let mut buf = [0u8; 16];
            assert_eq!(get_dir(raw, name, &mut buf), Ok(5));
            assert_eq!(&buf[..5], b"hello");
            assert_eq!(get_dir(raw, name, &mut buf[..2]), Err(Errno::ERANGE));
            assert_eq!(get_dir(raw, OsStr::new("user.absent"), &mut []), Err(Errno::ENODATA));
        }
        // Where the kernel has getxattrat (Linux 6.13), the short way
        // answers for an O_PATH directory fd, value and absence alike.
        let n = c(name).unwrap();
        if HAVE_GETXATTRAT.load(Relaxed) && SYS_GETXATTRAT.is_some() {
            let mut buf = [0u8; 16];
            assert_eq!(getxattrat_dot(path_fd.as_raw_fd(), &n, &mut buf), Some(Ok(5)));
            let absent = c(OsStr::new("user.absent")).unwrap();
            assert_eq!(getxattrat_dot(path_fd.as_raw_fd(), &absent, &mut []), Some(Err(Errno::ENODATA)));
        }
        std::fs::remove_dir(&d).unwrap();
    }
}
