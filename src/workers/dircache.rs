//! What the reconcile pass of a shared tier remembers of each directory it
//! read, so the next pass re-reads only the directories that changed.
//!
//! Rule (POSIX, and what JuiceFS, CephFS, NFS and Lustre keep): adding,
//! removing or renaming an entry in or out of a directory updates the
//! directory's own mtime and ctime. A directory whose (device, inode, mtime,
//! ctime, size, link count) — as `fstat` gives them just after it is opened —
//! are the same as when a pass last read it has the same entries, so the
//! pass skips its `getdents` and the `fstatat` of every entry, keeps what it
//! learned of them (their keys and mtimes) and descends only the
//! subdirectories it remembers. What that does not see, and how it is
//! covered:
//! - a file's own changes (a recency stamp by another node, a rewrite in
//!   place that changes its size) change the file, not its directory:
//!   stamps still reach eviction, which `fstatat`s every victim and re-ranks
//!   it when its mtime is newer than the newest this node knows
//!   (`Core::stamped_elsewhere`; skipping never lowers a known mtime), and
//!   every [`FULL_EVERY`]th pass reads everything, so a stamp reaches the
//!   LRU order ahead of eviction, and a size change or a temporary turning
//!   stale is seen, at most that many passes late;
//! - a change within one timestamp tick of the read, or hidden by a
//!   client's attribute or entry cache (JuiceFS: 1 s by default): a
//!   directory whose ctime was within [`CTIME_MARGIN_NS`] of the start of the
//!   pass that read it is not trusted and is read again next pass.
//!
//! Only in shared mode (`-o shared`); a single node keeps reading the whole
//! tree each pass. Memory: one key and mtime per entry (about 32 bytes).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::key::{FileKey, key_of};

/// Every this many passes one reads every directory (the first pass too).
pub const FULL_EVERY: u64 = 6;

/// A directory whose ctime is this close (ns) to the start of the pass that
/// read it is read again by the next pass (timestamp ticks, attribute caches).
pub const CTIME_MARGIN_NS: i128 = 2_000_000_000;

/// What identifies a directory's entries as unchanged.
#[derive(Clone, Copy, PartialEq, Eq)]
struct DirStat {
    key: FileKey,
    mtime: i128,
    ctime: i128,
    size: i64,
    nlink: u64,
}

impl DirStat {
    fn of(st: &libc::stat) -> Self {
        DirStat {
            key: key_of(st),
            mtime: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
            ctime: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
            size: st.st_size,
            nlink: st.st_nlink as u64,
        }
    }
}

/// One directory as a pass read it.
struct Dir {
    stat: DirStat,
    /// Start of the pass that read it (ns since the epoch).
    read_at: i128,
    /// Its entries' keys and mtimes (ns) as read then.
    entries: Vec<(FileKey, i128)>,
    /// Its subdirectories, relative to BACKING.
    subdirs: Vec<PathBuf>,
}

/// The directories the last pass read or kept (see the module docs).
#[derive(Default)]
pub struct DirCache {
    dirs: HashMap<PathBuf, Dir>,
    next: HashMap<PathBuf, Dir>,
    reading: Option<(PathBuf, Dir)>,
    start: i128,
    full: bool,
    passes: u64,
    /// [`CTIME_MARGIN_NS`] (tests set 0).
    pub(crate) margin_ns: i128,
    /// Directories read (getdents + fstatat of each entry) by this pass.
    pub read: u64,
    /// Directories skipped as unchanged by this pass.
    pub skipped: u64,
}

impl DirCache {
    /// An empty cache: the first pass reads everything.
    pub fn new() -> Self {
        DirCache { margin_ns: CTIME_MARGIN_NS, ..Default::default() }
    }

    /// Starts a pass at `start` (ns since the epoch). Returns whether it
    /// reads every directory (the first pass, then every [`FULL_EVERY`]th).
    pub fn begin(&mut self, start: i128) -> bool {
        self.full = self.passes % FULL_EVERY == 0;
        self.passes += 1;
        self.start = start;
        self.read = 0;
        self.skipped = 0;
        self.next.clear();
        self.reading = None;
        self.full
    }

    /// The walk opened directory `rel` with `fstat` `st`: `Some(subdirs)`
    /// when it is unchanged (its remembered entries are appended to `kept`),
    /// `None` when it must be read (its entries then come through
    /// [`DirCache::entry`]).
    pub fn enter(&mut self, rel: &Path, st: &libc::stat, kept: &mut Vec<(FileKey, i128)>) -> Option<Vec<PathBuf>> {
        self.finish();
        let stat = DirStat::of(st);
        if !self.full
            && let Some(d) = self.dirs.remove(rel)
            && d.stat == stat
            && d.stat.ctime < d.read_at - self.margin_ns
        {
            kept.extend_from_slice(&d.entries);
            let subdirs = d.subdirs.clone();
            self.next.insert(rel.to_path_buf(), d);
            self.skipped += 1;
            return Some(subdirs);
        }
        self.read += 1;
        let d = Dir { stat, read_at: self.start, entries: Vec::new(), subdirs: Vec::new() };
        self.reading = Some((rel.to_path_buf(), d));
        None
    }

    /// An entry of the directory being read: its key, mtime (ns), path
    /// relative to BACKING, and whether it is a directory.
    pub fn entry(&mut self, key: FileKey, mtime: i128, path: &Path, dir: bool) {
        if let Some((_, d)) = &mut self.reading {
            d.entries.push((key, mtime));
            if dir {
                d.subdirs.push(path.to_path_buf());
            }
        }
    }

    /// The directory being read could not be read whole: not remembered.
    pub fn failed(&mut self) {
        self.reading = None;
    }

    /// Ends the pass: what it read or kept is what the next pass compares with.
    pub fn end(&mut self) {
        self.finish();
        self.dirs = std::mem::take(&mut self.next);
    }

    fn finish(&mut self) {
        if let Some((rel, d)) = self.reading.take() {
            self.next.insert(rel, d);
        }
    }
}
