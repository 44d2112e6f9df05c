//! Node ids after a crash: a daemon started on a live connection after its
//! predecessor died (`-o supervise`, `daemon::supervisor`) has an empty
//! inode table, yet the kernel still holds every node id the dead daemon
//! gave it and goes on naming them (a LOOKUP in a directory it cached, a
//! GETATTR, an OPEN of a cached entry). Without help each answers ESTALE.
//!
//! A node id is the backing object's `st_ino` (see `inode`), so the object
//! can be found again: on the first id the table does not know, one walk of
//! BACKING (`workers::walk`: beneath BACKING, no symlink followed) maps
//! every `st_ino` to its path (the caller gives the walk: `workers::walk::map_inos`); the object is opened `O_PATH | O_NOFOLLOW`
//! by that path and taken only if its `st_ino` still is the id, then
//! adopted into the table with one kernel reference (a later FORGET of more
//! saturates at zero and drops it; should the kernel name it again it is
//! found again). A miss in the map rewalks at most once per [`REWALK`]
//! (objects made since the last walk). Not found (a synthetic id, an object
//! removed or renamed away since): ESTALE, as before.
//!
//! Why a walk and not a table kept by the daemon: it costs nothing while
//! the daemon lives (no write per LOOKUP or FORGET), it is right after any
//! kind of death (nothing half-written), and the kernel only names ids it
//! cached, most of which a client touches again soon. The cost: one walk
//! (stat of every entry) after a crash, and the map's memory (a path per
//! entry) while the daemon runs on. Limit: an inode number recycled by
//! BACKING's filesystem after the kernel cached the old object resolves to
//! the new object (no generation is known without a file handle).
//!
//! Lock: one mutex over the map, held through a walk so that concurrent
//! misses wait for the one walk instead of each starting its own. A leaf
//! lock: the caller holds no other lock (the inode table's is released).

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::key::{FileKey, key_of};
use crate::sys;

/// Least time between two walks of BACKING for unknown ids.
pub const REWALK: Duration = Duration::from_secs(2);

/// Finds backing objects by their `st_ino` (see the module docs).
pub struct NodeFinder {
    /// BACKING (`O_PATH`).
    root: OwnedFd,
    map_backing: MapBacking,
    map: Mutex<Found>,
    /// Ids found again (counted for the log and tests).
    pub found: AtomicU64,
    /// Walks of BACKING made.
    pub walks: AtomicU64,
}

#[derive(Default)]
struct Found {
    by_ino: HashMap<u64, PathBuf>,
    at: Option<Instant>,
}

/// An object found again: its `O_PATH` fd, identity and `S_IFMT` bits.
pub type Refound = (OwnedFd, FileKey, u32);

/// Maps every object beneath BACKING (open at the fd given): `st_ino` →
/// path relative to BACKING (`workers::walk::map_inos`).
pub type MapBacking = Box<dyn Fn(std::os::fd::BorrowedFd<'_>) -> HashMap<u64, PathBuf> + Send + Sync>;

impl NodeFinder {
    /// A finder over BACKING open at `root` (any fd of the directory),
    /// mapping it with `map_backing`.
    pub fn new(root: OwnedFd, map_backing: MapBacking) -> Self {
        NodeFinder { root, map_backing, map: Mutex::default(), found: AtomicU64::new(0), walks: AtomicU64::new(0) }
    }

    /// The backing object whose `st_ino` is `ino`, opened `O_PATH |
    /// O_NOFOLLOW` beneath BACKING, or None (not found, or it was replaced
    /// by another object between the walk and the open).
    pub fn find(&self, ino: u64) -> Option<Refound> {
        let mut f = self.map.lock();
        if let Some(r) = f.by_ino.get(&ino).and_then(|p| self.open(p, ino)) {
            return Some(r);
        }
        if f.at.is_some_and(|t| t.elapsed() < REWALK) {
            return None;
        }
        let t = Instant::now();
        f.by_ino = (self.map_backing)(self.root.as_fd());
        f.at = Some(Instant::now());
        let n = self.walks.fetch_add(1, Ordering::Relaxed) + 1;
        log::info!(
            "node id {ino} unknown (a previous daemon gave it): walk {n} of BACKING mapped {} objects in {:.2}s",
            f.by_ino.len(),
            t.elapsed().as_secs_f64()
        );
        f.by_ino.get(&ino).and_then(|p| self.open(p, ino))
    }

    /// Opens `rel` and checks it is still object `ino`.
    fn open(&self, rel: &std::path::Path, ino: u64) -> Option<Refound> {
        let fd = sys::open_beneath(self.root.as_fd(), rel, libc::O_PATH | libc::O_NOFOLLOW).ok()?;
        let st = sys::fstat(fd.as_fd()).ok()?;
        if st.st_ino != ino {
            return None;
        }
        self.found.fetch_add(1, Ordering::Relaxed);
        Some((fd, key_of(&st), st.st_mode & libc::S_IFMT))
    }
}

impl super::Core {
    /// From now on, a node id the inode table does not know is looked for
    /// in BACKING before it answers ESTALE (a daemon started on a live
    /// connection after a crash; see the module docs). Errors: BACKING
    /// cannot be reopened (nothing changes).
    pub fn recover_node_ids(&self, map_backing: MapBacking) -> Result<(), String> {
        let root = sys::reopen(self.root().fd(), libc::O_PATH).map_err(|e| format!("reopen BACKING: {e:?}"))?;
        self.inodes.set_finder(NodeFinder::new(root, map_backing));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;

    /// Objects are found by `st_ino` anywhere beneath BACKING, a symlink is
    /// taken as itself, and an id nothing has answers None.
    #[test]
    fn finds_objects_by_inode_number() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("a/b");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("f.bin"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.join("l")).unwrap();
        let root =
            sys::open(&std::ffi::CString::new(dir.path().as_os_str().as_bytes()).unwrap(), libc::O_PATH).unwrap();
        let top = dir.path().to_path_buf();
        let f = NodeFinder::new(
            root,
            Box::new(move |_| {
                let mut m = HashMap::new();
                let mut todo = vec![PathBuf::new()];
                while let Some(rel) = todo.pop() {
                    for e in std::fs::read_dir(top.join(&rel)).unwrap().flatten() {
                        let st = std::fs::symlink_metadata(e.path()).unwrap();
                        m.insert(st.ino(), rel.join(e.file_name()));
                        if st.is_dir() {
                            todo.push(rel.join(e.file_name()));
                        }
                    }
                }
                m
            }),
        );
        for (p, fmt) in [("a/b/f.bin", libc::S_IFREG), ("a/b", libc::S_IFDIR), ("a/b/l", libc::S_IFLNK)] {
            let ino = std::fs::symlink_metadata(dir.path().join(p)).unwrap().ino();
            let (_, key, got) = f.find(ino).unwrap_or_else(|| panic!("{p} not found"));
            assert_eq!((key.ino, got), (ino, fmt), "{p}");
        }
        assert_eq!(f.walks.load(Ordering::Relaxed), 1, "one walk serves every id it mapped");
        assert!(f.find(u64::MAX - 7).is_none());
        assert_eq!(f.walks.load(Ordering::Relaxed), 1, "no second walk within REWALK");
    }
}
