//! The identity of a backing object, shared by every floor above the syscalls.

/// Identity of a backing object: `(st_dev, st_ino)`. Hard links share one key,
/// so a file with two names is counted once, as du counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    /// `st_dev` of the backing object.
    pub dev: u64,
    /// `st_ino` of the backing object.
    pub ino: u64,
}

/// Backing identity of a stat result.
pub fn key_of(st: &libc::stat) -> FileKey {
    FileKey { dev: st.st_dev, ino: st.st_ino }
}
