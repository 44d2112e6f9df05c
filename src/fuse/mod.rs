//! `fuser::Filesystem` for [`Core`]: decode the request, call the core
//! operation, reply. Every error goes out through `reply_err!`, which logs
//! it with its operation, path or handle and errno (see `errors`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BackingId, BsdFileFlags, Errno, FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow, WriteFlags,
};

use crate::config::Passthrough;
use crate::fs::passthrough::Plan;
use crate::fs::{Caller, Core, Opened, SetAttr, Target, Xattr};
use crate::stats::Op;

mod backing;
mod errors;
pub mod gated;
pub mod handover;
mod resent;
mod timing;

/// Stack depth asked for passthrough: BACKING may itself be on a stacked
/// filesystem (overlayfs, as in most containers); nothing stacks on boundfs.
const MAX_STACK_DEPTH: u32 = 2;

/// The FUSE adapter.
pub struct BoundFs {
    core: Arc<Core>,
    ttl: Duration,
    /// FUSE_DONT_MASK was negotiated: CREATE, MKDIR and MKNOD carry the
    /// client's umask unapplied (see [`Core::creation_mode`]).
    dont_mask: bool,
    /// FUSE_HANDLE_KILLPRIV_V2 was negotiated (see [`Filesystem::init`]).
    killpriv: bool,
    /// Block files resolved by the daemon's own warming (`workers::warm`)
    /// and not used since, by FUSE inode: their entries were answered with
    /// attributes valid for 0 s, so a client's first stat, access or open
    /// of one still reaches the daemon (as GETATTR) and counts as a use, as
    /// its LOOKUP would have on a cold mount.
    warmed: parking_lot::Mutex<std::collections::HashSet<u64>>,
    /// What INIT settled, recorded there for a hand-over (`daemon::upgrade`).
    pub negotiated: Arc<std::sync::OnceLock<handover::Negotiated>>,
}

impl BoundFs {
    /// An adapter serving `core`; the kernel may cache entries, misses and
    /// attributes for `ttl`; opens use kernel passthrough as `passthrough`
    /// says (reads, or block writes too), when the kernel and our
    /// privileges allow it.
    pub fn new(core: Arc<Core>, ttl: Duration, passthrough: Passthrough) -> Self {
        core.enable_passthrough(passthrough != Passthrough::Off);
        core.allow_pass_writers(passthrough == Passthrough::Auto);
        BoundFs {
            core,
            ttl,
            dont_mask: false,
            killpriv: false,
            warmed: Default::default(),
            negotiated: Default::default(),
        }
    }

    /// The mode to create an object with under `parent`: the kernel applied
    /// the umask already unless FUSE_DONT_MASK was negotiated.
    fn creation_mode(&self, parent: INodeNo, mode: u32, umask: u32) -> u32 {
        if self.dont_mask { self.core.creation_mode(parent, mode, umask) } else { mode & !umask }
    }

    /// Finishes an OPEN or CREATE the core planned: registers the handle's
    /// backing fd with the kernel (`open_backing`) when the plan needs one.
    /// Returns the file handle, the open flags and the backing id to answer
    /// with. Errors: ETXTBSY (see [`Core::backing_made`]).
    fn answer(
        &self,
        o: Opened,
        open_backing: impl FnOnce(&std::os::fd::OwnedFd) -> std::io::Result<BackingId>,
    ) -> Result<(u64, FopenFlags, Option<Arc<BackingId>>), Errno> {
        let o = match o.plan {
            Plan::NeedBacking { .. } => {
                let made = open_backing(&o.handle.fd);
                self.core.backing_made(o, made)?
            }
            _ => o,
        };
        Ok(match o.plan {
            Plan::Passthrough { id, direct } => {
                let flags = if direct { FopenFlags::FOPEN_DIRECT_IO } else { FopenFlags::empty() };
                (o.fh, flags, Some(id))
            }
            Plan::Direct => (o.fh, FopenFlags::FOPEN_DIRECT_IO, None),
            _ => (o.fh, FopenFlags::empty(), None),
        })
    }
}

/// A negative entry: a LOOKUP of a missing name is answered with node id 0
/// and `entry_valid` = `attr_timeout` instead of ENOENT, so the kernel keeps
/// a negative dentry (fs/fuse/dir.c, `fuse_lookup_name`: "Zero nodeid is
/// same as -ENOENT, but with valid timeout"; an ENOENT reply leaves the
/// dentry with timeout 0) and a second `stat`/`access` of the name costs no
/// request. What it cannot save: `fuse_dentry_revalidate` never trusts a
/// negative dentry for LOOKUP_EXCL (mkdir, O_CREAT|O_EXCL) or
/// LOOKUP_RENAME_TARGET ("For negative dentries, always do a fresh
/// lookup"), so the MKDIR, CREATE or RENAME that follows a miss still
/// costs its own LOOKUP. A name created through the mount turns the dentry
/// positive in the kernel itself (`d_instantiate` on the MKDIR or CREATE
/// reply). A name that appears behind the mount (an operator's copy into
/// BACKING, another node's store with `-o shared`) stays a miss until the
/// timeout ends, exactly as a positive entry removed or replaced behind the
/// mount stays cached that long: one rule for every change behind the
/// mount, `attr_timeout` (60 s; 2 s with `-o shared`, so another node's new
/// block is a hit here within 2 s: `config::SHARED_ATTR_TIMEOUT`), or
/// sooner when a reconcile pass adopts the file and invalidates its name
/// (`workers::reconcile`). The inotify watch on BACKING (`workers::watch`)
/// sees removals only, so it has no appearance to invalidate.
fn negative_entry() -> FileAttr {
    // SAFETY: stat is plain data; all-zero is a valid value.
    let mut a = crate::fs::attr(0, &unsafe { std::mem::zeroed() });
    a.ino = INodeNo(0);
    a
}

fn who(req: &Request) -> Caller {
    Caller { uid: req.uid(), gid: req.gid(), pid: req.pid() }
}

/// Replies `$e` to `$reply` after logging the failure of `$op` on
/// `$target` (see [`errors::failed`]).
macro_rules! reply_err {
    ($self:ident, $reply:expr, $op:ident, $target:expr, $e:expr) => {
        $reply.error(errors::failed(&$self.core, Op::$op, $target, $e))
    };
}

impl Filesystem for BoundFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        self.core.stats().requests.count(Op::Init);
        // READ and WRITE requests: fuser asks for its largest max_write (16 MiB)
        // and max_pages to match; the kernel caps both at
        // fs.fuse.max_pages_limit pages (256 = 1 MiB by default), so requests
        // are as large as this kernel allows.
        // The umask must not be applied under a directory with a default ACL
        // (POSIX.1e); the kernel applies it to every create unless the
        // daemon takes it over (fs/fuse/dir.c, FUSE_DONT_MASK).
        self.dont_mask = self.core.acl() && config.add_capabilities(InitFlags::FUSE_DONT_MASK).is_ok();
        // POSIX ACLs enforced as on a plain directory: with FUSE_POSIX_ACL the
        // kernel's permission checks (default_permissions) read a file's
        // access ACL (GETXATTR system.posix_acl_access), cached per inode
        // until the kernel next refreshes the inode's attributes (GETATTR or
        // an entry's revalidating LOOKUP, both forget_all_cached_acls in
        // fs/fuse/dir.c), so an ACL changed in BACKING behind the mount is
        // enforced within attr_timeout, as a mode change there is. Without
        // it the kernel checks the mode bits only while setfacl appears to
        // work: a deny entry is ignored (hence `noacl` also refuses them).
        if self.core.acl() && config.add_capabilities(InitFlags::FUSE_POSIX_ACL).is_err() {
            log::warn!("the kernel does not offer FUSE_POSIX_ACL: ACLs are stored but not enforced through the mount");
        }
        // Without FUSE_PARALLEL_DIROPS the kernel serialises LOOKUP and
        // READDIR per directory inode (fuse_lock_inode, fs/fuse/dir.c and
        // readdir.c): four engine threads loading blocks from one hash
        // directory, or the entry warming beside a listing, would queue
        // behind each other. The VFS still holds the directory's i_rwsem
        // exclusively for CREATE, MKDIR, UNLINK, RENAME, and the daemon
        // serialises its own changes per directory (`fs::dirlock`).
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        // A client's O_DIRECT read or write larger than max_write (1 MiB)
        // through a read-write or cached open goes out as its READ/WRITE
        // requests all at once instead of one after the other
        // (fuse_direct_IO, fs/fuse/file.c), as the backing disk sees it
        // natively. Their commits may then reach the ledger out of order
        // (`Accounts::commit_write` keeps the size exact). Write-only opens,
        // answered FOPEN_DIRECT_IO (vLLM's stores), stay one WRITE at a time:
        // the kernel sends those synchronously (fuse_direct_write_iter).
        let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        // Before a file's first write the kernel asks GETXATTR
        // security.capability (file_remove_privs), one round trip per stored
        // block. With FUSE_HANDLE_KILLPRIV_V2 the daemon kills suid/sgid on
        // WRITE (FUSE_WRITE_KILL_SUIDGID) and truncate, and write-only opens
        // answered FOPEN_DIRECT_IO skip file_remove_privs altogether
        // (fs/fuse/file.c, fuse_direct_write_iter); caps go with the daemon's
        // own write to the backing file (the backing filesystem removes them).
        self.killpriv = config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2).is_ok();
        if self.killpriv {
            self.core.allow_direct_writers();
        }
        if self.core.passthrough_enabled() && crate::sys::euid() != 0 {
            // FUSE_DEV_IOC_BACKING_OPEN needs CAP_SYS_ADMIN (fs/fuse/backing.c).
            self.core.no_passthrough("not root: registering backing files needs CAP_SYS_ADMIN");
        }
        if self.core.passthrough_enabled() {
            let ok = config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
                && config.set_max_stack_depth(MAX_STACK_DEPTH).is_ok();
            if ok {
                log::info!("kernel passthrough on for read-only opens");
            } else {
                self.core.no_passthrough("the kernel does not offer FUSE_PASSTHROUGH; Linux >= 6.9 is needed");
            }
        }
        let _ = self.negotiated.set(handover::Negotiated::of(config, handover::asked(self.core.passthrough_enabled())));
        Ok(())
    }

    fn destroy(&mut self) {
        self.core.stats().requests.count(Op::Destroy);
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _timer = self.begin(Op::Lookup);
        // The daemon's own warming lookups (workers::warm) are no use of a block.
        let warming = req.pid() as i32 == self.core.warm_tid().load(std::sync::atomic::Ordering::Relaxed);
        match self.core.lookup_as(parent, name, !warming) {
            Ok(a) if warming && a.kind == fuser::FileType::RegularFile && self.core.is_block_name(name) => {
                self.warmed.lock().insert(a.ino.0);
                reply.entry_with_ttls(&Duration::ZERO, &self.ttl, &a, Generation(0))
            }
            Ok(a) => reply.entry(&self.ttl, &a, Generation(0)),
            Err(Errno::ENOENT) if !self.ttl.is_zero() => reply.entry(&self.ttl, &negative_entry(), Generation(0)),
            Err(e) => reply_err!(self, reply, Lookup, Target::Entry(parent, name), e),
        }
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        // fuser hands a BATCH_FORGET over node by node, each with the batch's
        // header: count a message once (one request, as the kernel sent it).
        thread_local! { static LAST_FORGET: std::cell::Cell<u64> = const { std::cell::Cell::new(0) } }
        let unique = u64::from(req.unique());
        if LAST_FORGET.with(|l| l.replace(unique)) != unique {
            self.core.stats().requests.count(Op::Forget);
        }
        self.warmed.lock().remove(&ino.0);
        self.core.forget(ino, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let _timer = self.begin(Op::Getattr);
        let first_use = self.warmed.lock().remove(&ino.0);
        if first_use {
            // The first use of a warmed block (see `warmed`).
            if let Ok(i) = self.core.inode(ino) {
                self.core.touch(i.key);
            }
        }
        match self.core.getattr(ino, fh.map(|f| f.0)) {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply_err!(self, reply, Getattr, Target::Ino(ino), e),
        }
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
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _timer = self.begin(Op::Setattr);
        // FATTR_KILL_SUIDGID is not passed on by fuser: whether the caller
        // lacks CAP_FSETID is read from its status (`Caller::has_fsetid`),
        // only for what may kill privileges (a size, an owner, or nothing
        // set: chown(f, -1, -1), fallocate), not for a touch or a chmod.
        let asks = size.is_some() || uid.is_some() || gid.is_some() || (mode, atime, mtime) == (None, None, None);
        let killer = (self.killpriv && asks).then(|| who(req)).filter(|w| !w.has_fsetid());
        let set = SetAttr { fh: fh.map(|f| f.0), mode, uid, gid, size, atime, mtime, killer };
        match self.core.setattr(ino, &set) {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply_err!(self, reply, Setattr, Target::Ino(ino), e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _timer = self.begin(Op::Readlink);
        match self.core.readlink(ino) {
            Ok(t) => reply.data(&t),
            Err(e) => reply_err!(self, reply, Readlink, Target::Ino(ino), e),
        }
    }

    // MKNOD, MKDIR, UNLINK, RMDIR, SYMLINK, RENAME, LINK: journaled while in
    // flight, so that a resend after a crash of one already done answers as
    // done (`resent`).
    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let mode = self.creation_mode(parent, mode, umask);
        self.made(req, Op::Mknod, (parent, name), reply, || self.core.mknod(parent, name, mode, rdev, who(req)));
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let mode = self.creation_mode(parent, mode, umask);
        self.made(req, Op::Mkdir, (parent, name), reply, || self.core.mkdir(parent, name, mode, who(req)));
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let target = (Target::Entry(parent, name), name);
        self.removed(req, Op::Unlink, target, reply, || self.core.unlink(parent, name));
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let target = (Target::Entry(parent, name), name);
        self.removed(req, Op::Rmdir, target, reply, || self.core.rmdir(parent, name));
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let at = (parent, link_name);
        self.made(req, Op::Symlink, at, reply, || self.core.symlink(parent, link_name, target, who(req)));
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
        let target = (Target::Rename(parent, name, newparent, newname), name);
        self.removed(req, Op::Rename, target, reply, || {
            self.core.rename(parent, name, newparent, newname, flags.bits())
        });
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        self.made(req, Op::Link, (newparent, newname), reply, || self.core.link(ino, newparent, newname));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _timer = self.begin(Op::Open);
        let opening = self.opening(req);
        let answer = self.core.open(ino, flags.0).and_then(|o| self.answer(o, |fd| self.backing(&reply, ino, fd)));
        if let Ok((fh, ..)) = answer {
            opening.opened(fh, None);
        }
        match answer {
            Ok((fh, f, Some(id))) => reply.opened_passthrough(FileHandle(fh), f, &id),
            Ok((fh, f, None)) => reply.opened(FileHandle(fh), f),
            Err(e) => reply_err!(self, reply, Open, Target::Ino(ino), e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _timer = self.begin(Op::Read);
        match self.core.read(fh.0, offset, size, flags.0) {
            Ok(buf) => reply.data(&buf),
            Err(e) => reply_err!(self, reply, Read, Target::Fh(fh.0), e),
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _timer = self.begin(Op::Write);
        let killer = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID).then(|| who(req));
        let from_cache = write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
        match self.core.write(fh.0, offset, data, killer, from_cache) {
            Ok(n) => reply.written(n),
            Err(e) => reply_err!(self, reply, Write, Target::Fh(fh.0), e),
        }
    }

    /// FLUSH: on a local BACKING nothing to do (every write already reached
    /// it); ENOSYS tells the kernel never to send it again, saving a round
    /// trip per close. Where BACKING commits at close (`flush`), the backing
    /// file is flushed first (see `Core::flush`).
    fn flush(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        let _timer = self.begin(Op::Flush);
        match self.core.flush(fh.0) {
            Ok(()) => reply.ok(),
            Err(e) if e == Errno::ENOSYS => reply.error(e),
            Err(e) => reply_err!(self, reply, Flush, Target::Fh(fh.0), e),
        }
    }

    /// IOCTL: none is supported; ENOTTY is what isatty() (Python's open()
    /// asks it of every file) expects from a regular file.
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        let _timer = self.begin(Op::Ioctl);
        reply.error(Errno::ENOTTY);
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
        let _timer = self.begin(Op::Release);
        let backing = self.core.release(fh.0);
        reply.ok();
        drop(backing);
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let _timer = self.begin(Op::Fsync);
        match self.core.fsync(fh.0, datasync) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(self, reply, Fsync, Target::Fh(fh.0), e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _timer = self.begin(Op::Opendir);
        match self.core.opendir(ino) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply_err!(self, reply, Opendir, Target::Ino(ino), e),
        }
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let _timer = self.begin(Op::Readdir);
        let r = self.core.readdir(fh.0, offset as i64, |ino, next, kind, name| {
            reply.add(INodeNo(ino), next as u64, kind, OsStr::from_bytes(name))
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(self, reply, Readdir, Target::Dir(fh.0), e),
        }
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        let _timer = self.begin(Op::Releasedir);
        self.core.releasedir(fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let _timer = self.begin(Op::Fsyncdir);
        match self.core.fsyncdir(fh.0, datasync) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(self, reply, Fsyncdir, Target::Dir(fh.0), e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _timer = self.begin(Op::Statfs);
        match self.core.statfs() {
            Ok(s) => reply.statfs(s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.bsize),
            Err(e) => reply_err!(self, reply, Statfs, Target::Mount, e),
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
        let _timer = self.begin(Op::Setxattr);
        match self.core.setxattr(ino, name, value, flags, who(req)) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(self, reply, Setxattr, Target::Ino(ino), e),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _timer = self.begin(Op::Getxattr);
        match self.core.getxattr(ino, name, size) {
            Ok(Xattr::Size(n)) => reply.size(n),
            Ok(Xattr::Data(d)) => reply.data(&d),
            Err(e) => reply_err!(self, reply, Getxattr, Target::Ino(ino), e),
        }
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _timer = self.begin(Op::Listxattr);
        match self.core.listxattr(ino, size, req.uid() == 0) {
            Ok(Xattr::Size(n)) => reply.size(n),
            Ok(Xattr::Data(d)) => reply.data(&d),
            Err(e) => reply_err!(self, reply, Listxattr, Target::Ino(ino), e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _timer = self.begin(Op::Removexattr);
        match self.core.removexattr(ino, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(self, reply, Removexattr, Target::Ino(ino), e),
        }
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let _timer = self.begin(Op::Access);
        match self.core.access(ino, mask.bits(), req.uid(), req.gid()) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(self, reply, Access, Target::Ino(ino), e),
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
        let _timer = self.begin(Op::Create);
        let opening = self.opening(req);
        // A CREATE the dead daemon had done made the file: open it.
        let flags = if opening.done_before { flags & !libc::O_EXCL } else { flags };
        let answer = self
            .core
            .create(parent, name, self.creation_mode(parent, mode, umask), flags, who(req))
            .and_then(|(a, o)| Ok((a, self.answer(o, |fd| reply.open_backing(fd))?)));
        if let Ok((_, (fh, ..))) = answer {
            opening.opened(fh, Some(name));
        }
        let (ttl, g) = (&self.ttl, Generation(0));
        match answer {
            Ok((a, (fh, f, Some(id)))) => reply.created_passthrough(ttl, &a, g, FileHandle(fh), f, &id),
            Ok((a, (fh, f, None))) => reply.created(ttl, &a, g, FileHandle(fh), f),
            Err(e) => reply_err!(self, reply, Create, Target::Entry(parent, name), e),
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
        let _timer = self.begin(Op::Fallocate);
        match self.core.fallocate(fh.0, offset, length, mode) {
            Ok(()) => reply.ok(),
            Err(e) => reply_err!(self, reply, Fallocate, Target::Fh(fh.0), e),
        }
    }

    fn lseek(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek) {
        let _timer = self.begin(Op::Lseek);
        match self.core.lseek(fh.0, offset, whence) {
            Ok(o) => reply.offset(o),
            Err(e) => reply_err!(self, reply, Lseek, Target::Fh(fh.0), e),
        }
    }
}
