//! What the FUSE adapter's timing hook costs per request, histograms on and
//! off (`latency_histograms`): the count of `Stats::requests` plus the
//! `latency::RequestTimer` taken and dropped, in a loop, alternately off
//! and on; per request in wall time and in this thread's CPU time (the one
//! to read on a busy machine, where the wall clock counts other processes). `cargo run --release --example latency_cost [N]` (N requests per
//! round, default 20,000,000); docs/performance.md reads it beside the
//! bench's with/without rows.

use std::hint::black_box;
use std::time::Instant;

use boundfs::stats::{Op, Stats};

/// This thread's CPU time, nanoseconds.
fn cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: t is a valid timespec to write; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000_000);
    let stats = Stats::default();
    for on in [false, true, false, true] {
        stats.latency.set_enabled(on);
        let (t0, c0) = (Instant::now(), cpu_ns());
        for _ in 0..n {
            let op = black_box(Op::Lookup);
            stats.requests.count(op);
            drop(stats.latency.request(op.class()));
        }
        let ns = t0.elapsed().as_nanos() as f64 / n as f64;
        let cpu = (cpu_ns() - c0) as f64 / n as f64;
        let state = if on { "on " } else { "off" };
        println!("histograms {state}: {ns:.1} ns wall, {cpu:.1} ns CPU per request (count + timer)");
    }
}
