//! Directory locks: serialise namespace changes in one backing directory.
//!
//! The evictor holds the victim's directory lock from "is this name still the
//! file I chose?" through the unlink; create, rename and link through the mount
//! hold the lock of every directory they change. So no rename can slip a new
//! file under a name between the evictor's check and its unlink. The reaper
//! of emptied directories decides and does its rmdir under the parent's lock,
//! which LOOKUP and MKDIR in that parent hold while they count a request to
//! the directory (see `Core::reap_empty_dirs`).
//!
//! Locks are a fixed array of mutexes indexed by a hash of the directory's
//! backing identity (striping: two directories may share a stripe, which only
//! costs concurrency). Lock order: stripes in ascending index, then the ledger
//! (see `crate::fs::Core`). Never evict (take a victim's stripe) while holding one.

use std::hash::{BuildHasher, Hash};

use parking_lot::{Mutex, MutexGuard};

use crate::key::FileKey;

const STRIPES: usize = 256;

/// The striped directory locks.
pub struct DirLocks {
    stripes: Vec<Mutex<()>>,
    hasher: std::collections::hash_map::RandomState,
}

/// Held stripes; released on drop.
pub struct DirGuard<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl Default for DirLocks {
    fn default() -> Self {
        DirLocks { stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(), hasher: Default::default() }
    }
}

impl DirLocks {
    fn stripe(&self, dir: &FileKey) -> usize {
        let mut h = self.hasher.build_hasher();
        dir.hash(&mut h);
        (std::hash::Hasher::finish(&h) as usize) % STRIPES
    }

    /// Locks the directories `dirs` (one or two), in stripe order.
    pub fn lock(&self, dirs: &[FileKey]) -> DirGuard<'_> {
        let mut idx: Vec<usize> = dirs.iter().map(|d| self.stripe(d)).collect();
        idx.sort_unstable();
        idx.dedup();
        DirGuard { _guards: idx.into_iter().map(|i| self.stripes[i].lock()).collect() }
    }
}
