//! The most recently used block files, for warming the kernel's entries
//! after a mount (`crate::workers::warm`); a child module of `ledger` so it
//! can read the LRU.

use std::path::PathBuf;

use super::Ledger;

impl Ledger {
    /// Paths (relative to BACKING) of at most `n` evictable block files,
    /// most recently used first. O(n) under the ledger lock.
    pub fn recent_block_paths(&self, n: usize) -> Vec<PathBuf> {
        self.entries
            .lru_hottest(n)
            .iter()
            .filter_map(|k| self.entries.get(k).and_then(|e| e.path.as_deref().map(std::path::Path::to_path_buf)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::FileKey;

    #[test]
    fn recent_block_paths_come_most_recent_first_and_bounded() {
        let mut l = Ledger::new(1 << 30);
        for i in 1..=5u64 {
            let key = FileKey { dev: 1, ino: i };
            l.upsert(key, 4096, true, Some(PathBuf::from(format!("a/{i}.bin"))), i as u32);
        }
        let got = l.recent_block_paths(3);
        assert_eq!(got, ["a/5.bin", "a/4.bin", "a/3.bin"].map(PathBuf::from));
        assert_eq!(l.recent_block_paths(100).len(), 5);
    }
}
