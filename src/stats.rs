//! Counters of the daemon's work, all monotonic, read by the status xattr and
//! logged at shutdown. Names are the metric names (units in the name).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Event counters (relaxed atomics: each is independent).
#[derive(Default, Debug)]
pub struct Stats {
    /// Block files evicted.
    pub evictions: AtomicU64,
    /// Bytes freed by eviction.
    pub evicted_bytes: AtomicU64,
    /// Requests answered ENOSPC because nothing evictable could make room.
    pub enospc: AtomicU64,
    /// Eviction candidates skipped (renamed, relinked, vanished, could not
    /// unlink, opened meanwhile): all reasons, `evict_skipped_open` included.
    pub evict_skipped: AtomicU64,
    /// Eviction candidates skipped because a client opened them between the
    /// choice and the unlink.
    pub evict_skipped_open: AtomicU64,
    /// Shared mode: eviction candidates made most recent instead, because
    /// another node stamped them since the last walk (one LRU across nodes).
    pub evict_reranked: AtomicU64,
    /// Background eviction sweeps run (each brings usage from above the high
    /// to the low watermark).
    pub eviction_sweeps: AtomicU64,
    /// Time spent in background eviction sweeps, microseconds.
    pub eviction_sweep_micros: AtomicU64,
    /// Opens of block files (hits).
    pub block_opens: AtomicU64,
    /// Lookups of block-file names that found nothing (misses).
    pub lookup_misses: AtomicU64,
    /// mtime stamps written.
    pub stamps: AtomicU64,
    /// Opens answered with kernel passthrough.
    pub passthrough_opens: AtomicU64,
    /// Reconcile passes over BACKING (see `workers::reconcile`).
    pub reconciles: AtomicU64,
    /// Ledger entries a reconcile pass corrected (adopted, dropped, resized, renamed).
    pub reconcile_fixes: AtomicU64,
    /// Stale engine temporaries removed.
    pub stale_tmp_removed: AtomicU64,
    /// FUSE requests received, per opcode.
    pub requests: Requests,
}

/// The FUSE opcodes boundfs counts, by their kernel protocol names
/// (`include/uapi/linux/fuse.h` without the `FUSE_` prefix), in [`Op`] order.
/// RENAME counts RENAME and RENAME2; FORGET counts FORGET and BATCH_FORGET
/// messages, a batch once however many nodes it carries (fuser 0.18 hands
/// the nodes over one by one with the batch's header: `crate::fuse` counts
/// a request id once). Opcodes boundfs leaves
/// to fuser's defaults (GETLK, BMAP, POLL, COPY_FILE_RANGE …) are not counted.
pub const OPS: [&str; 34] = [
    "INIT",
    "LOOKUP",
    "FORGET",
    "GETATTR",
    "SETATTR",
    "READLINK",
    "SYMLINK",
    "MKNOD",
    "MKDIR",
    "UNLINK",
    "RMDIR",
    "RENAME",
    "LINK",
    "OPEN",
    "READ",
    "WRITE",
    "STATFS",
    "RELEASE",
    "FSYNC",
    "SETXATTR",
    "GETXATTR",
    "LISTXATTR",
    "REMOVEXATTR",
    "FLUSH",
    "OPENDIR",
    "READDIR",
    "RELEASEDIR",
    "FSYNCDIR",
    "ACCESS",
    "CREATE",
    "IOCTL",
    "FALLOCATE",
    "LSEEK",
    "DESTROY",
];

/// A counted FUSE opcode: its index in [`OPS`] and `Stats::requests`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Op {
    Init,
    Lookup,
    Forget,
    Getattr,
    Setattr,
    Readlink,
    Symlink,
    Mknod,
    Mkdir,
    Unlink,
    Rmdir,
    Rename,
    Link,
    Open,
    Read,
    Write,
    Statfs,
    Release,
    Fsync,
    Setxattr,
    Getxattr,
    Listxattr,
    Removexattr,
    Flush,
    Opendir,
    Readdir,
    Releasedir,
    Fsyncdir,
    Access,
    Create,
    Ioctl,
    Fallocate,
    Lseek,
    Destroy,
}

/// FUSE requests received per opcode (relaxed atomics, indexed by [`Op`]).
pub struct Requests([AtomicU64; OPS.len()]);

impl Default for Requests {
    fn default() -> Self {
        Requests(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.snapshot()).finish()
    }
}

impl Requests {
    /// Counts one request of `op`.
    pub fn count(&self, op: Op) {
        self.0[op as usize].fetch_add(1, Relaxed);
    }

    /// Every opcode received at least once, by kernel name, with its count.
    pub fn snapshot(&self) -> std::collections::BTreeMap<String, u64> {
        OPS.iter().zip(&self.0).map(|(name, c)| (name.to_string(), c.load(Relaxed))).filter(|&(_, n)| n > 0).collect()
    }
}

impl Stats {
    /// Adds `n` to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Reads a counter.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Relaxed)
    }
}
