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
    let (keys, ns) = crate::workers::stamp::flush(&c.stamper, &fd);
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
    c.accounts().lock().place_by_known(&[(key(d.path(), "x.bin"), i128::from(t - 100 * S))]);
    assert_eq!(eviction_order(&c, d.path(), &["x.bin", "y.bin"]), ["y.bin", "x.bin"]);
    assert_eq!(reranked(&c), 0);
}
