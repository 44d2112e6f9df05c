//! Counters of the daemon's work, all monotonic, read by the status xattr and
//! logged at shutdown. Names are the metric names (units in the name).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Event counters (relaxed atomics: each is independent).
#[derive(Default, Debug)]
pub struct Stats {
    /// Block files evicted.
    pub evictions: AtomicU64,
    /// Bytes freed by eviction.
    pub evicted_bytes: AtomicU64,
    /// Requests answered ENOSPC because nothing evictable could make room.
    pub enospc: AtomicU64,
    /// Eviction candidates skipped (renamed, relinked, vanished, could not
    /// unlink, opened meanwhile): all reasons, `evict_skipped_open` included.
    pub evict_skipped: AtomicU64,
    /// Eviction candidates skipped because a client opened them between the
    /// choice and the unlink.
    pub evict_skipped_open: AtomicU64,
    /// Background eviction sweeps run (each brings usage from above the high
    /// to the low watermark).
    pub eviction_sweeps: AtomicU64,
    /// Time spent in background eviction sweeps, microseconds.
    pub eviction_sweep_micros: AtomicU64,
    /// Opens of block files (hits).
    pub block_opens: AtomicU64,
    /// Lookups of block-file names that found nothing (misses).
    pub lookup_misses: AtomicU64,
    /// mtime stamps written.
    pub stamps: AtomicU64,
    /// Opens answered with kernel passthrough.
    pub passthrough_opens: AtomicU64,
    /// Reconcile passes over BACKING (see `workers::reconcile`).
    pub reconciles: AtomicU64,
    /// Ledger entries a reconcile pass corrected (adopted, dropped, resized, renamed).
    pub reconcile_fixes: AtomicU64,
    /// Stale engine temporaries removed.
    pub stale_tmp_removed: AtomicU64,
}

impl Stats {
    /// Adds `n` to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Reads a counter.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Relaxed)
    }
}
