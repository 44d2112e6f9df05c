//! The background evictor: sleeps until usage passes the high watermark, then
//! evicts least recently used blocks down to the low watermark through
//! [`Core::evict`] (the protocol is written in `crate::fs::evict`). In shared
//! mode only the node holding the sweeper lease sweeps (`crate::fs::shared::lease`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fs::Core;
use crate::fs::shared::journal::SWEEP_BATCHES;
use crate::stats::Stats;

/// Shortest time between two info lines about eviction sweeps. Under a
/// steady store load a sweep runs several times a second; the sweeps in
/// between are summed into the next line (each is logged at debug level).
const SWEEP_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Sweeps done since the last info line: `[sweeps, files, bytes, skipped
/// because opened meanwhile, skipped for other reasons]` and their time.
#[derive(Default)]
struct SweepLog {
    last: Option<Instant>,
    n: [u64; 5],
    secs: f64,
}

impl SweepLog {
    fn add(&mut self, n: [u64; 5], secs: f64) {
        log::debug!("eviction sweep: {} files, {} bytes in {secs:.3}s", n[1], n[2]);
        for (t, x) in self.n.iter_mut().zip(n) {
            *t += x;
        }
        self.secs += secs;
    }

    /// Logs what was summed, if anything, once [`SWEEP_LOG_INTERVAL`] has passed.
    fn flush(&mut self, core: &Core) {
        let [sweeps, files, bytes, open, other] = self.n;
        if sweeps == 0 || self.last.is_some_and(|t| t.elapsed() < SWEEP_LOG_INTERVAL) {
            return;
        }
        let (usage, c) = core.accounts().usage_and_counts();
        let what = if sweeps == 1 { "eviction sweep:".to_string() } else { format!("eviction, {sweeps} sweeps:") };
        log::info!(
            "{what} {files} files, {bytes} bytes in {:.3}s; skipped {open} opened meanwhile, {other} for other \
             reasons; {} block files not evictable now (open, or linked twice); usage now {usage} of {}",
            self.secs,
            c.block_files.saturating_sub(c.evictable),
            core.policy().max_size,
        );
        *self = SweepLog { last: Some(Instant::now()), ..Default::default() };
    }
}

/// The background evictor: sleeps until usage passes the high watermark,
/// then evicts down to the low watermark. Runs until `stop` returns true.
/// Shared mode: tries the sweeper lease every second and sweeps only while
/// it holds it. At the stop, `session_ended` says whether the FUSE session
/// has ended (an unmount: the node leaves the shared budget record, and the
/// emptied directories still queued are removed, since the kernel holds
/// none of them) or goes on in another process (a hand-over,
/// `daemon::handoff`: requests still flow until its gate closes, so the
/// directories stay, as the kernel may still hold them, and the node leaves
/// the record only once the next daemon serves: a store in between would
/// put its line back).
pub fn run(core: Arc<Core>, stop: impl Fn() -> bool, session_ended: impl Fn() -> bool) {
    let mut sweeps = SweepLog::default();
    let mut lease = crate::fs::shared::lease::SweeperLease::default();
    // Background eviction waits for the start-up index, which sets the LRU
    // order (writes that need room meanwhile wait for it in `Core::reserve`).
    while !core.wait_indexed_for(Duration::from_secs(1)) {
        if stop() {
            return;
        }
    }
    loop {
        core.evictor_wait(Duration::from_secs(1));
        if stop() {
            sweeps.last = None;
            sweeps.flush(&core);
            if session_ended() {
                if let Some(t) = core.shared_tier() {
                    core.grant_leave(t);
                }
                core.reap_empty_dirs_at_unmount();
            }
            return;
        }
        // Every node removes the directories its own evictions emptied (a
        // store on another node racing that rmdir recreates its directory:
        // fs/recreate.rs), so inline evictions leave no empty directories
        // behind to fill the shared budget.
        core.reap_empty_dirs();
        let sweeping = core.shared() && lease.poll(&core);
        if let Some(t) = core.shared_tier() {
            // Shared tier: what the other nodes evicted stops counting here
            // (the sweeper reads it again before each batch), before the
            // beat, so that grant it freed goes back to the pool at once.
            core.journal_apply(t, false);
            // The shared budget's beat: publish the net, give back unused
            // grant, and on the sweeper reclaim dead nodes' lines (fs/shared/grants.rs).
            core.grant_beat(t, sweeping);
        }
        if core.shared() && !sweeping {
            // Shared tier: only the sweeper sweeps, so no two nodes evict the
            // same excess; this node evicts inline for its own writes only
            // (Core::reserve).
            sweeps.flush(&core);
            continue;
        }
        if !core.accounts().should_wake() {
            core.unevictable().clear();
            sweeps.flush(&core);
            continue;
        }
        let t0 = Instant::now();
        let st = core.stats();
        let counters = [&st.evictions, &st.evicted_bytes, &st.evict_skipped, &st.evict_skipped_open];
        let before = counters.map(Stats::get);
        // Non-block usage alone above the high watermark: the low one can't
        // be reached; evict only what max_size itself needs (see fs/unevictable.rs).
        let stuck = core.unevictable().over_high(&core);
        let measure = || {
            // Shared tier: re-read what the other nodes evicted (inline, for
            // their writes) before each batch, so it is not evicted twice.
            if let Some(t) = core.shared_tier() {
                core.journal_apply(t, true);
            }
            if stuck { core.accounts().over_max() } else { core.accounts().excess() }
        };
        let mut excess = measure();
        let batch = if core.shared() { excess.div_ceil(SWEEP_BATCHES).max(1) } else { u64::MAX };
        while excess > 0 && core.evict(excess.min(batch), true) > 0 && !stop() {
            // Shared tier: a holder stopped for longer than the takeover
            // time was replaced meanwhile, and steps down here (fs/shared/lease.rs).
            if core.shared() && !lease.poll(&core) {
                break;
            }
            excess = measure();
        }
        let took = t0.elapsed();
        let after = counters.map(Stats::get);
        let [files, bytes, skipped, open] = [0, 1, 2, 3].map(|i| after[i].saturating_sub(before[i]));
        // A sweep is a pass that evicted: above the high watermark with
        // nothing evictable (all open, all non-block) the evictor wakes
        // every second and finds nothing, which is no sweep. Counted once
        // its files are, so a reader never sees a sweep without them.
        let evicted = u64::from(files > 0);
        Stats::add(&st.eviction_sweeps, evicted);
        Stats::add(&st.eviction_sweep_micros, took.as_micros().min(u64::MAX as u128) as u64);
        // Its evictions were no request's wait; its time is one sample when it evicted.
        st.latency.not_inline();
        if evicted > 0 {
            st.latency.sweep(took);
        }
        sweeps.add([evicted, files, bytes, open, skipped.saturating_sub(open)], took.as_secs_f64());
        sweeps.flush(&core);
    }
}
