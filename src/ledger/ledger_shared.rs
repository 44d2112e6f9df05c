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

    /// This node wrote `key`'s mtime, or bounds what its own writes gave
    /// it, at `ns` (ns since the epoch, reference time: see
    /// `crate::fs::clock`): raises the known mtime and the rank to `ns` if
    /// it is newer. Over a stamp read from the future (a rank apart from
    /// the known mtime), this node's own stamp replaced that value in the
    /// tree: the known mtime becomes `ns`. Unknown keys are ignored.
    pub fn know_mtime(&mut self, key: FileKey, ns: i64) {
        if !self.entries.contains_key(&key) {
            return;
        }
        let (k, r) = (self.known.get(&key).copied(), self.rank(&key));
        let known = if self.capped.contains_key(&key) { ns } else { k.map_or(ns, |k| k.max(ns)) };
        self.set_known(key, known, r.map_or(ns, |r| r.max(ns)));
    }

    /// Whether `raw`, an mtime read from `key`'s file, is a stamp this node
    /// does not know yet: newer than the known mtime, or, while the known
    /// one is a stamp from the future (its rank is capped), any other value
    /// (someone stamped over it). True when none is known.
    pub fn is_new_mtime(&self, key: FileKey, raw: i64) -> bool {
        match self.known.get(&key) {
            None => true,
            Some(k) if self.capped.contains_key(&key) => raw != *k,
            Some(k) => raw > *k,
        }
    }

    /// A walk or eviction read the mtime `raw` from `key`'s file, with
    /// `cap` the reader's reference time plus `crate::fs::clock::FUTURE_TOLERANCE`:
    /// when it is new ([`Ledger::is_new_mtime`]) it becomes the known mtime,
    /// and the rank is raised to it, or to `cap` for a stamp from the future
    /// (so a node whose clock is ahead makes a block look hottest for at
    /// most the tolerance). Returns whether it was new.
    pub fn know_read(&mut self, key: FileKey, raw: i64, cap: i64) -> bool {
        if !self.entries.contains_key(&key) || !self.is_new_mtime(key, raw) {
            return false;
        }
        let rank = raw.min(cap);
        let r = self.rank(&key).map_or(rank, |r| r.max(rank));
        self.set_known(key, raw, r);
        true
    }

    fn set_known(&mut self, key: FileKey, known: i64, rank: i64) {
        self.known.insert(key, known);
        if rank == known {
            self.capped.remove(&key);
        } else {
            self.capped.insert(key, rank);
        }
    }

    /// The newest mtime (ns since the epoch) this node knows `key` to have
    /// had; None if it never read, wrote or released it.
    pub fn known_mtime(&self, key: FileKey) -> Option<i64> {
        self.known.get(&key).copied()
    }

    /// Where `key` stands in the LRU order across nodes (ns, reference
    /// time): its known mtime, or the capped rank of a stamp from the future.
    pub fn rank(&self, key: &FileKey) -> Option<i64> {
        self.capped.get(key).or_else(|| self.known.get(key)).copied()
    }

    /// A walk read these files with these mtimes (ns): each new one becomes
    /// known ([`Ledger::know_read`], `cap` as there), then the evictable
    /// ones are placed in the LRU by their rank (so a block stamped since by
    /// this node, or re-ranked since, is not moved back to an older mtime the
    /// walk read first). O(LRU).
    pub fn place_by_known(&mut self, read: &[(FileKey, i128)], cap: i64) {
        for (k, t) in read {
            self.know_read(*k, i64::try_from(*t).unwrap_or(i64::MAX), cap);
        }
        let placed: Vec<(FileKey, i128)> =
            read.iter().filter_map(|(k, _)| self.rank(k).map(|t| (*k, i128::from(t)))).collect();
        let known = std::mem::take(&mut self.known);
        let capped = std::mem::take(&mut self.capped);
        self.place_by_mtime(&placed, |k| capped.get(k).or_else(|| known.get(k)).map(|t| i128::from(*t)));
        self.known = known;
        self.capped = capped;
    }

    /// Another node used evictable `key` at `mtime` (ns, read from its
    /// file), after every use this node knew: remembers that mtime
    /// ([`Ledger::know_read`], `cap` as there) and moves the block to its
    /// place in the LRU by its rank, below every block ranked later and above
    /// the rest (blocks with no known mtime count as older). Not a use by
    /// this node: no stamp is due for it. O(blocks used after it).
    pub fn rerank_at(&mut self, key: FileKey, mtime: i64, cap: i64) {
        self.know_read(key, mtime, cap);
        let Some(size) = self.entries.get(&key).filter(|e| Self::evictable(e)).map(|e| e.size) else { return };
        let at = self.rank(&key).unwrap_or(mtime);
        let had = self.entries.lru_contains(&key);
        let (known, capped) = (&self.known, &self.capped);
        self.entries.lru_place_from_hot(&key, |k| capped.get(k).or_else(|| known.get(k)).is_some_and(|t| *t > at));
        if !had {
            self.lru_bytes += size;
        }
    }
}
