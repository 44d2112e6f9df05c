//! [`Gated`]: a `fuser::Filesystem` that runs another one behind a
//! [`Gate`], for the hand-over (docs/design/upgrade.md): once the gate is
//! closed no request starts; one read after that is left unanswered (its
//! reply forgotten: fuser answers EIO for a dropped one), so that
//! FUSE_NOTIFY_RESEND brings it to the next process. FORGET is always
//! applied: it has no reply, so no resend brings it back (BATCH_FORGET goes
//! through fuser's default, which calls `forget` per node). `init` and
//! `destroy` pass through. Every other method is the same two lines, made
//! by [`gated!`] from one signature each, as fuser 0.18's trait spells it
//! (its macOS-only methods left out).
//!
//! A method fuser adds later is not forwarded until it is listed here:
//! `Gated` answers it with fuser's default (ENOSYS, or a no-op), even where
//! the inner filesystem implements it. The test below fails when
//! `BoundFs` implements a method `Gated` does not forward, so the list is
//! checked at the next fuser upgrade.

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

/// Methods of `fuser::Filesystem` forwarded behind the gate: each
/// `fn NAME(ARG: TYPE, ...) -> REPLY;` becomes the trait method with those
/// arguments and `reply: REPLY`, which enters the gate (or forgets the reply
/// when it is closed) and calls the inner filesystem's method.
macro_rules! gated {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $reply:ty;)*) => {
        $(
            fn $name(&self, $($arg: $ty,)* reply: $reply) {
                let Some(_in) = self.gate.enter() else { return std::mem::forget(reply) };
                self.inner.$name($($arg,)* reply)
            }
        )*
    };
}

impl<FS: Filesystem> Filesystem for Gated<FS> {
    fn init(&mut self, req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        self.inner.init(req, config)
    }

    fn destroy(&mut self) {
        self.inner.destroy()
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        self.inner.forget(req, ino, nlookup)
    }

    gated! {
        fn lookup(req: &Request, parent: INodeNo, name: &OsStr) -> ReplyEntry;
        fn getattr(req: &Request, ino: INodeNo, fh: Option<FileHandle>) -> ReplyAttr;
        fn setattr(req: &Request, ino: INodeNo, mode: Option<u32>, uid: Option<u32>, gid: Option<u32>, size: Option<u64>, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>, ctime: Option<SystemTime>, fh: Option<FileHandle>, crtime: Option<SystemTime>, chgtime: Option<SystemTime>, bkuptime: Option<SystemTime>, flags: Option<BsdFileFlags>) -> ReplyAttr;
        fn readlink(req: &Request, ino: INodeNo) -> ReplyData;
        fn mknod(req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32) -> ReplyEntry;
        fn mkdir(req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32) -> ReplyEntry;
        fn unlink(req: &Request, parent: INodeNo, name: &OsStr) -> ReplyEmpty;
        fn rmdir(req: &Request, parent: INodeNo, name: &OsStr) -> ReplyEmpty;
        fn symlink(req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path) -> ReplyEntry;
        fn rename(req: &Request, parent: INodeNo, name: &OsStr, newparent: INodeNo, newname: &OsStr, flags: RenameFlags) -> ReplyEmpty;
        fn link(req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr) -> ReplyEntry;
        fn open(req: &Request, ino: INodeNo, flags: OpenFlags) -> ReplyOpen;
        fn read(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, size: u32, flags: OpenFlags, lock_owner: Option<LockOwner>) -> ReplyData;
        fn write(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, data: &[u8], write_flags: WriteFlags, flags: OpenFlags, lock_owner: Option<LockOwner>) -> ReplyWrite;
        fn flush(req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner) -> ReplyEmpty;
        fn release(req: &Request, ino: INodeNo, fh: FileHandle, flags: OpenFlags, lock_owner: Option<LockOwner>, flush: bool) -> ReplyEmpty;
        fn fsync(req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool) -> ReplyEmpty;
        fn opendir(req: &Request, ino: INodeNo, flags: OpenFlags) -> ReplyOpen;
        fn readdir(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64) -> ReplyDirectory;
        fn readdirplus(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64) -> ReplyDirectoryPlus;
        fn releasedir(req: &Request, ino: INodeNo, fh: FileHandle, flags: OpenFlags) -> ReplyEmpty;
        fn fsyncdir(req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool) -> ReplyEmpty;
        fn statfs(req: &Request, ino: INodeNo) -> ReplyStatfs;
        fn setxattr(req: &Request, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32, position: u32) -> ReplyEmpty;
        fn getxattr(req: &Request, ino: INodeNo, name: &OsStr, size: u32) -> ReplyXattr;
        fn listxattr(req: &Request, ino: INodeNo, size: u32) -> ReplyXattr;
        fn removexattr(req: &Request, ino: INodeNo, name: &OsStr) -> ReplyEmpty;
        fn access(req: &Request, ino: INodeNo, mask: AccessFlags) -> ReplyEmpty;
        fn create(req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32) -> ReplyCreate;
        fn getlk(req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, start: u64, end: u64, typ: i32, pid: u32) -> ReplyLock;
        fn setlk(req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, start: u64, end: u64, typ: i32, pid: u32, sleep: bool) -> ReplyEmpty;
        fn bmap(req: &Request, ino: INodeNo, blocksize: u32, idx: u64) -> ReplyBmap;
        fn ioctl(req: &Request, ino: INodeNo, fh: FileHandle, flags: IoctlFlags, cmd: u32, in_data: &[u8], out_size: u32) -> ReplyIoctl;
        fn poll(req: &Request, ino: INodeNo, fh: FileHandle, ph: PollNotifier, events: PollEvents, flags: PollFlags) -> ReplyPoll;
        fn fallocate(req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, length: u64, mode: i32) -> ReplyEmpty;
        fn lseek(req: &Request, ino: INodeNo, fh: FileHandle, offset: i64, whence: i32) -> ReplyLseek;
        fn copy_file_range(req: &Request, ino_in: INodeNo, fh_in: FileHandle, offset_in: u64, ino_out: INodeNo, fh_out: FileHandle, offset_out: u64, len: u64, flags: CopyFileRangeFlags) -> ReplyWrite;
    }
}

#[cfg(test)]
mod tests {
    /// The `fn` names of the first `impl ... Filesystem for TYPE` block in `src`.
    fn methods(src: &str, of: &str) -> Vec<String> {
        let start = src.find(&format!("Filesystem for {of}")).expect("the impl");
        let body = &src[start..];
        let end = body.find("\n}\n").expect("its end");
        body[..end]
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("fn ").map(|r| r.split('(').next().unwrap_or("").to_string()))
            .collect()
    }

    #[test]
    fn every_method_boundfs_implements_is_forwarded_behind_the_gate() {
        let gated = include_str!("gated.rs");
        let forwarded = methods(gated, "Gated<FS>");
        let missing: Vec<String> =
            methods(include_str!("mod.rs"), "BoundFs").into_iter().filter(|m| !forwarded.contains(m)).collect();
        assert!(
            missing.is_empty(),
            "BoundFs implements {missing:?}, which Gated does not forward (list them in gated!)"
        );
        assert!(forwarded.len() > 30, "the gated! list was read ({} methods)", forwarded.len());
    }
}
