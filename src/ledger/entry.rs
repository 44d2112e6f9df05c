//! One ledger entry per backing object: its bytes, state, kind and LRU bits.

use std::path::{Path, PathBuf};

/// Lifecycle of an entry with respect to eviction and unlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Present in BACKING under `path` (when known).
    Live,
    /// Chosen by the evictor, verified unopened, about to be unlinked. An open
    /// that finds this state answers ENOENT.
    Evicting,
    /// Unlinked by a client while handles were still open: its bytes stay in
    /// usage until the last release, as du of the backing fs would see them.
    Unlinked,
}

/// What kind of object an entry is, for status counts only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Kind {
    /// A regular file (the default until told otherwise).
    #[default]
    File,
    /// A directory (BACKING itself included).
    Dir,
    /// A symlink, fifo, socket or device node.
    Other,
}

impl Kind {
    /// The kind of a `st_mode`.
    pub fn of_mode(mode: u32) -> Kind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            _ => Kind::Other,
        }
    }
}

/// Flag in [`Entry::stamped_at`]: the block file was used since its last
/// stamp, within `stamp_interval` of it, so no stamp was written for that
/// use; the stamp writer writes it at unmount (`Ledger::unstamped_uses`).
pub(super) const USED_SINCE_STAMP: u32 = 1 << 31;

/// One backing object.
#[derive(Debug)]
pub struct Entry {
    /// Allocated bytes (`st_blocks * 512`).
    pub size: u64,
    /// The name matches `pattern`, so the file may be evicted.
    pub block: bool,
    /// Open handles through the mount.
    pub opens: u32,
    /// See [`State`].
    pub state: State,
    /// Path relative to BACKING of the name eviction would unlink, if known.
    pub path: Option<Box<Path>>,
    /// Taken out of the LRU by the evictor (e.g. it had two links); a touch
    /// puts it back.
    pub(super) parked: bool,
    /// Seconds (of the caller's clock, +1 so 0 means never) of the last mtime
    /// stamp, and in the top bit [`USED_SINCE_STAMP`] (kept in this word so a
    /// table slot stays 64 bytes).
    pub(super) stamped_at: u32,
    /// See [`Kind`]; set with [`super::Ledger::set_kind`].
    pub(super) kind: Kind,
    /// In the LRU list (kept by [`super::table::Table`]).
    pub(super) linked: bool,
    /// The table slot holds this entry (false: a free slot).
    pub(super) used: bool,
    /// Created through this mount (shared mode: this node's part of usage).
    pub(super) local: bool,
    /// A directory: files created in it through the mount since it was
    /// first seen (saturating; see [`super::Ledger::files_made_in`]).
    pub files_made: u8,
}

impl Entry {
    /// A live entry of `size` bytes with no handle, not yet in the LRU.
    pub(super) fn new(size: u64, block: bool, path: Option<PathBuf>, parked: bool, stamped_at: u32) -> Self {
        let path = path.map(PathBuf::into_boxed_path);
        Entry {
            size,
            block,
            opens: 0,
            state: State::Live,
            path,
            parked,
            stamped_at,
            kind: Kind::File,
            linked: false,
            used: true,
            local: false,
            files_made: 0,
        }
    }

    /// An empty entry (size 0, not a block, no path).
    pub(super) fn placeholder() -> Self {
        Entry::new(0, false, None, false, 0)
    }
}
