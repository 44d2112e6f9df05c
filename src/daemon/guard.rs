//! The guard on the bare mountpoint (`guard`, on by default as root): the
//! directory under the mount is made immutable (`chattr +i`,
//! FS_IMMUTABLE_FL), so once the mount goes away, by a stop, a crash the
//! supervisor does not catch, or an operator's `umount`, a writer that
//! carries on gets EPERM instead of filling the filesystem under the
//! mountpoint (DESIGN.md: "a stopped mount never lets a writer fill the
//! filesystem under the mountpoint").
//!
//! Why an inode flag and not a mount: an empty read-only mount over the
//! mountpoint would make `mountpoint` and `findmnt` say a filesystem is
//! there, and an engine's start-up check would pass on it. The flag is on
//! the covered directory only, so the boundfs mount above it is untouched,
//! and it stays after a clean stop, when the engine may still run.
//!
//! The flag needs CAP_LINUX_IMMUTABLE and a filesystem with FS_IOC_SETFLAGS
//! (ext4, xfs, btrfs, and tmpfs since Linux 6.0); elsewhere the mount goes
//! on unguarded with one warning. A guard boundfs set is marked with the
//! xattr [`MARK`], so that `-o guard=off` clears boundfs' own guard and never
//! an immutable flag the operator set. Clearing by hand: `chattr -i MNT`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// The xattr that says boundfs set the mountpoint's immutable flag (value "1").
pub const MARK: &CStr = c"trusted.boundfs.guard";

/// FS_IMMUTABLE_FL of `linux/fs.h` (`chattr +i`).
const IMMUTABLE: libc::c_int = 0x10;

/// The mountpoint directory itself, opened `O_PATH` before the mount
/// covers it: the inode the guard goes on. `O_PATH` sends no request when
/// the mountpoint is itself on a FUSE mount (an OPENDIR there could wait on
/// another daemon before our mount(2)). Errors: open(2)'s, e.g. ENOENT or
/// ENOTDIR.
pub fn open_bare(mountpoint: &CStr) -> io::Result<OwnedFd> {
    crate::sys::open(mountpoint, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
}

/// The inode flags (FS_IOC_GETFLAGS). Errors: ENOTTY or EOPNOTSUPP where
/// the filesystem has none.
fn flags(dir: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    let mut f: libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one int through the pointer, alive for the call.
    if unsafe { libc::ioctl(dir.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut f) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(f)
}

fn set_flags(dir: BorrowedFd<'_>, f: libc::c_int) -> io::Result<()> {
    // SAFETY: FS_IOC_SETFLAGS reads one int through the pointer, alive for the call.
    if unsafe { libc::ioctl(dir.as_raw_fd(), libc::FS_IOC_SETFLAGS, &f) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the directory carries boundfs' mark.
fn marked(dir: BorrowedFd<'_>) -> bool {
    let mut v = [0u8; 4];
    // SAFETY: a NUL-terminated name and a buffer of the given length, alive for the call.
    let n = unsafe { libc::fgetxattr(dir.as_raw_fd(), MARK.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
    n >= 0
}

/// Guards the bare mountpoint `dir`: marks it, then sets its immutable
/// flag. An immutable flag already there (a guard left by an earlier mount,
/// or the operator's) is kept as it is. Errors: EPERM without
/// CAP_LINUX_IMMUTABLE; ENOTTY or EOPNOTSUPP on a filesystem without
/// inode flags.
pub fn set(dir: BorrowedFd<'_>) -> io::Result<()> {
    let f = flags(dir)?;
    if f & IMMUTABLE != 0 {
        return Ok(());
    }
    // SAFETY: NUL-terminated name and a 1-byte value, alive for the call.
    let r = unsafe { libc::fsetxattr(dir.as_raw_fd(), MARK.as_ptr(), c"1".as_ptr().cast(), 1, 0) };
    if r != 0 {
        // Without the mark the guard still works; only guard=off will not
        // recognise it as boundfs' own.
        log::debug!("guard mark not set: {}", io::Error::last_os_error());
    }
    set_flags(dir, f | IMMUTABLE)
}

/// Clears a guard boundfs set on `dir` (its mark present); an immutable
/// flag without the mark is the operator's and stays. Returns whether a
/// guard was cleared. Errors: as [`set`].
pub fn clear_own(dir: BorrowedFd<'_>) -> io::Result<bool> {
    let f = flags(dir)?;
    if f & IMMUTABLE == 0 || !marked(dir) {
        return Ok(false);
    }
    set_flags(dir, f & !IMMUTABLE)?;
    // SAFETY: a NUL-terminated name, alive for the call.
    unsafe { libc::fremovexattr(dir.as_raw_fd(), MARK.as_ptr()) };
    Ok(true)
}

/// Applies the `guard` option to the bare mountpoint `dir` just mounted
/// over (root's mount(2) path; a non-root mount through fusermount3 has no
/// CAP_LINUX_IMMUTABLE and is not guarded). Never fails the mount: what
/// could not be done is one log line.
pub fn apply(bare: BorrowedFd<'_>, on: bool, mountpoint: &Path) {
    let m = mountpoint.display();
    // The ioctls need a real open of the covered inode: through its O_PATH fd.
    let opened = match crate::sys::reopen(bare, libc::O_RDONLY | libc::O_DIRECTORY) {
        Ok(fd) => fd,
        Err(e) => {
            log::warn!("mountpoint {m} not guarded: cannot open the directory under the mount ({e:?})");
            return;
        }
    };
    let dir = std::os::fd::AsFd::as_fd(&opened);
    if !on {
        match clear_own(dir) {
            Ok(true) => log::info!("guard=off: cleared the guard an earlier mount left on {m}"),
            Ok(false) => {}
            Err(e) => log::warn!("guard=off: could not clear the guard on {m}: {e} (run chattr -i {m})"),
        }
        return;
    }
    match set(dir) {
        Ok(()) => log::info!(
            "guarding the bare mountpoint {m} (immutable under the mount): once unmounted, writes into it \
             fail with EPERM instead of filling its filesystem; -o guard=off or chattr -i {m} clears it"
        ),
        Err(e) => log::warn!(
            "mountpoint {m} not guarded ({e}): if the mount stops, writers fill the filesystem under it \
             (needs root and a filesystem with chattr +i, such as ext4, xfs, btrfs or tmpfs)"
        ),
    }
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
