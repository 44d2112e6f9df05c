//! Recency persistence: a background thread writes "now" into the mtime of
//! block files that were used, at most once per `stamp_interval` per file
//! (the ledger decides when a stamp is due). The request path only queues
//! (`crate::fs::stamps::Stamper`). On restart, `scan` rebuilds the LRU order
//! from these mtimes.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use filetime::FileTime;

use crate::fs::stamps::Stamper;
use crate::key::{FileKey, key_of};
use crate::sys;

/// How long a queued stamp waits before it is written. The request that
/// queued it (a lookup, an open) replies with the attributes it read; the
/// attribute invalidation sent after the stamp must reach the kernel after
/// that reply, or the kernel would keep the old mtime for attr_timeout.
pub const STAMP_DELAY: Duration = Duration::from_millis(100);

/// Writes every stamp queued in `q` now, with the mtime `now_ns` (ns since
/// the epoch: the reference time, `crate::fs::Core::clock`); returns the
/// keys stamped and that mtime. Each path is resolved beneath `root` without following symlinks and
/// checked to still be `key`, so a stamp never lands on another file.
pub fn flush(q: &Stamper, root: &OwnedFd, now_ns: i64) -> (Vec<FileKey>, i64) {
    let batch = q.take();
    let now = ns_time(now_ns);
    let done =
        batch.into_iter().filter(|(key, path)| stamp_one(root, *key, path, |_| Some(now)).is_some()).map(|(k, _)| k);
    (done.collect(), ns_of(now))
}

/// Writes `mtime(current mtime in ns)` into the mtime of `path` (beneath
/// `root`, symlinks not followed) if it is still the regular file `key`;
/// returns the mtime written, None if the file is gone, another object,
/// `mtime` declined, or the write failed (logged at debug).
fn stamp_one(
    root: &OwnedFd,
    key: FileKey,
    path: &Path,
    mtime: impl FnOnce(i64) -> Option<FileTime>,
) -> Option<FileTime> {
    let fd = sys::open_beneath(root.as_fd(), path, libc::O_PATH).ok()?;
    let st =
        sys::fstat(fd.as_fd()).ok().filter(|st| key_of(st) == key && st.st_mode & libc::S_IFMT == libc::S_IFREG)?;
    let t = mtime(st.st_mtime.saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec))?;
    let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
    match filetime::set_file_mtime(&proc, t) {
        Ok(()) => Some(t),
        Err(e) => {
            log::debug!("stamp of {} failed: {e}", path.display());
            None
        }
    }
}

fn ns_of(t: FileTime) -> i64 {
    t.unix_seconds().saturating_mul(1_000_000_000).saturating_add(i64::from(t.nanoseconds()))
}

/// The last stamps, at unmount: `uses` are block files used since their
/// last stamp (`(key, path, seconds since the latest stamp before it in the
/// LRU)`, least recently used first, from `Core::unstamped_uses`), uses the
/// `stamp_interval` rate limit did not write. Each gets as mtime the time of
/// that latest earlier stamp plus [`UNSTAMPED_MARGIN`] (at most now), raised
/// to 1 ns past the mtime of the file before it, so the start-up index
/// (`scan`, which orders by mtime) rebuilds this LRU order to within the
/// margin; a file whose mtime is already that late is left as it is.
/// `now` is the reference time (ns since the epoch, `crate::fs::Core::clock`).
/// Returns the keys stamped with the mtime each got (ns since the epoch).
pub fn flush_unstamped(uses: &[(FileKey, PathBuf, u32)], root: &OwnedFd, now: i64) -> Vec<(FileKey, i64)> {
    let mut last = i64::MIN;
    let mut done = Vec::new();
    for (key, path, age) in uses {
        let ago = Duration::from_secs(u64::from(*age)).saturating_sub(UNSTAMPED_MARGIN);
        let want = now.saturating_sub(ago.as_nanos().min(i64::MAX as u128) as i64).max(last.saturating_add(1));
        let written = stamp_one(root, *key, path, |current| {
            last = current;
            (want > current).then(|| ns_time(want))
        });
        if let Some(t) = written {
            last = ns_of(t);
            done.push((*key, last));
        }
    }
    done
}

/// How far past the latest earlier stamp's second an unstamped use is put
/// at unmount: that second is whole (the ledger's clock), and a stamp is
/// written [`STAMP_DELAY`] after it is due, so a use after it is at least
/// this much later than the second it was counted in, give or take.
pub const UNSTAMPED_MARGIN: Duration = Duration::from_secs(2);

fn ns_time(ns: i64) -> FileTime {
    FileTime::from_unix_time(ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000) as u32)
}

/// The thread body: flushes stamps queued in `q` in batches, each at least
/// [`STAMP_DELAY`] after its first stamp was queued, until `stop` returns
/// true; flushes once more on the way out. `now` gives the mtime to write
/// (ns since the epoch, the reference time); `stamped` gets the keys of
/// each batch written and the mtime written.
pub fn run(
    q: &Stamper,
    root: &OwnedFd,
    stop: impl Fn() -> bool,
    now: impl Fn() -> i64,
    stamped: impl Fn(&[FileKey], i64),
) {
    while !stop() {
        let queued = q.wait_queued(Duration::from_secs(1));
        if queued && !stop() {
            std::thread::sleep(STAMP_DELAY);
        }
        let (keys, ns) = flush(q, root, now());
        stamped(&keys, ns);
    }
    let (keys, ns) = flush(q, root, now());
    stamped(&keys, ns);
}
