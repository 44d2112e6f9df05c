//! The ledger events of the walks that bring it back to what BACKING holds:
//! the start-up index (`crate::workers::scan`), a reconcile pass
//! (`crate::workers::reconcile`) and, in the shared tier, other nodes'
//! removals read from their journals (`crate::fs::shared::journal`).
//!
//! Each method takes the ledger lock once; a walk hands over a whole batch
//! (a directory chunk, a list of keys) in one call, so the lock is taken per
//! batch, not per object, and is never held across the walk's syscalls.

use std::path::{Path, PathBuf};

use super::Accounts;
use crate::key::FileKey;
use crate::ledger::{Kind, Ledger, State};
use crate::status::ScanReport;

/// One object the start-up index found in BACKING.
pub struct Indexed {
    /// Its backing identity.
    pub key: FileKey,
    /// Allocated bytes.
    pub size: u64,
    /// Its mtime: (seconds, nanoseconds) since the Unix epoch.
    pub mtime: (i64, i64),
    /// The name matches the block pattern (and it is a regular file).
    pub block: bool,
    /// What kind of object it is.
    pub kind: Kind,
    /// For block files, the path relative to BACKING eviction would unlink.
    pub path: Option<PathBuf>,
}

/// What the ledger knows of an object a reconcile walk read, from
/// [`Accounts::compare_walked`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// The ledger does not count it: adopt it.
    New,
    /// Counted; `resized` when its allocated bytes differ from the walk's,
    /// `pathless` when it is live and has no path (a block file's was lost
    /// by a rename behind the daemon; other files keep none), `block` when
    /// the ledger counts it as a block file.
    Counted {
        /// See the variant's docs.
        resized: bool,
        /// See the variant's docs.
        pathless: bool,
        /// See the variant's docs.
        block: bool,
    },
}

/// Records `found` in `ledger` (a bare one for `crate::workers::scan::scan`,
/// or the mounted one through [`Accounts::index_chunk`]), counting what was
/// new into `report` and the block files into `order` as `(mtime, key)`.
/// Block files with an mtime at or after `stamped_after` (Unix seconds) count
/// as stamped at mount: no stamp is due for them before one stamp interval.
pub fn record_indexed(
    ledger: &mut Ledger,
    found: Vec<Indexed>,
    stamped_after: i64,
    report: &mut ScanReport,
    order: &mut Vec<((i64, i64), FileKey)>,
) {
    for f in found {
        if ledger.index(f.key, f.size, f.block, f.path) {
            ledger.set_kind(f.key, f.kind);
            if f.block && f.mtime.0 >= stamped_after {
                ledger.mark_stamped_at_start(f.key);
            }
            report.objects += 1;
            report.bytes += f.size;
            report.blocks += u64::from(f.block);
            if f.block {
                order.push((f.mtime, f.key));
            }
        }
    }
}

/// `key` leaves the ledger if it is live, has no open handle and still has
/// the path `rel` the caller checked. Returns the bytes dropped, or None
/// when it was kept.
fn drop_if_still(l: &mut Ledger, key: FileKey, rel: Option<&Path>) -> Option<u64> {
    if l.unused_path(&key)?.as_deref() != rel {
        return None;
    }
    Some(l.drop_unused(key))
}

impl Accounts {
    /// Start-up index: one directory chunk's objects `found` (in the
    /// directory `dir`, of which `blocks` are block files, which count as
    /// files made in it) are recorded as [`record_indexed`] does.
    pub fn index_chunk(
        &self,
        dir: FileKey,
        found: Vec<Indexed>,
        stamped_after: i64,
        report: &mut ScanReport,
        order: &mut Vec<((i64, i64), FileKey)>,
    ) {
        let blocks = found.iter().filter(|f| f.block).count();
        let mut l = self.guard();
        l.files_made_in(dir, blocks);
        record_indexed(&mut l, found, stamped_after, report, order);
    }

    /// Start-up index, shared tier: the indexed blocks' mtimes (`order`, as
    /// [`record_indexed`] gives them) become the ones this node knows, which
    /// eviction compares a victim's mtime with.
    /// A stamp from the future is ranked at `cap` (see `Ledger::know_read`).
    pub fn know_indexed_mtimes(&self, order: &[((i64, i64), FileKey)], cap: i64) {
        let mut l = self.guard();
        for ((s, ns), k) in order {
            l.know_read(*k, s.saturating_mul(1_000_000_000).saturating_add(*ns), cap);
        }
    }

    /// Start-up index: places `newest_first` (block keys, most recent first)
    /// in the LRU; called per chunk of keys so a RELEASE never waits long.
    pub fn order_indexed(&self, newest_first: &[FileKey]) {
        self.guard().order_indexed(newest_first);
    }

    /// Reconcile: the keys a pass may find gone (live, no open handle),
    /// taken before its walk so an entry created during the walk is never
    /// dropped; None while the start-up index is still being built (it
    /// counts everything, and a pass would only race it).
    pub fn unused_keys(&self) -> Option<Vec<FileKey>> {
        let l = self.guard();
        (!l.indexing()).then(|| l.unused_keys())
    }

    /// Reconcile: what the ledger knows of each object a walk read, given as
    /// `(key, allocated bytes)`; the answers are in the same order.
    pub fn compare_walked(&self, walked: &[(FileKey, u64)]) -> Vec<Known> {
        let l = self.guard();
        walked
            .iter()
            .map(|(key, size)| match l.get(key) {
                None => Known::New,
                Some(e) => Known::Counted {
                    resized: e.size != *size,
                    pathless: e.path.is_none() && e.state == State::Live,
                    block: e.block,
                },
            })
            .collect()
    }

    /// Reconcile: `key`'s path if it is live with no open handle (what a
    /// pass may drop; the inner None when it has no path), else None.
    pub fn unused_path(&self, key: &FileKey) -> Option<Option<PathBuf>> {
        self.guard().unused_path(key)
    }

    /// Reconcile: `key`, found gone from BACKING, stops counting if it is
    /// still live, unopened and at the path `rel` the check was made on.
    /// Returns the bytes dropped, or None when it was kept.
    pub fn drop_unused_at(&self, key: FileKey, rel: Option<&Path>) -> Option<u64> {
        drop_if_still(&mut self.guard(), key, rel)
    }

    /// Shared tier: blocks other nodes removed, as `(key, path)`, stop
    /// counting where this node still counts them unopened at that path.
    /// Returns the bytes dropped.
    pub fn drop_removed_elsewhere(&self, removed: &[(FileKey, PathBuf)]) -> u64 {
        let mut l = self.guard();
        removed.iter().filter_map(|(key, path)| drop_if_still(&mut l, *key, Some(path))).sum()
    }

    /// Reconcile: counts a file found in BACKING that the ledger does not
    /// know (`size` allocated bytes; `path` for a block file). False, and
    /// nothing changed, if it is known.
    pub fn adopt(&self, key: FileKey, size: u64, block: bool, path: Option<PathBuf>) -> bool {
        self.guard().adopt(key, size, block, path)
    }

    /// Reconcile: adopted blocks `placed` take their place in the LRU by
    /// mtime (ns), compared with the others' mtimes `mtime_of` read by the walk.
    pub fn place_by_mtime(&self, placed: &[(FileKey, i128)], mtime_of: impl Fn(&FileKey) -> Option<i128>) {
        self.guard().place_by_mtime(placed, mtime_of);
    }

    /// Reconcile, shared tier: every block the walk read (`(key, mtime ns)`)
    /// takes its place in the LRU by the newest mtime known for it (a stamp
    /// from the future at most at `cap`: see `Ledger::know_read`).
    pub fn place_by_known(&self, read: &[(FileKey, i128)], cap: i64) {
        self.guard().place_by_known(read, cap);
    }

    /// Reconcile: `key` now has `size` allocated bytes; false when the
    /// ledger already said so (or does not know it).
    pub fn resized(&self, key: FileKey, size: u64) -> bool {
        let mut l = self.guard();
        if l.get(&key).is_none_or(|e| e.size == size) {
            return false;
        }
        l.set_size(key, size);
        true
    }

    /// Reconcile: a live entry that lost its path was found at `path`; a
    /// block file becomes evictable again. False when nothing changed.
    pub fn restore_path(&self, key: FileKey, path: PathBuf, block: bool) -> bool {
        self.guard().restore_path(key, path, block)
    }

    /// Usage and `max_size` (bytes), read together, for a log line.
    pub fn usage_and_max(&self) -> (u64, u64) {
        let l = self.guard();
        (l.usage(), l.max_size())
    }
}
