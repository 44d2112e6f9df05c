//! [`Gated`]: a `fuser::Filesystem` that runs another one behind a
//! [`Gate`], for the hand-over (docs/design/upgrade.md): once the gate is
//! closed no request starts; one read after that is left unanswered (its
//! reply forgotten: fuser answers EIO for a dropped one), so that
//! FUSE_NOTIFY_RESEND brings it to the next process. FORGET is always
//! applied: it has no reply, so no resend brings it back (BATCH_FORGET goes
//! through fuser's default, which calls `forget` per node). `init` and
//! `destroy` pass through. Every other method is the same two lines,
//! written out from fuser 0.18's trait (its macOS-only methods left out).

use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::*;

use super::handover::Gate;

/// `inner` behind `gate`.
pub struct Gated<FS> {
    /// The filesystem served.
    pub inner: FS,
    /// The gate its requests pass.
    pub gate: Arc<Gate>,
}

impl<FS: Filesystem> Filesystem for Gated<FS> {
    fn init(&mut self, req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        self.inner.init(req, config)
    }

    fn destroy(&mut self) {
        self.inner.destroy()
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.lookup(req, parent, name, reply)
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        self.inner.forget(req, ino, nlookup)
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.getattr(req, ino, fh, reply)
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        crtime: Option<SystemTime>,
        chgtime: Option<SystemTime>,
        bkuptime: Option<SystemTime>,
        flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner
            .setattr(req, ino, mode, uid, gid, size, atime, mtime, ctime, fh, crtime, chgtime, bkuptime, flags, reply)
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.readlink(req, ino, reply)
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.mknod(req, parent, name, mode, umask, rdev, reply)
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.mkdir(req, parent, name, mode, umask, reply)
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.unlink(req, parent, name, reply)
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.rmdir(req, parent, name, reply)
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.symlink(req, parent, link_name, target, reply)
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.rename(req, parent, name, newparent, newname, flags, reply)
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.link(req, ino, newparent, newname, reply)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.open(req, ino, flags, reply)
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.read(req, ino, fh, offset, size, flags, lock_owner, reply)
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.write(req, ino, fh, offset, data, write_flags, flags, lock_owner, reply)
    }

    fn flush(&self, req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.flush(req, ino, fh, lock_owner, reply)
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.release(req, ino, fh, flags, lock_owner, flush, reply)
    }

    fn fsync(&self, req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.fsync(req, ino, fh, datasync, reply)
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.opendir(req, ino, flags, reply)
    }

    fn readdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectory) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.readdir(req, ino, fh, offset, reply)
    }

    fn readdirplus(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectoryPlus) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.readdirplus(req, ino, fh, offset, reply)
    }

    fn releasedir(&self, req: &Request, ino: INodeNo, fh: FileHandle, flags: OpenFlags, reply: ReplyEmpty) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.releasedir(req, ino, fh, flags, reply)
    }

    fn fsyncdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.fsyncdir(req, ino, fh, datasync, reply)
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.statfs(req, ino, reply)
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.setxattr(req, ino, name, value, flags, position, reply)
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.getxattr(req, ino, name, size, reply)
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.listxattr(req, ino, size, reply)
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.removexattr(req, ino, name, reply)
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.access(req, ino, mask, reply)
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
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.create(req, parent, name, mode, umask, flags, reply)
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.getlk(req, ino, fh, lock_owner, start, end, typ, pid, reply)
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.setlk(req, ino, fh, lock_owner, start, end, typ, pid, sleep, reply)
    }

    fn bmap(&self, req: &Request, ino: INodeNo, blocksize: u32, idx: u64, reply: ReplyBmap) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.bmap(req, ino, blocksize, idx, reply)
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.ioctl(req, ino, fh, flags, cmd, in_data, out_size, reply)
    }

    fn poll(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        ph: PollNotifier,
        events: PollEvents,
        flags: PollFlags,
        reply: ReplyPoll,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.poll(req, ino, fh, ph, events, flags, reply)
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.fallocate(req, ino, fh, offset, length, mode, reply)
    }

    fn lseek(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.lseek(req, ino, fh, offset, whence, reply)
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
        self.inner.copy_file_range(req, ino_in, fh_in, offset_in, ino_out, fh_out, offset_out, len, flags, reply)
    }
}
