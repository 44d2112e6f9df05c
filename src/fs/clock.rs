//! The wall clock recency stamps are written and compared in.
//!
//! The LRU order across nodes (`-o shared`) is persisted as block files'
//! mtimes, and every mtime in the shared tree comes from some node's own
//! clock: boundfs's stamp writer sets explicit values (this node's
//! `SystemTime::now`), and the distributed filesystem's client sets a new
//! or written file's mtime from its own host's clock (JuiceFS's metadata
//! library runs in the client and takes `time.Now()` for a write and for
//! `UTIME_NOW`; Redis only stores the value). So a node whose clock is 5
//! minutes behind writes stamps that read as 5 minutes old to the sweeper,
//! and one 5 minutes ahead writes stamps that look the hottest for 5 minutes.
//!
//! Every node therefore stamps in one **reference time**: its own clock plus
//! an offset it measures to the sweeper's reference time. The sweeper writes
//! its reference time into its lease line at every heartbeat
//! (`shared::lease`); every other node reads that line once a second and,
//! for each new beat it sees, takes `line's time − own clock at the read`
//! as a sample. A sample is never above the true offset (the line was written
//! before it was read) and falls short of it by the time between the write
//! and the read: at most [`super::shared::lease::TRY_EVERY`] plus the
//! filesystem's latency when the watcher sees the beat at its next poll. The
//! offset is the largest of the last [`SAMPLES`] samples (one minute of
//! beats), so it follows a clock step within a minute. A node that becomes
//! the sweeper keeps its offset, so the reference time goes on across a
//! takeover (the first sweeper's reference is its own clock).
//!
//! The bound: two uses on different nodes are ordered by their stamps once
//! they are more than [`SKEW_BOUND`] apart (1 s of polling, 1 s of
//! latency), whatever the nodes' clocks say, once each node has read one
//! beat after the sweeper's (at most [`super::shared::lease::HEARTBEAT`] plus
//! a poll after it mounts). Until then a node stamps by its own clock; a
//! stamp ahead of the reader's reference time by more than
//! [`FUTURE_TOLERANCE`] is counted as made at the reader's time then plus
//! that tolerance (`crate::ledger::Ledger::know_mtime`), so it looks
//! hottest for at most that long.
//!
//! Tests shift a core's clock with [`Clock::set_skew`] (a node whose
//! clock is wrong); nothing else sets it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// How many beats' samples the offset is the largest of (12 × 5 s heartbeat:
/// a minute).
pub const SAMPLES: usize = 12;

/// How far apart two uses on different nodes must be to be ordered by
/// their stamps, whatever the nodes' clocks: a sample's shortfall (one
/// poll, [`super::shared::lease::TRY_EVERY`], plus the read's latency, taken
/// as 1 s). A node also stamps up to [`super::stamps`]'s delay late, which
/// is the same on every node.
pub const SKEW_BOUND: Duration = Duration::from_secs(2);

/// How far past the reader's reference time a stamp read from the tree may
/// be before it is counted as made then ([`SKEW_BOUND`]: any later and the
/// writer's clock is ahead and not yet corrected).
pub const FUTURE_TOLERANCE: Duration = SKEW_BOUND;

/// A node's wall clock for recency stamps: its own clock, shifted by the
/// offset measured to the sweeper's reference time (see the module docs).
#[derive(Default)]
pub struct Clock {
    /// Tests: how far this node's own clock is off (ns; a node whose clock
    /// is wrong). Zero otherwise.
    skew: AtomicI64,
    /// Reference time minus this node's own clock (ns).
    offset: AtomicI64,
    /// The offset has been measured at least once.
    measured: AtomicBool,
    /// The latest samples, oldest first.
    samples: Mutex<VecDeque<i64>>,
}

impl Clock {
    /// This node's own clock, ns since the epoch.
    pub fn local_ns(&self) -> i64 {
        super::unix_ns().saturating_add(self.skew.load(Ordering::Relaxed))
    }

    /// The reference time now, ns since the epoch: what stamps are written
    /// in and compared with.
    pub fn now_ns(&self) -> i64 {
        self.local_ns().saturating_add(self.offset.load(Ordering::Relaxed))
    }

    /// The reference time minus this node's own clock (ns), and whether it
    /// was measured (else 0).
    pub fn offset_ns(&self) -> (i64, bool) {
        (self.offset.load(Ordering::Relaxed), self.measured.load(Ordering::Relaxed))
    }

    /// A new beat of the sweeper's line read at `local_ns` (this node's own
    /// clock) says the reference time was `reference_ns` when it was
    /// written: a sample of the offset, never above it.
    pub fn sample(&self, reference_ns: i64, local_ns: i64) {
        let s = reference_ns.saturating_sub(local_ns);
        let mut q = self.samples.lock();
        if q.len() == SAMPLES {
            q.pop_front();
        }
        q.push_back(s);
        let offset = q.iter().copied().max().unwrap_or(0);
        self.offset.store(offset, Ordering::Relaxed);
        self.measured.store(true, Ordering::Relaxed);
    }

    /// Tests: this node's own clock runs `ns` ahead (negative: behind).
    pub fn set_skew(&self, ns: i64) {
        self.skew.store(ns, Ordering::Relaxed);
    }
}

impl super::Core {
    /// The wall clock recency stamps are written and compared in: this
    /// node's own, shifted to the sweeper's reference time in shared mode
    /// (see [`crate::fs::clock`]).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The latest mtime (ns since the epoch) a stamp read from the tree is
    /// ranked at: the reference time now plus [`FUTURE_TOLERANCE`]
    /// (see [`crate::ledger::Ledger::know_read`]).
    pub fn future_cap(&self) -> i64 {
        let tol = FUTURE_TOLERANCE.as_nanos() as i64;
        self.clock.now_ns().saturating_add(tol)
    }

    /// Shared mode, this node's own clock more than
    /// [`SKEW_BOUND`] off the reference time: the mtime its
    /// distributed filesystem's client gave a file it wrote is by that clock,
    /// so the block `key` (where the ledger knows it) gets a
    /// stamp in the reference time (see [`crate::fs::clock`]).
    /// Returns whether a stamp was queued.
    pub(crate) fn restamp_if_clock_off(&self, key: crate::key::FileKey) -> bool {
        let (offset, measured) = self.clock.offset_ns();
        if self.shared.is_none() || !measured || offset.unsigned_abs() <= SKEW_BOUND.as_nanos() as u64 {
            return false;
        }
        let Some(p) = self.accounts.path_of(key) else { return false };
        self.stamper.push(key, p);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_the_largest_recent_sample_and_follows_a_step() {
        let c = Clock::default();
        assert_eq!(c.offset_ns(), (0, false));
        // The sweeper's clock 300 s ahead; lines read 0.2 s and 1 s late.
        c.sample(1_300_000_000_000, 1_000_200_000_000);
        c.sample(1_305_000_000_000, 1_006_000_000_000);
        assert_eq!(c.offset_ns(), (299_800_000_000, true));
        // The sweeper's clock stepped back 10 s: after SAMPLES beats the
        // older, larger samples are gone.
        for i in 0..SAMPLES as i64 {
            c.sample(1_400_000_000_000 + i * 5_000_000_000, 1_110_000_000_000 + i * 5_000_000_000);
        }
        assert_eq!(c.offset_ns(), (290_000_000_000, true));
    }
}
