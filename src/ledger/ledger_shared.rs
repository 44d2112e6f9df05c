//! Ledger support for the shared tier (`-o shared`, several nodes over one
//! BACKING): which entries this node created, when it last wrote their
//! mtime, and the newest mtime it knows each file to have had. Pure, no I/O.
//!
//! Known mtimes are how eviction tells another node's recency stamp from
//! this node's own use, exactly (no time window): a victim whose mtime is
//! newer than the known one was used on another node since this node last
//! knew it (`Core::stamped_elsewhere`). They come from the walks that read
//! the file (start-up index, reconcile passes), from the values this node's
//! stamp writer wrote, from this node's RELEASE of a handle (an upper bound
//! of the mtime its own writes gave the file) and from re-ranks. Only ever
//! raised, so a walk that read the mtime before this node's own stamp does
//! not lower it. Filled only in shared mode (the callers check): about 40
//! bytes per file there, in a map beside the 64-byte table slots.

use super::Ledger;
use super::entry::USED_SINCE_STAMP;
use crate::key::FileKey;

impl Ledger {
    /// When this node last wrote `key`'s mtime (created it through the mount
    /// or stamped it), seconds of the caller's clock; None if never or unknown.
    pub fn stamped_at(&self, key: FileKey) -> Option<u32> {
        self.entries.get(&key).and_then(|e| (e.stamped_at & !USED_SINCE_STAMP).checked_sub(1))
    }

    /// Raises the known mtime of `key` (ns since the epoch) to `ns` if it is
    /// newer (see the module docs); unknown keys are ignored.
    pub fn know_mtime(&mut self, key: FileKey, ns: i64) {
        if self.entries.contains_key(&key) {
            let k = self.known.entry(key).or_insert(ns);
            *k = (*k).max(ns);
        }
    }

    /// The newest mtime (ns since the epoch) this node knows `key` to have
    /// had; None if it never read, wrote or released it.
    pub fn known_mtime(&self, key: FileKey) -> Option<i64> {
        self.known.get(&key).copied()
    }

    /// A walk read these files with these mtimes (ns): raises their known
    /// mtimes, then places the evictable ones in the LRU by their known
    /// mtime (so a block stamped since by this node, or re-ranked since, is
    /// not moved back to an older mtime the walk read first). O(LRU).
    pub fn place_by_known(&mut self, read: &[(FileKey, i128)]) {
        for (k, t) in read {
            self.know_mtime(*k, i64::try_from(*t).unwrap_or(i64::MAX));
        }
        let placed: Vec<(FileKey, i128)> =
            read.iter().filter_map(|(k, _)| self.known.get(k).map(|t| (*k, i128::from(*t)))).collect();
        let known = std::mem::take(&mut self.known);
        self.place_by_mtime(&placed, |k| known.get(k).map(|t| i128::from(*t)));
        self.known = known;
    }

    /// Another node used evictable `key` at `mtime` (ns), after every use
    /// this node knew: remembers that mtime and moves the block to its place
    /// in the LRU, below every block known to be used later and above the
    /// rest (blocks with no known mtime count as older). Not a use by this
    /// node: no stamp is due for it. O(blocks used after `mtime`).
    pub fn rerank_at(&mut self, key: FileKey, mtime: i64) {
        self.know_mtime(key, mtime);
        let Some(size) = self.entries.get(&key).filter(|e| Self::evictable(e)).map(|e| e.size) else { return };
        let had = self.entries.lru_contains(&key);
        let known = &self.known;
        self.entries.lru_place_from_hot(&key, |k| known.get(k).is_some_and(|t| *t > mtime));
        if !had {
            self.lru_bytes += size;
        }
    }
}
