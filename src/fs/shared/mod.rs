//! The shared tier (`-o shared`): N boundfs mounts, one per node, over one
//! BACKING on a distributed filesystem (JuiceFS, CephFS, NFSv4, Lustre).
//!
//! **Cross-node protection.** The single-node protocol (an open pins the
//! ledger entry; eviction verifies and unlinks under the directory stripe)
//! only sees this node's opens. Across nodes the distributed filesystem's own
//! lock manager carries it, with whole-file `flock(2)` locks on the backing
//! file (each lock belongs to one open file description, so to one handle):
//! - an opener takes `LOCK_SH` on its backing fd and holds it until RELEASE
//!   closes the fd; once it has the lock it re-checks that the file still has
//!   a name (`st_nlink > 0`), else the open fails with ENOENT;
//! - eviction opens the victim, checks it is the chosen file, and takes
//!   `LOCK_EX | LOCK_NB` before unlinking and truncating it; when another
//!   node holds `LOCK_SH` the victim is skipped and made most recent (it is
//!   in use), so the truncate never hits a file another node has open.
//!
//! flock locks cross JuiceFS clients (tests/sh/shared/jfs-held-open.sh checks
//! it), CephFS (kernel and ceph-fuse), NFSv4 (Linux emulates flock with
//! whole-file POSIX locks on NFS) and Lustre mounted with `-o flock`. Locks
//! belong to the client: a boundfs killed closes its fds and its locks go;
//! a JuiceFS client killed keeps its locks in the metadata engine until its
//! session is cleaned up (another client's background job, after the
//! heartbeat timeout), which only makes eviction skip those files meanwhile.
//!
//! **Close-to-open.** Distributed filesystems commit a file's data when it is
//! closed. close(2) on the mount waits for FLUSH, not for RELEASE, so when
//! BACKING is on such a filesystem FLUSH closes a duplicate of the backing fd
//! (that close is the backing filesystem's own FLUSH) before answering; on
//! local filesystems FLUSH stays answered ENOSYS (the kernel stops sending it).

pub mod grants;
pub mod journal;
pub mod lease;
pub mod orphans;

use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use fuser::Errno;

use super::{Core, OpResult, sys};
use crate::config::FlushMode;

/// The shared tier's state in a core mounted with `-o shared`; a local
/// mount has none (`Core`'s `shared` is `None`) and never enters it.
#[derive(Default)]
pub struct SharedTier {
    /// The removals this node publishes and reads from the other nodes
    /// (see [`journal`]).
    pub(in crate::fs) journal: journal::Journal,
    /// This node holds the sweeper lease (see [`lease`]); only the sweeper
    /// runs background sweeps and removes emptied directories.
    pub(in crate::fs) sweeping: AtomicBool,
    /// This node's side of the shared budget record (see [`grants`]).
    pub(in crate::fs) grants: grants::Grants,
    /// The budget record is on (`shared_budget=record`).
    pub(in crate::fs) budget: bool,
}

impl SharedTier {
    /// Records that this node's eviction removed `path` (inode `ino`); it is
    /// published by the next [`Core::journal_publish`].
    pub(crate) fn journal_record(&self, ino: u64, path: &Path) {
        self.journal.pending.lock().push((ino, path.to_path_buf()));
    }
}

/// How long an opener waits for an eviction on another node that holds
/// `LOCK_EX` on the file (an unlink and a truncate: milliseconds) before it
/// answers ENOENT (the file is being evicted). Bounded, so that a lock left
/// by a dead client of the distributed filesystem cannot wedge an open.
pub const OPEN_LOCK_WAIT: Duration = Duration::from_secs(2);

/// statfs(2) `f_type` of filesystems that commit data at close, with their
/// names (linux/magic.h; Lustre's and Ceph's from their sources). FUSE covers
/// JuiceFS, ceph-fuse, s3fs and every other FUSE client.
const COMMIT_AT_CLOSE: &[(u32, &str)] = &[
    (0x6573_5546, "fuse"),
    (0x6969, "nfs"),
    (0x00c3_6400, "ceph"),
    (0x0bd0_0bd0, "lustre"),
    (0xff53_4d42, "cifs"),
    (0xfe53_4d42, "smb2"),
    (0x0102_1997, "9p"),
    (0x0116_1970, "gfs2"),
    (0x7461_636f, "ocfs2"),
];

/// The name of BACKING's filesystem type if it commits at close (see
/// `COMMIT_AT_CLOSE`), from `fstatfs` of any fd on it; `None` for a local
/// filesystem or when fstatfs fails.
pub fn commits_at_close(fd: BorrowedFd<'_>) -> Option<&'static str> {
    let st = sys::fstatfs(fd).ok()?;
    let t = st.f_type as u32;
    COMMIT_AT_CLOSE.iter().find(|(m, _)| *m == t).map(|(_, n)| *n)
}

/// Whether FLUSH closes a duplicate of the backing fd: `flush=on`, or
/// `flush=auto` with BACKING on a filesystem that commits at close.
pub fn flush_needed(mode: FlushMode, backing: BorrowedFd<'_>) -> bool {
    match mode {
        FlushMode::On => true,
        FlushMode::Off => false,
        FlushMode::Auto => commits_at_close(backing).is_some(),
    }
}

fn flock(fd: BorrowedFd<'_>, op: i32) -> OpResult<()> {
    sys::flock(fd, op)
}

/// Whether `e` says the filesystem has no flock support at all.
fn unsupported(e: Errno) -> bool {
    e == Errno::ENOLCK || e == Errno::EOPNOTSUPP || e == Errno::ENOSYS || e == Errno::EINVAL
}

impl Core {
    /// Shared mode: takes `LOCK_SH` on a backing fd just opened for a client
    /// (held until the fd is closed at RELEASE), then re-checks that the file
    /// still has a name. Does nothing without `-o shared`. Errors: ENOENT
    /// when another node evicted the file first, or still holds `LOCK_EX` on
    /// it after [`OPEN_LOCK_WAIT`]; the backing errno of flock or fstat. A
    /// filesystem without flock support is warned about once a minute and
    /// the open goes on unprotected.
    pub(crate) fn lock_opened(&self, fd: BorrowedFd<'_>) -> OpResult<()> {
        if self.shared.is_none() {
            return Ok(());
        }
        let deadline = Instant::now() + OPEN_LOCK_WAIT;
        let mut pause = Duration::from_millis(1);
        loop {
            match flock(fd, libc::LOCK_SH | libc::LOCK_NB) {
                Ok(()) => break,
                Err(e) if e == Errno::EWOULDBLOCK && Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err(e) if e == Errno::EWOULDBLOCK => return Err(Errno::ENOENT),
                Err(e) if e == Errno::EINTR => {}
                Err(e) if unsupported(e) => {
                    crate::warn_limited!("BACKING refuses flock ({e:?}): other nodes may evict files open here");
                    return Ok(());
                }
                // NFS emulates flock with POSIX locks, and a read lock needs
                // read access: a write-only handle (a store in progress) goes
                // on unprotected.
                Err(e) if e == Errno::EBADF => {
                    crate::warn_limited!(
                        "BACKING refuses LOCK_SH on write-only opens (NFS): other nodes may evict them"
                    );
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        // An eviction that held LOCK_EX before us has unlinked the file. Asked
        // of the backing filesystem, not this client's attribute cache: that
        // may still say linked (JuiceFS, for 1 s), and a read would then meet
        // the truncated file (EIO or short, seen in the long form of 95).
        if sys::nlink_synced(fd)? == 0 {
            return Err(Errno::ENOENT);
        }
        Ok(())
    }

    /// Shared mode: takes `LOCK_EX | LOCK_NB` on a victim opened for eviction
    /// (released when `fd` is closed). True without `-o shared`, and on a
    /// filesystem without flock support; false when a handle anywhere (this
    /// node or another) holds the file open.
    pub(crate) fn lock_victim(&self, fd: BorrowedFd<'_>) -> bool {
        if self.shared.is_none() {
            return true;
        }
        loop {
            match flock(fd, libc::LOCK_EX | libc::LOCK_NB) {
                Ok(()) => return true,
                Err(e) if e == Errno::EINTR => {}
                Err(e) => return unsupported(e),
            }
        }
    }

    /// FLUSH (close(2) of a handle): with `flush_backing`, closes a duplicate
    /// of the backing fd so that a filesystem that commits at close has
    /// committed this handle's writes before close(2) returns. Errors:
    /// ENOSYS when not needed (the kernel then stops sending FLUSH), EBADF
    /// for an unknown handle, the backing filesystem's errno of close (EIO,
    /// ENOSPC, EDQUOT: what close(2) reports to the client).
    pub fn flush(&self, fh: u64) -> OpResult<()> {
        if !self.flush_backing {
            return Err(Errno::ENOSYS);
        }
        let h = self.handle(fh)?;
        // A read-only handle has nothing to commit.
        // SAFETY: F_GETFL only reads the flags of the handle's open fd.
        let mode = unsafe { libc::fcntl(h.fd.as_raw_fd(), libc::F_GETFL) };
        if mode >= 0 && mode & libc::O_ACCMODE == libc::O_RDONLY {
            return Ok(());
        }
        // SAFETY: dup of the handle's open fd; the new fd is closed below.
        let dup = unsafe { libc::dup(h.fd.as_raw_fd()) };
        if dup < 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        // SAFETY: `dup` is our own fd from dup above, closed exactly once, here.
        if unsafe { libc::close(dup) } != 0 {
            let e = Errno::from(std::io::Error::last_os_error());
            // close(2) frees the fd even when it reports an error; EINTR is not a failure of the data.
            if e != Errno::EINTR {
                return Err(e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn flush_is_off_on_a_local_filesystem_unless_forced() {
        let d = tempfile::tempdir().unwrap();
        let f = std::fs::File::open(d.path()).unwrap();
        assert_eq!(commits_at_close(f.as_fd()), None, "the test directory is on a local filesystem");
        assert!(!flush_needed(FlushMode::Auto, f.as_fd()));
        assert!(flush_needed(FlushMode::On, f.as_fd()));
        assert!(!flush_needed(FlushMode::Off, f.as_fd()));
    }

    #[test]
    fn fuse_nfs_ceph_and_lustre_commit_at_close() {
        for name in ["fuse", "nfs", "ceph", "lustre"] {
            assert!(COMMIT_AT_CLOSE.iter().any(|(_, n)| *n == name), "{name}");
        }
    }
}
