//! The sweeper lease of the shared tier (`-o shared`): of the N nodes over
//! one shared BACKING, exactly one runs background eviction sweeps (down to
//! the low watermark); the others evict only inline, for their own writes, when a write would pass
//! `max_size`. Without it every node evicts the same excess and together they
//! go far below the low watermark (issue 12: mean occupancy 69–85 %).
//!
//! The lease is a `flock(LOCK_EX | LOCK_NB)` on [`LEASE_FILE`] in
//! [`LEASE_DIR`] beneath BACKING, taken with the distributed filesystem's own
//! lock manager (the one that protects open files, see `fs::shared`), so it
//! needs no extra service. Every node tries it once a second; the holder
//! keeps its fd open and rewrites the file's one line (`host pid N since
//! UNIX-SECONDS`) every [`HEARTBEAT`], which is what `boundfs status` on the
//! other nodes shows as the sweeper, with the line's age.
//!
//! A holder that dies: its boundfs killed, the kernel closes the fd and the
//! lock goes at once (JuiceFS, CephFS, NFSv4, Lustre release a client's
//! flocks when the fd closes); its JuiceFS client killed, the lock stays with
//! the dead client's session until another client cleans it up (JuiceFS:
//! after the session's heartbeat timeout). Meanwhile no node sweeps, and the
//! budget still holds: every node's writes evict inline before they pass
//! `max_size`. The heartbeat's age in `boundfs status` shows such a lease.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::Errno;

use super::Core;
use crate::sys;

/// Directory beneath BACKING that holds the lease file (created on demand).
pub const LEASE_DIR: &str = ".boundfs";
/// Name of the lease file in [`LEASE_DIR`].
pub const LEASE_FILE: &str = "sweeper.lock";
/// How often the holder rewrites its line (its mtime is the heartbeat).
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// This node's side of the lease: the open lease file and whether it holds it.
#[derive(Default)]
pub struct SweeperLease {
    fd: Option<OwnedFd>,
    held: bool,
    beat: Option<Instant>,
    since: u64,
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn host() -> String {
    let mut buf = [0u8; 256];
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return "?".into();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Opens (creating it and [`LEASE_DIR`] if needed) the lease file beneath
/// BACKING, never following a symlink. Errors: the backing errno.
fn open_lease(core: &Core) -> Result<OwnedFd, Errno> {
    let root = core.root();
    let dir_c = CString::new(LEASE_DIR).map_err(|_| Errno::EINVAL)?;
    match sys::mkdirat(root.fd(), &dir_c, 0o755) {
        Ok(()) => {}
        Err(e) if e == Errno::EEXIST => {}
        Err(e) => return Err(e),
    }
    let dir = sys::open_beneath(root.fd(), Path::new(LEASE_DIR), libc::O_PATH | libc::O_DIRECTORY)?;
    let file_c = CString::new(LEASE_FILE).map_err(|_| Errno::EINVAL)?;
    sys::openat(dir.as_fd(), &file_c, libc::O_RDWR | libc::O_CREAT, 0o644)
}

impl SweeperLease {
    /// Whether this node is the sweeper now: takes the lease when it is free
    /// (without blocking), keeps the heartbeat of a lease held, and records
    /// the answer in `core.sweeping`. A failure of the lease file (the
    /// backing client gone: ENOTCONN, EIO) drops the lease and is retried on
    /// the next call.
    pub fn poll(&mut self, core: &Core) -> bool {
        let held = self.try_poll(core).unwrap_or_else(|e| {
            crate::warn_limited!("sweeper lease {LEASE_DIR}/{LEASE_FILE} in BACKING: {e:?}; this node does not sweep");
            self.fd = None;
            self.held = false;
            false
        });
        if core.sweeping.swap(held, Ordering::Relaxed) != held {
            if held {
                log::info!("shared tier: this node holds the sweeper lease and runs eviction sweeps");
            } else {
                log::info!(
                    "shared tier: another node holds the sweeper lease; this node evicts only for its own writes"
                );
            }
        }
        held
    }

    fn try_poll(&mut self, core: &Core) -> Result<bool, Errno> {
        if self.fd.is_none() {
            self.fd = Some(open_lease(core)?);
        }
        let Some(fd) = &self.fd else { return Ok(false) };
        if !self.held {
            if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = Errno::from(std::io::Error::last_os_error());
                return if e == Errno::EWOULDBLOCK || e == Errno::EINTR { Ok(false) } else { Err(e) };
            }
            self.held = true;
            self.since = unix_now();
            self.beat = None;
        }
        if self.beat.is_none_or(|t| t.elapsed() >= HEARTBEAT) {
            let line = format!("{} pid {} since {}\n", host(), std::process::id(), self.since);
            sys::ftruncate(fd.as_raw_fd(), 0)?;
            sys::pwrite_full(fd.as_raw_fd(), line.as_bytes(), 0)?;
            self.beat = Some(Instant::now());
        }
        Ok(true)
    }
}

impl Core {
    /// The sweeper as its lease file says (`host pid N since UNIX-SECONDS`)
    /// and the age of that line in seconds (the heartbeat: above a few
    /// [`HEARTBEAT`]s the holder is stuck or its client dead). None without
    /// `-o shared` or when no node ever took the lease.
    pub fn sweeper_holder(&self) -> Option<(String, u64)> {
        if !self.shared {
            return None;
        }
        let rel = Path::new(LEASE_DIR).join(LEASE_FILE);
        let fd = sys::open_beneath(self.root().fd(), &rel, libc::O_RDONLY).ok()?;
        let st = sys::fstat(fd.as_fd()).ok()?;
        let mut buf = [0u8; 512];
        let n = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let line = String::from_utf8_lossy(&buf[..usize::try_from(n).ok()?]).trim().to_string();
        let age = unix_now().saturating_sub(u64::try_from(st.st_mtime).unwrap_or(0));
        (!line.is_empty()).then_some((line, age))
    }
}
