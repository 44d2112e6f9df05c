//! Latency histograms: how long FUSE requests take, per operation class
//! ([`CLASSES`]), how long a request waited for inline eviction, how long
//! one eviction victim and one background sweep took. Each [`Histogram`]
//! is a fixed set of log-scale buckets of relaxed atomics (bucket `i`
//! counts durations up to `2^(i+2)` µs: 4 µs … 8.39 s, then +Inf), so a
//! sample costs two clock reads and two `fetch_add`s and no lock. Exported
//! as Prometheus histograms (`daemon::metrics`) and as p50/p99 in the
//! status (`latency`, `eviction_latency`). Off with `latency_histograms=off`
//! ([`Latency::set_enabled`]): then no clock is read.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Finite buckets per histogram; the last counter of a histogram is +Inf.
pub const BUCKETS: usize = 22;

/// Upper bound of finite bucket `i` (< [`BUCKETS`]), microseconds: `2^(i+2)`.
pub fn bound_micros(i: usize) -> u64 {
    1 << (i + 2)
}

/// Upper bound of finite bucket `i`, seconds, as the `le` label writes it
/// (exact decimal: `0.000004` … `8.388608`).
pub fn le_label(i: usize) -> String {
    let us = bound_micros(i);
    let s = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The bucket of a duration of `ns` nanoseconds: the first whose bound is
/// at least it ([`BUCKETS`] is +Inf).
fn bucket(ns: u64) -> usize {
    let us = ns.div_ceil(1000);
    if us <= 4 {
        return 0;
    }
    // ceil(log2(us)) - 2
    let log = 64 - (us - 1).leading_zeros() as usize;
    (log - 2).min(BUCKETS)
}

/// One histogram: a counter per bucket (not cumulative) and the sum of the
/// durations, nanoseconds. Aligned to a cache line so two classes recorded
/// by two threads do not share one.
#[repr(align(64))]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS + 1],
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: std::array::from_fn(|_| AtomicU64::new(0)), sum_ns: AtomicU64::new(0) }
    }
}

impl Histogram {
    /// Counts one duration.
    pub fn record(&self, d: Duration) {
        self.record_ns(d.as_nanos().min(u128::from(u64::MAX)) as u64);
    }

    fn record_ns(&self, ns: u64) {
        self.counts[bucket(ns)].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(ns, Relaxed);
    }

    /// The counts now (each read once: a sample recorded meanwhile may be
    /// in the sum and not yet in its bucket, never the other way round in
    /// the count, which is the buckets' total).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            counts: std::array::from_fn(|i| self.counts[i].load(Relaxed)),
            sum_seconds: self.sum_ns.load(Relaxed) as f64 / 1e9,
        }
    }
}

/// A histogram's counts at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Samples per bucket, not cumulative; the last is above every bound (+Inf).
    pub counts: [u64; BUCKETS + 1],
    /// Sum of the samples, seconds.
    pub sum_seconds: f64,
}

impl Snapshot {
    /// Samples in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile (0..=1), seconds, interpolated linearly inside its
    /// bucket as Prometheus's `histogram_quantile` does (the first bucket
    /// from 0; a quantile in +Inf answers the highest bound). None when
    /// empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut below = 0u64;
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 && (below + n) as f64 >= rank {
                if i == BUCKETS {
                    return Some(bound_micros(BUCKETS - 1) as f64 / 1e6);
                }
                let lo = if i == 0 { 0.0 } else { bound_micros(i - 1) as f64 };
                let hi = bound_micros(i) as f64;
                let frac = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
                return Some((lo + (hi - lo) * frac) / 1e6);
            }
            below += n;
        }
        Some(bound_micros(BUCKETS - 1) as f64 / 1e6)
    }

    /// Its count, p50 and p99 (None when empty).
    pub fn quantiles(&self) -> Option<Quantiles> {
        let r = |q: f64| self.quantile(q).map(|s| (s * 1e9).round() / 1e9);
        Some(Quantiles { count: self.count(), p50_seconds: r(0.5)?, p99_seconds: r(0.99)? })
    }
}

/// What the status shows of a histogram.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Quantiles {
    /// Samples since the mount started.
    pub count: u64,
    /// Median, seconds (bucket-interpolated, as `histogram_quantile(0.5, …)`).
    pub p50_seconds: f64,
    /// 99th percentile, seconds (bucket-interpolated).
    pub p99_seconds: f64,
}

/// The operation classes timed, the `op` label of
/// `boundfs_fuse_request_duration_seconds`: the opcodes a store, a load and
/// an eviction's client see one by one (kernel protocol names), the
/// directory ones as `DIR` (OPENDIR, READDIR, RELEASEDIR, FSYNCDIR), the
/// extended-attribute ones as `XATTR`, the rest (MKDIR, RMDIR, MKNOD,
/// SYMLINK, LINK, READLINK, STATFS, ACCESS, IOCTL, FALLOCATE, LSEEK) as
/// `OTHER`. INIT, DESTROY and FORGET (no reply) are not timed.
pub const CLASSES: [&str; 15] = [
    "LOOKUP", "GETATTR", "SETATTR", "CREATE", "OPEN", "READ", "WRITE", "FLUSH", "FSYNC", "RELEASE", "RENAME", "UNLINK",
    "DIR", "XATTR", "OTHER",
];

/// The eviction histograms, by the key the status's `eviction_latency`
/// uses: a request's wait for inline eviction, one victim, one sweep.
pub const EVICTION: [&str; 3] = ["inline_wait", "victim", "sweep"];

/// Every histogram of a mount.
#[derive(Default)]
pub struct Latency {
    on: AtomicBool,
    ops: [Histogram; CLASSES.len()],
    /// Indexed as [`EVICTION`].
    eviction: [Histogram; EVICTION.len()],
}

impl std::fmt::Debug for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latency").field("on", &self.enabled()).finish_non_exhaustive()
    }
}

thread_local! {
    /// Nanoseconds this thread spent in inline eviction during the request it serves.
    static INLINE_NS: Cell<u64> = const { Cell::new(0) };
}

/// The histograms' counts at one moment ([`Latency::snapshot`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencySnapshot {
    /// Per [`CLASSES`] entry; empty when histograms are off.
    pub ops: Vec<Snapshot>,
    /// Per [`EVICTION`] entry; empty when histograms are off.
    pub eviction: Vec<Snapshot>,
}

impl Latency {
    /// Turns timing on or off (off by default until the daemon sets it).
    pub fn set_enabled(&self, on: bool) {
        self.on.store(on, Relaxed);
    }

    /// Whether timing is on.
    pub fn enabled(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// The time now when timing is on (to pass to a `*_since` below later).
    pub fn start(&self) -> Option<Instant> {
        self.enabled().then(Instant::now)
    }

    /// Times one request of the class `class` (an index in [`CLASSES`],
    /// `stats::Op::class`) until the returned guard drops (the FUSE adapter
    /// holds it across the reply); the request's inline eviction wait, if
    /// any, is recorded then too.
    pub fn request(&self, class: usize) -> RequestTimer<'_> {
        RequestTimer { lat: self, class: class.min(CLASSES.len() - 1), t0: self.start() }
    }

    /// Records an inline eviction begun at `t0` on this thread (added to
    /// the wait of the request it serves), or nothing when `t0` is None.
    pub fn inline_since(&self, t0: Option<Instant>) {
        if let Some(t0) = t0 {
            let ns = t0.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
            INLINE_NS.with(|c| c.set(c.get().saturating_add(ns)));
        }
    }

    /// Forgets this thread's inline eviction time (a background sweep's
    /// evictions are no request's wait).
    pub fn not_inline(&self) {
        INLINE_NS.with(|c| c.set(0));
    }

    /// Records one eviction victim tried since `t0`.
    pub fn victim_since(&self, t0: Option<Instant>) {
        if let Some(t0) = t0 {
            self.eviction[1].record(t0.elapsed());
        }
    }

    /// Records one background sweep that took `d`.
    pub fn sweep(&self, d: Duration) {
        if self.enabled() {
            self.eviction[2].record(d);
        }
    }

    /// Every histogram's counts now (none when off).
    pub fn snapshot(&self) -> LatencySnapshot {
        if !self.enabled() {
            return LatencySnapshot::default();
        }
        LatencySnapshot {
            ops: self.ops.iter().map(Histogram::snapshot).collect(),
            eviction: self.eviction.iter().map(Histogram::snapshot).collect(),
        }
    }
}

impl LatencySnapshot {
    /// The status's `latency`: count, p50 and p99 per class seen.
    pub fn op_quantiles(&self) -> BTreeMap<String, Quantiles> {
        named(&CLASSES, &self.ops)
    }

    /// The status's `eviction_latency`: the same per [`EVICTION`] histogram.
    pub fn eviction_quantiles(&self) -> BTreeMap<String, Quantiles> {
        named(&EVICTION, &self.eviction)
    }
}

fn named(names: &[&str], h: &[Snapshot]) -> BTreeMap<String, Quantiles> {
    names.iter().zip(h).filter_map(|(n, s)| Some((n.to_string(), s.quantiles()?))).collect()
}

/// Times a request ([`Latency::request`]).
pub struct RequestTimer<'a> {
    lat: &'a Latency,
    class: usize,
    t0: Option<Instant>,
}

impl Drop for RequestTimer<'_> {
    fn drop(&mut self) {
        if let Some(t0) = self.t0 {
            self.lat.ops[self.class].record(t0.elapsed());
            let waited = INLINE_NS.with(|c| c.replace(0));
            if waited > 0 {
                self.lat.eviction[0].record_ns(waited);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITE: usize = 6;

    #[test]
    fn buckets_are_log_scale_with_inclusive_bounds() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(4000), 0);
        assert_eq!(bucket(4001), 1);
        assert_eq!(bucket(8000), 1);
        assert_eq!(bucket(1_000_000), 8); // 1 ms <= 1024 µs
        assert_eq!(bucket(8_388_608_000), BUCKETS - 1);
        assert_eq!(bucket(8_388_608_001), BUCKETS);
        assert_eq!(bucket(u64::MAX), BUCKETS);
        assert_eq!(le_label(0), "0.000004");
        assert_eq!(le_label(18), "1.048576");
        assert_eq!(le_label(BUCKETS - 1), "8.388608");
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket() {
        let h = Histogram::default();
        for _ in 0..100 {
            h.record(Duration::from_micros(100)); // bucket 64..128 µs
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 100);
        assert!((s.sum_seconds - 0.01).abs() < 1e-9);
        let p50 = s.quantile(0.5).unwrap();
        assert!((p50 - 96e-6).abs() < 1e-9, "{p50}");
        h.record(Duration::from_secs(100));
        assert_eq!(h.snapshot().quantile(1.0), Some(8.388608));
        assert_eq!(Histogram::default().snapshot().quantile(0.5), None);
    }

    #[test]
    fn off_reads_no_clock_and_records_nothing() {
        let l = Latency::default();
        drop(l.request(WRITE));
        assert!(l.snapshot().ops.is_empty());
        l.set_enabled(true);
        assert_eq!(l.snapshot().ops[WRITE].count(), 0);
        drop(l.request(WRITE));
        assert_eq!(l.snapshot().ops[WRITE].count(), 1);
    }

    #[test]
    fn a_request_records_its_inline_eviction_wait_once() {
        let l = Latency::default();
        l.set_enabled(true);
        let t = l.request(3);
        l.inline_since(l.start());
        l.inline_since(l.start());
        drop(t);
        drop(l.request(5));
        let s = l.snapshot();
        assert_eq!(s.eviction[0].count(), 1);
        assert_eq!(l.snapshot().eviction_quantiles().len(), 1);
        assert_eq!(s.op_quantiles().keys().collect::<Vec<_>>(), ["CREATE", "READ"]);
    }
}
