//! The mark on a directory that a removal of the daemon's own (eviction, a
//! stale temporary, the reaper's removal of a subdirectory) may have left
//! empty, so a crash does not leave it in BACKING for good.
//!
//! The reaper ([`super::reap`]) keeps its queue in memory and waits a quiet
//! second before each rmdir, so a daemon killed under eviction used to
//! leave that last second's emptied directories behind; after a restart
//! nothing told them from a user's own empty directories, which must stay.
//! Now each removal marks its directory with the xattr [`NAME`], whose
//! value is the directory's mtime just after the removal (read under the
//! directory's stripe, so no create slips in between). At start-up the
//! index (`workers::scan::index`) hands every empty directory whose mark
//! still equals its mtime back to the reaper: an unchanged mtime means no
//! entry was created or removed in it since the daemon's own removal, so
//! it was emptied by boundfs and nobody has used it since. A directory
//! whose mtime moved (a user's create and unlink) keeps its mark's bytes
//! and is never reaped at start-up. The reaper takes the mark off only a
//! directory it gives up on while empty (held by a client for 60 passes),
//! so an eviction in a directory that keeps other files costs no second
//! xattr write.
//!
//! In shared mode (`-o shared`) the start-up hand-back is off: another
//! node's clients may be using such a directory, which this node's kernel
//! cannot see; there the crash edge stays as before.
//!
//! The mark is a `trusted.*` name: only a daemon with CAP_SYS_ADMIN (root,
//! the usual case) can write it; otherwise marking fails quietly and the
//! crash edge stays as before. Through the mount the name is hidden
//! (GETXATTR answers ENODATA, LISTXATTR leaves it out, SETXATTR and
//! REMOVEXATTR answer EPERM), so a copy made through the mount never
//! carries it.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::sys;

/// The mark's xattr name.
pub const NAME: &str = "trusted.boundfs.emptied";

/// Whether `name` (an xattr name from a client) is the reserved mark.
pub fn is_mark(name: &OsStr) -> bool {
    name.as_encoded_bytes() == NAME.as_bytes()
}

/// `list` (a LISTXATTR answer: NUL-terminated names) without the mark.
pub fn without_mark(list: Vec<u8>) -> Vec<u8> {
    let needle = [NAME.as_bytes(), b"\0"].concat();
    if !list.windows(needle.len()).any(|w| w == needle.as_slice()) {
        return list;
    }
    list.split_inclusive(|&b| b == 0).filter(|n| *n != needle.as_slice()).flatten().copied().collect()
}

/// The mark's value for a directory with stat `st`: its mtime as
/// `"SECONDS.NANOSECONDS"`.
fn value_of(st: &libc::stat) -> Vec<u8> {
    format!("{}.{:09}", st.st_mtime, st.st_mtime_nsec).into_bytes()
}

/// Marks the directory `dir` (any fd of it, `O_PATH` included) with its
/// current mtime. Best effort: an error (EPERM for a daemon without
/// CAP_SYS_ADMIN, ENOTSUP on a backing filesystem without xattrs, ENOSPC)
/// leaves it unmarked.
pub fn mark(dir: BorrowedFd<'_>) {
    if let Ok(st) = sys::fstat(dir) {
        let _ = sys::xattr::set(dir.as_raw_fd(), OsStr::new(NAME), &value_of(&st), 0);
    }
}

/// Removes the mark from `dir`, if any (best effort).
pub fn unmark(dir: BorrowedFd<'_>) {
    let _ = sys::xattr::remove(dir.as_raw_fd(), OsStr::new(NAME));
}

/// What the mark on `dir` (stat `st`) says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// No mark.
    None,
    /// Marked, and the mtime has not moved since.
    Unchanged,
    /// Marked, but the directory changed since (not boundfs' to remove).
    Stale,
}

/// Reads the mark on `dir`, whose stat is `st`.
pub fn found(dir: BorrowedFd<'_>, st: &libc::stat) -> Found {
    let mut buf = [0u8; 64];
    match sys::xattr::get(dir.as_raw_fd(), OsStr::new(NAME), &mut buf) {
        Ok(n) if buf[..n] == value_of(st)[..] => Found::Unchanged,
        Ok(_) => Found::Stale,
        Err(_) => Found::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_mark_holds_until_the_directory_changes() {
        let d = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(d.path()).unwrap();
        let st = || sys::fstat(dir.as_fd()).unwrap();
        assert_eq!(found(dir.as_fd(), &st()), Found::None);
        mark(dir.as_fd());
        if found(dir.as_fd(), &st()) == Found::None {
            // not root, or no xattrs on this filesystem: marking is best effort
            return;
        }
        assert_eq!(found(dir.as_fd(), &st()), Found::Unchanged, "setting the xattr moves only the ctime");
        std::fs::write(d.path().join("x"), b"1").unwrap();
        std::fs::remove_file(d.path().join("x")).unwrap();
        assert_eq!(found(dir.as_fd(), &st()), Found::Stale, "a create and an unlink since the mark");
        unmark(dir.as_fd());
        assert_eq!(found(dir.as_fd(), &st()), Found::None);
    }

    #[test]
    fn the_mark_is_left_out_of_a_list() {
        let list = [b"user.a\0".as_slice(), NAME.as_bytes(), b"\0trusted.x\0"].concat();
        assert_eq!(without_mark(list), b"user.a\0trusted.x\0".to_vec());
        assert_eq!(without_mark(b"user.a\0".to_vec()), b"user.a\0".to_vec());
        assert!(is_mark(OsStr::new(NAME)) && !is_mark(OsStr::new("trusted.boundfs.emptiedx")));
    }
}
