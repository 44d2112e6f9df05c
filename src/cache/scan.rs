//! The start-up walk of BACKING: every object with its allocated bytes, and
//! block files in mtime order, so the LRU order of the last run (persisted as
//! mtimes by `stamp`) is restored and usage counts pre-existing files from the
//! first request. The walk goes through directory fds and never follows a symlink.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use globset::GlobSet;

use crate::cache::ledger::{FileKey, Kind, Ledger};
use crate::fs::{key_of, sys};

/// What the walk found.
#[derive(Debug, Default)]
pub struct ScanReport {
    /// Objects indexed (files, directories, symlinks …), BACKING included.
    pub objects: u64,
    /// Block files among them.
    pub blocks: u64,
    /// Bytes allocated in total (what du reports).
    pub bytes: u64,
    /// Directories that could not be read (permissions, races).
    pub unreadable: u64,
}

struct Found {
    key: FileKey,
    size: u64,
    mtime: (i64, i64),
    block: bool,
    kind: Kind,
    path: PathBuf,
}

/// Walks the tree under `root` (an `O_PATH` fd of BACKING) into `ledger`.
pub fn scan(root: &OwnedFd, matcher: &GlobSet, ledger: &mut Ledger) -> ScanReport {
    let mut report = ScanReport::default();
    let mut found = Vec::new();
    if let Ok(st) = sys::fstat(root.as_fd()) {
        ledger.upsert(key_of(&st), sys::allocated(&st), false, None, 0);
        ledger.set_kind(key_of(&st), Kind::Dir);
        report.objects += 1;
        report.bytes += sys::allocated(&st);
    }
    let mut stack: Vec<(OwnedFd, PathBuf)> = match sys::reopen(root.as_fd(), libc::O_PATH) {
        Ok(fd) => vec![(fd, PathBuf::new())],
        Err(_) => return report,
    };
    while let Some((dir, rel)) = stack.pop() {
        let Ok(rd) = sys::reopen(dir.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY) else {
            report.unreadable += 1;
            continue;
        };
        loop {
            let Ok(batch) = sys::getdents(rd.as_raw_fd()) else {
                report.unreadable += 1;
                break;
            };
            if batch.is_empty() {
                break;
            }
            for e in batch {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                let Ok(c) = CString::new(e.name.clone()) else {
                    continue;
                };
                let Ok(st) = sys::fstatat(dir.as_fd(), &c) else {
                    continue;
                };
                let name = OsStr::from_bytes(&e.name);
                let path = rel.join(name);
                let fmt = st.st_mode & libc::S_IFMT;
                if fmt == libc::S_IFDIR {
                    if let Ok(fd) = sys::open_path(dir.as_fd(), &c) {
                        stack.push((fd, path.clone()));
                    }
                }
                let block = fmt == libc::S_IFREG && matcher.is_match(std::path::Path::new(name));
                found.push(Found {
                    key: key_of(&st),
                    size: sys::allocated(&st),
                    mtime: (st.st_mtime, st.st_mtime_nsec),
                    block,
                    kind: Kind::of_mode(st.st_mode),
                    path,
                });
            }
        }
    }
    // Oldest first: each upsert makes its key the most recent.
    found.sort_by_key(|f| (f.block, f.mtime));
    for f in found {
        if ledger.get(&f.key).is_none() {
            report.objects += 1;
            report.bytes += f.size;
            report.blocks += u64::from(f.block);
        }
        ledger.upsert(f.key, f.size, f.block, Some(f.path), 0);
        ledger.set_kind(f.key, f.kind);
        ledger.mark_unstamped(f.key);
    }
    report
}
