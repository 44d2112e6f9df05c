//! Recency persistence: a background thread writes "now" into the mtime of
//! block files that were used, at most once per `stamp_interval` per file
//! (the ledger decides when a stamp is due). The request path only queues.
//! On restart, `scan` rebuilds the LRU order from these mtimes.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use filetime::FileTime;
use parking_lot::{Condvar, Mutex};

use crate::cache::ledger::FileKey;
use crate::fs::{key_of, sys};

/// How long a queued stamp waits before it is written. The request that
/// queued it (a lookup, an open) replies with the attributes it read; the
/// attribute invalidation sent after the stamp must reach the kernel after
/// that reply, or the kernel would keep the old mtime for attr_timeout.
pub const STAMP_DELAY: Duration = Duration::from_millis(100);

/// Queue of `(key, path relative to BACKING)` to stamp.
#[derive(Default)]
pub struct Stamper {
    q: Mutex<Vec<(FileKey, PathBuf)>>,
    cv: Condvar,
}

impl Stamper {
    /// Queues a stamp of `path`, which should still be the object `key`.
    pub fn push(&self, key: FileKey, path: PathBuf) {
        self.q.lock().push((key, path));
        self.cv.notify_one();
    }

    /// Stamps waiting to be written.
    pub fn pending(&self) -> usize {
        self.q.lock().len()
    }

    /// Wakes [`Stamper::run`] (to stop, or to flush).
    pub fn kick(&self) {
        self.cv.notify_all();
    }

    /// Writes every queued stamp now; returns the keys stamped.
    /// Each path is resolved beneath `root` without following symlinks and
    /// checked to still be `key`, so a stamp never lands on another file.
    pub fn flush(&self, root: &OwnedFd) -> Vec<FileKey> {
        let batch = std::mem::take(&mut *self.q.lock());
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
        done
    }

    /// The thread body: flushes queued stamps in batches, each at least
    /// [`STAMP_DELAY`] after its first stamp was queued, until `stop` returns
    /// true; flushes once more on the way out. `stamped` gets the keys of
    /// each batch written.
    pub fn run(&self, root: &OwnedFd, stop: impl Fn() -> bool, stamped: impl Fn(&[FileKey])) {
        while !stop() {
            let queued = {
                let mut q = self.q.lock();
                if q.is_empty() {
                    self.cv.wait_for(&mut q, Duration::from_secs(1));
                }
                !q.is_empty()
            };
            if queued && !stop() {
                std::thread::sleep(STAMP_DELAY);
            }
            stamped(&self.flush(root));
        }
        stamped(&self.flush(root));
    }
}
