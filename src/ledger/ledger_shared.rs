//! Ledger support for the shared tier (`-o shared`, several nodes over one
//! BACKING): which entries this node created, and when it last wrote their
//! mtime (to tell its own stamps from other nodes'). Pure, no I/O.

use super::Ledger;
use crate::key::FileKey;

impl Ledger {
    /// Marks `key` as created through this mount (see [`Ledger::local_bytes`]).
    pub fn mark_local(&mut self, key: FileKey) {
        if let Some(e) = self.entries.get_mut(&key) {
            e.local = true;
        }
    }

    /// Bytes of the files created through this mount that are still there:
    /// in shared mode, this node's part of the shared usage (files other
    /// nodes created, found by the index or a reconcile pass, are not). O(entries).
    pub fn local_bytes(&self) -> u64 {
        self.entries.iter().filter(|(_, e)| e.local).map(|(_, e)| e.size).sum()
    }

    /// When this node last wrote `key`'s mtime (created it through the mount
    /// or stamped it), seconds of the caller's clock; None if never or unknown.
    pub fn stamped_at(&self, key: FileKey) -> Option<u32> {
        self.entries.get(&key).and_then(|e| e.stamped_at.checked_sub(1))
    }
}
