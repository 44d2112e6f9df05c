//! What the hand-over gate and the crash journal cost per request, in this
//! thread's CPU time (the figure to read on a busy machine) and wall time:
//!
//! - the gate (`fuse::handover::Gate`): every request enters it and leaves,
//!   two read-modify-writes on one shared counter; run on 1 thread and on
//!   `T` threads at once (the FUSE reader threads share it, so its cache
//!   line moves between cores);
//! - the journal of requests in flight (`fs::inflight`, supervised mounts
//!   only, namespace requests, OPEN and CREATE): a slot claimed, marked done
//!   and freed in the supervisor's memfd.
//!
//! `cargo run --release --example gate_cost [N] [T]` (N requests per
//! thread, default 20,000,000; T threads, default 2); docs/design/upgrade.md
//! reads it.

use std::hint::black_box;
use std::time::Instant;

use boundfs::fs::held::OpenTable;
use boundfs::fuse::handover::Gate;

/// This thread's CPU time, nanoseconds.
fn cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: t is a valid timespec to write; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Runs `f` `n` times; (wall ns, CPU ns) per call.
fn per_call(n: u64, mut f: impl FnMut(u64)) -> (f64, f64) {
    let (t0, c0) = (Instant::now(), cpu_ns());
    for i in 0..n {
        f(black_box(i));
    }
    (t0.elapsed().as_nanos() as f64 / n as f64, (cpu_ns() - c0) as f64 / n as f64)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000_000);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let gate = Gate::default();
    let empty = per_call(n, |i| {
        black_box(i);
    });
    println!("loop alone: {:.1} ns wall, {:.1} ns CPU per call", empty.0, empty.1);
    let (w, c) = per_call(n, |_| drop(black_box(gate.enter())));
    println!("gate, 1 thread: {w:.1} ns wall, {c:.1} ns CPU per request");
    let results: Vec<(f64, f64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads).map(|_| s.spawn(|| per_call(n, |_| drop(black_box(gate.enter()))))).collect();
        hs.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let worst = results.iter().fold((0f64, 0f64), |a, r| (a.0.max(r.0), a.1.max(r.1)));
    println!(
        "gate, {threads} threads at once: {:.1} ns wall, {:.1} ns CPU per request (slowest thread)",
        worst.0, worst.1
    );
    let table = OpenTable::create().and_then(OpenTable::map);
    let Ok(table) = table else {
        println!("journal: no memfd here ({})", table.err().map(|e| e.to_string()).unwrap_or_default());
        return;
    };
    let (w, c) = per_call(n, |i| {
        if let Some(s) = table.journal_begin(2 * i + 2) {
            table.journal_done(s, 0);
            table.journal_end(s);
        }
    });
    println!("journal (begin, done, end): {w:.1} ns wall, {c:.1} ns CPU per journaled request");
}
