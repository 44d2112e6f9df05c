//! The guard's flag and mark on a real directory (needs CAP_LINUX_IMMUTABLE
//! and a filesystem with inode flags; skipped, with a line, elsewhere).

use std::os::fd::AsFd;

use super::*;

/// A temporary directory and its open fd, or None where the guard cannot be
/// set here (not root, or a filesystem without chattr).
fn guardable() -> Option<(tempfile::TempDir, OwnedFd)> {
    let d = tempfile::tempdir().ok()?;
    let m = d.path().join("mnt");
    std::fs::create_dir(&m).ok()?;
    let c = std::ffi::CString::new(m.to_str()?).ok()?;
    let fd = crate::sys::reopen(open_bare(&c).ok()?.as_fd(), libc::O_RDONLY).ok()?;
    if let Err(e) = set(fd.as_fd()) {
        eprintln!("skipped: the guard cannot be set here ({e})");
        return None;
    }
    Some((d, fd))
}

/// Whether `dir` is immutable now.
fn is_guarded(dir: BorrowedFd<'_>) -> bool {
    flags(dir).is_ok_and(|f| f & IMMUTABLE != 0)
}

/// Clears the flag whatever marks it, so the temporary directory can go.
fn unguard(fd: &OwnedFd) {
    if let Ok(f) = flags(fd.as_fd()) {
        let _ = set_flags(fd.as_fd(), f & !IMMUTABLE);
    }
}

#[test]
fn a_guarded_mountpoint_refuses_new_files_and_guard_off_clears_it() {
    let Some((d, fd)) = guardable() else { return };
    assert!(is_guarded(fd.as_fd()));
    let err = std::fs::write(d.path().join("mnt/spill.bin"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM), "a writer gets EPERM, not the disk");
    assert!(clear_own(fd.as_fd()).unwrap(), "boundfs' own guard is cleared");
    assert!(!is_guarded(fd.as_fd()));
    std::fs::write(d.path().join("mnt/ok"), b"x").unwrap();
    unguard(&fd);
}

#[test]
fn an_immutable_flag_the_operator_set_is_not_cleared() {
    let Some((_d, fd)) = guardable() else { return };
    unguard(&fd);
    // SAFETY: a NUL-terminated name, alive for the call.
    unsafe { libc::fremovexattr(fd.as_raw_fd(), MARK.as_ptr()) };
    let f = flags(fd.as_fd()).unwrap();
    set_flags(fd.as_fd(), f | IMMUTABLE).unwrap(); // the operator's chattr +i
    assert!(!clear_own(fd.as_fd()).unwrap());
    assert!(is_guarded(fd.as_fd()));
    unguard(&fd);
}
