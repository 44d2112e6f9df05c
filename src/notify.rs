//! Kernel cache invalidation, sent from one dedicated thread.
//!
//! `FUSE_NOTIFY_INVAL_ENTRY` makes the kernel lock the parent directory's
//! inode. If a FUSE request handler sent it while a client held that lock
//! waiting for another request, every event loop could end up waiting; so
//! handlers only queue invalidations here, and may wait (bounded) until theirs
//! has been sent, so that a stat right after an eviction already says ENOENT.
//!
//! The wait for that lock is uninterruptible: a SIGKILL that finds this
//! thread there while a client's MKDIR in the same directory waits for a
//! reply leaves it there, and the process with it, /dev/fuse open. The
//! mount's watchdog process (`daemon::watchdog`) aborts the connection then,
//! which ends the MKDIR and lets this thread go.
//!
//! A removal reserves its place in the queue before the ledger marks the file
//! as leaving ([`Invalidator::reserve`]): an OPEN refused from that moment on
//! waits with [`Invalidator::wait_all`] for that place too, so its ENOENT never
//! reaches the client before the kernel has dropped the name.

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
    /// A place reserved by a removal still under way; sent as nothing if the
    /// removal ends without one.
    Reserved,
    Nothing,
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

    /// Drops the kernel's cached attributes (and cached POSIX ACLs) of FUSE
    /// inode `ino` now, from the calling thread, before the caller answers
    /// its request: the next stat or permission check asks GETATTR (and
    /// GETXATTR for the ACLs). Unlike an entry invalidation this is safe
    /// from a request handler: `fuse_reverse_inval_inode` (fs/fuse/inode.c)
    /// with offset -1 takes only the inode's spinlock, never a lock a
    /// pending request can hold. Failures (the kernel has no such inode: it
    /// cached nothing) are logged at debug level.
    pub fn attrs_now(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            crate::sys::tick();
            if let Err(e) = n.inval_inode(INodeNo(ino), -1, 0) {
                log::debug!("attribute invalidation of inode {ino} failed: {e}");
            }
        }
    }

    /// Reserves the next place in the queue for a removal about to begin.
    /// Invalidations queued after it wait until it is filled with
    /// [`Reservation::fill`] or dropped, so a removal must not hold one across
    /// anything that waits for the kernel.
    pub fn reserve(&self) -> Reservation<'_> {
        let t = self.enqueue(Item::Reserved);
        Reservation { inval: self, ticket: t, filled: false }
    }

    fn settle(&self, t: u64, item: Item) {
        let mut q = self.q.lock();
        if let Some(slot) = q.items.iter_mut().find(|(n, _)| *n == t) {
            slot.1 = item;
        }
        self.cv.notify_all();
    }

    fn enqueue(&self, item: Item) -> u64 {
        let mut q = self.q.lock();
        q.queued += 1;
        let t = q.queued;
        q.items.push_back((t, item));
        self.cv.notify_all();
        t
    }

    /// Waits until every invalidation queued or reserved so far is sent, at
    /// most `timeout`; returns whether they were.
    pub fn wait_all(&self, timeout: Duration) -> bool {
        let t = self.q.lock().queued;
        self.wait(t, timeout)
    }

    /// Waits until ticket `t` is sent, at most `timeout`; returns whether it was.
    pub fn wait(&self, t: u64, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut q = self.q.lock();
        while q.sent < t && !q.stop {
            if self.cv.wait_until(&mut q, deadline).timed_out() {
                break;
            }
        }
        q.sent >= t
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
                    if !matches!(q.items.front(), None | Some((_, Item::Reserved))) {
                        if let Some(item) = q.items.pop_front() {
                            break item;
                        }
                    }
                    self.cv.wait(&mut q);
                }
            };
            if let Some(n) = self.notifier.get() {
                let r = match &item {
                    Item::Entry(parent, name) => n.inval_entry(INodeNo(*parent), name),
                    // offset -1: attributes only, the page cache stays.
                    Item::Attrs(ino) => n.inval_inode(INodeNo(*ino), -1, 0),
                    Item::Reserved | Item::Nothing => Ok(()),
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

/// A place in the invalidation queue held by a removal under way (see
/// [`Invalidator::reserve`]). Dropped unfilled, it is sent as nothing.
pub struct Reservation<'a> {
    inval: &'a Invalidator,
    ticket: u64,
    filled: bool,
}

impl Reservation<'_> {
    /// Fills the place with an invalidation of `name` in directory `parent`;
    /// returns its ticket for [`Invalidator::wait`].
    pub fn fill(mut self, parent: u64, name: OsString) -> u64 {
        self.filled = true;
        self.inval.settle(self.ticket, Item::Entry(parent, name));
        self.ticket
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.filled {
            self.inval.settle(self.ticket, Item::Nothing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// An OPEN refused while a removal is under way waits for the removal's
    /// invalidation, even though it was not queued yet when the OPEN looked.
    #[test]
    fn wait_all_covers_a_reservation_filled_later() {
        let inval = Arc::new(Invalidator::default());
        let runner = {
            let i = inval.clone();
            std::thread::spawn(move || i.run())
        };
        let r = inval.reserve();
        let later = inval.push_attrs(7);
        // Nothing behind the unfilled place is sent, however long one waits.
        assert!(!inval.wait(later, Duration::from_millis(50)));
        let t = r.fill(1, "victim.bin".into());
        assert!(t < later);
        assert!(inval.wait_all(Duration::from_secs(10)));
        // A reservation dropped unfilled does not stall the queue.
        drop(inval.reserve());
        let after = inval.push_attrs(8);
        assert!(inval.wait(after, Duration::from_secs(10)));
        inval.stop();
        runner.join().expect("invalidator thread");
    }
}
