//! The sweeper lease of the shared tier (`-o shared`): of the N nodes over
//! one shared BACKING, exactly one runs background eviction sweeps (down to
//! the low watermark); the others evict only inline, for their own writes, when a write would pass
//! `max_size`. Without it every node evicts the same excess and together they
//! go far below the low watermark (measured: mean occupancy 69–85 %).
//!
//! The lease is a `flock(LOCK_EX | LOCK_NB)` on [`LEASE_FILE`] in
//! [`LEASE_DIR`] beneath BACKING, taken with the distributed filesystem's own
//! lock manager (the one that protects open files, see `fs::shared`), so it
//! needs no extra service. Every node tries it once a second; the holder
//! keeps its fd open and rewrites the file's one line (`host pid N since
//! UNIX-SECONDS term T beat B clock NS`) every [`HEARTBEAT`], which is what
//! `boundfs status` on the other nodes shows as the sweeper, with the line's
//! age. `clock` is the sweeper's reference time when it wrote the line: the
//! other nodes measure their offset to it for their recency stamps (see
//! `crate::fs::clock`).
//!
//! A holder that dies: its boundfs killed, the kernel closes the fd and the
//! lock goes at once (JuiceFS, CephFS, NFSv4, Lustre release a client's
//! flocks when the fd closes). Its distributed filesystem's client killed
//! (or its boundfs stopped), the lock stays with the dead client's session
//! until another client cleans it up (JuiceFS: minutes, and only by a client
//! running background jobs). So the lease also goes by **heartbeat age**:
//! a node that cannot take the lock and sees the holder's line unchanged for
//! [`TAKEOVER_AFTER`] (3 heartbeats, timed by its own clock: no clocks are
//! compared across nodes) starts the next *term*: it creates
//! `sweeper.T+1.lock` and takes the flock on that file instead (of two nodes
//! racing, one gets it), then removes the older terms' files. The lease is
//! always the flock on the newest term's file. A holder that comes back (its
//! boundfs resumed) sees a newer term, or its own file unlinked, at its next
//! poll, at the latest before its next batch of victims, and steps down: two
//! nodes sweep at the same time for at most one batch. Meanwhile, as
//! before, the budget holds through every node's inline eviction.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::Errno;

use crate::fs::Core;
use crate::sys;

/// Directory beneath BACKING that holds the lease file (created on demand).
pub const LEASE_DIR: &str = ".boundfs";
/// Name of the lease file in [`LEASE_DIR`].
pub const LEASE_FILE: &str = "sweeper.lock";
/// How often the holder rewrites its line (a beat counter in it changes).
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A holder whose line has not changed for this long (by the watching node's
/// own clock) is taken to be dead and the next term starts (see the module
/// docs): 3 heartbeats, so one late write is not a takeover.
pub const TAKEOVER_AFTER: Duration = Duration::from_secs(15);
/// How often a node tries the lease, and the holder checks it still holds it.
pub const TRY_EVERY: Duration = Duration::from_secs(1);

/// This node's side of the lease: the open lease file and whether it holds it.
#[derive(Default)]
pub struct SweeperLease {
    fd: Option<OwnedFd>,
    /// The term of the file `fd` is open on.
    term: u64,
    held: bool,
    beat: Option<Instant>,
    beats: u64,
    since: u64,
    last_try: Option<Instant>,
    /// The holder's line as last read: its term, what was read (the synced
    /// size and mtime, and the line) and when it last changed (this node's clock).
    watch: Option<(u64, Vec<u8>, Instant)>,
}

/// The lease file of term `term`: [`LEASE_FILE`] for term 0, `sweeper.T.lock` after.
fn term_file(term: u64) -> String {
    if term == 0 { LEASE_FILE.to_string() } else { format!("sweeper.{term}.lock") }
}

/// The term a lease file name stands for, if it is one.
fn term_of(name: &[u8]) -> Option<u64> {
    if name == LEASE_FILE.as_bytes() {
        return Some(0);
    }
    std::str::from_utf8(name).ok()?.strip_prefix("sweeper.")?.strip_suffix(".lock")?.parse().ok()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn host() -> String {
    match sys::hostname() {
        Some(buf) => String::from_utf8_lossy(&buf).into_owned(),
        None => "?".into(),
    }
}

/// Opens (creating it if needed) [`LEASE_DIR`] beneath BACKING, never
/// following a symlink. Errors: the backing errno.
pub(super) fn lease_dir(core: &Core) -> Result<OwnedFd, Errno> {
    let root = core.root();
    let dir_c = CString::new(LEASE_DIR).map_err(|_| Errno::EINVAL)?;
    match sys::mkdirat(root.fd(), &dir_c, 0o755) {
        Ok(()) => {}
        Err(e) if e == Errno::EEXIST => {}
        Err(e) => return Err(e),
    }
    sys::open_beneath(root.fd(), Path::new(LEASE_DIR), libc::O_RDONLY | libc::O_DIRECTORY)
}

/// The newest term whose lease file exists in `dir` (0 when none does).
fn current_term(dir: BorrowedFd<'_>) -> Result<u64, Errno> {
    // A fresh open: a directory fd read once is at its end.
    let list = sys::openat(dir, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    let mut term = 0;
    loop {
        let batch = sys::getdents(list.as_raw_fd())?;
        if batch.is_empty() {
            return Ok(term);
        }
        term = batch.iter().filter_map(|e| term_of(&e.name)).fold(term, u64::max);
    }
}

fn open_term(dir: BorrowedFd<'_>, term: u64) -> Result<OwnedFd, Errno> {
    let c = CString::new(term_file(term)).map_err(|_| Errno::EINVAL)?;
    sys::openat(dir, &c, libc::O_RDWR | libc::O_CREAT, 0o644)
}

/// `flock(LOCK_EX | LOCK_NB)`: Ok(false) when another client holds it.
fn try_lock(fd: BorrowedFd<'_>) -> Result<bool, Errno> {
    let Err(e) = sys::flock(fd, libc::LOCK_EX | libc::LOCK_NB) else { return Ok(true) };
    if e == Errno::EWOULDBLOCK || e == Errno::EINTR { Ok(false) } else { Err(e) }
}

/// The reference time (ns) a holder's line says it was written at
/// (`clock NS`), if it says one.
fn clock_of(line: &[u8]) -> Option<i64> {
    let line = std::str::from_utf8(line.split(|b| *b == b'\n').next()?).ok()?;
    let mut words = line.split_whitespace();
    words.find(|w| *w == "clock")?;
    words.next()?.parse().ok()
}

/// A sample of this node's offset to the sweeper's reference time: a line
/// written at `reference_ns` read now.
fn core_clock_sample(core: &Core, reference_ns: i64) {
    let clock = core.clock();
    clock.sample(reference_ns, clock.local_ns());
}

/// What a watcher compares between polls: the synced size and mtime of the
/// lease file and its line.
fn signature(fd: BorrowedFd<'_>) -> Result<Vec<u8>, Errno> {
    let (size, mtime) = sys::size_synced(fd)?;
    let mut buf = vec![0u8; 512];
    let n = sys::pread_full(fd.as_raw_fd(), &mut buf, 0)?;
    buf.truncate(n);
    buf.extend_from_slice(format!(" {size} {mtime}").as_bytes());
    Ok(buf)
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
        if core.shared.as_ref().is_some_and(|t| t.sweeping.swap(held, Ordering::Relaxed) != held) {
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
        // At most once per TRY_EVERY: a listing and a synced stat or two.
        if self.last_try.is_some_and(|t| t.elapsed() < TRY_EVERY) {
            return Ok(self.held);
        }
        self.last_try = Some(Instant::now());
        let dir = lease_dir(core)?;
        let term = current_term(dir.as_fd())?;
        if self.held {
            let unlinked = self.fd.as_ref().map_or(Ok(0), |fd| sys::nlink_synced(fd.as_fd()))? == 0;
            if term > self.term || unlinked {
                // Another node took over while this one was stopped or cut off.
                log::warn!(
                    "shared tier: another node took the sweeper lease over (term {term}): its holder's heartbeat \
                     stopped for {}s; this node stops sweeping",
                    TAKEOVER_AFTER.as_secs()
                );
                self.fd = None;
                self.held = false;
            }
        }
        if !self.held {
            if self.fd.is_none() || self.term != term {
                self.fd = Some(open_term(dir.as_fd(), term)?);
                self.term = term;
            }
            let Some(fd) = &self.fd else { return Ok(false) };
            if !try_lock(fd.as_fd())? && !self.take_over(core, dir.as_fd(), term)? {
                return Ok(false);
            }
            self.held = true;
            self.since = unix_now();
            self.beat = None;
            self.watch = None;
        }
        let Some(fd) = &self.fd else { return Ok(false) };
        if self.beat.is_none_or(|t| t.elapsed() >= HEARTBEAT) {
            self.beats += 1;
            let line = format!(
                "{} pid {} since {} term {} beat {} clock {}\n",
                host(),
                std::process::id(),
                self.since,
                self.term,
                self.beats,
                core.clock().now_ns()
            );
            sys::ftruncate(fd.as_raw_fd(), 0)?;
            sys::pwrite_full(fd.as_raw_fd(), line.as_bytes(), 0)?;
            // Distributed filesystems show other clients a write once it is committed.
            sys::fsync(fd.as_raw_fd(), true)?;
            self.beat = Some(Instant::now());
        }
        Ok(true)
    }

    /// The lock of `term` is held elsewhere: watches its holder's line, and
    /// once it has not changed for [`TAKEOVER_AFTER`] starts term + 1 (see
    /// the module docs). Returns whether this node now holds the lease.
    fn take_over(&mut self, core: &Core, dir: BorrowedFd<'_>, term: u64) -> Result<bool, Errno> {
        let Some(fd) = &self.fd else { return Ok(false) };
        let sig = signature(fd.as_fd())?;
        if self.watch.as_ref().is_none_or(|(t, s, _)| *t != term || *s != sig) {
            // A beat this node has not seen: the holder wrote it since the
            // last poll, at most TRY_EVERY ago (the first one read: at most
            // a HEARTBEAT ago). A sample of the offset to its clock.
            if let Some(ns) = clock_of(&sig) {
                core_clock_sample(core, ns);
            }
        }
        match &self.watch {
            Some((t, s, since)) if *t == term && *s == sig => {
                if since.elapsed() < TAKEOVER_AFTER {
                    return Ok(false);
                }
            }
            _ => {
                self.watch = Some((term, sig, Instant::now()));
                return Ok(false);
            }
        }
        let next = open_term(dir, term + 1)?;
        if !try_lock(next.as_fd())? {
            // Another node started the term first.
            return Ok(false);
        }
        log::warn!(
            "shared tier: the sweeper's heartbeat stopped {}s ago while its lock is still held (its client dead \
             or its boundfs stopped): this node takes the sweeper lease over (term {})",
            TAKEOVER_AFTER.as_secs(),
            term + 1
        );
        for old in [0, term] {
            if let Ok(c) = CString::new(term_file(old)) {
                let _ = sys::unlinkat(dir, &c, 0);
            }
        }
        self.fd = Some(next);
        self.term = term + 1;
        Ok(true)
    }
}

impl Core {
    /// The sweeper as its lease file says (`host pid N since UNIX-SECONDS`)
    /// and the age of that line in seconds (the heartbeat: above a few
    /// [`HEARTBEAT`]s the holder is stuck or its client dead). None without
    /// `-o shared` or when no node ever took the lease.
    pub fn sweeper_holder(&self) -> Option<(String, u64)> {
        if self.shared.is_none() {
            return None;
        }
        let dir = sys::open_beneath(self.root().fd(), Path::new(LEASE_DIR), libc::O_PATH | libc::O_DIRECTORY).ok()?;
        let c = CString::new(term_file(current_term(dir.as_fd()).ok()?)).ok()?;
        let fd = sys::openat(dir.as_fd(), &c, libc::O_RDONLY, 0).ok()?;
        let st = sys::fstat(fd.as_fd()).ok()?;
        let mut buf = [0u8; 512];
        // SAFETY: `fd` is open and the pointer and length describe `buf`.
        let n = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let line = String::from_utf8_lossy(&buf[..usize::try_from(n).ok()?]).trim().to_string();
        let age = unix_now().saturating_sub(u64::try_from(st.st_mtime).unwrap_or(0));
        (!line.is_empty()).then_some((line, age))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_term_has_its_own_lease_file_and_the_first_keeps_the_old_name() {
        assert_eq!(term_file(0), LEASE_FILE);
        for t in [0, 1, 7, 12345] {
            assert_eq!(term_of(term_file(t).as_bytes()), Some(t));
        }
        assert_eq!(term_of(b"sweeper.x.lock"), None);
        assert_eq!(term_of(b"evicted"), None);
    }

    #[test]
    fn the_current_term_is_the_newest_file() {
        let d = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(d.path()).unwrap();
        assert_eq!(current_term(dir.as_fd()).unwrap(), 0);
        for t in [0, 3, 2] {
            std::fs::write(d.path().join(term_file(t)), b"").unwrap();
        }
        assert_eq!(current_term(dir.as_fd()).unwrap(), 3);
    }
}
