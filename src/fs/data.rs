//! File and directory handles and the data path: open, read, write, release,
//! fsync, fallocate, lseek, setattr (truncate), opendir, readdir, releasedir.
//!
//! The hard cap on the write path: before any call that can allocate, the
//! bytes it could add are reserved in the ledger (evicting inline, or ENOSPC);
//! after it, the file's real allocated size replaces the reservation.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::SystemTime;

use fuser::{Errno, FileAttr, INodeNo, TimeOrNow};

use std::sync::Arc;

use super::{Caller, Core, Handle, OpResult, Opened, attr_of, privs};
use crate::stats::Stats;
use crate::sys;

/// Flags (`open(2)` bits) for opening the backing file on a client's behalf.
/// Not forwarded:
/// - O_DIRECT: the daemon's buffers are not aligned, and the client's own
///   O_DIRECT semantics are kept by the kernel's FUSE direct I/O path;
/// - O_NOFOLLOW: the backing file is reopened through the `/proc/self/fd`
///   magic link, which O_NOFOLLOW would refuse with ELOOP; the client's
///   O_NOFOLLOW already did its work in the kernel's path walk (a final
///   symlink fails with ELOOP there and never reaches OPEN), and the daemon
///   never follows a symlink in BACKING anyway (see `sys`);
/// - O_NOCTTY, O_CLOEXEC: they concern the client's fd, not the daemon's.
pub fn backing_flags(flags: i32) -> i32 {
    flags & !(libc::O_DIRECT | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_CLOEXEC)
}

/// Upper bound of the bytes a write of `len` at `off` can add to a file whose
/// current stat is `st`: nothing for an overwrite inside a fully allocated
/// file, else `len` rounded up to blocks plus one block of misalignment.
pub fn write_growth(st: &libc::stat, off: u64, len: u64) -> u64 {
    let bs = (st.st_blksize.max(512)) as u64;
    let size = st.st_size as u64;
    let full = sys::allocated(st) >= size.div_ceil(bs) * bs;
    if off.saturating_add(len) <= size && full {
        return 0;
    }
    len.div_ceil(bs) * bs + bs
}

/// What a SETATTR changes; `None` leaves an attribute as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    /// The file handle the change came through (a truncate then uses its fd).
    pub fh: Option<u64>,
    /// Permission bits (the low 12 bits are applied).
    pub mode: Option<u32>,
    /// Owner uid.
    pub uid: Option<u32>,
    /// Owner gid.
    pub gid: Option<u32>,
    /// New size in bytes (truncate or extend).
    pub size: Option<u64>,
    /// Access time.
    pub atime: Option<TimeOrNow>,
    /// Modification time.
    pub mtime: Option<TimeOrNow>,
    /// The caller, when it lacks CAP_FSETID: a truncate (size without mode)
    /// then clears the bits [`privs::after_change`] names, as the VFS does
    /// for an unprivileged truncate (with FUSE_HANDLE_KILLPRIV_V2 the kernel
    /// leaves it to the daemon).
    pub killer: Option<Caller>,
}

/// An open directory: the backing fd, and entries read but not yet returned
/// (walked in place in the stream's own getdents buffer).
pub struct DirStream {
    fd: OwnedFd,
    pending: sys::DirBuf,
    next_off: i64,
}

impl DirStream {
    /// A stream over `fd` handed over by a previous daemon: its position is
    /// unknown, so the next READDIR seeks to the kernel's offset.
    pub(super) fn handed(fd: OwnedFd) -> Self {
        DirStream { fd, pending: sys::DirBuf::new(), next_off: -1 }
    }

    /// The backing directory's fd.
    pub(super) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn dtype(t: u8) -> fuser::FileType {
    use fuser::FileType::*;
    match t {
        libc::DT_DIR => Directory,
        libc::DT_LNK => Symlink,
        libc::DT_CHR => CharDevice,
        libc::DT_BLK => BlockDevice,
        libc::DT_FIFO => NamedPipe,
        libc::DT_SOCK => Socket,
        _ => RegularFile,
    }
}

/// A SETATTR with nothing to set is the kernel asking the daemon to kill
/// privileges (FUSE_HANDLE_KILLPRIV_V2): for chown(f, -1, -1), or
/// file_remove_privs() before an fallocate (chown_common() in fs/open.c,
/// file_remove_privs() in fs/inode.c); the two look alike. For a caller
/// without CAP_FSETID (`killer`, see `Caller::has_fsetid`) the set-ID bits go as
/// [`privs::after_change`] says, and security.capability with them, when
/// the caller owns the file or may write it (an fallocate needs a writable
/// open). Anyone else can only be asking chown(f, -1, -1), which the kernel
/// refuses natively (EPERM: the mode change it implies is the owner's)
/// when a set-ID bit would go, and which otherwise removes
/// security.capability only. For root only security.capability goes
/// (root's fallocate keeps the set-ID bits; root's chown(f, -1, -1)
/// therefore keeps them on the mount, where a plain directory clears them).
/// Directories are left alone. Errors: EPERM as above; other failures are
/// logged at debug level.
fn kill_privs_empty_setattr(i: &super::Inode, killer: Option<Caller>, daemon_is_root: bool) -> OpResult<()> {
    if i.fmt == libc::S_IFDIR {
        return Ok(());
    }
    sys::tick();
    let fd = i.fd().as_raw_fd();
    let st = sys::fstat(i.fd())?;
    let keep = killer.map(|who| (who, privs::after_change(st.st_mode, st.st_gid, false, |g| who.in_group(g))));
    if let Some((who, Some(_))) = keep {
        if who.uid != st.st_uid && !super::creds::may_write(who, daemon_is_root, fd) {
            return Err(Errno::EPERM);
        }
    }
    let mut r = match sys::xattr::remove(fd, std::ffi::OsStr::new("security.capability")) {
        Err(e) if e == Errno::ENODATA => Ok(()),
        r => r,
    };
    if let Some((_, keep)) = keep {
        r = r.and(chmod_dropped(fd, keep));
    }
    if let Err(e) = r {
        log::debug!("killing privileges of inode {} failed: {e:?}", i.ino);
    }
    Ok(())
}

const CAPS: &str = "security.capability";

/// The `security.capability` value of the file open at `fd`, if it has one.
fn file_caps(fd: std::os::fd::RawFd) -> Option<Vec<u8>> {
    let mut buf = [0u8; 64];
    let n = sys::xattr::get(fd, std::ffi::OsStr::new(CAPS), &mut buf).ok()?;
    Some(buf[..n].to_vec())
}

/// Puts a file's `security.capability` back when dropped, if it is gone.
struct RestoreCaps(std::os::fd::RawFd, Vec<u8>);

impl Drop for RestoreCaps {
    fn drop(&mut self) {
        if file_caps(self.0).is_none() {
            if let Err(e) = sys::xattr::set(self.0, std::ffi::OsStr::new(CAPS), &self.1, 0) {
                log::debug!("restoring security.capability after a page-cache write failed: {e:?}");
            }
        }
    }
}

/// Sets the permission bits `keep` (from `privs`) on the object open at
/// `fd` (an `O_PATH` fd too), when there are any to set.
fn chmod_dropped(fd: std::os::fd::RawFd, keep: Option<u32>) -> OpResult<()> {
    match keep {
        // SAFETY: a NUL-terminated /proc path alive for the call.
        Some(m) => sys::check(unsafe { libc::chmod(sys::proc_path(fd).as_ptr(), m) }).map(drop),
        None => Ok(()),
    }
}

/// pwrite of `data` at `off` on handle `h`: through its O_DIRECT twin when
/// it has one and the piece is aligned, else (or when the device refuses
/// that alignment) through its ordinary fd.
fn pwrite(h: &Handle, data: &[u8], off: u64) -> OpResult<usize> {
    if let Some(d) = h.direct.as_ref().filter(|_| super::direct::aligned(off, data.len())) {
        match super::direct::write(d, data, off) {
            Err(e) if e == Errno::EINVAL || e == Errno::ENOMEM => {}
            r => return r,
        }
    }
    sys::pwrite_full(h.fd.as_raw_fd(), data, off)
}

impl Core {
    /// OPEN: opens the backing file and pins it against eviction until
    /// release. Errors: ENOENT if eviction removed it first (never an fd to a
    /// file eviction then deletes), the backing errno otherwise.
    /// The core plans the handle's I/O mode (see [`Opened`]).
    pub fn open(&self, ino: INodeNo, flags: i32) -> OpResult<Opened> {
        let (fh, handle, block) = self.open_pinned(ino, flags).inspect_err(|e| {
            if *e == Errno::ENOENT {
                // The kernel still had an entry for an evicted file. Let its
                // invalidation reach the kernel first, so a stat right after
                // this ENOENT agrees (an eviction from create or mkdir does
                // not wait for it). Bounded, as for a write that evicted.
                self.inval.wait_all(crate::fs::INVAL_WAIT);
            }
        })?;
        // Only a whole rewrite (O_TRUNC) of a block file may pass: an
        // append or an update in place goes through the daemon, exact.
        let room = self.writer_room(block && flags & libc::O_TRUNC != 0, flags, true);
        self.plan_io(fh, handle, flags, block, room)
    }

    /// OPEN's first part: the pinned handle, and whether it is a block file.
    fn open_pinned(&self, ino: INodeNo, flags: i32) -> OpResult<(u64, Arc<Handle>, bool)> {
        let i = self.inode(ino)?;
        let placeholder = self.accounts.pin(i.key).map_err(|_| Errno::ENOENT)?;
        let opened = self.reopen_backing(i.fd(), backing_flags(flags), false).and_then(|fd| {
            self.lock_opened(fd.as_fd())?;
            Ok((sys::fstat(fd.as_fd())?, fd))
        });
        let (st, fd) = match opened {
            Ok((st, _)) if st.st_nlink == 0 && placeholder => Err(Errno::ENOENT),
            other => other,
        }
        .inspect_err(|_| self.accounts.open_failed(i.key, placeholder))?;
        let after = self.accounts.opened(i.key, sys::allocated(&st), self.now(), self.stamp_secs);
        if after.block {
            Stats::add(&self.stats.block_opens, 1);
        }
        self.stamp_due(i.key, after.stamp);
        let direct = super::direct::twin(fd.as_fd(), flags);
        let (fh, h) = self.add_handle(Handle::new(fd, i.key, i.ino).with_direct(direct));
        Ok((fh, h, after.block))
    }

    /// READ `size` bytes at `off`; `flags` are the open flags the kernel sends
    /// with it (see `super::pagecache`). A read of a block file counts as use.
    pub fn read(&self, fh: u64, off: u64, size: u32, flags: i32) -> OpResult<Vec<u8>> {
        let h = self.handle(fh)?;
        let mut buf = vec![0u8; size as usize];
        let n = self.read_backing(&h, &mut buf, off, flags)?;
        buf.truncate(n);
        self.touch(h.key);
        Ok(buf)
    }

    /// WRITE `data` at `off`. `killer` is the writer when the kernel says
    /// it lacks CAP_FSETID (FUSE_WRITE_KILL_SUIDGID: with
    /// FUSE_HANDLE_KILLPRIV_V2 the kernel leaves the kill to the daemon):
    /// the set-ID bits go as [`privs::after_change`] says, and the kernel's
    /// cached attributes are dropped at once (a WRITE reply carries none, and
    /// a write-only open's writes never refresh the mode). security.capability
    /// is removed by the backing filesystem itself on the daemon's write.
    /// `from_cache`: the kernel writes back pages of a shared writable
    /// mapping (FUSE_WRITE_CACHE); natively that removes no
    /// security.capability (a page fault calls no file_remove_privs), so one
    /// the backing filesystem removes on the daemon's write is put back.
    /// Errors: ENOSPC when the bytes it may add can't be made room for
    /// (nothing else is disturbed), the backing errno.
    pub fn write(&self, fh: u64, off: u64, data: &[u8], killer: Option<Caller>, from_cache: bool) -> OpResult<u32> {
        let h = self.handle(fh)?;
        let st = sys::fstat(h.fd.as_fd())?;
        let caps = from_cache.then(|| file_caps(h.fd.as_raw_fd())).flatten();
        let _restore = caps.map(|v| RestoreCaps(h.fd.as_raw_fd(), v));
        if let Some(who) = killer {
            let keep = privs::after_change(st.st_mode, st.st_gid, false, |g| who.in_group(g));
            if keep.is_some() {
                chmod_dropped(h.fd.as_raw_fd(), keep)?;
                self.inval.attrs_now(h.ino);
            }
        }
        let room = self.reserve(write_growth(&st, off, data.len() as u64), true)?;
        // The backing filesystem itself may fill up (it may be smaller than
        // max_size, or shared), before the write starts (ENOSPC) or part way
        // (a short write): evict and write the rest, a few times, before
        // answering with what was written or the error.
        let (mut done, mut err, mut retries) = (0usize, None, 0);
        while done < data.len() {
            let rest = (data.len() - done) as u64;
            match pwrite(&h, &data[done..], off + done as u64) {
                Ok(k) if k as u64 == rest => done += k,
                Ok(k) => {
                    done += k;
                    if retries == 4 || self.evict(rest - k as u64, true) == 0 {
                        break;
                    }
                    retries += 1;
                }
                Err(e) if e == Errno::ENOSPC && retries < 4 && self.evict(rest, true) > 0 => retries += 1,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        let after = sys::fstat(h.fd.as_fd()).map(|st| sys::allocated(&st)).unwrap_or(0);
        // Measured, not yet committed: another WRITE of this file may land
        // and commit here (tests force that at this point).
        #[cfg(test)]
        crate::testing::crash_point();
        room.commit_write(h.key, after);
        match err {
            Some(e) if done == 0 => Err(e),
            _ => Ok(done as u32),
        }
    }

    /// FALLOCATE `len` bytes at `off` with `mode`. Errors: ENOSPC as for write.
    pub fn fallocate(&self, fh: u64, off: u64, len: u64, mode: i32) -> OpResult<()> {
        let h = self.handle(fh)?;
        if let Some(r) = self.writer_fallocate(&h, off, len, mode) {
            return r;
        }
        let grows = mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_COLLAPSE_RANGE) == 0;
        let room = self.reserve(if grows { len.div_ceil(4096) * 4096 + 4096 } else { 0 }, true)?;
        let r = sys::fallocate(h.fd.as_raw_fd(), mode, off, len);
        let after = sys::fstat(h.fd.as_fd()).map(|st| sys::allocated(&st)).unwrap_or(0);
        room.commit(h.key, after);
        r
    }

    /// FSYNC / FDATASYNC.
    pub fn fsync(&self, fh: u64, datasync: bool) -> OpResult<()> {
        sys::fsync(self.handle(fh)?.fd.as_raw_fd(), datasync)
    }

    /// LSEEK (SEEK_DATA / SEEK_HOLE reach the daemon).
    pub fn lseek(&self, fh: u64, off: i64, whence: i32) -> OpResult<i64> {
        sys::lseek(self.handle(fh)?.fd.as_raw_fd(), off, whence)
    }

    /// SETATTR: mode, owner, size, times, in that order (see [`SetAttr`]);
    /// returns the new attributes. Errors: ESTALE for an inode the core does
    /// not hold, the backing errno of the first change that fails (the ones
    /// before it stay made).
    pub fn setattr(&self, ino: INodeNo, set: &SetAttr) -> OpResult<FileAttr> {
        let SetAttr { fh, mode, uid, gid, size, atime, mtime, killer } = *set;
        let i = self.inode(ino)?;
        let p = sys::proc_path(i.fd().as_raw_fd());
        let check = |r: libc::c_int| sys::check(r).map(drop);
        if let Some(m) = mode {
            // SAFETY: a NUL-terminated /proc path alive for the call.
            check(unsafe { libc::chmod(p.as_ptr(), m & 0o7777) })?;
        }
        if uid.is_some() || gid.is_some() {
            let before = killer.map(|_| sys::fstat(i.fd())).transpose()?;
            let (u, g) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
            // SAFETY: an open O_PATH fd and an empty NUL-terminated path with AT_EMPTY_PATH.
            check(unsafe { libc::fchownat(i.fd().as_raw_fd(), c"".as_ptr(), u, g, libc::AT_EMPTY_PATH) })?;
            // The daemon's chown dropped S_ISUID, and S_ISGID only when
            // group-executable (root is in every group); a caller outside the
            // file's group loses S_ISGID too (chown_common() in fs/open.c).
            if let (Some(who), Some(before)) = (killer.filter(|_| i.fmt != libc::S_IFDIR && mode.is_none()), before) {
                if before.st_mode & libc::S_ISGID != 0 && !who.in_group(before.st_gid) {
                    let now = sys::fstat(i.fd())?.st_mode;
                    chmod_dropped(i.fd().as_raw_fd(), Some(now & 0o7777 & !libc::S_ISGID))?;
                }
            }
        }
        if let Some(sz) = size {
            match fh.map(|f| self.handle(f)) {
                Some(Ok(h)) => sys::ftruncate(h.fd.as_raw_fd(), sz)?,
                // SAFETY: a NUL-terminated /proc path alive for the call.
                _ => check(unsafe { libc::truncate(p.as_ptr(), sz as i64) })?,
            }
            self.refresh_size(i.key, i.fd());
        }
        if atime.is_some() || mtime.is_some() {
            let ts = [timespec(atime), timespec(mtime)];
            // SAFETY: a NUL-terminated path and two timespecs, alive for the call.
            check(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), ts.as_ptr(), 0) })?;
        }
        if mode.is_none() && uid.is_none() && gid.is_none() && size.is_none() && atime.is_none() && mtime.is_none() {
            kill_privs_empty_setattr(&i, killer, self.euid == 0)?;
        }
        let mut st = sys::fstat(i.fd())?;
        if let (Some(who), Some(_), None) = (killer, size, mode) {
            let keep = privs::after_change(st.st_mode, st.st_gid, false, |g| who.in_group(g));
            if keep.is_some() {
                chmod_dropped(i.fd().as_raw_fd(), keep)?;
                st = sys::fstat(i.fd())?;
            }
        }
        Ok(attr_of(&i, &st))
    }

    /// OPENDIR: opens the backing directory for reading.
    pub fn opendir(&self, ino: INodeNo) -> OpResult<u64> {
        let i = self.inode(ino)?;
        let fd = self.reopen_backing(i.fd(), libc::O_RDONLY | libc::O_DIRECTORY, true)?;
        let s = DirStream { fd, pending: sys::DirBuf::new(), next_off: 0 };
        let fh = self.next_fh.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.dirs.write().insert(fh, std::sync::Arc::new(parking_lot::Mutex::new(s)));
        Ok(fh)
    }

    /// READDIR from `offset` (0, or an offset this stream returned): feeds
    /// entries to `add(ino, next_offset, type, name) -> full` until it is full.
    pub fn readdir(
        &self,
        fh: u64,
        offset: i64,
        mut add: impl FnMut(u64, i64, fuser::FileType, &[u8]) -> bool,
    ) -> OpResult<()> {
        let s = self.dirs.read().get(&fh).cloned().ok_or(Errno::EBADF)?;
        let mut s = s.lock();
        if offset != s.next_off {
            sys::lseek(s.fd.as_raw_fd(), offset, libc::SEEK_SET)?;
            s.pending.clear();
            s.next_off = offset;
        }
        let s = &mut *s;
        loop {
            if s.pending.is_empty() && !s.pending.fill(s.fd.as_raw_fd())? {
                return Ok(());
            }
            let Some(e) = s.pending.peek() else {
                return Ok(());
            };
            if add(e.ino, e.next_off, dtype(e.kind), e.name) {
                return Ok(());
            }
            s.next_off = e.next_off;
            s.pending.advance();
        }
    }

    /// FSYNCDIR: `fsync` (`fdatasync` with `datasync`) of the backing
    /// directory OPENDIR opened, so an entry created, renamed or removed in
    /// it is durable once the client's fsync on the directory returns (what
    /// sqlite, git and tmp+rename writers rely on; `fsync(2)`). Errors:
    /// EBADF for a handle that is not open; the backing errno.
    pub fn fsyncdir(&self, fh: u64, datasync: bool) -> OpResult<()> {
        let s = self.dirs.read().get(&fh).cloned().ok_or(Errno::EBADF)?;
        let fd = s.lock().fd.as_raw_fd();
        // The stream stays in the table (and its fd open) while `s` is held.
        sys::fsync(fd, datasync)
    }

    /// RELEASEDIR.
    pub fn releasedir(&self, fh: u64) {
        self.dirs.write().remove(&fh);
    }
}

fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        Some(TimeOrNow::Now) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => libc::timespec { tv_sec: d.as_secs() as i64, tv_nsec: d.subsec_nanos() as i64 },
            Err(e) => {
                let d = e.duration();
                libc::timespec { tv_sec: -(d.as_secs() as i64), tv_nsec: 0 }
            }
        },
    }
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
