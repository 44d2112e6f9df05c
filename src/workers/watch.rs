//! The watch on BACKING: an inotify watch on BACKING's top directory sees
//! entries removed or moved out of it behind the daemon (`rm -rf BACKING/*`,
//! an operator's `mv`), and asks the reconcile thread for a pass at once when
//! the ledger still counts block files beneath a name that went, so status
//! and `du` agree again within a second.
//!
//! How it decides, per batch of events (a batch ends once no event came for
//! [`QUIET`], or after [`MAX_BATCH`]): a removed or moved-out name with a
//! counted block file at or beneath it (the ledger's paths) means usage is
//! wrong now: `Waker::request_now`. The daemon's own removals (eviction,
//! emptied directories, unlinks through the mount) are noted by the core
//! (`crate::fs::own_removals`) and matched off event by event: a reaped hash
//! directory recreated by the next store has a counted block beneath it
//! again, and is no news. A queue overflow asks for a pass too.
//!
//! Deeper deletions (inside a subdirectory, with BACKING's top entries left
//! in place) are not watched (one watch per directory would cost kernel
//! memory per hash directory): eviction meets them and drops them at once
//! (`Core::evict_victim`), and the periodic pass finds the rest.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fs::Core;
use crate::sys;

/// A batch of events ends once none came for this long (an `rm -rf` in
/// progress keeps it open, so one pass sees the whole removal).
pub const QUIET: Duration = Duration::from_millis(100);

/// A batch ends after this long even while events keep coming.
pub const MAX_BATCH: Duration = Duration::from_millis(500);

/// Events that mean a top entry of BACKING went.
const GONE: u32 = libc::IN_DELETE | libc::IN_MOVED_FROM;

/// Watches BACKING's top directory until `stop` returns true (checked every
/// 250 ms). Logs one warning and returns if inotify is unavailable (the
/// periodic and eviction-triggered passes still run).
pub fn run(core: Arc<Core>, stop: impl Fn() -> bool) {
    // SAFETY: inotify_init1 takes flags only; the fd is checked below.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        log::warn!("inotify unavailable ({}): removals in BACKING are found by reconcile passes only", errno());
        return;
    }
    // SAFETY: inotify_init1 returned a new fd (checked >= 0) that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // The exact directory the daemon serves, through its fd (no path lookup).
    let target = sys::proc_path(core.root().fd().as_raw_fd());
    let mask = GONE | libc::IN_ONLYDIR;
    // SAFETY: an open inotify fd and a NUL-terminated path alive for the call.
    if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), target.as_ptr(), mask) } < 0 {
        log::warn!("cannot watch BACKING with inotify ({}): raise fs.inotify.max_user_watches", errno());
        return;
    }
    let mut names = HashMap::new();
    let mut overflow = false;
    let mut batch_start: Option<Instant> = None;
    let mut buf = vec![0u8; 64 << 10];
    while !stop() {
        let wait = if batch_start.is_some() { QUIET } else { Duration::from_millis(250) };
        let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: `pfd` is one valid pollfd alive for the call.
        let n = unsafe { libc::poll(&mut pfd, 1, wait.as_millis() as i32) };
        if n > 0 {
            // SAFETY: an open fd; the pointer and length describe `buf`.
            let got = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if got > 0 {
                overflow |= parse(&buf[..got as usize], &mut names);
                batch_start.get_or_insert_with(Instant::now);
                if batch_start.is_some_and(|t| t.elapsed() < MAX_BATCH) {
                    continue;
                }
            }
        }
        if batch_start.take().is_none() {
            continue;
        }
        // The daemon's own removals (reaped hash directories, evicted or
        // unlinked top entries) are no news: only names removed more often
        // than it removed them itself are (fs/own_removals.rs).
        let foreign: HashSet<OsString> = core.own_removals().foreign(std::mem::take(&mut names)).into_iter().collect();
        let stale = overflow || core.accounts().counts_blocks_under(&foreign);
        if stale {
            log::debug!("watch: {} top entries of BACKING removed behind the daemon: reconcile now", foreign.len());
            core.reconcile_waker().request_now();
        }
        names.clear();
        overflow = false;
    }
}

/// Counts the `GONE` events in `buf` (whole `inotify_event` records) per
/// name into `names`; returns whether the queue overflowed.
fn parse(buf: &[u8], names: &mut HashMap<OsString, u32>) -> bool {
    let head = std::mem::size_of::<libc::inotify_event>();
    let mut overflow = false;
    let mut off = 0;
    while off + head <= buf.len() {
        // SAFETY: the kernel writes whole records; read_unaligned copies the header.
        let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(buf[off..].as_ptr().cast()) };
        let end = (off + head + ev.len as usize).min(buf.len());
        let raw = &buf[off + head..end];
        let name = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
        if ev.mask & libc::IN_Q_OVERFLOW != 0 {
            overflow = true;
        } else if ev.mask & GONE != 0 && !name.is_empty() {
            *names.entry(std::ffi::OsStr::from_bytes(name).to_os_string()).or_insert(0) += 1;
        }
        off = end;
    }
    overflow
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}
