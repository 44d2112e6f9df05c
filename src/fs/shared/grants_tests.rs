//! Two nodes (two cores over one directory, as two mounts over one shared
//! BACKING) storing past the shared budget: the tree never holds more than
//! `max_size`, and neither node's stores fail.

use std::path::Path;

use crate::fs::{Config, Core};
use crate::testing::{core_with, store};

const MIB: u64 = 1 << 20;

fn node(dir: &Path, max: u64) -> Core {
    let mut config = Config::new(dir.canonicalize().unwrap(), max);
    config.shared = true;
    config.shared_budget = true;
    core_with(config)
}

/// Allocated bytes of the block files in `dir` (what `du` would count).
fn blocks_in(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".bin"))
        .map(|e| std::os::unix::fs::MetadataExt::blocks(&e.metadata().unwrap()) * 512)
        .sum()
}

#[test]
fn two_nodes_storing_past_the_budget_stay_within_it_together() {
    let d = tempfile::tempdir().unwrap();
    let max = 8 * MIB;
    let (a, b) = (node(d.path(), max), node(d.path(), max));
    let block = vec![5u8; MIB as usize];
    let mut peak = 0;
    for i in 0..12 {
        // Alternate nodes: neither learns of the other's stores (no
        // reconcile pass runs), as at full speed.
        let (who, n) = if i % 2 == 0 { (&a, "a") } else { (&b, "b") };
        store(who, &format!("{n}{i}.bin"), &block);
        peak = peak.max(blocks_in(d.path()));
    }
    assert!(peak <= max, "the tree held {peak} bytes of blocks against a budget of {max}");
    assert!(blocks_in(d.path()) >= max / 2, "the budget is used, not emptied: {}", blocks_in(d.path()));
    let tier = a.shared_tier().unwrap();
    a.grant_beat(tier, false);
    let st = a.accounts().grant_state();
    let chunk = super::grant_chunk(&a.accounts().policy(), 2);
    assert!(st.granted.unwrap() - st.held <= chunk, "a's beat keeps at most one chunk unused: {st:?}");
}

#[test]
fn a_node_that_leaves_moves_its_bytes_to_the_drift_and_the_last_one_clears_the_record() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (node(d.path(), 8 * MIB), node(d.path(), 8 * MIB));
    store(&a, "x.bin", &vec![1u8; MIB as usize]);
    store(&b, "y.bin", &vec![1u8; MIB as usize]);
    let record = d.path().join(".boundfs").join(super::BUDGET_FILE);
    a.grant_leave(a.shared_tier().unwrap());
    let text = std::fs::read_to_string(&record).unwrap();
    let drift: i64 = text.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(drift >= MIB as i64, "a's megabyte is in the drift: {text}");
    assert_eq!(text.lines().filter(|l| !l.is_empty()).count(), 2, "only b's line is left: {text}");
    b.grant_leave(b.shared_tier().unwrap());
    assert!(!record.exists(), "the last node to leave clears the record");
}

#[test]
fn a_directory_made_through_the_mount_counts_in_the_net() {
    let d = tempfile::tempdir().unwrap();
    let a = node(d.path(), 8 * MIB);
    let before = a.accounts().grant_state().net;
    a.mkdir(crate::testing::ROOT, std::ffi::OsStr::new("h"), 0o755, crate::testing::ME).unwrap();
    let dir = std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(d.path().join("h")).unwrap()) * 512;
    assert!(dir > 0, "the backing filesystem gives a directory bytes");
    assert_eq!(a.accounts().grant_state().net - before, dir as i64, "the directory's bytes are this node's");
}

/// The record's drift (bytes no node counts).
fn drift_of(dir: &Path) -> i64 {
    let text = std::fs::read_to_string(dir.join(".boundfs").join(super::BUDGET_FILE)).unwrap();
    text.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn what_a_node_leaves_behind_the_sweeper_adopts_and_takes_off_the_drift() {
    let d = tempfile::tempdir().unwrap();
    let a = node(d.path(), 16 * MIB);
    store(&a, "x.bin", &vec![1u8; MIB as usize]);
    store(&a, "y.bin", &vec![2u8; MIB as usize]);
    // b starts after a's stores: its start-up index knows both blocks.
    let b = node(d.path(), 16 * MIB);
    store(&b, "z.bin", &vec![3u8; MIB as usize]);
    std::fs::remove_file(d.path().join("y.bin")).unwrap();
    a.grant_leave(a.shared_tier().unwrap());
    assert!(drift_of(d.path()) >= 2 * MIB as i64, "a's net went to the drift");
    let net = b.accounts().grant_state().net;
    b.grant_beat(b.shared_tier().unwrap(), true);
    assert!(drift_of(d.path()) < MIB as i64 / 2, "adopted and gone bytes left the drift: {}", drift_of(d.path()));
    let adopted = b.accounts().grant_state().net - net;
    // y.bin too: b still counts it (removed behind its mount), so it is
    // adopted, on the safe side, until b's next reconcile pass.
    assert!(adopted >= 2 * MIB as i64, "x.bin and y.bin are b's now: {adopted}");
    let left = std::fs::read_dir(d.path().join(".boundfs").join(super::super::orphans::ORPHANS_DIR)).unwrap().count();
    assert_eq!(left, 0, "the list is removed once adopted");
}

#[test]
fn a_record_locked_by_another_client_holds_no_store_longer_than_the_lock_wait() {
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};
    let d = tempfile::tempdir().unwrap();
    let max = 8 * MIB;
    let a = node(d.path(), max);
    let block = vec![3u8; MIB as usize];
    store(&a, "a0.bin", &block);
    // Another client holds the record's lock (a dead client's session
    // keeps it): a second open file description conflicts with a's.
    let record = std::fs::File::open(d.path().join(".boundfs").join(super::BUDGET_FILE)).unwrap();
    // SAFETY: flock on an open fd; no pointers.
    assert_eq!(unsafe { libc::flock(record.as_raw_fd(), libc::LOCK_EX) }, 0);
    let bound = super::RECORD_LOCK_WAIT + Duration::from_millis(500);
    let mut longest = Duration::ZERO;
    for i in 1..16 {
        let t = Instant::now();
        store(&a, &format!("a{i}.bin"), &block);
        longest = longest.max(t.elapsed());
    }
    assert!(longest <= bound, "a store waited {longest:?} for the locked record (bound {bound:?})");
    assert!(blocks_in(d.path()) <= max, "within the grant a had: {} bytes", blocks_in(d.path()));
    let t = Instant::now();
    a.grant_beat(a.shared_tier().unwrap(), true);
    assert!(t.elapsed() <= bound, "the beat waited {:?} for the locked record", t.elapsed());
    drop(record);
    // The lock gone, the next take goes through (after EMPTY_WAIT).
    std::thread::sleep(super::EMPTY_WAIT);
    assert!(a.grant_take(a.shared_tier().unwrap(), MIB, true) > 0, "a takes grant once the record is free");
}

#[test]
fn bytes_of_a_node_that_left_leave_the_drift_when_another_node_removes_them() {
    use crate::testing::ROOT;
    let d = tempfile::tempdir().unwrap();
    let max = 8 * MIB;
    let (a, b) = (node(d.path(), max), node(d.path(), max));
    store(&a, "x.bin", &vec![1u8; MIB as usize]);
    store(&b, "y.bin", &vec![2u8; 4 * MIB as usize]);
    b.grant_leave(b.shared_tier().unwrap());
    let before = drift_of(d.path());
    assert!(before >= 4 * MIB as i64, "b's 4 MiB went to the drift: {before}");
    a.lookup(ROOT, std::ffi::OsStr::new("y.bin")).unwrap();
    a.unlink(ROOT, std::ffi::OsStr::new("y.bin")).unwrap();
    a.grant_beat(a.shared_tier().unwrap(), true);
    let after = drift_of(d.path());
    assert!(after <= before - 4 * MIB as i64, "y.bin came out of the drift once a removed it: {before} -> {after}");
    // Without that, a could never hold more than max - 4 MiB again.
    for i in 0..7 {
        store(&a, &format!("a{i}.bin"), &vec![3u8; MIB as usize]);
    }
    let st = a.accounts().grant_state();
    assert!(st.granted.unwrap() >= 7 * MIB as i64, "a holds the budget b left: {st:?}");
    assert!(blocks_in(d.path()) <= max);
}

#[test]
fn a_block_the_sweeper_evicts_moves_from_its_makers_grant_through_the_drift_to_the_pool() {
    use crate::testing::ROOT;
    let d = tempfile::tempdir().unwrap();
    let max = 8 * MIB;
    let (a, b) = (node(d.path(), max), node(d.path(), max));
    store(&a, "x.bin", &vec![1u8; MIB as usize]);
    store(&b, "y.bin", &vec![2u8; 4 * MIB as usize]);
    let (ta, tb) = (a.shared_tier().unwrap(), b.shared_tier().unwrap());
    a.grant_beat(ta, true);
    b.grant_beat(tb, false);
    let d0 = drift_of(d.path());
    let gb = b.accounts().grant_state().granted.unwrap();
    // a (the sweeper) evicts b's block; b learns it from a's journal.
    a.lookup(ROOT, std::ffi::OsStr::new("y.bin")).unwrap();
    assert!(a.evict(4 * MIB, false) >= 4 * MIB, "a evicted y.bin");
    a.grant_beat(ta, true);
    assert_eq!(drift_of(d.path()), d0 - 4 * MIB as i64, "the drift lends the evicted bytes at once");
    assert!(b.journal_apply(tb, true) > 0, "b learns y.bin is gone");
    let st = b.accounts().grant_state();
    // Kept, b could store them again while a's pool lent them out too.
    assert_eq!(st.granted.unwrap(), gb - 4 * MIB as i64, "b's grant shrinks with its net: {st:?}");
    assert_eq!(st.held, 0, "y.bin left b's net");
    b.grant_beat(tb, false);
    assert_eq!(drift_of(d.path()), d0, "b's beat pays the drift back: nothing counted twice");
    let chunk = super::grant_chunk(&b.accounts().policy(), 2);
    let g = b.accounts().grant_state().granted.unwrap();
    assert!(g <= chunk, "and gives back what it holds unused beyond one chunk: {g}");
}

#[test]
fn a_node_found_reclaimed_takes_its_count_back_and_keeps_what_it_stored_since() {
    let d = tempfile::tempdir().unwrap();
    let b = node(d.path(), 8 * MIB);
    let tb = b.shared_tier().unwrap();
    store(&b, "y0.bin", &vec![1u8; MIB as usize]);
    b.grant_beat(tb, false);
    // The sweeper reclaims b's line: its published net goes to the drift.
    let path = d.path().join(".boundfs").join(super::BUDGET_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut rec = super::Record::parse(&text);
    let (_, _, net, _) = rec.nodes.pop().unwrap();
    rec.drift += net;
    std::fs::write(&path, rec.render()).unwrap();
    // b stores on within the grant it has, then finds its line gone.
    store(&b, "y1.bin", &vec![2u8; MIB as usize]);
    b.grant_beat(tb, false);
    let rec = super::Record::parse(&std::fs::read_to_string(&path).unwrap());
    let nets: i64 = rec.nodes.iter().map(|n| n.2).sum();
    assert_eq!(rec.drift + nets, blocks_in(d.path()) as i64, "both blocks counted, once: {rec:?}");
    assert_eq!(nets, blocks_in(d.path()) as i64, "b took its count back from the drift: {rec:?}");
}

#[test]
fn a_left_nodes_block_the_sweeper_did_not_know_yet_is_adopted_after_its_next_reconcile_pass() {
    let d = tempfile::tempdir().unwrap();
    let a = node(d.path(), 16 * MIB);
    // b starts (and takes a line in the record) before a's store: it learns
    // of x.bin only at a reconcile pass.
    let b = node(d.path(), 16 * MIB);
    store(&b, "z.bin", &vec![3u8; MIB as usize]);
    store(&a, "x.bin", &vec![1u8; MIB as usize]);
    a.grant_leave(a.shared_tier().unwrap());
    let tier = b.shared_tier().unwrap();
    b.grant_beat(tier, true);
    assert!(
        drift_of(d.path()) >= MIB as i64,
        "not known yet: x.bin stays in the drift for now: {}",
        drift_of(d.path())
    );
    let net = b.accounts().grant_state().net;
    b.grant_beat(tier, true);
    assert_eq!(b.accounts().grant_state().net, net, "no pass has run: nothing new is adopted");
    crate::workers::reconcile::Reconciler::new(std::time::Duration::ZERO).pass(&b);
    b.grant_beat(tier, true);
    assert!(drift_of(d.path()) < MIB as i64 / 2, "adopted after the pass: drift {}", drift_of(d.path()));
    assert!(b.accounts().grant_state().net - net >= MIB as i64, "x.bin is b's now");
}

#[test]
fn a_file_open_for_writing_at_a_hand_over_counts_in_the_next_daemons_net() {
    use crate::testing::{ME, ROOT};
    let d = tempfile::tempdir().unwrap();
    let a = node(d.path(), 16 * MIB);
    let b = node(d.path(), 16 * MIB);
    store(&b, "z.bin", &vec![3u8; MIB as usize]);
    // A store in flight on a: x.bin created and half written.
    let (_, o) = a.create(ROOT, std::ffi::OsStr::new("x.bin"), 0o644, libc::O_WRONLY, ME).unwrap();
    a.write(o.fh, 0, &vec![1u8; MIB as usize], None, false).unwrap();
    let c = a.collect_state(vec![]).unwrap();
    let given = own_files(&c.state);
    assert_eq!(given.len(), 1, "x.bin was a's own");
    // The next daemon (a2) takes the state over, then a leaves the record.
    let a2 = node(d.path(), 16 * MIB);
    assert_eq!(a2.adopt_state(c.state.clone(), c.fds), 0);
    a.grant_leave_except(a.shared_tier().unwrap(), &given);
    assert!(drift_of(d.path()) < MIB as i64 / 2, "x.bin's bytes are not left in the drift: {}", drift_of(d.path()));
    assert!(a2.accounts().grant_state().net >= MIB as i64, "x.bin counts in a2's net");
    // The store goes on through a2: what it writes counts in a2's net too.
    a2.write(o.fh, MIB, &vec![2u8; MIB as usize], None, false).unwrap();
    a2.release(o.fh);
    let net = a2.accounts().grant_state().net;
    assert!(net >= 2 * MIB as i64, "x.bin's 2 MiB are in a2's net: {net}");
    let orphans = d.path().join(".boundfs").join(super::super::orphans::ORPHANS_DIR);
    let listed: String = std::fs::read_dir(&orphans)
        .map(|r| r.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok()).collect())
        .unwrap_or_default();
    assert!(!listed.contains("x.bin"), "a does not list x.bin for the sweeper: {listed}");
}

/// The files a hand-over `state` gives as the old daemon's own (stores in flight).
fn own_files(state: &crate::fs::handed::HandedState) -> Vec<crate::key::FileKey> {
    state
        .handles
        .iter()
        .filter(|h| h.own.is_some())
        .map(|h| crate::key::FileKey { dev: h.key.0, ino: h.key.1 })
        .collect()
}

/// The record's drift plus every node's grant: the bytes the record covers.
fn covered(dir: &Path) -> i64 {
    let rec = super::Record::parse(&std::fs::read_to_string(dir.join(".boundfs").join(super::BUDGET_FILE)).unwrap());
    rec.drift + rec.nodes.iter().map(|n| n.1).sum::<i64>()
}

#[test]
fn an_adopted_block_moves_from_the_drift_into_the_adopters_grant() {
    let d = tempfile::tempdir().unwrap();
    let max = 8 * MIB;
    // c starts before a's stores and learns nothing of them (no reconcile
    // pass runs, as at full speed); b starts after (its index knows them).
    let (a, c) = (node(d.path(), max), node(d.path(), max));
    c.grant_beat(c.shared_tier().unwrap(), false);
    for i in 0..4 {
        store(&a, &format!("a{i}.bin"), &vec![1u8; MIB as usize]);
    }
    let b = node(d.path(), max);
    b.grant_beat(b.shared_tier().unwrap(), false);
    a.grant_leave(a.shared_tier().unwrap());
    b.grant_beat(b.shared_tier().unwrap(), true);
    assert!(b.accounts().grant_state().net >= 4 * MIB as i64, "b adopted a's blocks");
    // Before, the adopted bytes left the drift and joined b's net but not
    // its grant: the pool offered them to c, which stored them again.
    assert!(covered(d.path()) >= blocks_in(d.path()) as i64, "the record covers the tree: {}", covered(d.path()));
    let mut peak = 0;
    for i in 0..8 {
        store(&c, &format!("c{i}.bin"), &vec![2u8; MIB as usize]);
        peak = peak.max(blocks_in(d.path()));
    }
    assert!(peak <= max, "the tree held {peak} bytes of blocks against a budget of {max}");
}

#[test]
fn a_file_handed_over_is_in_the_next_daemons_grant_before_the_old_one_leaves() {
    use crate::testing::{ME, ROOT};
    let d = tempfile::tempdir().unwrap();
    let max = 8 * MIB;
    let a = node(d.path(), max);
    let b = node(d.path(), max);
    b.grant_beat(b.shared_tier().unwrap(), false);
    let (_, o) = a.create(ROOT, std::ffi::OsStr::new("x.bin"), 0o644, libc::O_WRONLY, ME).unwrap();
    a.write(o.fh, 0, &vec![1u8; 3 * MIB as usize], None, false).unwrap();
    let c = a.collect_state(vec![]).unwrap();
    let given = own_files(&c.state);
    let a2 = node(d.path(), max);
    assert_eq!(a2.adopt_state(c.state.clone(), c.fds), 0);
    a.grant_leave_except(a.shared_tier().unwrap(), &given);
    // Before, x.bin left a's line and the drift, and a2's line (grant 0)
    // did not cover it until a2's next transaction: b could take its bytes.
    assert!(covered(d.path()) >= blocks_in(d.path()) as i64, "the record covers x.bin: {}", covered(d.path()));
    let mut peak = 0;
    for i in 0..8 {
        store(&b, &format!("b{i}.bin"), &vec![2u8; MIB as usize]);
        peak = peak.max(blocks_in(d.path()));
    }
    assert!(peak <= max, "the tree held {peak} bytes of blocks against a budget of {max}");
    a2.release(o.fh);
}

#[test]
fn a_block_removed_by_another_node_is_stored_into_once() {
    let d = tempfile::tempdir().unwrap();
    let max = 8 * MIB;
    let m = node(d.path(), max);
    for i in 0..7 {
        store(&m, &format!("m{i}.bin"), &vec![1u8; MIB as usize]);
    }
    // r evicts two of m's blocks (its pool gets their bytes) and stores two.
    let r = node(d.path(), max);
    assert!(r.evict(2 * MIB, false) >= 2 * MIB, "r evicted m's blocks");
    for i in 0..2 {
        store(&r, &format!("r{i}.bin"), &vec![2u8; MIB as usize]);
    }
    assert!(m.journal_apply(m.shared_tier().unwrap(), true) > 0, "m learns its blocks are gone");
    // Before, m kept the grant of the blocks r removed and stored into it
    // again (m's view does not know r's stores): 9 MiB of blocks against 8.
    let mut peak = 0;
    for i in 7..9 {
        store(&m, &format!("m{i}.bin"), &vec![3u8; MIB as usize]);
        peak = peak.max(blocks_in(d.path()));
    }
    assert!(peak <= max, "the tree held {peak} bytes of blocks against a budget of {max}");
}
