//! The queue of recency stamps: the request path pushes `(key, path)` when
//! the ledger says a stamp is due; the stamp writer (`crate::workers::stamp`)
//! takes them in batches and writes the mtimes.

use std::path::PathBuf;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::key::FileKey;

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

    /// Wakes the stamp writer (to stop, or to flush).
    pub fn kick(&self) {
        self.cv.notify_all();
    }

    /// Takes every queued stamp.
    pub fn take(&self) -> Vec<(FileKey, PathBuf)> {
        std::mem::take(&mut *self.q.lock())
    }

    /// Waits at most `timeout` for a stamp when none is queued, or for a
    /// [`Stamper::kick`]; returns whether any is queued.
    pub fn wait_queued(&self, timeout: Duration) -> bool {
        let mut q = self.q.lock();
        if q.is_empty() {
            self.cv.wait_for(&mut q, timeout);
        }
        !q.is_empty()
    }
}
