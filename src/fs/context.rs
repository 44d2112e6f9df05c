//! What a failed request was about, in words, for its log line: the path
//! (relative to BACKING, which is the path relative to the mountpoint) or
//! the handle it named, and, for ENOSPC, why the budget had no room.
//! Only read on the error path; never a syscall outside BACKING (the paths
//! come from the ledger or from `/proc/self/fd` links of our own fds).

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use fuser::{Errno, INodeNo};

use super::{Core, inode};
use crate::status::bytes;
use crate::sys;

/// The object a request named, as the kernel gave it.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// The mount as a whole (INIT, STATFS, ...).
    Mount,
    /// An inode (GETATTR, SETATTR, OPEN, ...).
    Ino(INodeNo),
    /// An open file handle (READ, WRITE, FSYNC, ...).
    Fh(u64),
    /// An open directory handle (READDIR).
    Dir(u64),
    /// `name` in directory `parent` (LOOKUP, CREATE, MKDIR, UNLINK, ...).
    Entry(INodeNo, &'a OsStr),
    /// RENAME's source and destination (`parent`/`name` → `newparent`/`newname`).
    Rename(INodeNo, &'a OsStr, INodeNo, &'a OsStr),
}

impl Core {
    /// `target` in words for a log line: `fh=12 kv/ab/cd.bin`, `ino=5 kv/ab`,
    /// `kv/ab/cd.bin`, `a.tmp -> a.bin`. A path that can no longer be found
    /// (the object was removed) is shown as `?`.
    pub fn describe(&self, target: Target<'_>) -> String {
        match target {
            Target::Mount => ".".into(),
            Target::Ino(ino) => format!("ino={} {}", ino.0, show(self.ino_path(ino).as_deref())),
            Target::Fh(fh) => {
                let path = self.handle(fh).ok().and_then(|h| self.fd_rel_path(h.fd.as_fd()));
                format!("fh={fh} {}", show(path.as_deref()))
            }
            Target::Dir(fh) => {
                let path = self.dirs.read().get(&fh).cloned().and_then(|s| self.fd_rel_path(s.lock().fd()));
                format!("fh={fh} {}", show(path.as_deref()))
            }
            Target::Entry(parent, name) => show(self.entry_path(parent, name).as_deref()),
            Target::Rename(p, n, np, nn) => {
                let (from, to) = (self.entry_path(p, n), self.entry_path(np, nn));
                format!("{} -> {}", show(from.as_deref()), show(to.as_deref()))
            }
        }
    }

    /// More words on `e`, when the core knows why it happened: for ENOSPC,
    /// the budget and what holds it (`budget 64.0 MiB has no room: 63.9 MiB used,
    /// 0 B evictable, 3 open handles pin the rest`), or, when BACKING's
    /// filesystem has less than 1 MiB free while the budget has 1 MiB or more,
    /// that filesystem (`BACKING's filesystem is full (0 B free) while ...`).
    pub fn explain(&self, e: Errno) -> Option<String> {
        if e != Errno::ENOSPC {
            return None;
        }
        let max = self.policy().max_size;
        let c = self.accounts.counts();
        // ENOSPC from BACKING's own filesystem (smaller than max_size, or
        // shared with other data) is not the budget's doing: say which.
        let room = max.saturating_sub(c.usage + c.reserved);
        if let Ok(v) = sys::fstatvfs(self.root().fd()) {
            let free = sys::avail_bytes(&v);
            if room >= 1 << 20 && free < 1 << 20 {
                return Some(format!(
                    "BACKING's filesystem is full ({} free) while the budget {} still has {} of room: free \
                     space there, or lower max_size to what it can hold",
                    bytes(free),
                    bytes(max),
                    bytes(room),
                ));
            }
        }
        Some(format!(
            "budget {} has no room: {} used, {} evictable, {} open handles pin the rest",
            bytes(max),
            bytes(c.usage + c.reserved),
            bytes(c.evictable),
            c.open_handles
        ))
    }

    /// Path of inode `ino` relative to BACKING (`.` for the root).
    fn ino_path(&self, ino: INodeNo) -> Option<PathBuf> {
        if ino.0 == inode::ROOT_INO {
            return Some(PathBuf::from("."));
        }
        let i = self.inodes.get(ino.0)?;
        let known = self.accounts.path_of(i.key);
        known.or_else(|| self.fd_rel_path(i.fd()))
    }

    /// Path of `name` under inode `parent`, relative to BACKING.
    fn entry_path(&self, parent: INodeNo, name: &OsStr) -> Option<PathBuf> {
        let dir = self.inodes.get(parent.0)?;
        self.rel_path(&dir, name)
    }

    /// Path of the object open at `fd`, relative to BACKING (None if it was
    /// deleted or lies outside BACKING).
    fn fd_rel_path(&self, fd: std::os::fd::BorrowedFd<'_>) -> Option<PathBuf> {
        let abs = sys::fd_path(fd)?;
        let rel = abs.strip_prefix(&self.root_path).ok()?;
        Some(if rel.as_os_str().is_empty() { PathBuf::from(".") } else { rel.to_path_buf() })
    }
}

fn show(p: Option<&Path>) -> String {
    p.map_or_else(|| "?".into(), |p| p.display().to_string())
}
