//! Operations that change or resolve names: lookup, create, mkdir, mknod,
//! symlink, link, unlink, rmdir, rename. Each change holds the stripes of the
//! directories it touches (see `dirlock`) and keeps the ledger in step.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use fuser::{Errno, FileAttr, INodeNo};

use super::accounts::{Created, Moved, NameGone, Renamed};
use super::creds::AsCaller;
use super::inode::Inode;
use super::{Caller, Core, Handle, OpResult, Opened};
use crate::key::key_of;
use crate::ledger::Kind;
use crate::stats::Stats;
use crate::sys;

/// Room reserved for the directory block a new entry may add (bytes).
const ENTRY_RESERVE: u64 = 8192;

impl Core {
    /// LOOKUP: resolves `name` in `parent` without following a symlink. A
    /// block file found this way becomes most recent. Errors: the backing errno
    /// (ENOENT for a miss).
    pub fn lookup(&self, parent: INodeNo, name: &OsStr) -> OpResult<FileAttr> {
        self.lookup_as(parent, name, true)
    }

    /// LOOKUP as [`Core::lookup`]; `touch`: whether finding a known block
    /// counts as a use of it (false for the daemon's own warming lookups).
    pub fn lookup_as(&self, parent: INodeNo, name: &OsStr, touch: bool) -> OpResult<FileAttr> {
        let p = self.inode(parent)?;
        let c = sys::cname(name)?;
        // The stripe orders this lookup with the removal of an emptied
        // directory (see Core::reap_empty_dirs).
        let _g = self.dirlocks.lock(&[p.key]);
        let fd = match sys::open_path(p.fd(), &c) {
            Ok(fd) => fd,
            Err(e) => {
                if e == Errno::ENOENT && self.is_block_name(name) {
                    Stats::add(&self.stats.lookup_misses, 1);
                }
                return Err(e);
            }
        };
        let st = sys::fstat(fd.as_fd())?;
        Ok(self.publish(&p, name, fd, &st, touch))
    }

    /// CREATE: creates (or, without O_EXCL, opens) `name` and opens it.
    /// Returns the attributes and the opened handle with its I/O plan
    /// (see [`Opened`]). Errors: EEXIST with O_EXCL,
    /// ENOSPC when no room can be made, other backing errnos.
    pub fn create(
        &self,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
        who: Caller,
    ) -> OpResult<(FileAttr, Opened)> {
        let p = self.inode(parent)?;
        let c = sys::cname(name)?;
        let room = self.reserve(ENTRY_RESERVE, false)?;
        // Reserved before the directory lock: a passthrough writer's room.
        let block = self.is_block_name(name);
        let candidate = block || super::unevictable::is_tmp_name(name);
        let writer = self.writer_room(candidate, flags, false);
        let open_flags = super::data::backing_flags(flags) & !(libc::O_CREAT | libc::O_EXCL);
        // A directory removed behind the daemon is recreated (see recreate.rs).
        let (p, (_g, fd, created)) = self.in_dir(p, |p| {
            let g = self.dirlocks.lock(&[p.key]);
            let made = {
                let _as = AsCaller::enter(who, self.euid == 0, libc::S_IFREG | mode);
                sys::openat(p.fd(), &c, open_flags | libc::O_CREAT | libc::O_EXCL | self.open_extra.0, mode)
            };
            match made {
                Ok(fd) => Ok((g, fd, true)),
                Err(e) if e == Errno::EEXIST && flags & libc::O_EXCL == 0 => {
                    Ok((g, sys::openat(p.fd(), &c, open_flags, 0)?, false))
                }
                Err(e) => Err(e),
            }
        })?;
        // An existing file may be evicted by another node: the same lock as OPEN.
        self.lock_opened(fd.as_fd())?;
        let st = sys::fstat(fd.as_fd())?;
        let key = key_of(&st);
        let path_fd = sys::reopen(fd.as_fd(), libc::O_PATH)?;
        if created {
            self.unevictable.written(name, block, false);
        }
        let new = Created {
            key,
            fresh: created,
            size: sys::allocated(&st),
            block,
            // Below the root, `created` joins the parent's path in the ledger.
            path: (p.ino == super::inode::ROOT_INO).then(|| PathBuf::from(name)),
            name: name.to_os_string(),
            dir: sys::fstat(p.fd()).ok().map(|d| (p.key, sys::allocated(&d))),
            reserved: room.settle(),
        };
        // Gone is unreachable while we hold the directory stripe; answer as a miss.
        let after = self.accounts.created(new, self.now(), self.stamp_secs).map_err(|_| Errno::ENOENT)?;
        self.stamp_due(key, after.stamp);
        if after.unnamed {
            // A parent the ledger has no path for (rare): ask the kernel.
            if let Some(path) = self.rel_path(&p, name) {
                self.accounts.named(key, sys::allocated(&st), block, path, self.now());
            }
        }
        let inode = self.inodes.insert(path_fd, key, libc::S_IFREG);
        let direct = super::direct::twin(fd.as_fd(), flags);
        let (fh, handle) = self.add_handle(Handle::new(fd, key, inode.ino).with_direct(direct));
        if after.wake {
            self.wake_evictor();
        }
        // An existing file opened without O_TRUNC is written through the daemon.
        let writer = writer.filter(|_| created || flags & libc::O_TRUNC != 0);
        Ok((super::attr(inode.ino, &st), self.plan_io(fh, handle, flags, candidate, writer)?))
    }

    /// Shared tail of mkdir, mknod and symlink: the new object `name` in `p`.
    fn made(&self, p: &super::Inode, name: &OsStr) -> OpResult<FileAttr> {
        let c = sys::cname(name)?;
        let fd = sys::open_path(p.fd(), &c)?;
        let st = sys::fstat(fd.as_fd())?;
        self.accounts.made(key_of(&st));
        self.refresh_dir(p);
        let attr = self.publish(p, name, fd, &st, false);
        self.accounts.made_here(key_of(&st));
        Ok(attr)
    }

    /// MKDIR. Errors: the backing errno, ENOSPC when no room can be made.
    pub fn mkdir(&self, parent: INodeNo, name: &OsStr, mode: u32, who: Caller) -> OpResult<FileAttr> {
        let p = self.inode(parent)?;
        let c = sys::cname(name)?;
        let _room = self.reserve(ENTRY_RESERVE, false)?;
        let (p, _g) = self.in_dir(p, |p| {
            let g = self.dirlocks.lock(&[p.key]);
            let _as = AsCaller::enter(who, self.euid == 0, libc::S_IFDIR | mode);
            match sys::mkdirat(p.fd(), &c, mode) {
                Ok(()) => Ok(g),
                Err(e) => {
                    if e == Errno::EEXIST {
                        // The client saw the name exist (`os.makedirs` then
                        // uses it): a directory waiting to be reaped stays a
                        // pass more. Counted under the stripe the reaper
                        // checks under (`g` is held until this returns).
                        if let Ok(st) = sys::fstatat(p.fd(), &c) {
                            self.inodes.touch(&key_of(&st));
                        }
                    }
                    Err(e)
                }
            }
        })?;
        self.made(&p, name)
    }

    /// MKNOD (FIFOs, sockets, devices, regular files).
    pub fn mknod(&self, parent: INodeNo, name: &OsStr, mode: u32, rdev: u32, who: Caller) -> OpResult<FileAttr> {
        let p = self.inode(parent)?;
        let c = sys::cname(name)?;
        let _room = self.reserve(ENTRY_RESERVE, false)?;
        let _g = self.dirlocks.lock(&[p.key]);
        {
            let _as = AsCaller::enter(who, self.euid == 0, mode);
            sys::mknodat(p.fd(), &c, mode, u64::from(rdev))?;
        }
        self.made(&p, name)
    }

    /// SYMLINK: `name` in `parent` pointing at `target` (stored, never followed).
    pub fn symlink(&self, parent: INodeNo, name: &OsStr, target: &Path, who: Caller) -> OpResult<FileAttr> {
        let p = self.inode(parent)?;
        let c = sys::cname(name)?;
        let _room = self.reserve(ENTRY_RESERVE, false)?;
        let _g = self.dirlocks.lock(&[p.key]);
        {
            let _as = AsCaller::enter(who, self.euid == 0, libc::S_IFLNK | 0o777);
            sys::symlinkat(target, p.fd(), &c)?;
        }
        self.made(&p, name)
    }

    /// LINK: a new name for an existing object. The ledger keeps one entry
    /// per object; a block name becomes the name eviction would remove.
    pub fn link(&self, ino: INodeNo, newparent: INodeNo, newname: &OsStr) -> OpResult<FileAttr> {
        let i = self.inode(ino)?;
        let np = self.inode(newparent)?;
        let c = sys::cname(newname)?;
        let _room = self.reserve(ENTRY_RESERVE, false)?;
        let _g = self.dirlocks.lock(&[np.key]);
        sys::link_fd(i.fd(), np.fd(), &c)?;
        let st = sys::fstat(i.fd())?;
        let block = self.is_block_name(newname);
        if block {
            let path = self.rel_path(&np, newname);
            let stamp = self.accounts.linked_block(i.key, sys::allocated(&st), path, self.now(), self.stamp_secs);
            self.stamp_due(i.key, stamp);
        }
        self.refresh_dir(&np);
        let fd = sys::reopen(i.fd(), libc::O_PATH)?;
        let inode = self.inodes.insert(fd, i.key, i.fmt);
        Ok(super::attr(inode.ino, &st))
    }

    /// UNLINK. A file still open through the mount stays in usage until its
    /// last release. Errors: the backing errno.
    pub fn unlink(&self, parent: INodeNo, name: &OsStr) -> OpResult<()> {
        let p = self.inode(parent)?;
        let c = sys::cname(name)?;
        let path = self.rel_path(&p, name);
        let _g = self.dirlocks.lock(&[p.key]);
        let st = sys::fstatat(p.fd(), &c)?;
        self.note_removal(&p, name);
        sys::unlinkat(p.fd(), &c, 0)?;
        self.forget_name(&st, path.as_deref());
        self.refresh_dir(&p);
        drop(_g);
        // Shared budget: another node's file removed here leaves the drift
        // now, before its maker learns of it and drops it from its grant.
        if let Some(t) = &self.shared {
            self.grant_settle(t);
        }
        Ok(())
    }

    /// RMDIR. Errors: the backing errno (ENOTEMPTY, ENOENT …).
    pub fn rmdir(&self, parent: INodeNo, name: &OsStr) -> OpResult<()> {
        let p = self.inode(parent)?;
        let c = sys::cname(name)?;
        let _g = self.dirlocks.lock(&[p.key]);
        let st = sys::fstatat(p.fd(), &c)?;
        self.note_removal(&p, name);
        sys::unlinkat(p.fd(), &c, libc::AT_REMOVEDIR)?;
        self.accounts.dir_removed(key_of(&st));
        self.refresh_dir(&p);
        Ok(())
    }

    /// Notes a removal (or move away) of `name` in the directory `p` for the
    /// watch on BACKING, which sees its top directory only.
    fn note_removal(&self, p: &Inode, name: &OsStr) {
        if p.ino == super::inode::ROOT_INO {
            self.own_removals.note(name);
        }
    }

    /// The ledger side of removing the name `path` of the object `st`.
    fn forget_name(&self, st: &libc::stat, path: Option<&Path>) {
        if let Some(gone) = name_gone(st, path) {
            self.accounts.name_gone(gone);
        }
    }

    /// RENAME with `flags` (RENAME_NOREPLACE, RENAME_EXCHANGE passed to
    /// renameat2). A block file renamed into place becomes most recent; a
    /// replaced file leaves usage (or, if open, at its last release).
    pub fn rename(
        &self,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: u32,
    ) -> OpResult<()> {
        let p = self.inode(parent)?;
        let np = self.inode(newparent)?;
        let (c, nc) = (sys::cname(name)?, sys::cname(newname)?);
        let (old_path, new_path) = self.rel_paths(&p, name, &np, newname);
        let _g = self.dirlocks.lock(&[p.key, np.key]);
        let src = sys::fstatat(p.fd(), &c)?;
        let dst = sys::fstatat(np.fd(), &nc).ok();
        self.note_removal(&p, name);
        if flags & libc::RENAME_EXCHANGE != 0 {
            self.note_removal(&np, newname);
        }
        sys::renameat2(p.fd(), &c, np.fd(), &nc, flags)?;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let mut r = Renamed::default();
        if let Some(d) = dst.as_ref().filter(|d| key_of(d) != key_of(&src)) {
            if exchange {
                r.moved.push(self.moved(d, old_path.clone(), new_path.clone(), name));
            } else {
                r.replaced = name_gone(d, None);
            }
        }
        r.moved.push(self.moved(&src, new_path, old_path, newname));
        for d in if np.key != p.key { vec![&p, &np] } else { vec![&p] } {
            if let Ok(st) = sys::fstat(d.fd()) {
                r.dirs.push((d.key, sys::allocated(&st)));
            }
        }
        for (key, path) in self.accounts.renamed(r, self.now(), self.stamp_secs) {
            self.stamp_due(key, Some(path));
        }
        // A temporary renamed into place keeps the mtime its writes got by
        // this node's own clock (see `Core::restamp_if_clock_off`).
        if src.st_mode & libc::S_IFMT == libc::S_IFREG {
            self.restamp_if_clock_off(key_of(&src));
        }
        Ok(())
    }

    /// The paths relative to BACKING of `name` in `p` and `newname` in
    /// `np`: from the ledger in one lock, else (a directory it has no path
    /// for) asked of the kernel.
    fn rel_paths(&self, p: &Inode, name: &OsStr, np: &Inode, newname: &OsStr) -> (Option<PathBuf>, Option<PathBuf>) {
        let root = |i: &Inode| i.ino == super::inode::ROOT_INO;
        let mut known = self.accounts.paths_in(&[(p.key, root(p), name), (np.key, root(np), newname)]).into_iter();
        let (a, b) = (known.next().flatten(), known.next().flatten());
        (a.or_else(|| self.rel_path(p, name)), b.or_else(|| self.rel_path(np, newname)))
    }

    /// The ledger side of an object `st` now named `to` (was `from`), for
    /// [`Accounts::renamed`].
    fn moved(&self, st: &libc::stat, to: Option<PathBuf>, from: Option<PathBuf>, new_name: &OsStr) -> Moved {
        let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
        let block = regular && self.is_block_name(new_name);
        if regular && to.is_some() {
            self.unevictable.written(new_name, block, false);
        }
        Moved { key: key_of(st), size: sys::allocated(st), block, kind: Kind::of_mode(st.st_mode), to, from }
    }
}

/// What removing the name `path` of the object `st` takes from the ledger:
/// the object itself when it was its last link (or a directory), else that
/// one name (when known).
fn name_gone(st: &libc::stat, path: Option<&Path>) -> Option<NameGone> {
    let key = key_of(st);
    if st.st_nlink <= 1 || st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        Some(NameGone::Unlinked(key))
    } else {
        path.map(|p| NameGone::Name(key, p.to_path_buf()))
    }
}
