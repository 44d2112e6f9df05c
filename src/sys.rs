//! Thin safe wrappers over the Linux syscalls the passthrough uses. Every path
//! here is one name relative to a held directory fd (never containing `/`), or
//! a path resolved with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so no
//! symlink inside BACKING is ever followed on a client's behalf.
//! Errors are the raw errno of the syscall, as `fuser::Errno`.
//! Process-wide calls (the daemon's ids, start-up opens, flock, fstatfs) are
//! in `process`, re-exported here.

use std::ffi::{CStr, CString, OsStr};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use fuser::Errno;

mod process;
pub mod xattr;
pub use process::{access, egid, euid, flock, fstatfs, hostname, open, ppid, statvfs, tid, uid};

/// Result of a syscall wrapper.
pub type SysResult<T> = Result<T, Errno>;

fn last_errno() -> Errno {
    Errno::from(std::io::Error::last_os_error())
}

/// Syscalls the daemon issued on BACKING since it started (see [`tick`]).
static SYSCALLS: AtomicU64 = AtomicU64::new(0);

/// Counts one syscall issued. Every wrapper here calls it once per syscall
/// (through `check` and `check_size`, or directly); code outside this
/// module that calls libc itself goes through [`check`]. Not counted: close(2)
/// of dropped fds, the FUSE device's own reads and writes, start-up.
pub fn tick() {
    SYSCALLS.fetch_add(1, Relaxed);
}

/// Syscalls counted by [`tick`] since the daemon started (status `syscalls`).
pub fn syscalls() -> u64 {
    SYSCALLS.load(Relaxed)
}

/// Counts a syscall and turns its `int` result into the errno on failure.
pub fn check(ret: libc::c_int) -> SysResult<libc::c_int> {
    tick();
    if ret < 0 { Err(last_errno()) } else { Ok(ret) }
}

fn check_size(ret: libc::ssize_t) -> SysResult<usize> {
    tick();
    if ret < 0 { Err(last_errno()) } else { Ok(ret as usize) }
}

/// A name for a `*at` call. Errors: EINVAL for a name with a NUL byte or a
/// `/`, ENOENT-free "." and ".." are refused with EPERM so no request can
/// climb out of BACKING.
pub fn cname(name: &OsStr) -> SysResult<CString> {
    let bytes = name.as_bytes();
    if bytes.contains(&b'/') {
        return Err(Errno::EINVAL);
    }
    if bytes == b"." || bytes == b".." {
        return Err(Errno::EPERM);
    }
    CString::new(bytes).map_err(|_| Errno::EINVAL)
}

/// `/proc/self/fd/N`: opening it reopens exactly the inode behind `fd` (the
/// kernel follows the magic link to the object, not a path in BACKING).
pub fn proc_path(fd: RawFd) -> CString {
    // A formatted integer never contains a NUL byte.
    CString::new(format!("/proc/self/fd/{fd}")).unwrap_or_default()
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`.
pub fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32, mode: u32) -> SysResult<OwnedFd> {
    // SAFETY: a NUL-terminated name and a borrowed open dir fd, alive for the call.
    let fd = check(unsafe {
        libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode)
    })?;
    // SAFETY: openat returned a new fd (checked) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `O_PATH` handle on `name` in `dir` (not following a final symlink).
pub fn open_path(dir: BorrowedFd<'_>, name: &CStr) -> SysResult<OwnedFd> {
    openat(dir, name, libc::O_PATH, 0)
}

/// Reopens the object behind an `O_PATH` fd with `flags` (through /proc/self/fd).
pub fn reopen(fd: BorrowedFd<'_>, flags: i32) -> SysResult<OwnedFd> {
    let p = proc_path(fd.as_raw_fd());
    // SAFETY: a NUL-terminated /proc path alive for the call.
    let fd = check(unsafe { libc::open(p.as_ptr(), flags | libc::O_CLOEXEC, 0) })?;
    // SAFETY: open returned a new fd (checked) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `rel` (relative to `root`, may have several components) with
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`:
/// ELOOP/EXDEV if any component is a symlink or escapes `root`.
pub fn open_beneath(root: BorrowedFd<'_>, rel: &Path, flags: i32) -> SysResult<OwnedFd> {
    let path = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: open_how is plain data; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    tick();
    // SAFETY: a NUL-terminated path and an open_how of the size passed, alive for the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if ret < 0 {
        return Err(last_errno());
    }
    // SAFETY: openat2 returned a new fd (checked) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// `fstat(fd)` (works on `O_PATH` fds).
pub fn fstat(fd: BorrowedFd<'_>) -> SysResult<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a borrowed open fd and a writable stat alive for the call.
    check(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded (checked), so it filled `st`.
    Ok(unsafe { st.assume_init() })
}

/// `statx(fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, mask)`: the fields in
/// `mask` of the object behind `fd`, asked of the filesystem itself, which
/// makes a FUSE or network filesystem client refresh its cached attributes
/// (statx(2); a distributed filesystem's client caches them for up to its
/// attribute timeout, JuiceFS 1 s, and another node's change is not seen
/// until then). Errors: the errno of statx.
fn statx_synced(fd: BorrowedFd<'_>, mask: u32) -> SysResult<libc::statx> {
    let mut stx = MaybeUninit::<libc::statx>::uninit();
    // SAFETY: a borrowed open fd, an empty NUL-terminated path and a writable statx.
    check(unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_STATX_FORCE_SYNC,
            mask,
            stx.as_mut_ptr(),
        )
    })?;
    // SAFETY: statx succeeded (checked), so it filled `stx`.
    Ok(unsafe { stx.assume_init() })
}

/// The link count of the object behind `fd`, asked of the filesystem itself
/// (see `statx_synced`: another node's unlink is seen at once). Errors: the
/// errno of statx.
pub fn nlink_synced(fd: BorrowedFd<'_>) -> SysResult<u32> {
    Ok(statx_synced(fd, libc::STATX_NLINK)?.stx_nlink)
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub fn fstatat(dir: BorrowedFd<'_>, name: &CStr) -> SysResult<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a borrowed open dir fd, a NUL-terminated name and a writable stat.
    check(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) })?;
    // SAFETY: fstatat succeeded (checked), so it filled `st`.
    Ok(unsafe { st.assume_init() })
}

/// `unlinkat(dir, name, flags)` (`AT_REMOVEDIR` for rmdir).
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> SysResult<()> {
    // SAFETY: a borrowed open dir fd and a NUL-terminated name.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) }).map(drop)
}

/// `mkdirat(dir, name, mode)`.
pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> SysResult<()> {
    // SAFETY: a borrowed open dir fd and a NUL-terminated name.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(drop)
}

/// `mknodat(dir, name, mode, rdev)`.
pub fn mknodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32, rdev: u64) -> SysResult<()> {
    // SAFETY: a borrowed open dir fd and a NUL-terminated name.
    check(unsafe { libc::mknodat(dir.as_raw_fd(), name.as_ptr(), mode, rdev) }).map(drop)
}

/// `symlinkat(target, dir, name)`.
pub fn symlinkat(target: &Path, dir: BorrowedFd<'_>, name: &CStr) -> SysResult<()> {
    let t = CString::new(target.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: a NUL-terminated target and name and a borrowed open dir fd.
    check(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }).map(drop)
}

/// `linkat(fd, "", newdir, newname, AT_EMPTY_PATH)`: a new name for the object
/// behind an `O_PATH` fd (needs CAP_DAC_READ_SEARCH, else falls back to /proc).
pub fn link_fd(fd: BorrowedFd<'_>, newdir: BorrowedFd<'_>, newname: &CStr) -> SysResult<()> {
    let empty = c"";
    tick();
    // SAFETY: borrowed open fds, an empty and a NUL-terminated name.
    let r = unsafe {
        libc::linkat(fd.as_raw_fd(), empty.as_ptr(), newdir.as_raw_fd(), newname.as_ptr(), libc::AT_EMPTY_PATH)
    };
    if r == 0 {
        return Ok(());
    }
    let p = proc_path(fd.as_raw_fd());
    // SAFETY: a NUL-terminated /proc path and name and a borrowed open dir fd.
    check(unsafe {
        libc::linkat(libc::AT_FDCWD, p.as_ptr(), newdir.as_raw_fd(), newname.as_ptr(), libc::AT_SYMLINK_FOLLOW)
    })
    .map(drop)
}

/// `renameat2(olddir, old, newdir, new, flags)`.
pub fn renameat2(olddir: BorrowedFd<'_>, old: &CStr, newdir: BorrowedFd<'_>, new: &CStr, flags: u32) -> SysResult<()> {
    // SAFETY: borrowed open dir fds and NUL-terminated names.
    check(unsafe { libc::renameat2(olddir.as_raw_fd(), old.as_ptr(), newdir.as_raw_fd(), new.as_ptr(), flags) })
        .map(drop)
}

/// `readlinkat(fd, "")` on an `O_PATH` fd of a symlink.
pub fn readlink_fd(fd: BorrowedFd<'_>) -> SysResult<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: a borrowed open fd, an empty NUL-terminated path; the pointer and length describe `buf`.
    let n = check_size(unsafe { libc::readlinkat(fd.as_raw_fd(), c"".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })?;
    buf.truncate(n);
    Ok(buf)
}

/// The absolute path the kernel currently gives the object behind `fd`
/// (`readlink /proc/self/fd/N`), or None if it was deleted.
pub fn fd_path(fd: BorrowedFd<'_>) -> Option<std::path::PathBuf> {
    tick();
    let p = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    if p.as_os_str().as_bytes().ends_with(b" (deleted)") {
        return None;
    }
    Some(p)
}

/// The absolute path the object behind `fd` had when it was deleted (the
/// kernel's `/proc/self/fd/N` link ends with " (deleted)" then), or None if
/// it was not deleted.
pub fn deleted_path(fd: BorrowedFd<'_>) -> Option<std::path::PathBuf> {
    let p = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let b = p.as_os_str().as_bytes().strip_suffix(b" (deleted)")?;
    Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b)))
}

/// `pread(fd, buf, off)`, retried until `buf` is full or EOF.
pub fn pread_full(fd: RawFd, buf: &mut [u8], off: u64) -> SysResult<usize> {
    let mut done = 0;
    while done < buf.len() {
        let n =
            // SAFETY: the pointer and length describe the unfilled tail of `buf`.
            unsafe { libc::pread(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done, (off + done as u64) as i64) };
        match check_size(n) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e == Errno::EINTR => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// `pwrite(fd, buf, off)`, retried until all of `buf` is written.
pub fn pwrite_full(fd: RawFd, buf: &[u8], off: u64) -> SysResult<usize> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length describe the unwritten tail of `buf`.
        let n = unsafe { libc::pwrite(fd, buf[done..].as_ptr().cast(), buf.len() - done, (off + done as u64) as i64) };
        match check_size(n) {
            Ok(n) => done += n,
            Err(e) if e == Errno::EINTR => continue,
            Err(e) if done > 0 => {
                log::debug!("short write after {done} bytes: {e:?}");
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// `fallocate(fd, mode, off, len)`.
pub fn fallocate(fd: RawFd, mode: i32, off: u64, len: u64) -> SysResult<()> {
    // SAFETY: plain integers; an invalid fd is an EBADF, not undefined behaviour.
    check(unsafe { libc::fallocate(fd, mode, off as i64, len as i64) }).map(drop)
}

/// `fsync` or `fdatasync`.
pub fn fsync(fd: RawFd, datasync: bool) -> SysResult<()> {
    // SAFETY: plain integers; an invalid fd is an EBADF, not undefined behaviour.
    check(unsafe { if datasync { libc::fdatasync(fd) } else { libc::fsync(fd) } }).map(drop)
}

/// `lseek(fd, off, whence)`.
pub fn lseek(fd: RawFd, off: i64, whence: i32) -> SysResult<i64> {
    tick();
    // SAFETY: plain integers; an invalid fd is an EBADF, not undefined behaviour.
    let r = unsafe { libc::lseek(fd, off, whence) };
    if r < 0 { Err(last_errno()) } else { Ok(r) }
}

/// `ftruncate(fd, size)`.
pub fn ftruncate(fd: RawFd, size: u64) -> SysResult<()> {
    // SAFETY: plain integers; an invalid fd is an EBADF, not undefined behaviour.
    check(unsafe { libc::ftruncate(fd, size as i64) }).map(drop)
}

/// `fstatvfs(fd)`.
pub fn fstatvfs(fd: BorrowedFd<'_>) -> SysResult<libc::statvfs> {
    let mut st = MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a borrowed open fd and a writable statvfs alive for the call.
    check(unsafe { libc::fstatvfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstatvfs succeeded (checked), so it filled `st`.
    Ok(unsafe { st.assume_init() })
}

/// Bytes an unprivileged write can still get on the filesystem `v`
/// describes: `f_bavail × f_frsize` (df's Avail).
pub fn avail_bytes(v: &libc::statvfs) -> u64 {
    (v.f_bavail as u64).saturating_mul((v.f_frsize as u64).max(1))
}

/// One directory entry from [`getdents`].
pub struct DirEnt {
    /// Backing inode number.
    pub ino: u64,
    /// Opaque offset of the next entry (for `lseek`).
    pub next_off: i64,
    /// `DT_*` type.
    pub kind: u8,
    /// Name bytes.
    pub name: Vec<u8>,
}

/// One `getdents64` call on `fd` into a 64 KiB buffer; empty at end of directory.
pub fn getdents(fd: RawFd) -> SysResult<Vec<DirEnt>> {
    let mut b = DirBuf::new();
    let mut out = Vec::new();
    if b.fill(fd)? {
        while let Some(e) = b.peek() {
            out.push(DirEnt { ino: e.ino, next_off: e.next_off, kind: e.kind, name: e.name.to_vec() });
            b.advance();
        }
    }
    Ok(out)
}

/// One entry inside a [`DirBuf`], its name borrowed from the buffer.
pub struct DirEntRef<'a> {
    /// Backing inode number.
    pub ino: u64,
    /// Opaque offset of the next entry (for `lseek`).
    pub next_off: i64,
    /// `DT_*` type.
    pub kind: u8,
    /// Name bytes (no NUL).
    pub name: &'a [u8],
}

/// A `getdents64` buffer of 64 KiB kept across calls, walked in place: a
/// directory stream read this way allocates nothing per entry (READDIR of
/// a large flat directory, `crate::fs` data path).
pub struct DirBuf {
    buf: Vec<u8>,
    len: usize,
    pos: usize,
}

impl Default for DirBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl DirBuf {
    /// An empty buffer.
    pub fn new() -> Self {
        DirBuf { buf: vec![0u8; 64 * 1024], len: 0, pos: 0 }
    }

    /// Drops the entries not yet walked (after an lseek of the directory).
    pub fn clear(&mut self) {
        self.len = 0;
        self.pos = 0;
    }

    /// Whether every entry of the last fill was walked.
    pub fn is_empty(&self) -> bool {
        self.peek().is_none()
    }

    /// Replaces the contents with one `getdents64` call on `fd`. Returns
    /// false at the end of the directory. Errors: the errno of getdents64.
    pub fn fill(&mut self, fd: RawFd) -> SysResult<bool> {
        self.clear();
        tick();
        // SAFETY: the pointer and length describe `self.buf`, writable for the call.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, self.buf.as_mut_ptr(), self.buf.len()) };
        if n < 0 {
            return Err(last_errno());
        }
        self.len = n as usize;
        Ok(self.len > 0)
    }

    /// The entry at the cursor, if any.
    pub fn peek(&self) -> Option<DirEntRef<'_>> {
        let (buf, pos) = (&self.buf[..self.len], self.pos);
        if pos + 19 > buf.len() {
            return None;
        }
        let reclen = u16::from_ne_bytes([buf[pos + 16], buf[pos + 17]]) as usize;
        if reclen < 19 || pos + reclen > buf.len() {
            return None;
        }
        let name_area = &buf[pos + 19..pos + reclen];
        let len = name_area.iter().position(|&b| b == 0).unwrap_or(name_area.len());
        Some(DirEntRef {
            ino: u64::from_ne_bytes(buf[pos..pos + 8].try_into().unwrap_or_default()),
            next_off: i64::from_ne_bytes(buf[pos + 8..pos + 16].try_into().unwrap_or_default()),
            kind: buf[pos + 18],
            name: &name_area[..len],
        })
    }

    /// Moves the cursor past the entry [`DirBuf::peek`] returns.
    pub fn advance(&mut self) {
        if self.pos + 19 <= self.len {
            let reclen = u16::from_ne_bytes([self.buf[self.pos + 16], self.buf[self.pos + 17]]) as usize;
            self.pos = if reclen < 19 { self.len } else { (self.pos + reclen).min(self.len) };
        }
    }
}

/// Bytes an object occupies (`st_blocks * 512`), as du counts it.
pub fn allocated(st: &libc::stat) -> u64 {
    (st.st_blocks as u64) * 512
}

/// Raises RLIMIT_NOFILE as far as allowed: one `O_PATH` fd is held per inode
/// the kernel has looked up, plus one per open handle. Root may lift the hard
/// limit up to `fs.nr_open`; others get their hard limit. Returns the new soft limit.
pub fn raise_nofile() -> u64 {
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(1 << 20);
    let mut lim = MaybeUninit::<libc::rlimit>::uninit();
    // SAFETY: `lim` is filled by getrlimit before assume_init (a failure returns first); the rlimits passed are valid locals.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, lim.as_mut_ptr()) != 0 {
            return 0;
        }
        let mut lim = lim.assume_init();
        let want = libc::rlimit { rlim_cur: nr_open, rlim_max: nr_open.max(lim.rlim_max) };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
            return want.rlim_cur;
        }
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        lim.rlim_cur
    }
}

/// xattr calls on the object behind an fd, through /proc/self/fd (works for
/// `O_PATH` fds of files and directories).
/// Largest file handle the kernel hands out (MAX_HANDLE_SZ, include/linux/exportfs.h).
const MAX_HANDLE_SZ: usize = 128;

#[repr(C)]
struct HandleBuf {
    bytes: libc::c_uint,
    kind: libc::c_int,
    data: [u8; MAX_HANDLE_SZ],
}

/// The file handle of the object behind `fd` (`name_to_handle_at` with
/// AT_EMPTY_PATH), as `kind` (4 bytes, native endian) followed by the handle
/// bytes. Errors: EOPNOTSUPP where the filesystem has none, EOVERFLOW.
pub fn file_handle(fd: BorrowedFd<'_>) -> SysResult<Box<[u8]>> {
    let mut h = HandleBuf { bytes: MAX_HANDLE_SZ as u32, kind: 0, data: [0; MAX_HANDLE_SZ] };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: a borrowed open fd, an empty NUL-terminated path, a HandleBuf whose `bytes` is its data's size, and a writable mount id.
    check(unsafe {
        libc::name_to_handle_at(
            fd.as_raw_fd(),
            c"".as_ptr(),
            (&mut h as *mut HandleBuf).cast(),
            &mut mount_id,
            libc::AT_EMPTY_PATH,
        )
    })?;
    let n = (h.bytes as usize).min(MAX_HANDLE_SZ);
    let mut out = Vec::with_capacity(4 + n);
    out.extend_from_slice(&h.kind.to_ne_bytes());
    out.extend_from_slice(&h.data[..n]);
    Ok(out.into_boxed_slice())
}

/// Opens a handle from [`file_handle`] as `O_PATH` (`open_by_handle_at`, with
/// `mount_fd` any fd on the same filesystem). Needs CAP_DAC_READ_SEARCH.
/// Errors: ESTALE when the object no longer exists, EPERM without the capability.
pub fn open_handle(mount_fd: BorrowedFd<'_>, handle: &[u8]) -> SysResult<OwnedFd> {
    let (kind, data) = handle.split_at_checked(4).ok_or(Errno::EINVAL)?;
    if data.len() > MAX_HANDLE_SZ {
        return Err(Errno::EINVAL);
    }
    let mut h = HandleBuf { bytes: data.len() as u32, kind: 0, data: [0; MAX_HANDLE_SZ] };
    h.kind = libc::c_int::from_ne_bytes(kind.try_into().map_err(|_| Errno::EINVAL)?);
    h.data[..data.len()].copy_from_slice(data);
    // SAFETY: a borrowed open fd and a HandleBuf whose `bytes` fits its data.
    let fd = check(unsafe {
        libc::open_by_handle_at(
            mount_fd.as_raw_fd(),
            (&mut h as *mut HandleBuf).cast(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: open_by_handle_at returned a new fd (checked) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Size in bytes and mtime in Unix seconds of the file open at `fd`, asked of
/// the filesystem itself (`statx` with `AT_STATX_FORCE_SYNC`), not a network
/// or FUSE client's attribute cache (JuiceFS keeps one for 1 s).
pub fn size_synced(fd: BorrowedFd<'_>) -> SysResult<(u64, u64)> {
    let stx = statx_synced(fd, libc::STATX_SIZE | libc::STATX_MTIME)?;
    Ok((stx.stx_size, u64::try_from(stx.stx_mtime.tv_sec).unwrap_or(0)))
}
