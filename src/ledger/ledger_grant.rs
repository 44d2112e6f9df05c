//! Ledger support for the shared budget's grants (`-o shared`; see
//! `crate::fs::shared::grants`). Pure, no I/O.
//!
//! A node's **net** is the bytes of the objects it made (files created and
//! directories made through its mount) that are still in the tree, as far
//! as it knows: an object another node removes leaves it once this node
//! learns so (its journal, a reconcile pass, an eviction finding it gone),
//! so until then the net counts it still, on the safe side. Every object
//! made through a mount counts in exactly one net, so the nets of all nodes
//! add up to at least the tree's usage, less what was made behind the
//! mounts (the shared record's drift).
//!
//! With a grant set, a reservation is admitted only while net + reserved
//! stays within the grant: the sum of the grants is kept within `max_size`
//! by the shared record, so the tree's usage is too, at any store rate.

use super::{FileKey, Ledger};

/// The grant state of a ledger (see the module docs).
#[derive(Debug, Default)]
pub struct Grant {
    /// Bytes of the entries made here (`Entry::local`): the net.
    local: u64,
    /// Bytes this node may hold (net + reserved); None without a shared budget.
    granted: Option<i64>,
    /// Bytes of this node's objects that others removed since the last
    /// [`Ledger::take_drift_moves`]: they left the net and the grant, and go
    /// to the shared record's drift (the remover took them out of it).
    drift_in: u64,
    /// Bytes of objects not this node's that it removed since then: they
    /// come out of the drift (their maker, learning of it, puts them back
    /// from its net; a dead or departed maker's are in the drift already).
    drift_out: u64,
}

impl Ledger {
    /// This node's net: bytes of the objects made here still counted.
    pub fn net(&self) -> i64 {
        self.grant.local as i64
    }

    /// Marks `key` as made through this mount: its bytes join the net.
    pub fn mark_local(&mut self, key: FileKey) {
        if let Some(e) = self.entries.get_mut(&key)
            && !e.local
        {
            e.local = true;
            self.grant.local += e.size;
        }
    }

    /// Bytes of the objects made through this mount still in the tree (the
    /// net, unsigned). O(1).
    pub fn local_bytes(&self) -> u64 {
        self.grant.local
    }

    /// An entry's size changed from `old` to `new` bytes (the ledger's totals).
    pub(super) fn local_resized(&mut self, key: FileKey, old: u64, new: u64) {
        if self.entries.get(&key).is_some_and(|e| e.local) {
            self.grant.local = self.grant.local - old + new;
        }
    }

    /// [`Ledger::remove`] of an object this node learned was removed
    /// elsewhere (another node, or behind the mounts).
    pub fn remove_learned(&mut self, key: FileKey) -> Option<super::Entry> {
        self.remove_as(key, false)
    }

    /// [`Ledger::finish_removal`] of a victim another node (or a process
    /// behind the mounts) removed first: learned, not this node's removal.
    pub fn finish_removal_learned(&mut self, key: FileKey) -> u64 {
        match self.entries.get(&key) {
            Some(e) if e.state == super::State::Evicting => self.remove_learned(key).map_or(0, |e| e.size),
            _ => 0,
        }
    }

    /// An entry left the ledger: `own`, this node removed it; otherwise it
    /// learned the object was removed elsewhere.
    pub(super) fn local_removed(&mut self, e: &super::Entry, own: bool) {
        if e.local {
            self.grant.local -= e.size;
            // Removed elsewhere: the remover took the bytes off the drift
            // for the pool (or its own store), so they leave this grant too;
            // kept here as well, both nodes stored into them (one block
            // over max_size in shared/upgrade-record).
            if !own && let Some(g) = self.grant.granted.as_mut() {
                *g -= e.size as i64;
                self.grant.drift_in += e.size;
            }
        } else if own && self.grant.granted.is_some() {
            self.grant.drift_out += e.size;
        }
    }

    /// The bytes to move into and out of the shared record's drift since
    /// the last call (see `Grant`), reset.
    pub fn take_drift_moves(&mut self) -> (u64, u64) {
        (std::mem::take(&mut self.grant.drift_in), std::mem::take(&mut self.grant.drift_out))
    }

    /// Bytes of others' objects removed here not yet taken out of the drift.
    pub fn drift_out(&self) -> u64 {
        self.grant.drift_out
    }

    /// Moves taken by [`Ledger::take_drift_moves`] that the record did not
    /// get (its transaction failed), kept for the next one.
    pub fn restore_drift_moves(&mut self, into: u64, out: u64) {
        self.grant.drift_in += into;
        self.grant.drift_out += out;
    }

    /// The grant (bytes), if the shared budget is on.
    pub fn granted(&self) -> Option<i64> {
        self.grant.granted
    }

    /// Sets the grant to `bytes` (None: no shared budget).
    pub fn set_granted(&mut self, bytes: Option<i64>) {
        self.grant.granted = bytes;
    }

    /// Bytes a reservation of `bytes` lacks within the grant: 0 when it fits
    /// (or there is no grant).
    pub fn grant_short(&self, bytes: u64) -> u64 {
        let Some(g) = self.grant.granted else { return 0 };
        let after = self.net() + self.reserved as i64 + bytes as i64;
        u64::try_from(after - g).unwrap_or(0)
    }

    /// A request just created a new object with identity `key`. Any entry
    /// under that key is of an object already removed whose inode number the
    /// filesystem reused (an eviction or rmdir between its unlink and its
    /// ledger update, here or on another node): drop it, so the new object
    /// is recorded afresh.
    pub fn fresh(&mut self, key: FileKey) {
        self.remove_learned(key);
    }

    /// Eviction for this node's own grant: the least recently used evictable
    /// block this node made (among the 4096 least recent), taken out of the
    /// LRU like [`Ledger::take_victim`]'s choice.
    pub fn take_own_victim(&mut self) -> Option<(FileKey, std::path::PathBuf)> {
        let key = self.entries.lru_coldest_where(4096, |e| e.local && e.path.is_some())?;
        let e = self.entries.get(&key)?;
        let (size, path) = (e.size, e.path.as_deref()?.to_path_buf());
        self.entries.lru_remove(&key);
        self.lru_bytes -= size;
        Some((key, path))
    }

    /// The objects this node made that have a path: `(key, bytes, path
    /// relative to BACKING)`. What a node leaving a shared budget lists
    /// for another to adopt. O(entries).
    pub fn local_objects(&self) -> Vec<(FileKey, u64, std::path::PathBuf)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.local)
            .filter_map(|(k, e)| Some((*k, e.size, e.path.as_deref()?.to_path_buf())))
            .collect()
    }

    /// The path and block-ness of `key` when it is this node's own and has
    /// a path.
    pub fn own_entry(&self, key: FileKey) -> Option<(std::path::PathBuf, bool)> {
        let e = self.entries.get(&key).filter(|e| e.local)?;
        Some((e.path.as_deref()?.to_path_buf(), e.block))
    }

    /// Marks `key` as this node's if the ledger knows it under `path`
    /// (adopting a left node's object). Returns whether it did.
    pub fn adopt_local(&mut self, key: FileKey, path: &std::path::Path) -> bool {
        if self.entries.get(&key).is_some_and(|e| e.path.as_deref() == Some(path)) {
            self.mark_local(key);
            return true;
        }
        false
    }

    /// Bytes this node holds against its grant: net plus reservations.
    pub fn held(&self) -> i64 {
        self.net() + self.reserved as i64
    }
}

#[cfg(test)]
mod tests {
    use crate::key::FileKey;
    use crate::ledger::Ledger;

    #[test]
    fn the_net_is_what_this_node_made_and_a_grant_bounds_net_plus_reserved() {
        let mut l = Ledger::new(1 << 30);
        let k = |i| FileKey { dev: 1, ino: i };
        assert!(l.index(k(1), 100, true, Some("a.bin".into())));
        assert_eq!(l.net(), 0, "an indexed file is not this node's");
        l.set_granted(Some(50));
        assert_eq!(l.grant_short(50), 0);
        assert_eq!(l.grant_short(60), 10);
        l.reserve(40).unwrap();
        assert_eq!(l.grant_short(20), 10, "reservations count against the grant");
        l.release(40);
        l.upsert(k(2), 30, true, Some("b.bin".into()), 0);
        l.mark_local(k(2));
        assert_eq!(l.net(), 30, "a file this node made is its own");
        l.set_size(k(2), 45);
        assert_eq!(l.net(), 45);
        l.remove(k(1));
        assert_eq!(l.net(), 45, "removing another node's file leaves the net");
        l.remove(k(2));
        assert_eq!(l.net(), 0);
        assert_eq!(l.take_drift_moves(), (0, 100), "another node's file this node removed leaves the drift");
    }

    #[test]
    fn a_removal_learned_of_this_nodes_object_moves_it_from_the_grant_to_the_drift() {
        let mut l = Ledger::new(1 << 30);
        let k = |i| FileKey { dev: 1, ino: i };
        l.set_granted(Some(100));
        l.upsert(k(1), 30, true, Some("a.bin".into()), 0);
        l.mark_local(k(1));
        assert!(l.index(k(2), 20, true, Some("b.bin".into())));
        l.remove_learned(k(1));
        assert_eq!((l.net(), l.granted()), (0, Some(70)), "the net and the grant drop together");
        l.remove_learned(k(2));
        assert_eq!(l.take_drift_moves(), (30, 0), "only this node's object goes back to the drift");
        assert_eq!(l.take_drift_moves(), (0, 0), "taken once");
    }
}
