//! The ledger: every file and directory of the backing tree with its allocated
//! bytes, the LRU order of evictable block files, open-handle pins and write
//! reservations. Pure bookkeeping: no I/O, no clock, no locks of its own (the
//! caller wraps it in one mutex, see `crate::fs::Core`).
//!
//! Invariant: a key is in the LRU list iff its entry is `Live`, is a block file,
//! has no open handle (`opens == 0`), has a known path and is not parked. So the
//! least recently used evictable block is always the LRU list's cold end: choosing a
//! victim is O(1) and never scans the index.

use std::path::{Path, PathBuf};

pub mod entry;
pub mod policy;
pub mod table;

use crate::key::FileKey;
pub use crate::stats::LedgerCounts;
use entry::USED_SINCE_STAMP;
pub use entry::{Entry, Kind, State};
use policy::Policy;
use table::Table;

/// Why a reservation could not be granted: the bytes missing.
#[derive(Debug, PartialEq, Eq)]
pub struct Shortfall(pub u64);

/// The answer of [`Ledger::pin`] for a file that eviction is removing.
#[derive(Debug, PartialEq, Eq)]
pub struct Gone;

/// The index of the backing tree. See the module docs for the invariant.
pub struct Ledger {
    /// Entries, and the LRU list of the evictable ones.
    entries: Table,
    usage: u64,
    reserved: u64,
    /// Bytes of the entries in the LRU list (what eviction could free now).
    lru_bytes: u64,
    /// The budget and its watermarks: the one home of `max_size`.
    policy: Policy,
    block_files: u64,
    open_handles: u64,
    dirs: u64,
    others: u64,
    /// While the start-up index is incomplete: an upper bound of the backing
    /// tree's usage (bytes used on BACKING's filesystem at mount, plus every
    /// reservation granted since), which reservations are checked against.
    indexing_bound: Option<u64>,
    /// Shared mode only (see `ledger_shared.rs`): per file, the newest mtime
    /// (ns since the epoch) this node knows it to have had.
    known: std::collections::HashMap<FileKey, i64>,
    /// Shared mode only: the LRU rank (ns) of a file whose known mtime is a
    /// stamp from the future (see `ledger_shared.rs`); else it is that mtime.
    capped: std::collections::HashMap<FileKey, i64>,
    /// Shared budget only: the net and the grant (see `ledger_grant.rs`).
    grant: grant_support::Grant,
}

/// What the daemon is about to remove, for [`Ledger::begin_removal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The least recently used block file (eviction).
    Block,
    /// A stale temporary file of `size` allocated bytes (reconcile).
    Stale {
        /// Allocated bytes, to index it if the ledger does not know it.
        size: u64,
    },
    /// A directory eviction left empty.
    Dir,
}

/// Why [`Ledger::reserve`] refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `committed() + bytes` would pass the budget by this many bytes.
    Short(u64),
    /// The start-up index is incomplete and its bound leaves no room: wait
    /// for the index, then ask again.
    Indexing,
}

impl Ledger {
    /// Tests: an empty ledger for a budget of `max_size` bytes, with the
    /// options' default watermarks (0.95 and 0.90).
    #[cfg(test)]
    pub fn new(max_size: u64) -> Self {
        Ledger::with_policy(Policy {
            max_size,
            high_watermark: crate::config::DEFAULT_HIGH_WATERMARK,
            low_watermark: crate::config::DEFAULT_LOW_WATERMARK,
        })
    }

    /// An empty ledger for the budget and watermarks of `policy`.
    pub fn with_policy(policy: Policy) -> Self {
        Ledger {
            entries: Table::default(),
            usage: 0,
            reserved: 0,
            lru_bytes: 0,
            policy,
            block_files: 0,
            open_handles: 0,
            dirs: 0,
            others: 0,
            indexing_bound: None,
            known: Default::default(),
            capped: Default::default(),
            grant: Default::default(),
        }
    }

    /// Starts the start-up index: until [`Ledger::indexed`], reservations are
    /// granted only while `used_bound` (bytes; at least the backing tree's
    /// usage now, e.g. the used bytes of BACKING's filesystem) plus all
    /// reservations granted since stays within the budget.
    pub fn start_indexing(&mut self, used_bound: u64) {
        self.indexing_bound = Some(used_bound);
    }

    /// The start-up index is complete: usage is exact again.
    pub fn indexed(&mut self) {
        self.indexing_bound = None;
    }

    /// Whether the start-up index is still being built.
    pub fn indexing(&self) -> bool {
        self.indexing_bound.is_some()
    }

    /// Records an object found by the start-up index, unless it is known
    /// already (a request saw it first). It counts in usage at once but stays
    /// out of the LRU (parked) until [`Ledger::order_indexed`] places it by
    /// its mtime, or a touch makes it most recent. Returns whether it was new.
    pub fn index(&mut self, key: FileKey, size: u64, block: bool, path: Option<PathBuf>) -> bool {
        if self.entries.contains_key(&key) {
            return false;
        }
        self.usage += size;
        self.block_files += u64::from(block);
        self.entries.insert(key, Entry::new(size, block, path, true, 0));
        true
    }

    /// Puts indexed block files that nothing has touched since at the cold
    /// end of the LRU, `newest_first` (by mtime), so the oldest ends up least
    /// recent: they are all older than anything used since the mount.
    pub fn order_indexed(&mut self, newest_first: &[FileKey]) {
        for &key in newest_first {
            let Some(e) = self.entries.get_mut(&key) else { continue };
            if !e.parked {
                continue;
            }
            e.parked = false;
            if Self::evictable(e) {
                let size = e.size;
                self.entries.lru_put_cold(&key);
                self.lru_bytes += size;
            }
        }
    }

    /// The budget in bytes.
    pub fn max_size(&self) -> u64 {
        self.policy.max_size
    }

    /// The budget and its watermarks (a copy).
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Replaces the budget and watermarks.
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    /// Changes the budget (bytes), keeping the watermark fractions; returns
    /// the old budget. The caller wakes the evictor.
    pub fn set_max_size(&mut self, max_size: u64) -> u64 {
        std::mem::replace(&mut self.policy.max_size, max_size)
    }

    /// Whether usage is above the high watermark (reservations within the
    /// budget not counted: they are not bytes yet), or usage with reservations above max_size.
    pub fn should_wake(&self) -> bool {
        self.policy.should_wake(self.usage) || self.committed() > self.policy.max_size
    }

    /// Bytes to free: usage down to the low watermark, and at least what reservations hold past max_size.
    pub fn excess(&self) -> u64 {
        self.policy.excess(self.usage).max(self.committed().saturating_sub(self.policy.max_size))
    }

    /// Bytes of the backing tree as indexed.
    pub fn usage(&self) -> u64 {
        self.usage
    }

    /// Usage plus outstanding reservations: what the hard cap is checked against.
    pub fn committed(&self) -> u64 {
        self.usage + self.reserved
    }

    /// The entry for `key`, if indexed.
    pub fn get(&self, key: &FileKey) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// Counts for status output.
    pub fn counts(&self) -> LedgerCounts {
        LedgerCounts {
            usage: self.usage,
            reserved: self.reserved,
            files: self.entries.len() as u64 - self.dirs - self.others,
            dirs: self.dirs,
            others: self.others,
            block_files: self.block_files,
            evictable: self.entries.lru_len() as u64,
            open_handles: self.open_handles,
        }
    }

    fn evictable(e: &Entry) -> bool {
        e.state == State::Live && e.block && e.opens == 0 && e.path.is_some() && !e.parked
    }

    /// Brings the LRU membership of `key` in line with the invariant. A key
    /// that (re)enters goes in as most recent.
    fn sync_lru(&mut self, key: FileKey) {
        let want = self.entries.get(&key).is_some_and(Self::evictable);
        let has = self.entries.lru_contains(&key);
        if want && !has {
            self.entries.lru_put_hot(&key);
            self.lru_bytes += self.entries.get(&key).map_or(0, |e| e.size);
        } else if !want && has {
            self.lru_pop(key);
        }
    }

    /// Takes `key` out of the LRU (if there), keeping `lru_bytes` in step.
    fn lru_pop(&mut self, key: FileKey) {
        if self.entries.lru_remove(&key) {
            self.lru_bytes -= self.entries.get(&key).map_or(0, |e| e.size);
        }
    }

    /// Bytes eviction could free right now (block files in the LRU).
    pub fn evictable_bytes(&self) -> u64 {
        self.lru_bytes
    }

    /// Applies a size change of `key` (from `old` to `new` bytes) to the totals.
    fn resize(&mut self, key: FileKey, old: u64, new: u64) {
        self.usage = self.usage - old + new;
        self.local_resized(key, old, new);
        if self.entries.lru_contains(&key) {
            self.lru_bytes = self.lru_bytes - old + new;
        }
    }

    /// Records `key` as present with `size` allocated bytes, block-ness and path.
    /// A new key becomes most recent; an existing one keeps its recency unless
    /// it was not evictable before. `stamped_at`: see [`Ledger::touch`].
    pub fn upsert(&mut self, key: FileKey, size: u64, block: bool, path: Option<PathBuf>, now: u32) {
        match self.entries.get_mut(&key) {
            Some(e) => {
                let old = e.size;
                if e.block != block {
                    if block {
                        self.block_files += 1;
                    } else {
                        self.block_files -= 1;
                    }
                }
                e.size = size;
                e.block = block;
                if e.stamped_at == 0 {
                    e.stamped_at = now.saturating_add(1);
                }
                if path.is_some() {
                    e.path = path.map(PathBuf::into_boxed_path);
                }
                self.resize(key, old, size);
            }
            None => {
                self.usage += size;
                if block {
                    self.block_files += 1;
                }
                self.entries.insert(key, Entry::new(size, block, path, false, now.saturating_add(1)));
            }
        }
        self.sync_lru(key);
    }

    /// Records what kind of object `key` is (status counts only; new entries
    /// count as regular files until told otherwise).
    pub fn set_kind(&mut self, key: FileKey, kind: Kind) {
        let Some(e) = self.entries.get_mut(&key) else {
            return;
        };
        let old = std::mem::replace(&mut e.kind, kind);
        self.count_kind(old, false);
        self.count_kind(kind, true);
    }

    fn count_kind(&mut self, kind: Kind, add: bool) {
        let c = match kind {
            Kind::File => return,
            Kind::Dir => &mut self.dirs,
            Kind::Other => &mut self.others,
        };
        if add {
            *c += 1;
        } else {
            *c -= 1;
        }
    }

    /// Counts `key` as stamped when the ledger's clock started (its mtime is
    /// recent already), so its next stamp is due one interval after that.
    pub fn mark_stamped_at_start(&mut self, key: FileKey) {
        if let Some(e) = self.entries.get_mut(&key) {
            e.stamped_at = 1;
        }
    }

    /// Forgets when `key` was last stamped, so its next touch stamps at once
    /// (for files found by the start-up scan, whose mtime may be old).
    pub fn mark_unstamped(&mut self, key: FileKey) {
        if let Some(e) = self.entries.get_mut(&key) {
            e.stamped_at = 0;
        }
    }

    /// Counts `n` files made in the directory `dir`: created through the
    /// mount, or block files the start-up index found there (saturating at
    /// 255), so eviction can tell an engine's flat store (many files in one
    /// directory it made once) from a fan-out directory holding a block or
    /// two (`Core::reap_empty_dirs`).
    pub fn files_made_in(&mut self, dir: FileKey, n: usize) {
        if let Some(e) = self.entries.get_mut(&dir) {
            e.files_made = e.files_made.saturating_add(u8::try_from(n).unwrap_or(u8::MAX));
        }
    }

    /// Sets the allocated size of a known key (bytes); unknown keys are ignored.
    pub fn set_size(&mut self, key: FileKey, size: u64) {
        if let Some(e) = self.entries.get_mut(&key) {
            let old = std::mem::replace(&mut e.size, size);
            self.resize(key, old, size);
        }
    }

    /// Marks `key` most recently used. Returns the path to stamp when the last
    /// stamp of this file is `interval` seconds or more before `now` (seconds
    /// of the caller's monotonic clock); otherwise flags the use for the last
    /// stamps at unmount ([`Ledger::unstamped_uses`]).
    pub fn touch(&mut self, key: FileKey, now: u32, interval: u32) -> Option<PathBuf> {
        let e = self.entries.get_mut(&key)?;
        e.parked = false;
        let due = e.block
            && e.state == State::Live
            && (e.stamped_at == 0
                || now.saturating_add(1).saturating_sub(e.stamped_at & !USED_SINCE_STAMP) >= interval);
        let stamp = if due {
            e.stamped_at = now.saturating_add(1);
            e.path.as_deref().map(Path::to_path_buf)
        } else {
            e.stamped_at |= if e.block && e.state == State::Live && e.stamped_at != 0 { USED_SINCE_STAMP } else { 0 };
            None
        };
        if self.entries.lru_promote(&key) {
            return stamp;
        }
        self.sync_lru(key);
        stamp
    }

    /// Registers an open handle on `key` before the backing file is opened.
    /// Errors: [`Gone`] when eviction has already chosen and verified the file
    /// (the caller answers ENOENT). An unknown key gets a placeholder entry of
    /// size 0 (and the answer `true`) that the caller fills in with
    /// [`Ledger::upsert`] or removes with [`Ledger::mark_unlinked`] + [`Ledger::unpin`].
    pub fn pin(&mut self, key: FileKey) -> Result<bool, Gone> {
        let new = !self.entries.contains_key(&key);
        if new {
            self.entries.insert(key, Entry::placeholder());
        }
        let Some(e) = self.entries.get_mut(&key) else { return Err(Gone) };
        if e.state == State::Evicting {
            return Err(Gone);
        }
        e.opens += 1;
        self.open_handles += 1;
        self.lru_pop(key);
        Ok(new)
    }

    /// Drops one open handle on `key`. The last handle of an unlinked file
    /// removes it from usage; the last handle of a block file makes it most recent.
    pub fn unpin(&mut self, key: FileKey) {
        let Some(e) = self.entries.get_mut(&key) else {
            return;
        };
        if e.opens == 0 {
            return;
        }
        e.opens -= 1;
        self.open_handles -= 1;
        if e.opens == 0 && e.state == State::Unlinked {
            self.remove(key);
            return;
        }
        self.sync_lru(key);
    }

    /// A client removed the last name of `key` (`nlink` was 1). With handles
    /// open the bytes stay counted until the last [`Ledger::unpin`]; otherwise
    /// the entry goes.
    pub fn mark_unlinked(&mut self, key: FileKey) {
        let Some(e) = self.entries.get_mut(&key) else {
            return;
        };
        if e.opens == 0 {
            self.remove(key);
        } else {
            e.state = State::Unlinked;
            e.path = None;
            self.sync_lru(key);
        }
    }

    /// A client removed one name of a multiply linked `key`. If that was the
    /// name eviction knew, eviction forgets it until the file is seen again.
    pub fn name_removed(&mut self, key: FileKey, path: &Path) {
        if let Some(e) = self.entries.get_mut(&key) {
            if e.path.as_deref() == Some(path) {
                e.path = None;
            }
            e.parked = false;
            self.sync_lru(key);
        }
    }

    /// Moves every indexed path under directory `from` to `to` (a directory
    /// rename). O(index); directory renames are rare in a KV tier.
    pub fn rename_prefix(&mut self, from: &Path, to: &Path) {
        for e in self.entries.values_mut() {
            if let Some(p) = e.path.as_deref() {
                if let Ok(rest) = p.strip_prefix(from) {
                    e.path = Some(to.join(rest).into_boxed_path());
                }
            }
        }
    }

    /// Forgets `key` entirely, returning its bytes to the budget: this
    /// node removed it (an unlink or rmdir through the mount, its eviction).
    pub fn remove(&mut self, key: FileKey) -> Option<Entry> {
        self.remove_as(key, true)
    }

    fn remove_as(&mut self, key: FileKey, own: bool) -> Option<Entry> {
        self.lru_pop(key);
        self.known.remove(&key);
        self.capped.remove(&key);
        let e = self.entries.remove(&key)?;
        self.usage -= e.size;
        self.local_removed(&e, own);
        self.open_handles -= u64::from(e.opens);
        if e.block {
            self.block_files -= 1;
        }
        self.count_kind(e.kind, false);
        Some(e)
    }

    /// Reserves `bytes` for a write about to happen. Errors: the shortfall
    /// when `committed() + bytes` would pass the budget.
    pub fn reserve(&mut self, bytes: u64) -> Result<(), Shortfall> {
        let after = self.committed().saturating_add(bytes);
        if after > self.policy.max_size {
            return Err(Shortfall(after - self.policy.max_size));
        }
        self.reserved += bytes;
        Ok(())
    }

    /// [`Ledger::reserve`], checked while the start-up index is incomplete
    /// against the index's usage bound instead. Errors: [`Refused`].
    pub fn reserve_checked(&mut self, bytes: u64) -> Result<(), Refused> {
        let Some(bound) = self.indexing_bound else {
            return self.reserve(bytes).map_err(|s| Refused::Short(s.0));
        };
        if bound.saturating_add(bytes) > self.policy.max_size {
            return Err(Refused::Indexing);
        }
        self.indexing_bound = Some(bound + bytes);
        self.reserved += bytes;
        Ok(())
    }

    /// Returns a reservation of `bytes`.
    pub fn release(&mut self, bytes: u64) {
        self.reserved = self.reserved.saturating_sub(bytes);
    }

    /// Takes the least recently used evictable block out of the LRU and
    /// returns it with the path to unlink. The caller verifies the name, then
    /// calls [`Ledger::begin_removal`]; if it gives up it calls [`Ledger::park`]
    /// or [`Ledger::forget_path`].
    pub fn take_victim(&mut self) -> Option<(FileKey, PathBuf)> {
        while let Some(key) = self.entries.lru_pop_cold() {
            self.lru_bytes -= self.entries.get(&key).map_or(0, |e| e.size);
            if let Some(p) = self.entries.get(&key).and_then(|e| e.path.as_deref()) {
                return Some((key, p.to_path_buf()));
            }
        }
        None
    }

    /// The victim can't be evicted now (e.g. it has another hard link): keep it
    /// out of the LRU until it is touched.
    pub fn park(&mut self, key: FileKey) {
        if let Some(e) = self.entries.get_mut(&key) {
            e.parked = true;
            self.sync_lru(key);
        }
    }

    /// The victim's path no longer names it: drop the path (a lookup or rescan
    /// finds it again).
    pub fn forget_path(&mut self, key: FileKey) {
        if let Some(e) = self.entries.get_mut(&key) {
            e.path = None;
            self.sync_lru(key);
        }
    }

    /// The atomic check before the daemon removes an object (eviction of a
    /// block, a stale temporary, an emptied directory): succeeds, marking the
    /// entry `Evicting` (an open racing the removal answers ENOENT), only if
    /// it is live with no open handle and, for [`Removal::Block`], still a
    /// block. A stale temporary unknown to the ledger is first indexed with
    /// its size. Called with the object's directory stripe held and its name
    /// verified; finish with [`Ledger::finish_removal`] or [`Ledger::abort_removal`].
    pub fn begin_removal(&mut self, key: FileKey, what: Removal) -> bool {
        if let Removal::Stale { size } = what {
            if !self.entries.contains_key(&key) {
                self.upsert(key, size, false, None, 0);
            }
        }
        match self.entries.get_mut(&key) {
            Some(e) if e.state == State::Live && e.opens == 0 && (what != Removal::Block || e.block) => {
                e.state = State::Evicting;
                self.lru_pop(key);
                true
            }
            _ => false,
        }
    }

    /// The unlink is done: drop the entry and return the bytes freed. An
    /// entry that is no longer `Evicting` belongs to a new object that was
    /// given the freed inode number meanwhile (see [`Ledger::fresh`]): it stays.
    pub fn finish_removal(&mut self, key: FileKey) -> u64 {
        match self.entries.get(&key) {
            Some(e) if e.state == State::Evicting => self.remove(key).map_or(0, |e| e.size),
            _ => 0,
        }
    }

    /// The unlink failed: the file stays, parked (it is not chosen again until touched).
    pub fn abort_removal(&mut self, key: FileKey) {
        if let Some(e) = self.entries.get_mut(&key) {
            e.state = State::Live;
            e.parked = true;
            self.sync_lru(key);
        }
    }
}

#[path = "ledger_grant.rs"]
mod grant_support;
#[cfg(test)]
#[path = "ledger_model_tests.rs"]
mod model_tests;
#[path = "ledger_recent.rs"]
mod recent_support;
#[path = "ledger_reconcile.rs"]
mod reconcile_support;
#[path = "ledger_shared.rs"]
mod shared_support;
#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
