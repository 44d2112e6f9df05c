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
