//! The ledger's reconcile support, a child module of `ledger` so it can
//! reach the ledger's private state: bringing the index back to what BACKING
//! holds after changes made behind the daemon's back (see
//! `crate::workers::reconcile`), and holding what a previous daemon's
//! writers may still add ([`Ledger::hold`]).

use std::path::{Path, PathBuf};

use super::{FileKey, Ledger, State};

/// Reconcile support (see `crate::workers::reconcile`): bringing the index back
/// to what BACKING holds after changes made behind the daemon's back.
impl Ledger {
    /// Holds `bytes` that writes already admitted may still add, whether or
    /// not they fit: a passthrough writer a previous daemon admitted and
    /// handed over (an upgrade, a supervised restart) goes on writing in the
    /// kernel whatever this daemon answers. Counted in the reservations and
    /// in the start-up index's usage bound, so every later reservation, and
    /// the evictor, see them; [`Ledger::release`] returns them.
    pub fn hold(&mut self, bytes: u64) {
        self.reserved += bytes;
        if let Some(b) = self.indexing_bound.as_mut() {
            *b += bytes;
        }
    }

    /// Keys a reconcile pass may find gone: live entries with no open handle.
    /// Taken before the walk, so an entry created during the walk is never a
    /// candidate for [`Ledger::drop_unused`].
    pub fn unused_keys(&self) -> Vec<FileKey> {
        self.entries.iter().filter(|(_, e)| e.state == State::Live && e.opens == 0).map(|(k, _)| *k).collect()
    }

    /// Bytes of usage that are not block files (regular files matching no
    /// pattern, directories, symlinks …): what eviction can never free. O(index).
    pub fn nonblock_bytes(&self) -> u64 {
        self.entries.iter().filter(|(_, e)| !e.block).map(|(_, e)| e.size).sum()
    }

    /// Whether a live block file the ledger counts has a path whose first
    /// component is one of `names` (top entries of BACKING removed behind
    /// the daemon: see `crate::workers::watch`). O(index), no allocation.
    pub fn counts_blocks_under(&self, names: &std::collections::HashSet<std::ffi::OsString>) -> bool {
        !names.is_empty()
            && self.entries.iter().any(|(_, e)| {
                e.state == State::Live
                    && e.block
                    && e.path
                        .as_deref()
                        .and_then(|p| p.components().next())
                        .is_some_and(|c| names.contains(c.as_os_str()))
            })
    }

    /// The entry's path, for a key that is live with no open handle (what a
    /// reconcile pass may drop), else None.
    pub fn unused_path(&self, key: &FileKey) -> Option<Option<PathBuf>> {
        let e = self.entries.get(key)?;
        (e.state == State::Live && e.opens == 0).then(|| e.path.as_deref().map(Path::to_path_buf))
    }

    /// Forgets `key`, whose file is gone from BACKING, if it is still live
    /// with no open handle. Returns the bytes taken out of usage (0 when the
    /// entry was kept or unknown).
    pub fn drop_unused(&mut self, key: FileKey) -> u64 {
        match self.entries.get(&key) {
            Some(e) if e.state == State::Live && e.opens == 0 => self.remove_learned(key).map_or(0, |e| e.size),
            _ => 0,
        }
    }

    /// Indexes a file found in BACKING that the ledger does not know, with
    /// `size` allocated bytes and (for a block file) the path eviction would unlink. Returns false (and changes nothing) if the key
    /// is already known. A block enters the LRU as most recent; call
    /// [`Ledger::place_by_mtime`] to move it to its mtime's place. Its next
    /// touch stamps its mtime at once.
    pub fn adopt(&mut self, key: FileKey, size: u64, block: bool, path: Option<PathBuf>) -> bool {
        if self.entries.contains_key(&key) {
            return false;
        }
        self.upsert(key, size, block, path, 0);
        self.mark_unstamped(key);
        true
    }

    /// Gives a known live entry that lost its path (renamed behind the
    /// daemon, a removed hard link …) the name a reconcile walk found it
    /// under, so eviction can consider it again. Returns whether it changed.
    pub fn restore_path(&mut self, key: FileKey, path: PathBuf, block: bool) -> bool {
        let Some(e) = self.entries.get_mut(&key) else { return false };
        if e.path.is_some() || e.state != State::Live {
            return false;
        }
        e.path = Some(path.into_boxed_path());
        if e.block != block {
            e.block = block;
            if block {
                self.block_files += 1;
            } else {
                self.block_files -= 1;
            }
        }
        self.sync_lru(key);
        true
    }

    /// Moves the evictable keys of `placed` (with their mtimes, any monotonic
    /// unit) to their place in the LRU order: among the other evictable
    /// blocks, whose mtimes `mtime_of` gives (None: keeps the mtime of the
    /// block before it), the older a file, the sooner it is evicted. Keys not
    /// in the LRU are ignored. O(placed) when they all go at one end, else
    /// O(LRU) (one pass, no allocation per entry beyond the order list).
    pub fn place_by_mtime(&mut self, placed: &[(FileKey, i128)], mtime_of: impl Fn(&FileKey) -> Option<i128>) {
        let mut new: Vec<(i128, FileKey)> =
            placed.iter().filter(|(k, _)| self.entries.lru_contains(k)).map(|(k, t)| (*t, *k)).collect();
        if new.is_empty() {
            return;
        }
        new.sort_unstable();
        new.dedup_by_key(|(_, k)| *k);
        let ids: std::collections::HashSet<FileKey> = new.iter().map(|(_, k)| *k).collect();
        // Oldest first, without the keys being placed.
        let old: Vec<FileKey> = self.entries.lru_keys().into_iter().filter(|k| !ids.contains(k)).collect();
        let (first, last) = (old.first().and_then(&mtime_of), old.last().and_then(&mtime_of));
        if old.is_empty() || last.is_some_and(|t| new[0].0 >= t) {
            for (_, k) in &new {
                self.entries.lru_put_hot(k);
            }
            return;
        }
        if first.is_some_and(|t| new[new.len() - 1].0 < t) {
            for (_, k) in new.iter().rev() {
                self.entries.lru_put_cold(k);
            }
            return;
        }
        let mut j = 0;
        let mut prev = i128::MIN;
        for k in old {
            let t = mtime_of(&k).unwrap_or(prev);
            prev = t;
            while j < new.len() && new[j].0 < t {
                self.entries.lru_put_hot(&new[j].1);
                j += 1;
            }
            self.entries.lru_put_hot(&k);
        }
        for (_, k) in &new[j..] {
            self.entries.lru_put_hot(k);
        }
    }
}
