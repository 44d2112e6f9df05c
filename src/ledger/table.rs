//! Storage of the ledger: entries in one slab with an intrusive LRU list,
//! found by key through a hash table of 4-byte slab indices.
//!
//! Why not `HashMap<FileKey, Entry>` plus the `lru` crate: at a million files
//! each hash table sits at 2^21 buckets, so the entry map alone cost ~120
//! bytes per file and the LRU's own map and boxed nodes ~80 more. Here a file
//! costs one 64-byte slot, ~5 bytes of index, and its path.
//!
//! Every operation is O(1) (amortised for growth); nothing scans the table.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use super::Entry;
use crate::key::FileKey;

/// "No slot" in links.
const NIL: u32 = u32::MAX;

/// A slab slot: an entry, or a free slot (`entry.used` false) on the free
/// list. Whether it is in the LRU is `entry.linked` (it fits in the
/// entry's padding, keeping a slot at 64 bytes).
struct Slot {
    key: FileKey,
    entry: Entry,
    /// LRU neighbours (towards least / most recent), or the free list link in `next`.
    prev: u32,
    next: u32,
}

/// Entries by key, and the LRU order of a subset of them.
pub struct Table {
    slots: Vec<Slot>,
    index: HashTable<u32>,
    hasher: RandomState,
    free: u32,
    len: usize,
    /// Least recently used end, and most recently used end.
    cold: u32,
    hot: u32,
    linked: usize,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            index: HashTable::new(),
            hasher: RandomState::new(),
            free: NIL,
            len: 0,
            cold: NIL,
            hot: NIL,
            linked: 0,
        }
    }
}

impl Table {
    fn find(&self, key: &FileKey) -> Option<u32> {
        let h = self.hasher.hash_one(key);
        self.index.find(h, |&i| self.slots[i as usize].key == *key).copied()
    }

    /// Entries stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `key` is stored.
    pub fn contains_key(&self, key: &FileKey) -> bool {
        self.find(key).is_some()
    }

    /// The entry of `key`.
    pub fn get(&self, key: &FileKey) -> Option<&Entry> {
        self.find(key).map(|i| &self.slots[i as usize].entry)
    }

    /// The entry of `key`, mutable.
    pub fn get_mut(&mut self, key: &FileKey) -> Option<&mut Entry> {
        self.find(key).map(|i| &mut self.slots[i as usize].entry)
    }

    /// Stores `entry` under `key` (not in the LRU), replacing any entry there.
    pub fn insert(&mut self, key: FileKey, entry: Entry) {
        if let Some(i) = self.find(&key) {
            self.slots[i as usize].entry = entry;
            return;
        }
        let mut slot = Slot { key, entry, prev: NIL, next: NIL };
        (slot.entry.linked, slot.entry.used) = (false, true);
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.slots[i as usize].next;
            self.slots[i as usize] = slot;
            i
        } else {
            self.slots.push(slot);
            (self.slots.len() - 1) as u32
        };
        let hasher = &self.hasher;
        let slots = &self.slots;
        self.index.insert_unique(hasher.hash_one(key), i, |&j| hasher.hash_one(slots[j as usize].key));
        self.len += 1;
    }

    /// Removes `key` (and unlinks it from the LRU); returns its entry.
    pub fn remove(&mut self, key: &FileKey) -> Option<Entry> {
        let h = self.hasher.hash_one(key);
        let slots = &self.slots;
        let i = self.index.find_entry(h, |&i| slots[i as usize].key == *key).ok()?.remove().0;
        self.unlink(i);
        let s = &mut self.slots[i as usize];
        s.next = self.free;
        self.free = i;
        self.len -= 1;
        let mut e = std::mem::replace(&mut s.entry, Entry::placeholder());
        // The slot is free now: iter and values_mut must skip it.
        s.entry.used = false;
        e.used = false;
        Some(e)
    }

    /// Every stored entry, mutable (O(slots): for rare whole-index passes).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.slots.iter_mut().filter(|s| s.entry.used).map(|s| &mut s.entry)
    }

    /// Every stored `(key, entry)` (O(slots): for rare whole-index passes).
    pub fn iter(&self) -> impl Iterator<Item = (&FileKey, &Entry)> {
        self.slots.iter().filter(|s| s.entry.used).map(|s| (&s.key, &s.entry))
    }

    // ---------------------------------------------------------------- LRU

    /// Entries in the LRU.
    pub fn lru_len(&self) -> usize {
        self.linked
    }

    /// Whether `key` is in the LRU.
    pub fn lru_contains(&self, key: &FileKey) -> bool {
        self.find(key).is_some_and(|i| self.slots[i as usize].entry.linked)
    }

    /// Puts a stored `key` in the LRU as most recent (moving it if there).
    /// Returns false if `key` is not stored.
    pub fn lru_put_hot(&mut self, key: &FileKey) -> bool {
        let Some(i) = self.find(key) else { return false };
        self.unlink(i);
        self.link_between(i, self.hot, NIL);
        true
    }

    /// Puts a stored `key` in the LRU as least recent. Returns false if `key` is not stored.
    pub fn lru_put_cold(&mut self, key: &FileKey) -> bool {
        let Some(i) = self.find(key) else { return false };
        self.unlink(i);
        self.link_between(i, NIL, self.cold);
        true
    }

    /// Makes `key` most recent if it is in the LRU; returns whether it was.
    pub fn lru_promote(&mut self, key: &FileKey) -> bool {
        match self.find(key) {
            Some(i) if self.slots[i as usize].entry.linked => {
                self.unlink(i);
                self.link_between(i, self.hot, NIL);
                true
            }
            _ => false,
        }
    }

    /// Takes `key` out of the LRU; returns whether it was there.
    pub fn lru_remove(&mut self, key: &FileKey) -> bool {
        match self.find(key) {
            Some(i) if self.slots[i as usize].entry.linked => {
                self.unlink(i);
                true
            }
            _ => false,
        }
    }

    /// The keys in the LRU, least recently used first (O(LRU): for rare
    /// whole-order passes such as placing adopted files by mtime).
    pub fn lru_keys(&self) -> Vec<FileKey> {
        let mut out = Vec::with_capacity(self.linked);
        let mut i = self.cold;
        while i != NIL {
            out.push(self.slots[i as usize].key);
            i = self.slots[i as usize].next;
        }
        out
    }

    /// At most `n` keys of the LRU, most recently used first (O(n)).
    pub fn lru_hottest(&self, n: usize) -> Vec<FileKey> {
        let mut out = Vec::with_capacity(n.min(self.linked));
        let mut i = self.hot;
        while i != NIL && out.len() < n {
            out.push(self.slots[i as usize].key);
            i = self.slots[i as usize].prev;
        }
        out
    }

    /// Moves `key` (stored) in the LRU just colder than the hottest run of
    /// entries for which `hotter` holds: from the most recent end, passes
    /// every entry `hotter` says is more recent, and links `key` below the
    /// first one it does not (or coldest, if it holds for all). Returns false
    /// if `key` is not stored. O(entries passed).
    pub fn lru_place_from_hot(&mut self, key: &FileKey, hotter: impl Fn(&FileKey) -> bool) -> bool {
        let Some(i) = self.find(key) else { return false };
        self.unlink(i);
        let mut above = NIL;
        let mut j = self.hot;
        while j != NIL && hotter(&self.slots[j as usize].key) {
            above = j;
            j = self.slots[j as usize].prev;
        }
        self.link_between(i, j, above);
        true
    }

    /// The least recently used key for which `pick` holds, looking at most
    /// `limit` keys from the cold end (O(limit)).
    pub fn lru_coldest_where(&self, limit: usize, pick: impl Fn(&Entry) -> bool) -> Option<FileKey> {
        let mut i = self.cold;
        for _ in 0..limit {
            if i == NIL {
                return None;
            }
            let s = &self.slots[i as usize];
            if pick(&s.entry) {
                return Some(s.key);
            }
            i = s.next;
        }
        None
    }

    /// Takes the least recently used key out of the LRU.
    pub fn lru_pop_cold(&mut self) -> Option<FileKey> {
        if self.cold == NIL {
            return None;
        }
        let i = self.cold;
        self.unlink(i);
        Some(self.slots[i as usize].key)
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next, linked) = {
            let s = &self.slots[i as usize];
            (s.prev, s.next, s.entry.linked)
        };
        if !linked {
            return;
        }
        if prev == NIL {
            self.cold = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.hot = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        let s = &mut self.slots[i as usize];
        (s.prev, s.next, s.entry.linked) = (NIL, NIL, false);
        self.linked -= 1;
    }

    /// Links unlinked slot `i` between `prev` (colder) and `next` (hotter).
    fn link_between(&mut self, i: u32, prev: u32, next: u32) {
        {
            let s = &mut self.slots[i as usize];
            (s.prev, s.next, s.entry.linked) = (prev, next, true);
        }
        if prev == NIL {
            self.cold = i;
        } else {
            self.slots[prev as usize].next = i;
        }
        if next == NIL {
            self.hot = i;
        } else {
            self.slots[next as usize].prev = i;
        }
        self.linked += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(n: u64) -> FileKey {
        FileKey { dev: 1, ino: n }
    }

    /// A table of k(1)..k(5), put hot in that order (k(5) hottest).
    fn five_hot() -> Table {
        let mut t = Table::default();
        for n in 1..=5 {
            t.insert(k(n), Entry::placeholder());
            t.lru_put_hot(&k(n));
        }
        t
    }

    fn order(t: &mut Table) -> Vec<u64> {
        std::iter::from_fn(|| t.lru_pop_cold().map(|k| k.ino)).collect()
    }

    #[test]
    fn lru_order_hot_cold_promote_remove_and_slot_reuse() {
        let mut t = five_hot();
        assert!(t.lru_promote(&k(1)));
        assert!(t.lru_put_cold(&k(5)));
        assert!(t.lru_remove(&k(3)));
        assert!(!t.lru_promote(&k(3)), "not in the LRU any more");
        assert_eq!(t.lru_len(), 4);
        assert!(t.remove(&k(2)).is_some());
        assert!(t.get(&k(2)).is_none());
        t.insert(k(6), Entry::placeholder()); // reuses 2's slot
        t.lru_put_hot(&k(6));
        assert_eq!(t.len(), 5);
        assert_eq!(order(&mut t), vec![5, 4, 1, 6]);
        assert_eq!(t.lru_len(), 0);
        assert!(t.contains_key(&k(3)));
    }

    #[test]
    fn place_from_hot_stops_at_the_first_colder_entry() {
        let mut t = five_hot();
        // Hotter than 5 and 4 only: between 3 and 4.
        assert!(t.lru_place_from_hot(&k(1), |x| x.ino >= 4));
        assert!(t.lru_place_from_hot(&k(2), |_| true), "hotter than all: coldest");
        assert!(t.lru_place_from_hot(&k(5), |_| false), "colder than none: hottest");
        assert!(!t.lru_place_from_hot(&k(9), |_| true));
        assert_eq!(order(&mut t), vec![2, 3, 1, 4, 5]);
    }

    #[test]
    fn a_slot_is_64_bytes() {
        assert!(std::mem::size_of::<Slot>() <= 64, "{}", std::mem::size_of::<Slot>());
    }
}
