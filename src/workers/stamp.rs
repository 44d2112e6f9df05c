//! Recency persistence: a background thread writes "now" into the mtime of
//! block files that were used, at most once per `stamp_interval` per file
//! (the ledger decides when a stamp is due). The request path only queues
//! (`crate::fs::stamps::Stamper`). On restart, `scan` rebuilds the LRU order
//! from these mtimes.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
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

/// Writes every stamp queued in `q` now; returns the keys stamped and the
/// mtime written into them (ns since the epoch). Each path is resolved beneath `root` without following symlinks and
/// checked to still be `key`, so a stamp never lands on another file.
pub fn flush(q: &Stamper, root: &OwnedFd) -> (Vec<FileKey>, i64) {
    let batch = q.take();
    let now = FileTime::now();
    let mut done = Vec::new();
    for (key, path) in batch {
        let Ok(fd) = sys::open_beneath(root.as_fd(), &path, libc::O_PATH) else {
            continue;
        };
        match sys::fstat(fd.as_fd()) {
            Ok(st) if key_of(&st) == key && st.st_mode & libc::S_IFMT == libc::S_IFREG => {}
            _ => continue,
        }
        let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match filetime::set_file_mtime(&proc, now) {
            Ok(()) => done.push(key),
            Err(e) => log::debug!("stamp of {} failed: {e}", path.display()),
        }
    }
    let ns = now.unix_seconds().saturating_mul(1_000_000_000).saturating_add(i64::from(now.nanoseconds()));
    (done, ns)
}

/// The thread body: flushes stamps queued in `q` in batches, each at least
/// [`STAMP_DELAY`] after its first stamp was queued, until `stop` returns
/// true; flushes once more on the way out. `stamped` gets the keys of
/// each batch written and the mtime written (ns since the epoch).
pub fn run(q: &Stamper, root: &OwnedFd, stop: impl Fn() -> bool, stamped: impl Fn(&[FileKey], i64)) {
    while !stop() {
        let queued = q.wait_queued(Duration::from_secs(1));
        if queued && !stop() {
            std::thread::sleep(STAMP_DELAY);
        }
        let (keys, ns) = flush(q, root);
        stamped(&keys, ns);
    }
    let (keys, ns) = flush(q, root);
    stamped(&keys, ns);
}
