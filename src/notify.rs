//! Kernel cache invalidation, sent from one dedicated thread.
//!
//! `FUSE_NOTIFY_INVAL_ENTRY` makes the kernel lock the parent directory's
//! inode. If a FUSE request handler sent it while a client held that lock
//! waiting for another request, every event loop could end up waiting; so
//! handlers only queue invalidations here, and may wait (bounded) until theirs
//! has been sent, so that a stat right after an eviction already says ENOENT.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::sync::OnceLock;
use std::time::Duration;

use fuser::{INodeNo, Notifier};
use parking_lot::{Condvar, Mutex};

/// One invalidation: an entry `(parent FUSE inode, name)`, or the cached
/// attributes of a FUSE inode.
enum Item {
    Entry(u64, OsString),
    Attrs(u64),
}

#[derive(Default)]
struct Queue {
    items: VecDeque<(u64, Item)>,
    queued: u64,
    sent: u64,
    stop: bool,
}

/// Queue of entry and attribute invalidations.
#[derive(Default)]
pub struct Invalidator {
    q: Mutex<Queue>,
    cv: Condvar,
    notifier: OnceLock<Notifier>,
}

impl Invalidator {
    /// Hands over the session's notifier; before this, invalidations are dropped
    /// (the kernel has cached nothing yet).
    pub fn set_notifier(&self, n: Notifier) {
        let _ = self.notifier.set(n);
    }

    /// Queues an invalidation of `name` in directory `parent`; returns a ticket for [`Invalidator::wait`].
    pub fn push(&self, parent: u64, name: OsString) -> u64 {
        self.enqueue(Item::Entry(parent, name))
    }

    /// Queues an invalidation of the cached attributes of `ino` (after the
    /// daemon changed them itself, e.g. an mtime stamp).
    pub fn push_attrs(&self, ino: u64) -> u64 {
        self.enqueue(Item::Attrs(ino))
    }

    fn enqueue(&self, item: Item) -> u64 {
        let mut q = self.q.lock();
        q.queued += 1;
        let t = q.queued;
        q.items.push_back((t, item));
        self.cv.notify_all();
        t
    }

    /// Waits until every invalidation queued so far is sent, at most `timeout`.
    pub fn wait_all(&self, timeout: Duration) {
        let t = self.q.lock().queued;
        self.wait(t, timeout);
    }

    /// Waits until ticket `t` is sent, at most `timeout`.
    pub fn wait(&self, t: u64, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        let mut q = self.q.lock();
        while q.sent < t && !q.stop {
            if self.cv.wait_until(&mut q, deadline).timed_out() {
                break;
            }
        }
    }

    /// Ends [`Invalidator::run`].
    pub fn stop(&self) {
        self.q.lock().stop = true;
        self.cv.notify_all();
    }

    /// The thread body: sends queued invalidations until [`Invalidator::stop`].
    pub fn run(&self) {
        loop {
            let (t, item) = {
                let mut q = self.q.lock();
                loop {
                    if q.stop {
                        return;
                    }
                    if let Some(item) = q.items.pop_front() {
                        break item;
                    }
                    self.cv.wait(&mut q);
                }
            };
            if let Some(n) = self.notifier.get() {
                let r = match &item {
                    Item::Entry(parent, name) => n.inval_entry(INodeNo(*parent), name),
                    // offset -1: attributes only, the page cache stays.
                    Item::Attrs(ino) => n.inval_inode(INodeNo(*ino), -1, 0),
                };
                if let Err(e) = r {
                    log::debug!("invalidation failed: {e}");
                }
            }
            let mut q = self.q.lock();
            q.sent = t;
            self.cv.notify_all();
        }
    }
}
