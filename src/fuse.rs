//! `fuser::Filesystem` for [`Core`]: decode the request, call the core
//! operation, reply. Every error goes out through [`reply_err`], which logs
//! unexpected errnos once at debug level.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLseek,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::fs::{Caller, Core, TTL, Xattr};

/// Largest WRITE/READ request asked of the kernel (bytes). The kernel caps it
/// at `fs.fuse.max_pages_limit` pages (256 = 1 MiB by default).
pub const MAX_REQUEST: u32 = 1 << 20;

/// The FUSE adapter.
pub struct BoundFs {
    core: Arc<Core>,
}

impl BoundFs {
    /// An adapter serving `core`.
    pub fn new(core: Arc<Core>) -> Self {
        BoundFs { core }
    }
}

fn who(req: &Request) -> Caller {
    Caller { uid: req.uid(), gid: req.gid() }
}

/// Logs errnos that are not part of normal traffic.
fn log_err(op: &str, e: Errno) -> Errno {
    let c = e.code();
    if c == libc::EMFILE || c == libc::ENFILE {
        crate::warn_limited!("{op}: out of file descriptors; raise the daemon's open file limit (LimitNOFILE=)");
    }
    if ![libc::ENOENT, libc::EEXIST, libc::ENODATA, libc::ENOTEMPTY, libc::ERANGE, libc::ENOSPC].contains(&c) {
        log::debug!("{op}: {}", std::io::Error::from_raw_os_error(c));
    }
    e
}

macro_rules! reply_err {
    ($reply:expr, $op:literal, $e:expr) => {
        $reply.error(log_err($op, $e))
    };
}

impl Filesystem for BoundFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if let Err(max) = config.set_max_write(MAX_REQUEST) {
            let _ = config.set_max_write(max);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.core.lookup(parent, name) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply_err!(reply, "lookup", e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.core.inodes.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.core.getattr(ino, fh.map(|f| f.0)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply_err!(reply, "getattr", e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.core.setattr(ino, fh.map(|f| f.0), mode, uid, gid, size, atime, mtime) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply_err!(reply, "setattr", e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.core.readlink(ino) {
            Ok(t) => reply.data(&t),
            Err(e) => reply_err!(reply, "readlink", e),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        match self.core.mknod(parent, name, mode & !umask, rdev, who(req)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply_err!(reply, "mknod", e),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        match self.core.mkdir(parent, name, mode & !umask, who(req)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply_err!(reply, "mkdir", e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.core.unlink(parent, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(reply, "unlink", e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.core.rmdir(parent, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(reply, "rmdir", e),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        match self.core.symlink(parent, link_name, target, who(req)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply_err!(reply, "symlink", e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self.core.rename(parent, name, newparent, newname, flags.bits()) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(reply, "rename", e),
        }
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        match self.core.link(ino, newparent, newname) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply_err!(reply, "link", e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.core.open(ino, flags.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply_err!(reply, "open", e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.core.read(fh.0, offset, size) {
            Ok(buf) => reply.data(&buf),
            Err(e) => reply_err!(reply, "read", e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.core.write(fh.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply_err!(reply, "write", e),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.core.release(fh.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        match self.core.fsync(fh.0, datasync) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(reply, "fsync", e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.core.opendir(ino) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply_err!(reply, "opendir", e),
        }
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let r = self.core.readdir(fh.0, offset as i64, |ino, next, kind, name| {
            reply.add(INodeNo(ino), next as u64, kind, OsStr::from_bytes(name))
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(reply, "readdir", e),
        }
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.core.releasedir(fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.core.statfs() {
            Ok(s) => reply.statfs(s.blocks, s.bfree, s.bfree, s.files, s.ffree, s.bsize, s.namelen, s.bsize),
            Err(e) => reply_err!(reply, "statfs", e),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        match self.core.setxattr(ino, name, value, flags, req.uid()) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(reply, "setxattr", e),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.core.getxattr(ino, name, size) {
            Ok(Xattr::Size(n)) => reply.size(n),
            Ok(Xattr::Data(d)) => reply.data(&d),
            Err(e) => reply_err!(reply, "getxattr", e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.core.listxattr(ino, size) {
            Ok(Xattr::Size(n)) => reply.size(n),
            Ok(Xattr::Data(d)) => reply.data(&d),
            Err(e) => reply_err!(reply, "listxattr", e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.core.removexattr(ino, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(reply, "removexattr", e),
        }
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        match self.core.access(ino, mask.bits(), req.uid(), req.gid()) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(reply, "access", e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.core.create(parent, name, mode & !umask, flags, who(req)) {
            Ok((a, fh)) => reply.created(&TTL, &a, Generation(0), FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply_err!(reply, "create", e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        match self.core.fallocate(fh.0, offset, length, mode) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(reply, "fallocate", e),
        }
    }

    fn lseek(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek) {
        match self.core.lseek(fh.0, offset, whence) {
            Ok(o) => reply.offset(o),
            Err(e) => reply_err!(reply, "lseek", e),
        }
    }
}
