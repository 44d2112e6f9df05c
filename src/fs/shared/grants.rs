//! The shared budget (`-o shared`): one record in BACKING, [`BUDGET_FILE`]
//! in the lease directory, that grants each node the bytes it may hold, so
//! the whole tree stays within `max_size` at any store rate.
//!
//! The record holds the **drift** (bytes of the tree no node counts: what was
//! there before the nodes came, and the nets of nodes that left or died) and
//! one line per node: its grant, its last published net (see
//! `crate::ledger`'s grant support: the bytes its own stores added less what
//! its removals freed) and a beat. It is changed only under
//! `flock(LOCK_EX)` on the file, through the distributed filesystem's own
//! lock manager (the one the open-file protection uses), and every change
//! keeps **drift + Σ grants ≤ max_size**. A node admits a reservation only
//! while its net plus its reservations stays within its grant, so the tree's
//! usage (drift + Σ nets) never passes `max_size`, whatever the store rate.
//! A line's grant is never written below what its node holds (net plus
//! reservations): where a net grew without a take (objects adopted from a
//! node that left, files taken over at a hand-over) the sum may pass
//! `max_size` for a while, and no node takes until evictions bring it back.
//!
//! - **Taking.** A reservation short of grant takes more under the lock
//!   (what it lacks plus one [chunk](grant_chunk), or what is free). When
//!   nothing is free the node evicts inline, which lowers its own net: it
//!   never waits for another node.
//! - **Giving back.** Once a second each node publishes its net and gives
//!   back what it holds unused beyond one chunk, after reading the other
//!   nodes' removal journals: the sweeper's evictions of its blocks lower
//!   its net there, and what they freed reaches the pool that way.
//! - **Removals across nodes.** A node that removes an object it did not
//!   make (the sweeper's evictions, mostly) takes its bytes out of the drift
//!   right after the eviction (or unlink), for the pool; the maker, once it
//!   learns the object is gone, drops it from its net and its grant at once
//!   (the pool lent the bytes out already: kept in the grant too, both nodes
//!   stored into them) and puts the bytes back in the drift at its next
//!   transaction. An object of a node that left or
//!   died is in the drift already, so its removal frees it for good.
//! - **Sweeps** stay on the sweeper's own view of the tree (its watermarks):
//!   the record's nets count a block an owner has not yet learned is gone,
//!   so a sweep by them would go below the low watermark.
//! - **Dead nodes.** The sweeper watches every other node's beat by its own
//!   clock (no clocks are compared); a line unchanged for [`RECLAIM_AFTER`]
//!   is removed, its net moved to the drift and its grant to the pool. A node
//!   that finds its line gone (it was cut off, not dead) takes that net back
//!   from the drift and goes on with its own count.
//! - **Booking the drift.** The first node whose start-up index completes
//!   while the record has no booking sets the drift to its view of the tree
//!   less the published nets.

use std::collections::HashMap;
use std::ffi::CString;
use std::fmt::Write as _;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use fuser::Errno;
use parking_lot::Mutex;

use super::SharedTier;
use crate::fs::Core;
use crate::fs::accounts::grant::GrantState;
use crate::key::FileKey;
use crate::sys;

/// Name of the shared budget record in the lease directory.
pub const BUDGET_FILE: &str = "budget";
/// A node whose beat has not changed for this long, by the sweeper's clock,
/// is taken to be dead and its grant reclaimed (the lease's takeover time).
pub const RECLAIM_AFTER: Duration = super::lease::TAKEOVER_AFTER;

/// The shared record as read: drift, whether it was booked, and the nodes'
/// lines `id → (granted, net, beat)`.
#[derive(Debug, Default, Clone, PartialEq)]
struct Record {
    drift: i64,
    booked: bool,
    nodes: Vec<(String, i64, i64, u64)>,
}

impl Record {
    fn parse(text: &str) -> Record {
        let mut r = Record::default();
        let mut lines = text.lines();
        if let Some(head) = lines.next() {
            let f: Vec<&str> = head.split_whitespace().collect();
            if f.len() == 4 && f[0] == "boundfs-budget" {
                r.drift = f[2].parse().unwrap_or(0);
                r.booked = f[3] == "1";
            }
        }
        for line in lines {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let [id, g, n, b] = f[..]
                && let (Ok(g), Ok(n), Ok(b)) = (g.parse(), n.parse(), b.parse())
            {
                r.nodes.push((id.to_string(), g, n, b));
            }
        }
        r
    }

    fn render(&self) -> String {
        let mut s = format!("boundfs-budget 1 {} {}\n", self.drift, u8::from(self.booked));
        for (id, g, n, b) in &self.nodes {
            let _ = writeln!(s, "{id} {g} {n} {b}");
        }
        // Padded with blank lines to whole pages (see `grant_transaction`).
        let pad = s.len().div_ceil(4096).max(1) * 4096 - s.len();
        s.extend(std::iter::repeat_n('\n', pad));
        s
    }

    /// Nodes in the record, counting `me` whether or not it has a line yet.
    fn nodes_with(&self, me: &str) -> usize {
        self.nodes.len() + usize::from(!self.nodes.iter().any(|n| n.0 == me))
    }

    fn granted_by_others(&self, me: &str) -> i64 {
        self.nodes.iter().filter(|n| n.0 != me).map(|n| n.1).sum()
    }
}

/// This node's side of the shared budget.
#[derive(Default)]
pub struct Grants {
    io: Mutex<Io>,
    /// When a take last found nothing free: for [`EMPTY_WAIT`] after, a
    /// short node evicts for itself instead of asking again.
    empty_at: Mutex<Option<Instant>>,
    /// Since when every transaction on the record has failed (None: the
    /// last one went through). See [`Core::grant_unreachable`].
    failing_since: Mutex<Option<Instant>>,
}

/// How long a transaction waits for the record's flock before giving up
/// (EWOULDBLOCK): a lock left by a dead or cut-off client of the distributed
/// filesystem (JuiceFS keeps a dead session's locks until a client running
/// background jobs cleans the session up, 5 heartbeats = 60 s after it went
/// silent by default, and never without one) must not hold a store, the
/// beat or the sweeper for that long. A take that gives up is treated as one
/// that found nothing free (the node evicts for itself within its grant).
pub const RECORD_LOCK_WAIT: Duration = Duration::from_secs(1);

/// `flock(LOCK_EX)` on the record, polled with `LOCK_NB` for at most
/// [`RECORD_LOCK_WAIT`]. Errors: EWOULDBLOCK when another client still holds
/// it then; the errno of flock.
fn lock_record(fd: std::os::fd::BorrowedFd<'_>) -> Result<(), Errno> {
    let deadline = Instant::now() + RECORD_LOCK_WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match sys::flock(fd, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => return Ok(()),
            Err(e) if (e == Errno::EWOULDBLOCK || e == Errno::EINTR) && Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// How long after a take found nothing free a node evicts for itself
/// instead of asking the record again (grant comes back at the beats, once a
/// second): one transaction per second at most while the pool is empty.
pub const EMPTY_WAIT: Duration = Duration::from_secs(1);

impl Io {
    /// Sets this node's id on first use.
    fn ensure_id(&mut self) {
        if self.id.is_empty() {
            self.id = super::journal::node_id();
        }
    }
}

#[derive(Default)]
struct Io {
    id: String,
    beat: u64,
    /// Had a line in the record (a later absence means it was reclaimed).
    registered: bool,
    /// The net this node last wrote in its line (what a reclaim moved to
    /// the drift).
    published: i64,
    /// Other nodes' beats as last seen, and since when (this node's clock).
    watch: HashMap<String, (u64, Instant)>,
    /// The lease directory, opened once (dropped after an error, reopened
    /// at the next transaction).
    dir: Option<std::os::fd::OwnedFd>,
    /// Bytes adopted from nodes that left (see [`super::orphans`]) still to
    /// come off the drift (a beat's transaction failed).
    off_drift: i64,
    /// Left nodes' objects not known here yet (see [`super::orphans`]).
    pending: super::orphans::Pending,
}

/// Bytes a node takes at a time beyond what it lacks, and keeps unused at
/// a beat, with `nodes` nodes in the record: `max_size / 32`, but no more
/// than `(max_size − low watermark) / (2 × nodes)`, so that what all nodes
/// hold unused stays within half the band between the low watermark and
/// `max_size` (a node short of grant with nothing free evicts its own
/// blocks, and grant held unused elsewhere would let it go below the low
/// watermark); at least 1 MiB.
pub fn grant_chunk(policy: &crate::ledger::policy::Policy, nodes: usize) -> i64 {
    let band = policy.max_size.saturating_sub(policy.low_bytes()) / (2 * nodes.max(1) as u64);
    band.min(policy.max_size / 32).max(1 << 20) as i64
}

impl Core {
    /// One transaction on the record under its flock: `f` changes the record
    /// given this node's id and state, and returns this node's new grant
    /// (None: leave its line out). The grant is lowered in the ledger before
    /// the record is written (never below what the node holds) and raised
    /// after. Returns the record as written. Errors: the backing errno.
    fn grant_transaction(
        &self,
        io: &mut Io,
        f: impl FnOnce(&mut Record, &str, GrantState) -> Option<i64>,
    ) -> Result<Record, Errno> {
        io.ensure_id();
        let r = self.grant_locked(io, f);
        if r.is_err() {
            io.dir = None;
        }
        r
    }

    /// The lease directory as cached in `io`, opened on first use.
    /// Errors: the backing errno.
    fn grant_dir<'a>(&self, io: &'a mut Io) -> Result<std::os::fd::BorrowedFd<'a>, Errno> {
        if io.dir.is_none() {
            io.dir = Some(super::lease::lease_dir(self)?);
        }
        io.dir.as_ref().map(AsFd::as_fd).ok_or(Errno::EIO)
    }

    /// [`Core::grant_transaction`] with the lease directory as cached in `io`.
    fn grant_locked(
        &self,
        io: &mut Io,
        f: impl FnOnce(&mut Record, &str, GrantState) -> Option<i64>,
    ) -> Result<Record, Errno> {
        let dir = self.grant_dir(io)?;
        let name = CString::new(BUDGET_FILE).map_err(|_| Errno::EINVAL)?;
        let fd =
            sys::openat(dir.as_fd(), &name, libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0o644)?;
        lock_record(fd.as_fd())?;
        // The size from the filesystem, not this client's attribute cache
        // (a second old on JuiceFS); the record is padded to whole pages, so
        // its size rarely changes anyway.
        let (size, _) = sys::size_synced(fd.as_fd())?;
        let mut buf = vec![0u8; usize::try_from(size).map_err(|_| Errno::EFBIG)?];
        let n = sys::pread_full(fd.as_raw_fd(), &mut buf, 0)?;
        let mut rec = Record::parse(&String::from_utf8_lossy(&buf[..n]));
        let me = io.id.clone();
        let mine = rec.nodes.iter().position(|x| x.0 == me);
        // Removals since the last transaction: this node's objects removed
        // elsewhere go from its net to the drift, others' objects it removed
        // come out of the drift (`crate::ledger`'s grant support).
        let moved = self.accounts().take_drift_moves();
        rec.drift += moved.0 as i64 - moved.1 as i64;
        if mine.is_none() && io.registered {
            // Reclaimed as dead while alive (cut off, stopped): the reclaim
            // moved the net it last published to the drift; it takes that
            // back and goes on with its own count, which still holds every
            // object it made (those stored since, those in flight) and has
            // dropped those others removed meanwhile (their removers took
            // them out of the drift). Counting from zero instead lost the
            // objects in flight: their growth counted nowhere.
            log::warn!(
                "shared tier: this node's line in the shared budget record was reclaimed; it takes its count back"
            );
            rec.drift -= io.published;
        }
        io.registered = true;
        let before = self.accounts().grant_state();
        let wanted = f(&mut rec, &me, before);
        rec.nodes.retain(|x| x.0 != me);
        if let Some(mut g) = wanted {
            // Never below what the node holds: its net grows without a take
            // when it adopts a left node's objects (their bytes leave the
            // drift here) or takes files over at a hand-over, and a line
            // short of it left those bytes in no count, free in the pool
            // for another node (shared/upgrade-record: 2 MiB over max_size).
            // Free may then be negative until the node evicts.
            g = g.max(self.accounts().grant_state().held);
            if before.granted.is_none_or(|b| g < b) {
                g = self.accounts().lower_grant(g);
            }
            io.beat += 1;
            // Removals learned from here on are the next transaction's
            // moves (out of this net already, and of the ledger's grant).
            let net = self.accounts().grant_state().net;
            rec.nodes.push((me, g, net, io.beat));
            if let Err(e) = self.write_record(&fd, &rec) {
                self.accounts().restore_drift_moves(moved.0, moved.1);
                return Err(e);
            }
            io.published = net;
            if g > before.granted.unwrap_or(0) {
                self.accounts().set_granted(Some(g));
            }
        } else if let Err(e) = self.write_record(&fd, &rec) {
            self.accounts().restore_drift_moves(moved.0, moved.1);
            return Err(e);
        }
        Ok(rec)
    }

    fn write_record(&self, fd: &std::os::fd::OwnedFd, rec: &Record) -> Result<(), Errno> {
        let text = rec.render();
        sys::pwrite_full(fd.as_raw_fd(), text.as_bytes(), 0)?;
        sys::ftruncate(fd.as_raw_fd(), text.len() as u64)?;
        sys::fsync(fd.as_raw_fd(), true)
    }

    /// A reservation lacks `short` bytes of grant: takes them plus one chunk
    /// from what the record has free, or what there is. Returns the bytes
    /// gained (0: none free, or the record could not be read; logged).
    /// Unless `force`, a take within [`EMPTY_WAIT`] of one that found nothing
    /// free returns 0 at once (the caller evicts for itself).
    pub(crate) fn grant_take(&self, tier: &SharedTier, short: u64, force: bool) -> u64 {
        if !tier.budget {
            return 0;
        }
        if !force && tier.grants.empty_at.lock().is_some_and(|t| t.elapsed() < EMPTY_WAIT) {
            return 0;
        }
        let mut io = tier.grants.io.lock();
        // Another store found nothing free (or the record locked) while this
        // one waited for `io`.
        if !force && tier.grants.empty_at.lock().is_some_and(|t| t.elapsed() < EMPTY_WAIT) {
            return 0;
        }
        let policy = self.accounts().policy();
        let max = policy.max_size as i64;
        let mut old = 0;
        let r = self.grant_transaction(&mut io, |rec, me, st| {
            old = st.granted.unwrap_or(0);
            let chunk = grant_chunk(&policy, rec.nodes_with(me));
            let free = max - rec.drift - rec.granted_by_others(me);
            // `short` is what the grant lacked for the reservation asked.
            Some((old + short as i64 + chunk).min(free).max(old.min(free)))
        });
        match r {
            Ok(rec) => {
                let now = rec.nodes.iter().find(|x| x.0 == io.id).map_or(0, |x| x.1);
                let got = u64::try_from(now - old).unwrap_or(0);
                log::debug!(
                    "shared budget: took {got} bytes for {short} short (grant {old} -> {now}, drift {})",
                    rec.drift
                );
                *tier.grants.empty_at.lock() = (got < short).then(Instant::now);
                *tier.grants.failing_since.lock() = None;
                got
            }
            Err(e) => {
                *tier.grants.empty_at.lock() = Some(Instant::now());
                self.grant_unreachable(tier);
                crate::warn_limited!(
                    "shared tier: could not read the shared budget record: {e:?}; stores wait for eviction"
                );
                0
            }
        }
    }

    /// A transaction on the record failed. Once they have all failed for
    /// [`RECLAIM_AFTER`] (a lock left by a dead client, which JuiceFS keeps
    /// until a client with background jobs cleans its session up; the
    /// record unreadable), this node admits stores against its own view of
    /// the tree, as with `shared_budget=views`, instead of failing them with
    /// ENOSPC once it has nothing of its own to evict; the next transaction
    /// that goes through sets its grant again (to what it holds, at least).
    fn grant_unreachable(&self, tier: &SharedTier) {
        let mut since = tier.grants.failing_since.lock();
        let first = *since.get_or_insert_with(Instant::now);
        if first.elapsed() >= RECLAIM_AFTER && self.accounts().grant_state().granted.is_some() {
            log::warn!(
                "shared tier: the shared budget record has been unusable for {RECLAIM_AFTER:?}; this node admits \
                 stores against its own view of the tree until it is back"
            );
            self.accounts().set_granted(None);
        }
    }

    /// The once-a-second beat: publishes this node's net, gives back what it
    /// holds unused beyond one [chunk](grant_chunk), and, on the sweeper,
    /// reclaims dead nodes' lines.
    pub(crate) fn grant_beat(&self, tier: &SharedTier, sweeping: bool) {
        if !tier.budget {
            return;
        }
        let mut io = tier.grants.io.lock();
        let policy = self.accounts().policy();
        let max = policy.max_size as i64;
        let now = Instant::now();
        let mut watch = std::mem::take(&mut io.watch);
        if sweeping {
            io.ensure_id();
            let me = io.id.clone();
            // The cached lease directory: this runs every second.
            let mut pending = std::mem::take(&mut io.pending);
            match self.grant_dir(&mut io) {
                Ok(lease) => {
                    let adopted = self.orphans_adopt(lease, &me, &mut pending);
                    io.off_drift += adopted;
                }
                Err(e) => crate::warn_limited!("shared tier: could not open the lease directory: {e:?}"),
            }
            io.pending = pending;
        }
        let off_drift = io.off_drift;
        let r = self.grant_transaction(&mut io, |rec, me, st| {
            rec.drift -= off_drift;
            if sweeping {
                let mut seen = HashMap::new();
                rec.nodes.retain(|(id, _, net, beat)| {
                    if id == me {
                        return true;
                    }
                    let since = match watch.get(id) {
                        Some((b, t)) if b == beat => *t,
                        _ => now,
                    };
                    if now.duration_since(since) >= RECLAIM_AFTER {
                        log::warn!(
                            "shared tier: node {id} has not beaten for {RECLAIM_AFTER:?}: its grant is reclaimed"
                        );
                        rec.drift += net;
                        return false;
                    }
                    seen.insert(id.clone(), (*beat, since));
                    true
                });
                watch = seen;
            }
            let g = st.granted.unwrap_or(0);
            let free = max - rec.drift - rec.granted_by_others(me);
            let keep = g.min(st.held + grant_chunk(&policy, rec.nodes_with(me)));
            Some(keep.min(free.max(st.held.min(g))))
        });
        io.watch = watch;
        if r.is_ok() {
            io.off_drift = 0;
        }
        match r {
            Ok(_) => *tier.grants.failing_since.lock() = None,
            Err(e) => {
                // Stores evict for themselves meanwhile rather than wait for
                // the record again.
                *tier.grants.empty_at.lock() = Some(Instant::now());
                self.grant_unreachable(tier);
                crate::warn_limited!("shared tier: could not update the shared budget record: {e:?}")
            }
        }
    }

    /// After an eviction that removed other nodes' objects: their bytes
    /// come out of the drift now, before the journal tells their makers
    /// (who then drop them from their grants and take from the pool).
    pub(crate) fn grant_settle(&self, tier: &SharedTier) {
        if tier.budget && self.accounts().drift_out() > 0 {
            self.grant_cover(tier);
        }
    }

    /// A hand-over gave this daemon files to count as its own, or
    /// reservations of writers in flight (`Core::adopt_state`): writes its
    /// line now, its grant covering them, before it serves and so before the
    /// old daemon leaves the record (which then leaves those files out of
    /// the drift). Also [`Core::grant_settle`]'s transaction (a transaction
    /// writes the drift out and the grant as at least net + reservations).
    /// Errors are logged (the next transaction covers them).
    pub(crate) fn grant_cover(&self, tier: &SharedTier) {
        if !tier.budget {
            return;
        }
        let mut io = tier.grants.io.lock();
        let r = self.grant_transaction(&mut io, |_, _, st| Some(st.granted.unwrap_or(0)));
        if let Err(e) = r {
            crate::warn_limited!("shared tier: could not update the shared budget record: {e:?}");
        }
    }

    /// The start-up index is complete: if the record has no booking yet,
    /// books the drift as this node's view of the tree less the published nets.
    pub(crate) fn grant_book(&self, tier: &SharedTier) {
        if !tier.budget {
            return;
        }
        let mut io = tier.grants.io.lock();
        let mut cleared = false;
        let r = self.grant_transaction(&mut io, |rec, me, st| {
            if !rec.booked {
                // Lists left for a record that was cleared since: their
                // bytes are in the tree this booking counts.
                cleared = true;
                let nets: i64 = rec.nodes.iter().filter(|n| n.0 != me).map(|n| n.2).sum();
                rec.drift = (st.usage as i64 - st.net - nets).max(0);
                rec.booked = true;
                log::info!(
                    "shared tier: {} bytes of the tree were there before the nodes; they count in the budget",
                    rec.drift
                );
            }
            st.granted
        });
        if let Err(e) = r {
            crate::warn_limited!("shared tier: could not book the tree in the shared budget record: {e:?}");
        } else if cleared {
            self.orphans_clear();
        }
    }

    /// Unmount: this node's net moves to the drift and its line goes (the
    /// last node to leave clears the record, which the next first node books).
    pub(crate) fn grant_leave(&self, tier: &SharedTier) {
        self.grant_leave_except(tier, &[])
    }

    /// [`Core::grant_leave`], after a hand-over: the objects `given` (open
    /// files the next daemon counts as its own, `fs::handed`) are left out
    /// of the net moved to the drift and of the list for the sweeper.
    pub(crate) fn grant_leave_except(&self, tier: &SharedTier, given: &[FileKey]) {
        if !tier.budget {
            return;
        }
        let mut io = tier.grants.io.lock();
        // Nothing changes any more at unmount: the list and the net agree.
        let (_, mut objects) = self.accounts().own_objects();
        let mut given_bytes = 0i64;
        objects.retain(|(k, bytes, _)| {
            let keep = !given.contains(k);
            if !keep {
                given_bytes += *bytes as i64;
            }
            keep
        });
        let r = self.grant_transaction(&mut io, |rec, _, st| {
            rec.drift += st.net - given_bytes;
            None
        });
        match r {
            Ok(rec) if rec.nodes.is_empty() => {
                if let Ok(dir) = super::lease::lease_dir(self)
                    && let Ok(name) = CString::new(BUDGET_FILE)
                {
                    let _ = sys::unlinkat(dir.as_fd(), &name, 0);
                }
            }
            Ok(_) => {
                // The sweeper takes them over (fs/shared/orphans.rs).
                if let Err(e) = self.orphans_leave(&io.id, &objects) {
                    log::warn!(
                        "shared tier: could not list this node's objects for the others to adopt: {e:?}; \
                         their bytes stay in the shared budget's drift"
                    );
                }
            }
            Err(e) => crate::warn_limited!("shared tier: could not leave the shared budget record: {e:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Record;

    #[test]
    fn the_record_reads_back_what_it_wrote_and_ignores_torn_lines() {
        let r = Record { drift: 5, booked: true, nodes: vec![("a".into(), 10, -3, 7), ("b".into(), 20, 20, 1)] };
        assert_eq!(Record::parse(&r.render()), r);
        assert_eq!(r.granted_by_others("a"), 20);
        let torn = format!("{}c 1", r.render());
        assert_eq!(Record::parse(&torn), r);
    }
}

#[cfg(test)]
#[path = "grants_tests.rs"]
mod grants_tests;
