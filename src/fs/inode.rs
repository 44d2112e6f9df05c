//! The inode table: FUSE inode numbers ↔ backing objects, each held by an
//! `O_PATH | O_NOFOLLOW` fd (the virtiofsd model). Holding the fd pins the
//! backing inode, so its `(dev, ino)` cannot be reused while the kernel still
//! knows the FUSE inode, and no later path lookup in BACKING can redirect it.
//!
//! Lock: one `RwLock` over both maps. It is a leaf lock: no other lock is
//! taken while it is held and no syscall runs under it.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::cache::ledger::FileKey;

/// FUSE inode number of the mountpoint's root (fixed by the protocol).
pub const ROOT_INO: u64 = 1;

/// One backing object the kernel holds a reference to.
#[derive(Debug)]
pub struct Inode {
    /// FUSE inode number.
    pub ino: u64,
    /// Backing identity.
    pub key: FileKey,
    /// `st_mode & S_IFMT` of the backing object.
    pub fmt: u32,
    fd: OwnedFd,
}

impl Inode {
    /// The `O_PATH` fd of the backing object.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether the object is a directory.
    pub fn is_dir(&self) -> bool {
        self.fmt == libc::S_IFDIR
    }
}

struct Slot {
    inode: Arc<Inode>,
    nlookup: u64,
}

struct Maps {
    by_ino: HashMap<u64, Slot>,
    by_key: HashMap<FileKey, u64>,
    next_ino: u64,
}

/// FUSE inode number → [`Inode`], with kernel lookup counts.
pub struct InodeTable {
    maps: RwLock<Maps>,
}

impl InodeTable {
    /// A table holding only the root (BACKING), never forgotten.
    pub fn new(root_fd: OwnedFd, root_key: FileKey) -> Self {
        let root = Arc::new(Inode { ino: ROOT_INO, key: root_key, fmt: libc::S_IFDIR, fd: root_fd });
        let mut by_ino = HashMap::new();
        by_ino.insert(ROOT_INO, Slot { inode: root, nlookup: 1 << 62 });
        let mut by_key = HashMap::new();
        by_key.insert(root_key, ROOT_INO);
        InodeTable { maps: RwLock::new(Maps { by_ino, by_key, next_ino: ROOT_INO + 1 }) }
    }

    /// The inode for a FUSE inode number. None: the kernel sent an inode we
    /// never gave it or already forgot (the caller answers ESTALE).
    pub fn get(&self, ino: u64) -> Option<Arc<Inode>> {
        self.maps.read().by_ino.get(&ino).map(|s| s.inode.clone())
    }

    /// The FUSE inode number of a backing object, if the kernel holds it.
    pub fn ino_of(&self, key: &FileKey) -> Option<u64> {
        self.maps.read().by_key.get(key).copied()
    }

    /// Records one more kernel reference (a lookup reply) for the object
    /// behind `fd`. An object already in the table keeps its inode and the new
    /// fd is dropped.
    pub fn insert(&self, fd: OwnedFd, key: FileKey, fmt: u32) -> Arc<Inode> {
        let mut m = self.maps.write();
        if let Some(&ino) = m.by_key.get(&key) {
            if let Some(slot) = m.by_ino.get_mut(&ino) {
                slot.nlookup += 1;
                return slot.inode.clone();
            }
        }
        let ino = m.next_ino;
        m.next_ino += 1;
        let inode = Arc::new(Inode { ino, key, fmt, fd });
        m.by_ino.insert(ino, Slot { inode: inode.clone(), nlookup: 1 });
        m.by_key.insert(key, ino);
        inode
    }

    /// The kernel dropped `n` references (FORGET). At zero the fd is closed.
    pub fn forget(&self, ino: u64, n: u64) {
        if ino == ROOT_INO {
            return;
        }
        let mut m = self.maps.write();
        let gone = match m.by_ino.get_mut(&ino) {
            Some(slot) => {
                slot.nlookup = slot.nlookup.saturating_sub(n);
                slot.nlookup == 0
            }
            None => false,
        };
        if gone {
            if let Some(slot) = m.by_ino.remove(&ino) {
                if m.by_key.get(&slot.inode.key) == Some(&ino) {
                    m.by_key.remove(&slot.inode.key);
                }
            }
        }
    }

    /// Number of inodes the kernel holds (root included).
    pub fn len(&self) -> usize {
        self.maps.read().by_ino.len()
    }

    /// Whether only the root is held.
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }
}
