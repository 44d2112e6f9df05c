//! Requests a dead daemon carried out but never answered (`-o supervise`).
//!
//! After a crash the kernel resends every request the dead daemon had read
//! and not answered (FUSE_NOTIFY_RESEND: the same unique with
//! FUSE_UNIQUE_RESEND set, `fuse_resend` in fs/fuse/dev.c), and the next
//! daemon runs it again. For a read that gives the same answer; for a
//! request that changes the namespace it does not: a MKDIR already done
//! answers EEXIST, an UNLINK or RENAME already done ENOENT, and an OPEN or
//! CREATE already done leaves the first handle open for good (its fh never
//! reached the kernel, which therefore never releases it: the file stays
//! pinned, never evicted, until the unmount).
//!
//! So each supervised daemon journals these requests in the supervisor's
//! memfd, after the open handle table (`held`): one slot per request in
//! flight, (unique, outcome), claimed when the request starts, marked done
//! (with the fh it opened, if any) once the backing call succeeded, freed
//! once the reply is written. The next daemon takes the marks left behind
//! before it serves ([`take_done`]); a resent request found there
//! ([`done_before`]) is answered as done without running it again (a
//! RENAME_EXCHANGE run twice would undo itself): MKDIR, MKNOD, SYMLINK and
//! LINK with the entry of what they made, UNLINK, RMDIR and RENAME with
//! success, and an OPEN or CREATE first releases the handle the dead daemon
//! opened (adopted under its fh by `held`) and then opens again. A mark
//! stays in the journal until its resend is answered, so a daemon killed
//! in between leaves it to the next.
//!
//! Windows: a daemon killed between the backing call and the mark leaves
//! a request not known to be done, which runs again (EEXIST or ENOENT as
//! a rule; an exchange undone); a reply that went out before the slot was
//! freed leaves a mark no resend will match (dropped [`EXPIRE_AFTER`]
//! later).
//!
//! Layout: [`SLOTS`] slots of two u64: the unique (FUSE_UNIQUE_RESEND
//! cleared; 0: free) and the outcome ([`DONE`] | fh; 0 while in flight),
//! open addressing from `unique % SLOTS`. Lock: [`DONE_BEFORE`] is a leaf
//! mutex.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::held::OpenTable;

/// Journal slots (one per request in flight; a daemon has at most its
/// reader threads' requests in flight). 64 KiB after the handle table.
pub const SLOTS: usize = 4096;
/// u64 words the journal adds to the supervisor's memfd.
pub const WORDS: usize = 2 * SLOTS;
/// FUSE_UNIQUE_RESEND (include/uapi/linux/fuse.h): the bit the kernel sets
/// in the unique of a resent request.
pub const RESEND: u64 = 1 << 63;
/// The outcome's bit for "the backing call succeeded".
const DONE: u64 = 1 << 63;

impl OpenTable {
    fn jword(&self, i: usize) -> &AtomicU64 {
        self.extra_word(i)
    }

    /// Claims a slot for request `unique` (resend bit ignored). None when
    /// the journal is full (the request then runs unjournaled).
    pub fn journal_begin(&self, unique: u64) -> Option<usize> {
        let u = unique & !RESEND;
        if u == 0 {
            return None;
        }
        (0..SLOTS).map(|p| (u as usize).wrapping_add(p) % SLOTS).find(|&s| {
            let won = self.jword(2 * s).compare_exchange(0, u, Ordering::AcqRel, Ordering::Relaxed).is_ok();
            if won {
                self.jword(2 * s + 1).store(0, Ordering::Release);
            }
            won
        })
    }

    /// Marks slot `s` done, with the fh it opened (0: none).
    pub fn journal_done(&self, s: usize, fh: u64) {
        self.jword(2 * s + 1).store(DONE | fh, Ordering::Release);
    }

    /// Frees slot `s` (its reply is written).
    pub fn journal_end(&self, s: usize) {
        self.jword(2 * s + 1).store(0, Ordering::Release);
        self.jword(2 * s).store(0, Ordering::Release);
    }

    /// The done requests previous daemons left (unique → (fh, 0 for none;
    /// slot)). Their slots stay taken until each is answered
    /// ([`done_before`]) or expires ([`expire`]), so a daemon killed
    /// before it answered a resend leaves the mark for the next one; the
    /// slots of requests that were not done are freed.
    pub fn journal_take(&self) -> HashMap<u64, (u64, usize)> {
        let mut done = HashMap::new();
        for s in 0..SLOTS {
            let u = self.jword(2 * s).load(Ordering::Acquire);
            let out = self.jword(2 * s + 1).load(Ordering::Acquire);
            if u != 0 && out & DONE != 0 {
                done.insert(u, (out & !DONE, s));
            } else {
                self.journal_end(s);
            }
        }
        done
    }
}

/// What the previous daemons had done and not answered (unique → (fh, slot)).
static DONE_BEFORE: Mutex<Option<HashMap<u64, (u64, usize)>>> = Mutex::new(None);

/// How long after a restart the marks no resend matched are dropped (the
/// kernel resends at once, so by then each was a request whose reply went
/// out before its slot was freed).
pub const EXPIRE_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// One journaled request of this daemon: mark it done with
/// [`Ticket::done`]; dropping it (after the reply) frees its slot.
pub struct Ticket {
    slot: Option<usize>,
}

/// Starts journaling request `unique` (nothing without a supervisor).
pub fn begin(unique: u64) -> Ticket {
    Ticket { slot: super::held::table().and_then(|t| t.journal_begin(unique)) }
}

impl Ticket {
    /// The backing call succeeded; `fh`: the handle it opened (0: none).
    pub fn done(&self, fh: u64) {
        if let (Some(s), Some(t)) = (self.slot, super::held::table()) {
            t.journal_done(s, fh);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let (Some(s), Some(t)) = (self.slot, super::held::table()) {
            t.journal_end(s);
        }
    }
}

/// After a crash, before serving: takes the done requests the dead
/// daemons left in the journal, and drops those no resend matched
/// [`EXPIRE_AFTER`] later (a thread). Returns how many.
pub fn take_done() -> usize {
    let done = super::held::table().map(OpenTable::journal_take).unwrap_or_default();
    let n = done.len();
    if let Ok(mut d) = DONE_BEFORE.lock() {
        *d = Some(done);
    }
    if n > 0 {
        let _ = std::thread::Builder::new().name("inflight-expire".into()).spawn(|| {
            std::thread::sleep(EXPIRE_AFTER);
            expire();
        });
    }
    n
}

/// Frees the slots of the marks no resend matched.
fn expire() {
    let Some(left) = DONE_BEFORE.lock().ok().and_then(|mut d| d.take()) else { return };
    if let Some(t) = super::held::table() {
        for (_, s) in left.into_values() {
            t.journal_end(s);
        }
    }
}

/// Whether request `unique` is a resend of one a dead daemon had done:
/// Some(fh it opened, 0 for none), once (its mark's slot is freed: the
/// caller's own ticket, marked done, carries it on).
pub fn done_before(unique: u64) -> Option<u64> {
    if unique & RESEND == 0 {
        return None;
    }
    let (fh, s) = DONE_BEFORE.lock().ok()?.as_mut()?.remove(&(unique & !RESEND))?;
    if let Some(t) = super::held::table() {
        t.journal_end(s);
    }
    Some(fh)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon killed between the mark and the reply leaves its done
    /// requests for the next mapping; one killed before the mark, or one
    /// that finished, leaves nothing.
    #[test]
    fn the_next_daemon_sees_what_the_dead_one_had_done() {
        let fd = OpenTable::create().unwrap();
        let dead = OpenTable::map(fd.try_clone().unwrap()).unwrap();
        let mkdir = dead.journal_begin(10).unwrap();
        let open = dead.journal_begin(12 + SLOTS as u64 * 2).unwrap();
        let unlink = dead.journal_begin(14).unwrap();
        let answered = dead.journal_begin(16).unwrap();
        dead.journal_done(mkdir, 0);
        dead.journal_done(open, 7);
        dead.journal_done(answered, 0);
        dead.journal_end(answered);
        let _ = unlink; // killed before its mark
        assert!(dead.opened(7, 100, 0), "the handle table beside it is untouched");
        let next = OpenTable::map(fd.try_clone().unwrap()).unwrap();
        let done = next.journal_take();
        let fhs: HashMap<u64, u64> = done.iter().map(|(&u, &(fh, _))| (u, fh)).collect();
        assert_eq!(fhs, HashMap::from([(10, 0), (12 + SLOTS as u64 * 2, 7)]));
        assert_eq!(next.live().len(), 1, "the handle table beside it is untouched");
        // The next daemon answers the mkdir's resend (its own ticket takes
        // another slot; the mark's is freed) and is killed before the open's:
        // the daemon after it still finds the open done.
        assert_ne!(next.journal_begin(RESEND | 10), Some(mkdir), "the mark's slot stays taken");
        next.journal_end(done[&10].1);
        let after = OpenTable::map(fd).unwrap();
        let left = after.journal_take();
        assert_eq!(left.keys().copied().collect::<Vec<_>>(), vec![12 + SLOTS as u64 * 2]);
        assert_eq!(left[&(12 + SLOTS as u64 * 2)].0, 7);
    }
}
