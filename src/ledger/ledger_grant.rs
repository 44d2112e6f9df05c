//! Ledger support for the shared budget's grants (`-o shared`; see
//! `crate::fs::shared::grants`). Pure, no I/O.
//!
//! A node's **net** is the bytes its own requests and evictions added to the
//! shared tree: its usage (its view of the whole tree) less what it
//! *learned* from walks and other nodes (the start-up index, a reconcile
//! pass's adoptions, drops and resizes, the removals read from other nodes'
//! journals). Another node's store counts in that node's net only, and a
//! block this node evicts, whoever stored it, lowers this node's net. So the
//! nets of all nodes add up to the tree's usage, less what changed behind
//! the mounts (the shared record's drift).
//!
//! With a grant set, a reservation is admitted only while net + reserved
//! stays within the grant: the sum of the grants is kept within `max_size`
//! by the shared record, so the tree's usage is too, at any store rate.

use super::{FileKey, Ledger, State};

/// The grant state of a ledger (see the module docs).
#[derive(Debug, Default)]
pub struct Grant {
    /// Bytes of usage learned from walks and other nodes (may go negative:
    /// this node's own stores that another node evicted).
    learned: i64,
    /// Bytes this node may hold (net + reserved); None without a shared budget.
    granted: Option<i64>,
}

impl Ledger {
    /// Usage changed by `delta` bytes through a walk or another node's
    /// removal, not through this node's requests (see the module docs).
    pub fn learn(&mut self, delta: i64) {
        self.grant.learned += delta;
    }

    /// This node's net bytes: usage less what it learned. Signed: a node
    /// that evicts other nodes' blocks has a negative net.
    pub fn net(&self) -> i64 {
        self.usage as i64 - self.grant.learned
    }

    /// Starts counting the net from zero: everything counted now is learned
    /// (a node whose shared record was reclaimed, or that joins a tree).
    pub fn reset_net(&mut self) {
        self.grant.learned = self.usage as i64;
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
    /// is recorded afresh. Unless this node was removing it, the removal was
    /// not this node's: its bytes leave the net as learned.
    pub fn fresh(&mut self, key: FileKey) {
        if let Some(e) = self.remove(key)
            && e.state != State::Evicting
        {
            self.learn(-(e.size as i64));
        }
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
    fn learned_bytes_are_not_net_and_a_grant_bounds_net_plus_reserved() {
        let mut l = Ledger::new(1 << 30);
        let k = |i| FileKey { dev: 1, ino: i };
        assert!(l.index(k(1), 100, true, Some("a.bin".into())));
        l.learn(100);
        assert_eq!(l.net(), 0, "an indexed file is learned, not this node's");
        l.set_granted(Some(50));
        assert_eq!(l.grant_short(50), 0);
        assert_eq!(l.grant_short(60), 10);
        l.reserve(40).unwrap();
        assert_eq!(l.grant_short(20), 10, "reservations count against the grant");
        l.release(40);
        l.upsert(k(2), 30, true, Some("b.bin".into()), 0);
        assert_eq!(l.net(), 30, "a file this node made is its own");
        l.remove(k(1));
        assert_eq!(l.net(), -70, "evicting a learned file lowers the net");
    }
}
