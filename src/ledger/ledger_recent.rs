//! The most recently used block files, for warming the kernel's entries
//! after a mount (`crate::workers::warm`); a child module of `ledger` so it
//! can read the LRU.

use std::path::PathBuf;

use super::Ledger;
use super::entry::{State, USED_SINCE_STAMP};
use crate::key::FileKey;

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

    /// Block files used since their last mtime stamp (each such use came
    /// within `stamp_interval` of that stamp, so none was written), least
    /// recently used first: `(key, path relative to BACKING, second)`, where
    /// the second (caller's clock) is the latest stamp of any block before it
    /// in the LRU, a lower bound of its use that keeps the LRU order. Read
    /// once at unmount so the stamp writer persists these uses too (README
    /// "Recency"). O(LRU) under the ledger lock.
    pub fn unstamped_uses(&self) -> Vec<(FileKey, PathBuf, u32)> {
        let mut out = Vec::new();
        let mut floor = 0;
        for k in self.entries.lru_keys() {
            let Some(e) = self.entries.get(&k) else { continue };
            floor = floor.max((e.stamped_at & !USED_SINCE_STAMP).saturating_sub(1));
            if e.stamped_at & USED_SINCE_STAMP != 0 && e.block && e.state == State::Live {
                if let Some(path) = e.path.as_deref() {
                    out.push((k, path.to_path_buf(), floor));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn unstamped_uses_are_the_uses_a_stamp_did_not_follow_coldest_first() {
        let mut l = Ledger::new(1 << 30);
        let key = |i: u64| FileKey { dev: 1, ino: i };
        for i in 1..=4u64 {
            l.upsert(key(i), 4096, true, Some(PathBuf::from(format!("a/{i}.bin"))), 0);
        }
        // Created at second 0 (that counts as a stamp); interval 60 s.
        assert_eq!(l.touch(key(3), 10, 60), None, "within the interval: no stamp now");
        assert_eq!(l.touch(key(1), 20, 60), None);
        assert_eq!(l.touch(key(2), 70, 60), Some(PathBuf::from("a/2.bin")), "due: stamped now, not at unmount");
        // LRU now 4, 3, 1, 2: the flagged 3 and 1 get the latest stamp before them.
        let got = l.unstamped_uses();
        assert_eq!(got, vec![(key(3), PathBuf::from("a/3.bin"), 0), (key(1), PathBuf::from("a/1.bin"), 0)]);
        assert_eq!(l.touch(key(3), 80, 60), Some(PathBuf::from("a/3.bin")), "a due stamp covers the use");
        assert_eq!(l.unstamped_uses(), vec![(key(1), PathBuf::from("a/1.bin"), 0)]);
        assert_eq!(l.touch(key(3), 100, 60), None, "20 s after its stamp");
        // LRU 4, 1, 2 (stamped at 70), 3 (stamped at 80, used at 100).
        assert_eq!(
            l.unstamped_uses(),
            vec![(key(1), PathBuf::from("a/1.bin"), 0), (key(3), PathBuf::from("a/3.bin"), 80)]
        );
        assert_eq!(l.stamped_at(key(3)), Some(80), "the flag does not change the last stamp");
    }
}
