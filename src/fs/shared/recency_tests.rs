//! One LRU across nodes (`-o shared`): how eviction tells another node's
//! recency stamp from this node's own use (`Core::stamped_elsewhere`), for
//! the interleavings of three nodes. Node A is the core under test over a
//! real backing directory (no mount); nodes B and C are simulated by what
//! they do to the shared tree: write a file's mtime (`utimensat`, their
//! recency stamp) or create files in it directly.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use filetime::FileTime;

use crate::fs::Core;
use crate::fs::shared::lease::SweeperLease;
use crate::key::FileKey;
use crate::stats::Stats;
use crate::testing::{core, store};
use crate::workers::reconcile::Reconciler;

const S: i64 = 1_000_000_000;

fn now_ns() -> i64 {
    crate::fs::unix_ns()
}

fn mtime_of(d: &Path, name: &str) -> i64 {
    let m = std::fs::metadata(d.join(name)).unwrap();
    m.mtime() * S + m.mtime_nsec()
}

fn key(d: &Path, name: &str) -> FileKey {
    let m = std::fs::metadata(d.join(name)).unwrap();
    FileKey { dev: m.dev(), ino: m.ino() }
}

/// Another node's recency stamp (or the value a file was created with): sets
/// `name`'s mtime to `ns` since the epoch, on the shared tree itself.
fn stamp_elsewhere(d: &Path, name: &str, ns: i64) {
    filetime::set_file_mtime(d.join(name), FileTime::from_unix_time(ns.div_euclid(S), ns.rem_euclid(S) as u32))
        .unwrap();
}

/// A shared tier whose BACKING holds `blocks` (name, mtime in ns since the
/// epoch) made by other nodes, indexed by node A and read by one reconcile
/// pass of A (its last walk).
fn tier(blocks: &[(&str, i64)]) -> (tempfile::TempDir, Core) {
    let d = tempfile::tempdir().unwrap();
    for (name, t) in blocks {
        std::fs::write(d.path().join(name), [1u8; 4096]).unwrap();
        stamp_elsewhere(d.path(), name, *t);
    }
    let mut c = core(d.path(), 1 << 30);
    c.shared = Some(Default::default());
    walk(&c);
    (d, c)
}

/// One reconcile pass of node A.
fn walk(c: &Core) {
    Reconciler::new(std::time::Duration::ZERO).pass(c);
}

/// Node A uses `name` and its stamp writer writes the recency stamp (due at
/// the first use of a block A did not create).
fn own_stamp(c: &Core, d: &Path, name: &str) {
    let k = key(d, name);
    c.touch(k);
    let p = std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).unwrap();
    let fd = crate::sys::open(&p, libc::O_PATH | libc::O_DIRECTORY).unwrap();
    let (keys, ns) = crate::workers::stamp::flush(&c.stamper, &fd, c.clock().now_ns());
    assert_eq!(keys, vec![k], "node A's stamp of {name} was due and written");
    c.stamped(&keys, ns);
}

/// Evicts one block at a time until nothing is left; the names in the order
/// they went.
fn eviction_order(c: &Core, d: &Path, names: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    while c.evict(1, false) > 0 {
        for n in names {
            if !d.join(n).exists() && !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
    }
    out
}

fn reranked(c: &Core) -> u64 {
    Stats::get(&c.stats().evict_reranked)
}

#[test]
fn a_stamp_from_another_node_after_the_last_walk_reranks_the_victim_at_that_mtime() {
    let t = now_ns();
    let (d, c) = tier(&[("x.bin", t - 100 * S), ("a.bin", t - 30 * S), ("w.bin", t + 3 * S)]);
    // B reads x after A's walk: its stamp is newer than a, older than w.
    stamp_elsewhere(d.path(), "x.bin", t + 2 * S);
    assert_eq!(eviction_order(&c, d.path(), &["x.bin", "a.bin", "w.bin"]), ["a.bin", "x.bin", "w.bin"]);
    assert_eq!(reranked(&c), 1);
}

#[test]
fn a_third_nodes_stamp_after_this_nodes_own_stamp_reranks_the_victim() {
    let t = now_ns();
    let (d, c) = tier(&[("x.bin", t - 100 * S), ("y.bin", t - 50 * S)]);
    own_stamp(&c, d.path(), "x.bin");
    own_stamp(&c, d.path(), "y.bin");
    // C reads x after A's own use of it (and of y).
    stamp_elsewhere(d.path(), "x.bin", mtime_of(d.path(), "y.bin") + S);
    assert_eq!(eviction_order(&c, d.path(), &["x.bin", "y.bin"]), ["y.bin", "x.bin"]);
}

#[test]
fn this_nodes_own_stamp_after_another_nodes_is_its_own_use() {
    let t = now_ns();
    let (d, c) = tier(&[("x.bin", t - 100 * S), ("y.bin", t - 50 * S)]);
    // B stamped x after A's walk; then A used x itself, and y after it.
    stamp_elsewhere(d.path(), "x.bin", t - 10 * S);
    own_stamp(&c, d.path(), "x.bin");
    own_stamp(&c, d.path(), "y.bin");
    assert_eq!(eviction_order(&c, d.path(), &["x.bin", "y.bin"]), ["x.bin", "y.bin"]);
    assert_eq!(reranked(&c), 0, "A's own stamp is not another node's use");
}

#[test]
fn a_block_stored_here_and_stamped_elsewhere_within_the_same_second_is_reranked() {
    let d = tempfile::tempdir().unwrap();
    let mut c = core(d.path(), 1 << 30);
    c.shared = Some(Default::default());
    store(&c, "x.bin", &[1u8; 4096]);
    store(&c, "y.bin", &[2u8; 4096]);
    // B reads x a fraction of a second after A stored both (one tick of
    // A's whole-second ledger clock).
    stamp_elsewhere(d.path(), "x.bin", now_ns() + S / 5);
    assert_eq!(eviction_order(&c, d.path(), &["x.bin", "y.bin"]), ["y.bin", "x.bin"]);
    // A's own writes did not read as another node's use.
    assert_eq!(reranked(&c), 1);
}

#[test]
fn one_nanosecond_decides_not_the_ledger_clocks_whole_seconds() {
    let t = now_ns();
    let (d, c) = tier(&[("x.bin", t - 100 * S), ("y.bin", t - 50 * S), ("z.bin", t - 40 * S)]);
    own_stamp(&c, d.path(), "x.bin");
    own_stamp(&c, d.path(), "y.bin");
    own_stamp(&c, d.path(), "z.bin");
    // B stamps x one nanosecond after A's own stamp of z (same second of
    // A's clock); a no-op stamp rewrites y's own value.
    stamp_elsewhere(d.path(), "x.bin", mtime_of(d.path(), "z.bin") + 1);
    stamp_elsewhere(d.path(), "y.bin", mtime_of(d.path(), "y.bin"));
    assert_eq!(eviction_order(&c, d.path(), &["x.bin", "y.bin", "z.bin"]), ["y.bin", "z.bin", "x.bin"]);
    assert_eq!(reranked(&c), 1);
}

#[test]
fn a_reranked_victim_still_least_recent_goes_in_the_same_sweep() {
    let t = now_ns();
    let (d, c) = tier(&[("x.bin", t - 100 * S), ("w.bin", t + 5 * S)]);
    stamp_elsewhere(d.path(), "x.bin", t + S);
    // One sweep asked for everything: x is re-ranked below w, met again
    // with nothing newer, and evicted after w.
    c.evict(u64::MAX, false);
    assert!(!d.path().join("x.bin").exists() && !d.path().join("w.bin").exists());
    assert_eq!(reranked(&c), 1, "re-ranked once, then evicted at the mtime it was re-ranked at");
}

#[test]
fn a_walk_that_read_an_older_mtime_does_not_undo_this_nodes_own_stamp() {
    let t = now_ns();
    let (d, c) = tier(&[("x.bin", t - 100 * S), ("y.bin", t - 50 * S)]);
    own_stamp(&c, d.path(), "x.bin");
    // A walk that read x before the stamp landed: x stays above y.
    c.accounts().lock().place_by_known(&[(key(d.path(), "x.bin"), i128::from(t - 100 * S))], c.future_cap());
    assert_eq!(eviction_order(&c, d.path(), &["x.bin", "y.bin"]), ["y.bin", "x.bin"]);
    assert_eq!(reranked(&c), 0);
}

// Clock skew between nodes (see `crate::fs::clock`). Node B is a second
// core over the same BACKING whose own clock is set off by minutes; node A
// (the core under test) holds the sweeper lease and has the right time.

const MINUTES_5: i64 = 300 * S;

/// Node B over `d` (indexed now), shared mode, its own clock `skew` ns off.
fn node_b(d: &Path, skew: i64) -> Core {
    let mut b = core(d, 1 << 30);
    b.shared = Some(Default::default());
    b.clock().set_skew(skew);
    b
}

/// A takes the sweeper lease (its first heartbeat carries its clock) and B
/// polls it once (it reads that beat).
fn leases(a: &Core, b: &Core) -> (SweeperLease, SweeperLease) {
    let (mut la, mut lb) = (SweeperLease::default(), SweeperLease::default());
    assert!(la.poll(a), "A holds the lease");
    assert!(!lb.poll(b), "B watches A's line");
    (la, lb)
}

#[test]
fn a_node_whose_clock_is_five_minutes_behind_keeps_its_hot_blocks() {
    let t = now_ns();
    // a1 and a2 were last used on A a minute ago; b1 and b2 an hour ago.
    let blocks = [("b1.bin", t - 3600 * S), ("b2.bin", t - 3590 * S), ("a1.bin", t - 70 * S), ("a2.bin", t - 60 * S)];
    let (d, a) = tier(&blocks);
    let b = node_b(d.path(), -MINUTES_5);
    let _leases = leases(&a, &b);
    // B uses b1 and b2 now: they are the hottest blocks of the tier.
    own_stamp(&b, d.path(), "b1.bin");
    own_stamp(&b, d.path(), "b2.bin");
    walk(&a);
    // By B's own clock its stamps would be 4 minutes older than A's uses.
    let stamped = mtime_of(d.path(), "b1.bin");
    let names = ["a1.bin", "a2.bin", "b1.bin", "b2.bin"];
    assert_eq!(eviction_order(&a, d.path(), &names), names);
    assert!(stamped > t - 10 * S, "B stamps in A's time, not 5 minutes back");
}

#[test]
fn a_block_stored_on_a_node_whose_clock_is_behind_is_restamped_in_the_reference_time() {
    let t = now_ns();
    let (d, a) = tier(&[("a1.bin", t - 60 * S)]);
    let b = node_b(d.path(), -MINUTES_5);
    let _leases = leases(&a, &b);
    // B stores b1 now; its client sets the mtime by B's clock (faked here:
    // the test's files get the real time), then B's stamp writer runs.
    store(&b, "b1.bin", &[3u8; 4096]);
    stamp_elsewhere(d.path(), "b1.bin", t - MINUTES_5);
    let p = std::ffi::CString::new(d.path().as_os_str().as_encoded_bytes()).unwrap();
    let fd = crate::sys::open(&p, libc::O_PATH | libc::O_DIRECTORY).unwrap();
    let (keys, ns) = crate::workers::stamp::flush(&b.stamper, &fd, b.clock().now_ns());
    b.stamped(&keys, ns);
    walk(&a);
    assert_eq!(eviction_order(&a, d.path(), &["a1.bin", "b1.bin"]), ["a1.bin", "b1.bin"]);
}

#[test]
fn a_stamp_from_a_node_five_minutes_ahead_counts_from_when_it_was_read() {
    let t = now_ns();
    let (d, a) = tier(&[("b1.bin", t - 3600 * S), ("a1.bin", t - 60 * S)]);
    // B, 5 minutes ahead, stamps b1 before it has read the sweeper's line.
    let b = node_b(d.path(), MINUTES_5);
    own_stamp(&b, d.path(), "b1.bin");
    walk(&a);
    // A minute later A uses a1; b1 is not used again.
    a.clock().set_skew(60 * S);
    own_stamp(&a, d.path(), "a1.bin");
    walk(&a);
    assert_eq!(eviction_order(&a, d.path(), &["a1.bin", "b1.bin"]), ["b1.bin", "a1.bin"]);
}

#[test]
fn a_use_stamped_over_a_stamp_from_the_future_is_seen() {
    let t = now_ns();
    let (d, a) = tier(&[("b1.bin", t - 3600 * S), ("a1.bin", t - 60 * S)]);
    let b = node_b(d.path(), MINUTES_5);
    own_stamp(&b, d.path(), "b1.bin");
    walk(&a);
    a.clock().set_skew(90 * S);
    own_stamp(&a, d.path(), "a1.bin");
    // Node C (right clock) reads b1 after A's use of a1: an mtime below the
    // one from the future, and still a new use.
    stamp_elsewhere(d.path(), "b1.bin", mtime_of(d.path(), "a1.bin") + S);
    walk(&a);
    assert_eq!(eviction_order(&a, d.path(), &["a1.bin", "b1.bin"]), ["a1.bin", "b1.bin"]);
}

#[test]
fn a_read_on_a_node_whose_clock_is_ahead_ranks_in_the_reference_time() {
    let t = now_ns();
    let (d, a) = tier(&[("x.bin", t - 100 * S), ("y.bin", t - 50 * S)]);
    // A's clock is 5 minutes ahead; B (right clock) is the sweeper.
    a.clock().set_skew(MINUTES_5);
    let b = node_b(d.path(), 0);
    let _leases = leases(&b, &a);
    // A reads x and closes it (RELEASE); B reads y half a second later.
    let ino = a.lookup(crate::testing::ROOT, std::ffi::OsStr::new("x.bin")).unwrap().ino;
    let fh = a.open(ino, libc::O_RDONLY).unwrap().fh;
    a.release(fh);
    stamp_elsewhere(d.path(), "y.bin", now_ns() + S / 2);
    walk(&a);
    assert_eq!(eviction_order(&a, d.path(), &["x.bin", "y.bin"]), ["x.bin", "y.bin"]);
}
