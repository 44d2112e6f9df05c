//! The ledger events of eviction and of every verified removal
//! (`crate::fs::evict`): the victim's choice, the removal begun, finished or
//! aborted, and what eviction learns on the way. Each takes the ledger lock once.

use std::path::PathBuf;

use super::Accounts;
use crate::key::FileKey;

impl Accounts {
    /// Eviction's choice: the least recently used evictable block file, its
    /// path, and the mtime this node knows for it (shared tier), taken out
    /// of the LRU until [`Accounts::park`] or the removal's end.
    /// With `own`, only a block this node made (the shared budget's
    /// eviction for this node's grant, `crate::fs::shared::grants`).
    pub fn choose_victim(&self, own: bool) -> Option<(FileKey, PathBuf, Option<i64>)> {
        let mut l = self.guard();
        let (key, path) = if own { l.take_own_victim()? } else { l.take_victim()? };
        let known = l.known_mtime(key);
        Some((key, path, known))
    }

    /// A victim eviction did not remove goes back to the LRU, most recent.
    pub fn park(&self, key: FileKey) {
        self.guard().park(key);
    }

    /// `key`'s path is no longer known (it moved behind the daemon).
    pub fn forget_path(&self, key: FileKey) {
        self.guard().forget_path(key);
    }

    /// Shared tier: `key` was used on another node at `mtime` (ns): it is
    /// ranked there in the LRU (at most at `cap`: see `Ledger::know_read`).
    pub fn rerank_at(&self, key: FileKey, mtime: i64, cap: i64) {
        self.guard().rerank_at(key, mtime, cap);
    }

    /// Shared tier: whether `mtime` (ns), read from `key`'s file, is a
    /// stamp this node does not know (`Ledger::is_new_mtime`).
    pub fn is_new_mtime(&self, key: FileKey, mtime: i64) -> bool {
        self.guard().is_new_mtime(key, mtime)
    }

    /// Shared tier: the mtime (ns) this node knows it gave `key`.
    pub fn known_mtime(&self, key: FileKey) -> Option<i64> {
        self.guard().known_mtime(key)
    }

    /// A verified removal begins (see `super::evict`): false when `key` is
    /// open or already being removed. Ends with
    /// [`Accounts::finish_removal`] or [`Accounts::abort_removal`].
    pub fn begin_removal(&self, key: FileKey, what: crate::ledger::Removal) -> bool {
        self.guard().begin_removal(key, what)
    }

    /// [`Accounts::begin_removal`] of an entry of the directory `dir`, in
    /// the same hold of the ledger lock: also returns how many files were
    /// made in `dir` through the mount ([`Accounts::files_made_in_dir`]).
    pub fn begin_removal_in(&self, key: FileKey, what: crate::ledger::Removal, dir: FileKey) -> (bool, u8) {
        let mut l = self.guard();
        let begun = l.begin_removal(key, what);
        (begun, l.get(&dir).map_or(0, |e| e.files_made))
    }

    /// The removal begun by [`Accounts::begin_removal`] happened: `key`
    /// leaves usage; returns the bytes freed.
    pub fn finish_removal(&self, key: FileKey) -> u64 {
        self.guard().finish_removal(key)
    }

    /// The removal begun by [`Accounts::begin_removal`] found the victim
    /// gone already (removed elsewhere): `key` leaves usage; returns the
    /// bytes freed.
    pub fn removal_found_gone(&self, key: FileKey) -> u64 {
        self.guard().finish_removal_learned(key)
    }

    /// The removal begun by [`Accounts::begin_removal`] did not happen.
    pub fn abort_removal(&self, key: FileKey) {
        self.guard().abort_removal(key);
    }

    /// Eviction found the victim's name `rel` gone behind the daemon: if
    /// the entry still names `rel`, it stops counting (as a reconcile pass
    /// would) and the bytes freed are returned; `None` when a rename
    /// through the mount gave it another name meanwhile.
    pub fn vanished(&self, key: FileKey, rel: &std::path::Path) -> Option<u64> {
        let mut l = self.guard();
        if l.get(&key).and_then(|e| e.path.as_deref()) != Some(rel) {
            return None;
        }
        Some(l.drop_unused(key))
    }
}
