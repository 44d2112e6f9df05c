//! The one walk of BACKING, shared by the start-up index (`super::scan`) and
//! the reconcile pass (`super::reconcile`): depth-first, one directory read
//! at a time, each opened by its path relative to BACKING with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (`sys::open_beneath`),
//! so a symlink is never followed, nothing outside BACKING is reached, and
//! only one directory fd is open at once however wide the tree. The names of
//! each directory are handed to the consumer in chunks of at most [`CHUNK`],
//! with the open directory to `fstatat` them in and its identity (to take
//! its stripe); the consumer stats and classifies them.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::key::{FileKey, key_of};
use crate::sys;

/// Names handed over per call (the start-up index stats one chunk per
/// stripe-lock hold).
pub const CHUNK: usize = 512;

/// Up to [`CHUNK`] names of one directory.
pub struct Chunk<'a> {
    /// The directory, open for reading (`fstatat` the names in it).
    pub dir: BorrowedFd<'a>,
    /// The directory's identity (its stripe in `fs::dirlock`).
    pub key: FileKey,
    /// The directory's path relative to BACKING (empty for BACKING itself).
    pub rel: &'a Path,
    /// Entry names, `.` and `..` left out.
    pub names: &'a [Vec<u8>],
}

/// `st_ino` → path relative to BACKING of every object beneath `root` (an
/// fd of BACKING), for finding the node ids a dead daemon gave the kernel
/// (`fs::recover`). Entries that vanish during the walk are left out.
pub fn map_inos(root: BorrowedFd<'_>) -> std::collections::HashMap<u64, PathBuf> {
    let mut by_ino = std::collections::HashMap::new();
    walk(root, |c| {
        for name in c.names {
            let Ok(cname) = CString::new(name.as_slice()) else { continue };
            if let Ok(st) = sys::fstatat(c.dir, &cname) {
                by_ino.insert(st.st_ino, c.rel.join(OsStr::from_bytes(name)));
            }
        }
        true
    });
    by_ino
}

/// Walks the tree under `root` (an fd of BACKING), calling `visit` with every
/// directory's names a [`Chunk`] at a time until it returns false. A
/// subdirectory is descended when `getdents` says it is one (or, for
/// `DT_UNKNOWN`, `fstatat` does). Returns the number of directories that
/// could not be opened or read (permissions, a symlink swapped in, races).
pub fn walk(root: BorrowedFd<'_>, visit: impl FnMut(Chunk<'_>) -> bool) -> u64 {
    walk_in(root, false, |_, _| None, |_| {}, |_, _, _| {}, visit)
}

/// [`walk`], also telling `empty` of every directory below `root` that
/// was read whole and held no entry, with the directory (open for reading),
/// its path relative to BACKING and its `fstat` (taken when it was opened).
pub fn walk_noting_empty(
    root: BorrowedFd<'_>,
    empty: impl FnMut(BorrowedFd<'_>, &Path, &libc::stat),
    visit: impl FnMut(Chunk<'_>) -> bool,
) -> u64 {
    walk_in(root, false, |_, _| None, |_| {}, empty, visit)
}

/// [`walk`], asking `enter` first about every directory opened, with its
/// path relative to BACKING and its `fstat` (taken before any entry is
/// read): `None` reads it (its names go to `visit`); `Some(subdirs)` skips
/// reading it (no `getdents`, no chunk) and descends only `subdirs` (paths
/// relative to BACKING), as the caller remembers them from an earlier read.
/// `failed` is told of a directory whose `getdents` failed part way (its
/// names were not all handed over). Each directory is first opened
/// `O_PATH` (no OPENDIR reaches a FUSE backing filesystem), and opened for
/// reading only when `enter` asks to read it.
/// The reconcile pass of a shared tier uses it to re-read only the
/// directories that changed (`super::reconcile`, module docs).
pub fn walk_changed(
    root: BorrowedFd<'_>,
    enter: impl FnMut(&Path, &libc::stat) -> Option<Vec<PathBuf>>,
    failed: impl FnMut(&Path),
    visit: impl FnMut(Chunk<'_>) -> bool,
) -> u64 {
    walk_in(root, true, enter, failed, |_, _, _| {}, visit)
}

/// [`walk_changed`]; `probe`: open `O_PATH` first (else for reading at once).
fn walk_in(
    root: BorrowedFd<'_>,
    probe: bool,
    mut enter: impl FnMut(&Path, &libc::stat) -> Option<Vec<PathBuf>>,
    mut failed: impl FnMut(&Path),
    mut empty: impl FnMut(BorrowedFd<'_>, &Path, &libc::stat),
    mut visit: impl FnMut(Chunk<'_>) -> bool,
) -> u64 {
    let mut unreadable = 0;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        // The daemon's own reads are no access: O_NOATIME where allowed
        // (refused with EPERM on a directory the daemon neither owns nor may
        // as CAP_FOWNER).
        let first = if probe { libc::O_PATH } else { libc::O_RDONLY | libc::O_NOATIME };
        let opened = match sys::open_beneath(root, &rel, first | libc::O_DIRECTORY) {
            Err(e) if e == fuser::Errno::EPERM => sys::open_beneath(root, &rel, libc::O_RDONLY | libc::O_DIRECTORY),
            r => r,
        }
        .and_then(|d| Ok((sys::fstat(d.as_fd())?, d)));
        let Ok((st, dir)) = opened else {
            unreadable += 1;
            continue;
        };
        if let Some(subdirs) = enter(&rel, &st) {
            stack.extend(subdirs);
            continue;
        }
        let dir = if probe {
            let read = |extra| sys::openat(dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY | extra, 0);
            match read(libc::O_NOATIME).or_else(|e| if e == fuser::Errno::EPERM { read(0) } else { Err(e) }) {
                Ok(d) => d,
                Err(_) => {
                    unreadable += 1;
                    failed(&rel);
                    continue;
                }
            }
        } else {
            dir
        };
        let key = key_of(&st);
        let mut entries = 0usize;
        loop {
            let batch = match sys::getdents(dir.as_raw_fd()) {
                Ok(b) if b.is_empty() => {
                    if entries == 0 && !rel.as_os_str().is_empty() {
                        empty(dir.as_fd(), &rel, &st);
                    }
                    break;
                }
                Ok(b) => b,
                Err(_) => {
                    unreadable += 1;
                    failed(&rel);
                    break;
                }
            };
            let mut names = Vec::with_capacity(batch.len());
            for e in batch {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                if is_dir(dir.as_fd(), e.kind, &e.name) {
                    stack.push(rel.join(OsStr::from_bytes(&e.name)));
                }
                names.push(e.name);
            }
            entries += names.len();
            for names in names.chunks(CHUNK) {
                if !visit(Chunk { dir: dir.as_fd(), key, rel: &rel, names }) {
                    return unreadable;
                }
            }
        }
    }
    unreadable
}

/// Whether the entry `name` of type `kind` (a `DT_*` from getdents) in
/// `dir` is a directory; `DT_UNKNOWN` is asked of `fstatat` (no symlink
/// followed).
fn is_dir(dir: BorrowedFd<'_>, kind: u8, name: &[u8]) -> bool {
    match kind {
        libc::DT_DIR => true,
        libc::DT_UNKNOWN => CString::new(name)
            .ok()
            .and_then(|c| sys::fstatat(dir, &c).ok())
            .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_directory_once_in_chunks_and_no_symlink_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        for i in 0..(CHUNK + 3) {
            std::fs::write(d.path().join(format!("a/b/{i}.bin")), b"x").unwrap();
        }
        std::fs::write(outside.path().join("secret.bin"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("a/out")).unwrap();
        let root = std::fs::File::open(d.path()).unwrap();
        let mut seen: Vec<(PathBuf, usize)> = Vec::new();
        let unreadable = walk(root.as_fd(), |c| {
            assert!(c.names.len() <= CHUNK);
            seen.push((c.rel.to_path_buf(), c.names.len()));
            true
        });
        assert_eq!(unreadable, 0);
        let count = |p: &str| seen.iter().filter(|(r, _)| r == Path::new(p)).map(|(_, n)| n).sum::<usize>();
        assert_eq!(count(""), 1, "BACKING holds a");
        assert_eq!(count("a"), 2, "a holds b and the symlink out");
        assert_eq!(count("a/b"), CHUNK + 3);
        assert!(seen.iter().filter(|(r, _)| r == Path::new("a/b")).count() >= 2, "chunked");
        assert!(!seen.iter().any(|(r, _)| r.starts_with("a/out")), "the symlink was followed");
        // The visitor stops the walk.
        let mut calls = 0;
        walk(root.as_fd(), |_| {
            calls += 1;
            false
        });
        assert_eq!(calls, 1);
    }
}
