//! Directories removed behind the daemon: a CREATE or MKDIR in a directory
//! the kernel still caches (an engine's hash directory, after an operator's
//! `rm -rf BACKING/*`) would fail with ENOENT until the kernel forgets it.
//! Instead the daemon recreates the directory and its missing parents at
//! the path it had, beneath BACKING (each component created with `mkdirat`
//! and opened with `O_NOFOLLOW | O_DIRECTORY` in the one before it, under
//! that directory's stripe: a symlink swapped in is never followed), points
//! the kernel's inode at the new directory ([`InodeTable::rebind`]), and
//! invalidates the kernel's entry for the topmost name it recreated, so the
//! intermediate directories are looked up afresh.
//!
//! Shared tier (`-o shared`): a directory another node removed is removed
//! behind this mount too, but this node's client of the distributed
//! filesystem never saw the rmdir: the fd still shows a link and a path (or
//! answers ENOENT), and the client may resolve the old path from its entry
//! cache for a while (JuiceFS: `--entry-cache`, 1 s). So in shared mode an
//! ENOENT in a directory recreates it at the path its fd shows, retried every
//! 100 ms for up to `fs::shared::OPEN_LOCK_WAIT` while that path still
//! resolves to the old directory.
//!
//! [`InodeTable::rebind`]: super::inode::InodeTable::rebind

use std::os::fd::AsFd;
use std::path::Component;
use std::sync::Arc;

use fuser::Errno;

use super::inode::Inode;
use super::{Caller, Core, OpResult, key_of, sys};

impl Core {
    /// If the directory `p` was removed from BACKING behind the daemon (its
    /// fd shows no link left), recreates it at the path it had, with its mode
    /// and owner, and returns the kernel's inode now bound to it. Errors:
    /// ENOENT when `p` was not removed (the caller's ENOENT stands) or its
    /// old path is unknown or outside BACKING; ENOTDIR/ELOOP when a
    /// component is now a file or a symlink; the backing errno of `mkdirat`.
    pub(super) fn recreate_dir(&self, p: &Inode) -> OpResult<Arc<Inode>> {
        if !p.is_dir() {
            return Err(Errno::ENOENT);
        }
        let st = sys::fstat(p.fd());
        let abs = match &st {
            Ok(st) if st.st_nlink == 0 => sys::deleted_path(p.fd()).ok_or(Errno::ENOENT)?,
            // Shared tier: another node removed it. This node's client of
            // the distributed filesystem never saw the rmdir, so the fd still
            // looks linked (or answers ENOENT); its path is the one to make.
            _ if self.shared.is_some() => sys::fd_path(p.fd()).ok_or(Errno::ENOENT)?,
            _ => return Err(Errno::ENOENT),
        };
        let rel = abs.strip_prefix(&self.root_path).map_err(|_| Errno::ENOENT)?;
        let (mode, owner) = match &st {
            Ok(st) => (st.st_mode & 0o7777, Caller { uid: st.st_uid, gid: st.st_gid, pid: 0 }),
            Err(_) => (0o755, Caller { uid: self.euid, gid: sys::egid(), pid: 0 }),
        };
        let mut cur = sys::reopen(self.root().fd(), libc::O_PATH | libc::O_DIRECTORY)?;
        let mut first_made = None;
        for comp in rel.components() {
            let Component::Normal(name) = comp else { return Err(Errno::ENOENT) };
            let c = sys::cname(name)?;
            let dkey = key_of(&sys::fstat(cur.as_fd())?);
            let _g = self.dirlocks.lock(&[dkey]);
            let made = match sys::mkdirat(cur.as_fd(), &c, mode) {
                Ok(()) => true,
                Err(e) if e == Errno::EEXIST => false,
                Err(e) => return Err(e),
            };
            let next = sys::openat(cur.as_fd(), &c, libc::O_PATH | libc::O_DIRECTORY, 0)?;
            if made {
                self.chown_new(next.as_fd(), owner);
                let nst = sys::fstat(next.as_fd())?;
                let key = key_of(&nst);
                self.accounts.made_dir(key, sys::allocated(&nst), self.now());
                self.refresh_size(dkey, cur.as_fd());
                first_made.get_or_insert((dkey, name.to_os_string()));
            }
            cur = next;
        }
        let key = key_of(&sys::fstat(cur.as_fd())?);
        if key == p.key {
            // Shared tier: the client still resolves the old path from its
            // entry cache (JuiceFS: --entry-cache, 1 s): not recreated yet.
            return Err(Errno::EAGAIN);
        }
        // The removed directory no longer counts (du does not see it).
        self.accounts.dir_dropped(p.key);
        let new = self.inodes.rebind(p.ino, cur, key).ok_or(Errno::ENOENT)?;
        if let Some((dkey, name)) = first_made {
            if let Some(pino) = self.inodes.ino_of(&dkey) {
                self.inval.push(pino, name);
            }
            log::info!("recreated {} (removed behind the daemon) for a create in it", rel.display());
        }
        // Whatever else went with it stops counting soon.
        self.reconcile.request();
        Ok(new)
    }

    /// Runs `op` in the directory `p`; if it fails with ENOENT because `p` was
    /// removed behind the daemon, recreates `p` ([`Core::recreate_dir`]) and
    /// runs `op` once more in it. Returns the directory `op` succeeded in and
    /// its value. Errors: those of `op`.
    pub(super) fn in_dir<T>(
        &self,
        p: Arc<Inode>,
        op: impl Fn(&Arc<Inode>) -> OpResult<T>,
    ) -> OpResult<(Arc<Inode>, T)> {
        match op(&p) {
            Err(e) if e == Errno::ENOENT => {
                // Shared tier: another node's rmdir reaches this node's client
                // of the distributed filesystem once its entry cache expires;
                // retry the recreate until then (bounded).
                let deadline = std::time::Instant::now() + super::shared::OPEN_LOCK_WAIT;
                loop {
                    match self.recreate_dir(&p) {
                        Ok(np) => return op(&np).map(|v| (np, v)),
                        Err(r) if r == Errno::EAGAIN && std::time::Instant::now() < deadline => {
                            std::thread::sleep(std::time::Duration::from_millis(100));
                        }
                        Err(_) => return Err(e),
                    }
                }
            }
            r => r.map(|v| (p, v)),
        }
    }
}
