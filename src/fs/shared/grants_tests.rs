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
