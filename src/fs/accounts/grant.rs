//! The ledger events of the shared budget's grants (`-o shared`; the
//! record they are kept against is `crate::fs::shared::grants`). Each takes
//! the ledger lock once.

use super::Accounts;

/// This node's side of the shared budget, read at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GrantState {
    /// Bytes this node's own requests and evictions added to the tree
    /// (signed; see `crate::ledger`'s grant support).
    pub net: i64,
    /// Net plus the reservations held now (bytes).
    pub held: i64,
    /// Usage as this node sees the tree (bytes).
    pub usage: u64,
    /// The grant (bytes), if set.
    pub granted: Option<i64>,
}

impl Accounts {
    /// This node's net, held bytes, usage and grant.
    pub fn grant_state(&self) -> GrantState {
        let l = self.guard();
        GrantState { net: l.net(), held: l.held(), usage: l.usage(), granted: l.granted() }
    }

    /// Sets the grant to `bytes` (None: no shared budget); returns the state
    /// after it.
    pub fn set_granted(&self, bytes: Option<i64>) -> GrantState {
        let mut l = self.guard();
        l.set_granted(bytes);
        GrantState { net: l.net(), held: l.held(), usage: l.usage(), granted: l.granted() }
    }

    /// Lowers the grant to `bytes`, or to what the node holds now if that is
    /// more (a reservation admitted meanwhile stays covered); returns the
    /// grant set.
    pub fn lower_grant(&self, bytes: i64) -> i64 {
        let mut l = self.guard();
        let g = bytes.max(l.held());
        l.set_granted(Some(g));
        g
    }

    /// The bytes to move into and out of the shared record's drift (see
    /// `crate::ledger`'s grant support), reset.
    pub fn take_drift_moves(&self) -> (u64, u64) {
        self.guard().take_drift_moves()
    }

    /// Bytes of others' objects this node removed not yet out of the drift.
    pub fn drift_out(&self) -> u64 {
        self.guard().drift_out()
    }

    /// Drift moves a failed transaction did not write, kept for the next.
    pub fn restore_drift_moves(&self, into: u64, out: u64) {
        self.guard().restore_drift_moves(into, out);
    }

    /// This node's net and the objects it made that have a path (`(key,
    /// bytes, path)`), read at once: what it leaves behind at unmount.
    pub fn own_objects(&self) -> (i64, Vec<(crate::key::FileKey, u64, std::path::PathBuf)>) {
        let l = self.guard();
        (l.net(), l.local_objects())
    }

    /// The path (relative to BACKING) and block-ness of `key` when it is
    /// this node's own (counted in its net) and has a path: what a
    /// hand-over passes on for an open file (`fs::handed`).
    pub fn own_entry(&self, key: crate::key::FileKey) -> Option<(std::path::PathBuf, bool)> {
        self.guard().own_entry(key)
    }

    /// A hand-over: the open file `key` (`bytes` allocated, at `path`, a
    /// block file or not) was the previous daemon's own; from now on it is
    /// this node's (its bytes and what is written to it count in the net),
    /// and the previous daemon leaves it out of what it leaves behind.
    pub fn take_over_own(&self, key: crate::key::FileKey, bytes: u64, block: bool, path: std::path::PathBuf, now: u32) {
        let mut l = self.guard();
        l.upsert(key, bytes, block, Some(path), now);
        l.mark_local(key);
    }

    /// Takes over a left node's object `key` at `path` as this node's own:
    /// true if the ledger knew it there (its bytes join the net).
    pub fn adopt_local(&self, key: crate::key::FileKey, path: &std::path::Path) -> bool {
        self.guard().adopt_local(key, path)
    }
}
