//! The inode table: FUSE inode numbers ↔ backing objects, each reached
//! through an `O_PATH | O_NOFOLLOW` fd (the virtiofsd model): every request
//! works on that fd, so no later path lookup in BACKING can redirect it.
//!
//! The kernel may hold far more inodes than the daemon may hold fds (its
//! dentry cache keeps every file an engine probed). So at most `fd_cap`
//! inodes keep their fd ("hot"); colder ones keep only their file handle
//! (`name_to_handle_at`, which carries the inode generation, so a recycled
//! inode number answers ESTALE; taken when the inode is first cooled, so
//! nothing is spent on it while fds are plentiful) and are reopened with
//! `open_by_handle_at` when the kernel next names them. Which fd to close is chosen by a CLOCK
//! (second chance) over the hot inodes. Where handles are unavailable (not
//! root, or a filesystem without them) inodes keep their fd, as before.
//!
//! Inode numbers: an object's FUSE node id is its backing `st_ino`, so that
//! `stat` (the kernel reports the attr's ino, which fuser also sends as the
//! node id of a LOOKUP/CREATE entry) agrees with readdir's `d_ino` (the
//! backing number, passed through) and stays the same across lookups
//! (`find -inum`, fts cycle checks, `os.scandir` inode()). Where that number
//! is taken (FUSE's root id 1, the backing root's number, or an object on
//! another filesystem mounted inside BACKING with the same number) the
//! object gets a synthetic id from [`SYNTHETIC_BASE`] up instead.
//!
//! Lock: one `RwLock` over the maps. It is a leaf lock: no other lock is
//! taken while it is held and no syscall runs under it (fds are opened
//! before and closed after).

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;

use crate::key::FileKey;
use crate::key::key_of;
use crate::sys;

/// FUSE inode number of the mountpoint's root (fixed by the protocol).
pub const ROOT_INO: u64 = 1;

/// First synthetic node id, for an object whose backing `st_ino` is taken
/// (far above the inode numbers filesystems hand out; should one collide
/// with a synthetic id, that object gets a synthetic id too).
pub const SYNTHETIC_BASE: u64 = 0xffff_0000_0000_0000;

/// One backing object the kernel holds a reference to, with its open fd.
#[derive(Debug)]
pub struct Inode {
    /// FUSE inode number.
    pub ino: u64,
    /// Backing identity.
    pub key: FileKey,
    /// `st_mode & S_IFMT` of the backing object.
    pub fmt: u32,
    fd: OwnedFd,
    /// Used since the CLOCK hand last passed (second chance).
    used: AtomicBool,
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

/// One inode as [`InodeTable::export`] gives it.
pub struct ExportedInode {
    /// FUSE node id.
    pub ino: u64,
    /// Backing identity.
    pub key: FileKey,
    /// `st_mode & S_IFMT`.
    pub fmt: u32,
    /// The kernel's lookup count.
    pub nlookup: u64,
    /// The inode with its `O_PATH` fd, while hot.
    pub hot: Option<Arc<Inode>>,
    /// Its file handle (`name_to_handle_at`), if one was made.
    pub handle: Option<Box<[u8]>>,
}

struct Slot {
    nlookup: u64,
    key: FileKey,
    fmt: u32,
    /// The fd may be closed while cold (file handles work here: root, and
    /// the object is on BACKING's filesystem).
    coolable: bool,
    /// File handle to reopen a cold inode, made when it is first cooled
    /// (never while fds are plentiful).
    handle: Option<Box<[u8]>>,
    /// The inode with its fd, while hot.
    hot: Option<Arc<Inode>>,
}

struct Maps {
    by_ino: HashMap<u64, Slot>,
    by_key: HashMap<FileKey, u64>,
    /// Next synthetic node id to try (see [`SYNTHETIC_BASE`]).
    next_synthetic: u64,
    /// CLOCK of hot inodes that have a handle (may hold stale numbers).
    ring: VecDeque<u64>,
    /// Hot inodes that have a handle (what `fd_cap` bounds).
    hot: usize,
    /// Directories the reaper watches (`Core::reap_empty_dirs`): how many
    /// times, since it began watching one, the kernel took or dropped a
    /// reference to it (LOOKUP, MKDIR, CREATE, a hand-over, a
    /// recovered node id, FORGET) or a request saw it without taking one
    /// ([`InodeTable::touch`]).
    watched: HashMap<FileKey, u64>,
}

impl Maps {
    /// Counts an event on `key` if the reaper watches it.
    fn touched(&mut self, key: &FileKey) {
        if !self.watched.is_empty() {
            if let Some(n) = self.watched.get_mut(key) {
                *n += 1;
            }
        }
    }
}

/// FUSE inode number → [`Inode`], with kernel lookup counts.
pub struct InodeTable {
    maps: RwLock<Maps>,
    root: Arc<Inode>,
    /// BACKING opened for reading: `open_by_handle_at` takes no `O_PATH` fd.
    mount_fd: Option<OwnedFd>,
    fd_cap: usize,
    handles: bool,
    /// After a crash: where unknown node ids are looked for (`recover`).
    finder: std::sync::OnceLock<super::recover::NodeFinder>,
}

impl InodeTable {
    /// A table holding only the root (BACKING), never forgotten. Up to half
    /// the open file limit of inodes keep their fd; the rest are reopened by
    /// handle (only as root: `open_by_handle_at` needs CAP_DAC_READ_SEARCH).
    pub fn new(root_fd: OwnedFd, root_key: FileKey) -> Self {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: `lim` is a writable rlimit alive for the call.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        let cap = (lim.rlim_cur / 2).clamp(64, 1 << 20) as usize;
        Self::with_fd_cap(root_fd, root_key, cap, sys::euid() == 0)
    }

    /// [`InodeTable::new`] with at most `fd_cap` fds held, and file handles
    /// used only if `handles`.
    pub fn with_fd_cap(root_fd: OwnedFd, root_key: FileKey, fd_cap: usize, handles: bool) -> Self {
        let fmt = libc::S_IFDIR;
        let root = Arc::new(Inode { ino: ROOT_INO, key: root_key, fmt, fd: root_fd, used: AtomicBool::new(true) });
        let slot =
            Slot { nlookup: 1 << 62, key: root_key, fmt, coolable: false, handle: None, hot: Some(root.clone()) };
        let maps = Maps {
            by_ino: HashMap::from([(ROOT_INO, slot)]),
            by_key: HashMap::from([(root_key, ROOT_INO)]),
            next_synthetic: SYNTHETIC_BASE,
            ring: VecDeque::new(),
            hot: 0,
            watched: HashMap::new(),
        };
        let mount_fd = if handles { sys::reopen(root.fd(), libc::O_RDONLY | libc::O_DIRECTORY).ok() } else { None };
        let handles = mount_fd.is_some();
        InodeTable {
            maps: RwLock::new(maps),
            root,
            mount_fd,
            fd_cap: fd_cap.max(1),
            handles,
            finder: Default::default(),
        }
    }

    /// The inode for a FUSE inode number, reopened by handle if it was cold.
    /// None: the kernel sent an inode we never gave it or already forgot, or
    /// the object is gone from BACKING (the caller answers ESTALE). After
    /// [`InodeTable::set_finder`] an unknown id is looked for in BACKING first.
    pub fn get(&self, ino: u64) -> Option<Arc<Inode>> {
        let (key, fmt, handle) = {
            let m = self.maps.read();
            let Some(s) = m.by_ino.get(&ino) else {
                drop(m);
                return self.refind(ino);
            };
            if let Some(i) = &s.hot {
                i.used.store(true, Ordering::Relaxed);
                return Some(i.clone());
            }
            (s.key, s.fmt, s.handle.clone()?)
        };
        let fd = sys::open_handle(self.mount_fd.as_ref()?.as_fd(), &handle).ok()?;
        if sys::fstat(fd.as_fd()).map(|st| key_of(&st)) != Ok(key) {
            return None;
        }
        let mut m = self.maps.write();
        let s = m.by_ino.get_mut(&ino)?;
        if let Some(i) = &s.hot {
            return Some(i.clone());
        }
        let i = Arc::new(Inode { ino, key, fmt, fd, used: AtomicBool::new(true) });
        s.hot = Some(i.clone());
        let cooled = Self::warmed(&mut m, ino, self.fd_cap);
        drop(m);
        drop(cooled);
        Some(i)
    }

    /// Looks for unknown node id `ino` with the finder, if one is set, and
    /// adopts what it finds with one kernel reference (see `recover`).
    fn refind(&self, ino: u64) -> Option<Arc<Inode>> {
        let (fd, key, fmt) = self.finder.get()?.find(ino)?;
        if ino >= SYNTHETIC_BASE || self.ino_of(&key).is_some_and(|n| n != ino) {
            return None;
        }
        self.adopt(ino, key, fmt, 1, Some(fd), None);
        let m = self.maps.read();
        m.by_ino.get(&ino)?.hot.clone()
    }

    /// From now on unknown node ids are looked for with `finder` (a daemon
    /// started after a crash). A second call does nothing.
    pub fn set_finder(&self, finder: super::recover::NodeFinder) {
        let _ = self.finder.set(finder);
    }

    /// The FUSE inode number of a backing object, if the kernel holds it.
    pub fn ino_of(&self, key: &FileKey) -> Option<u64> {
        self.maps.read().by_key.get(key).copied()
    }

    /// The reaper's view of the directory `key`, read in one lock: whether
    /// the kernel holds it now, and the count of kernel references taken or
    /// dropped and of [`InodeTable::touch`]es since the reaper began watching
    /// it (this call begins it, at 0). Two equal counts with the kernel
    /// holding it at neither call: no request reached it in between.
    pub fn watch(&self, key: FileKey) -> (bool, u64) {
        let mut m = self.maps.write();
        let n = *m.watched.entry(key).or_insert(0);
        (m.by_key.contains_key(&key), n)
    }

    /// A request saw the directory `key` without taking a kernel reference
    /// (a MKDIR answered EEXIST): counted for the reaper if it watches it.
    pub fn touch(&self, key: &FileKey) {
        self.maps.write().touched(key);
    }

    /// The reaper stops watching every directory `keep` rejects.
    pub fn watch_only(&self, keep: impl Fn(&FileKey) -> bool) {
        self.maps.write().watched.retain(|k, _| keep(k));
    }

    /// Records one more kernel reference (a lookup reply) for the object
    /// behind `fd`. An object already in the table keeps its inode number; if
    /// it was cold, `fd` becomes its fd, else `fd` is dropped.
    pub fn insert(&self, fd: OwnedFd, key: FileKey, fmt: u32) -> Arc<Inode> {
        let coolable = self.handles && key.dev == self.root.key.dev;
        let mut m = self.maps.write();
        let known = m.by_key.get(&key).copied().filter(|ino| m.by_ino.contains_key(ino));
        let ino = match known {
            Some(ino) => ino,
            None => {
                let ino = Self::node_id(&mut m, &key, self.root.key.ino);
                m.by_key.insert(key, ino);
                m.by_ino.insert(ino, Slot { nlookup: 0, key, fmt, coolable, handle: None, hot: None });
                ino
            }
        };
        m.touched(&key);
        let Some(s) = m.by_ino.get_mut(&ino) else { unreachable!("slot inserted above") };
        s.nlookup += 1;
        if let Some(i) = &s.hot {
            i.used.store(true, Ordering::Relaxed);
            return i.clone();
        }
        let coolable = s.coolable;
        let i = Arc::new(Inode { ino, key, fmt, fd, used: AtomicBool::new(true) });
        s.hot = Some(i.clone());
        let cooled = if coolable { Self::warmed(&mut m, ino, self.fd_cap) } else { Vec::new() };
        drop(m);
        drop(cooled);
        i
    }

    /// The node id for a new object `key`: its backing `st_ino` unless that
    /// is 0, FUSE's root id, the number the root reports (`root_ino`), or
    /// held by another object; else the next free synthetic id.
    fn node_id(m: &mut Maps, key: &FileKey, root_ino: u64) -> u64 {
        let free = |m: &Maps, n: u64| n > ROOT_INO && n != root_ino && !m.by_ino.contains_key(&n);
        if free(m, key.ino) {
            return key.ino;
        }
        loop {
            let n = m.next_synthetic;
            m.next_synthetic = m.next_synthetic.checked_add(1).unwrap_or(SYNTHETIC_BASE);
            if free(m, n) {
                return n;
            }
        }
    }

    /// Counts `ino` hot and runs the CLOCK until at most `cap` coolable
    /// inodes are hot; returns the inodes cooled, to be dropped (closing
    /// their fds once no request uses them) after the lock is released.
    fn warmed(m: &mut Maps, ino: u64, cap: usize) -> Vec<Arc<Inode>> {
        m.hot += 1;
        m.ring.push_back(ino);
        let mut cooled = Vec::new();
        let mut budget = 2 * m.ring.len();
        while m.hot > cap && budget > 0 {
            budget -= 1;
            let Some(cand) = m.ring.pop_front() else { break };
            let Some(s) = m.by_ino.get_mut(&cand) else { continue };
            let Some(i) = s.hot.clone() else { continue };
            if !s.coolable {
                continue;
            }
            if i.used.swap(false, Ordering::Relaxed) {
                m.ring.push_back(cand);
                continue;
            }
            if s.handle.is_none() {
                // First time cold: its handle now (one name_to_handle_at,
                // only once the fd cap is reached).
                match sys::file_handle(i.fd()) {
                    Ok(h) => s.handle = Some(h),
                    Err(_) => {
                        s.coolable = false;
                        m.hot -= 1;
                        continue;
                    }
                }
            }
            cooled.extend(s.hot.take());
            m.hot -= 1;
        }
        if m.ring.len() > 2 * cap + 64 {
            // Drop numbers of forgotten or cooled inodes.
            let by_ino = &m.by_ino;
            m.ring.retain(|n| by_ino.get(n).is_some_and(|s| s.hot.is_some() && s.coolable));
        }
        cooled
    }

    /// The kernel dropped `n` references (FORGET). At zero the inode goes
    /// (its fd is closed once no request uses it).
    pub fn forget(&self, ino: u64, n: u64) {
        if ino == ROOT_INO {
            return;
        }
        let gone = {
            let mut m = self.maps.write();
            let zero = match m.by_ino.get_mut(&ino) {
                Some(slot) => {
                    slot.nlookup = slot.nlookup.saturating_sub(n);
                    let (zero, key) = (slot.nlookup == 0, slot.key);
                    // Counted in the same lock as the slot's removal: the
                    // reaper never sees it forgotten but not touched.
                    m.touched(&key);
                    zero
                }
                None => false,
            };
            if !zero {
                return;
            }
            let slot = m.by_ino.remove(&ino);
            if let Some(s) = &slot {
                if m.by_key.get(&s.key) == Some(&ino) {
                    m.by_key.remove(&s.key);
                }
                if s.hot.is_some() && s.coolable {
                    m.hot -= 1;
                }
            }
            slot
        };
        drop(gone);
    }

    /// Points the kernel's inode `ino` at another backing object, `fd` with
    /// identity `key` (a directory recreated after it was removed behind the
    /// daemon, see `Core::recreate_dir`): the kernel keeps its inode number
    /// and lookup count, and every later request on it reaches the new object.
    /// Returns the new inode, or None if the kernel no longer holds `ino`.
    pub fn rebind(&self, ino: u64, fd: OwnedFd, key: FileKey) -> Option<Arc<Inode>> {
        if ino == ROOT_INO {
            return None;
        }
        let handle =
            if self.handles && key.dev == self.root.key.dev { sys::file_handle(fd.as_fd()).ok() } else { None };
        let mut m = self.maps.write();
        let s = m.by_ino.get_mut(&ino)?;
        let (old_key, fmt) = (s.key, s.fmt);
        let was_counted = s.hot.is_some() && s.handle.is_some();
        let i = Arc::new(Inode { ino, key, fmt, fd, used: AtomicBool::new(true) });
        let old = s.hot.replace(i.clone());
        s.key = key;
        s.handle = handle;
        let counted = s.handle.is_some();
        if m.by_key.get(&old_key) == Some(&ino) {
            m.by_key.remove(&old_key);
        }
        m.by_key.insert(key, ino);
        m.touched(&key);
        let cooled = match (was_counted, counted) {
            (false, true) => Self::warmed(&mut m, ino, self.fd_cap),
            (true, false) => {
                m.hot -= 1;
                Vec::new()
            }
            _ => Vec::new(),
        };
        drop(m);
        drop((old, cooled));
        Some(i)
    }

    /// Every inode the kernel holds but the root, for a hand-over: number,
    /// key, format, lookup count, the fd while hot, the file handle if made.
    pub fn export(&self) -> Vec<ExportedInode> {
        let m = self.maps.read();
        m.by_ino
            .iter()
            .filter(|(ino, _)| **ino != ROOT_INO)
            .map(|(ino, s)| ExportedInode {
                ino: *ino,
                key: s.key,
                fmt: s.fmt,
                nlookup: s.nlookup,
                hot: s.hot.clone(),
                handle: s.handle.clone(),
            })
            .collect()
    }

    /// Takes in an inode a previous daemon gave the kernel (a hand-over):
    /// `ino` with `nlookup` references, reached through `fd` or, when cold,
    /// `handle`. Returns false (nothing taken) when neither is given or
    /// `ino` is the root.
    pub fn adopt(
        &self,
        ino: u64,
        key: FileKey,
        fmt: u32,
        nlookup: u64,
        fd: Option<OwnedFd>,
        handle: Option<Box<[u8]>>,
    ) -> bool {
        if ino == ROOT_INO || (fd.is_none() && (handle.is_none() || !self.handles)) {
            return false;
        }
        let coolable = self.handles && key.dev == self.root.key.dev;
        let mut m = self.maps.write();
        if ino >= SYNTHETIC_BASE && ino >= m.next_synthetic {
            m.next_synthetic = ino + 1;
        }
        let hot = fd.map(|fd| Arc::new(Inode { ino, key, fmt, fd, used: AtomicBool::new(true) }));
        let counted = hot.is_some() && coolable;
        m.by_key.insert(key, ino);
        m.touched(&key);
        m.by_ino.insert(ino, Slot { nlookup, key, fmt, coolable, handle, hot });
        let cooled = if counted { Self::warmed(&mut m, ino, self.fd_cap) } else { Vec::new() };
        drop(m);
        drop(cooled);
        true
    }

    /// Number of inodes the kernel holds (root included).
    pub fn len(&self) -> usize {
        self.maps.read().by_ino.len()
    }

    /// Whether only the root is held.
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }

    /// Inodes holding an fd that may be closed (at most the fd cap).
    pub fn hot_fds(&self) -> usize {
        self.maps.read().hot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    fn open(p: &std::path::Path) -> OwnedFd {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path alive for the call; the fd is asserted below.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: open returned a new fd (asserted >= 0) that nothing else owns.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    #[test]
    fn node_ids_are_backing_inode_numbers_unless_taken() {
        let dir = tempfile::tempdir().unwrap();
        let root = open(dir.path());
        let rkey = key_of(&sys::fstat(root.as_fd()).unwrap());
        let t = InodeTable::with_fd_cap(root, rkey, 16, false);
        let p = dir.path().join("f");
        std::fs::write(&p, "x").unwrap();
        let key = key_of(&sys::fstat(open(&p).as_fd()).unwrap());
        assert_eq!(t.insert(open(&p), key, libc::S_IFREG).ino, key.ino, "a file's node id is its st_ino");
        assert_eq!(t.insert(open(&p), key, libc::S_IFREG).ino, key.ino, "and stays so on the next lookup");
        // Another filesystem inside BACKING may hand out the same number, or
        // the root's: those objects get distinct synthetic ids.
        let other = FileKey { dev: key.dev + 1, ino: key.ino };
        let a = t.insert(open(&p), other, libc::S_IFREG).ino;
        let b = t.insert(open(&p), FileKey { dev: key.dev + 1, ino: rkey.ino }, libc::S_IFREG).ino;
        let c = t.insert(open(&p), FileKey { dev: key.dev + 1, ino: ROOT_INO }, libc::S_IFREG).ino;
        assert!(a >= SYNTHETIC_BASE && b >= SYNTHETIC_BASE && c >= SYNTHETIC_BASE, "{a} {b} {c}");
        assert!(a != b && b != c && a != c);
        assert_eq!(t.ino_of(&other), Some(a));
        t.forget(key.ino, 2);
        assert_eq!(t.insert(open(&p), key, libc::S_IFREG).ino, key.ino, "the same number after FORGET");
    }

    #[test]
    fn at_most_cap_fds_are_held_and_cold_inodes_reopen_by_handle() {
        if sys::euid() != 0 {
            return; // open_by_handle_at needs CAP_DAC_READ_SEARCH
        }
        let dir = tempfile::tempdir().unwrap();
        let root = open(dir.path());
        let rkey = key_of(&sys::fstat(root.as_fd()).unwrap());
        let t = InodeTable::with_fd_cap(root, rkey, 4, true);
        let mut inos = Vec::new();
        for n in 0..10 {
            let p = dir.path().join(format!("f{n}"));
            std::fs::write(&p, format!("{n}")).unwrap();
            let fd = open(&p);
            let key = key_of(&sys::fstat(fd.as_fd()).unwrap());
            inos.push((t.insert(fd, key, libc::S_IFREG).ino, key));
            assert!(t.hot_fds() <= 4, "{} fds held", t.hot_fds());
        }
        for &(ino, key) in &inos {
            let i = t.get(ino).expect("a cold inode reopens by handle");
            assert_eq!(key_of(&sys::fstat(i.fd()).unwrap()), key);
            assert!(t.hot_fds() <= 4);
        }
        // A file deleted behind the table's back: its cold inode is stale.
        let (ino0, _) = inos[0];
        for &(ino, _) in &inos[5..] {
            t.get(ino);
        }
        std::fs::remove_file(dir.path().join("f0")).unwrap();
        std::fs::write(dir.path().join("new"), "x").unwrap(); // may reuse f0's inode number
        // Hot (its fd pins the old object) or cold (ESTALE): never another file.
        if let Some(i) = t.get(ino0) {
            assert_eq!(key_of(&sys::fstat(i.fd()).unwrap()), inos[0].1);
            assert_eq!(sys::fstat(i.fd()).unwrap().st_nlink, 0, "the deleted file itself");
        }
        for &(ino, _) in &inos {
            t.forget(ino, 1);
        }
        assert_eq!(t.hot_fds(), 0);
        assert_eq!(t.len(), 1);
    }
}
