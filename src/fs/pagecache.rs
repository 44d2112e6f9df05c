//! The page cache of backing files: what a client asks of the page cache
//! (O_DIRECT, `POSIX_FADV_DONTNEED`) made to reach the backing file where
//! FUSE does not carry it there.
//!
//! What Linux 6.18 does with a client's fadvise(2) on a FUSE file (read in
//! a current mainline tree, functions named below; checked on this 6.18
//! kernel's /proc/kallsyms and by measurement, tests/sh/status/page-cache.sh):
//! - `fadvise64` calls `vfs_fadvise`, which runs the file's own
//!   `f_op->fadvise` if it has one, else `generic_fadvise` on the file's own
//!   mapping, `file->f_mapping` (mm/fadvise.c). FUSE's
//!   `fuse_file_operations` has no `.fadvise` (fs/fuse/file.c; the running
//!   kernel's /proc/kallsyms has `ovl_fadvise` and `xfs_file_fadvise`, no
//!   FUSE one), and the FUSE protocol has no fadvise opcode
//!   (include/uapi/linux/fuse.h): the daemon never hears of it, in any mode.
//!   Overlayfs, by contrast, forwards it to the real file (`ovl_fadvise`).
//! - Passthrough: reads, splice and mmap go to a backing file the kernel
//!   opens per FUSE file with the client's open flags
//!   (`fuse_passthrough_open` → `backing_file_open(&file->f_path,
//!   file->f_flags, ...)`, then `backing_file_read_iter`/`backing_file_mmap`;
//!   fs/fuse/passthrough.c, fs/backing-file.c). So the pages are the backing
//!   inode's, and DONTNEED invalidates the FUSE inode's mapping, which holds
//!   none: nothing is dropped. O_DIRECT is in those flags, so an O_DIRECT
//!   reader's passthrough reads bypass the page cache as natively.
//! - Cached (daemon) path: the client's reads fill the FUSE inode's mapping
//!   and the daemon's pread fills the backing file's, so the pages are
//!   cached twice; DONTNEED drops the FUSE copy only (measured with mincore
//!   on the client's own fd: 32 MiB read, FUSE copy 32 → 0 MiB, backing
//!   copy stays 32 MiB). An O_DIRECT client read
//!   is a READ request here (`fuse_direct_IO`) whose `fuse_read_in.flags`
//!   carry the open flags O_DIRECT included (`fuse_read_args_fill`), served
//!   by the daemon's buffered fd: it would fill the backing file's cache.
//!
//! What the daemon does about it:
//! - A READ whose flags carry O_DIRECT is read without readahead
//!   (POSIX_FADV_RANDOM on the handle's fd) and the range it read dropped
//!   from the backing file's page cache (POSIX_FADV_DONTNEED), always: the
//!   page cache does not grow, as natively.
//! - With `drop_cache=release` (off by default: the backing file's pages
//!   stay cached after a close, as a plain directory's do): every READ drops
//!   its range likewise (the FUSE inode's mapping then holds the only copy,
//!   which a client's DONTNEED does reach, before its close: measured 32 → 0
//!   MiB, backing 0), and every RELEASE of a handle
//!   opened for reading drops the backing file's cached pages, so a reader
//!   that drops what it read (a KV tier keeping memory for the engine)
//!   leaves nothing cached once it closes, under passthrough too. A RELEASE
//!   is asynchronous to the client's close(2), so the drop lands shortly
//!   after the close returns.
//!
//! Both drop clean pages whoever cached them: a buffered reader of the same
//! range reads it again from the disk (natively an O_DIRECT read leaves
//! other readers' pages alone). Dirty pages are only queued for writeback
//! (mm/fadvise.c), never lost.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use super::Core;
use super::handles::Handle;
use crate::config::ConfigError;
use crate::sys::{self, SysResult};

impl Core {
    /// Sets `drop_cache=release` (`on`) or `off`; before the core is shared.
    pub(super) fn set_drop_cache(&mut self, on: bool) {
        self.drop_cache = on;
    }

    /// Reads up to `buf.len()` bytes at `off` of handle `h`'s backing file for
    /// a READ whose open flags (open(2) bits) are `flags`, then drops the range
    /// read from the backing file's page cache when the client opened O_DIRECT
    /// or `drop_cache=release` is set. Returns the bytes read (fewer at end of
    /// file). Errors: the errno of pread(2).
    pub(super) fn read_backing(&self, h: &Handle, buf: &mut [u8], off: u64, flags: i32) -> SysResult<usize> {
        let direct = flags & libc::O_DIRECT != 0;
        if direct {
            // No readahead (FMODE_RANDOM stays on this handle's fd, which
            // serves only this O_DIRECT open): pages read ahead, perhaps still
            // being read in (locked) when the drop below runs, would stay.
            advise(h.fd.as_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        }
        let n = sys::pread_full(h.fd.as_raw_fd(), buf, off)?;
        if n > 0 && (self.drop_cache || direct) {
            drop_range(h.fd.as_fd(), off, n as u64);
        }
        Ok(n)
    }

    /// RELEASE of handle `h`: with `drop_cache=release`, a handle opened for
    /// reading only drops its backing file's cached pages (the whole file).
    pub(super) fn drop_released(&self, h: &Handle) {
        if self.drop_cache && reads_only(h.fd.as_fd()) {
            drop_range(h.fd.as_fd(), 0, 0);
        }
    }
}

/// Whether `fd` was opened O_RDONLY (fcntl F_GETFL; false if that fails).
fn reads_only(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: F_GETFL takes no argument and only reads the fd's flags.
    let fl = sys::check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) });
    fl.is_ok_and(|fl| fl & libc::O_ACCMODE == libc::O_RDONLY)
}

/// posix_fadvise(POSIX_FADV_DONTNEED) of `len` bytes at `off` of `fd`'s file
/// (`len` 0: to the end of the file): its clean cached pages wholly inside
/// the range are dropped, dirty ones queued for writeback. Errors are
/// ignored (the advice is best effort, as the client's own would be).
pub fn drop_range(fd: BorrowedFd<'_>, off: u64, len: u64) {
    advise(fd, off, len, libc::POSIX_FADV_DONTNEED);
}

/// posix_fadvise(2) `advice` for `len` bytes at `off` of `fd`'s file (`len`
/// 0: to the end); best effort, errors ignored.
fn advise(fd: BorrowedFd<'_>, off: u64, len: u64, advice: i32) {
    sys::tick();
    let (off, len) = (off.min(i64::MAX as u64) as i64, len.min(i64::MAX as u64) as i64);
    // SAFETY: plain syscall on a valid fd; it returns an errno, never -1.
    let _ = unsafe { libc::posix_fadvise(fd.as_raw_fd(), off, len, advice) };
}

/// Parses `drop_cache`: `off` (false) or `release` (true). Errors: any other
/// value (one line naming the key).
pub fn parse_drop_cache(v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "off" => Ok(false),
        "release" => Ok(true),
        _ => crate::config::err(format!("drop_cache: '{v}' is not off or release; e.g. drop_cache=release")),
    }
}

/// Resident pages of `fd`'s file (mmap + mincore), for tests.
#[cfg(test)]
fn resident(fd: BorrowedFd<'_>, len: usize) -> usize {
    // SAFETY: a read-only shared mapping of a file of at least `len` bytes,
    // unmapped before returning; mincore writes one byte per page into `v`.
    unsafe {
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd.as_raw_fd(), 0);
        assert_ne!(p, libc::MAP_FAILED);
        let mut v = vec![0u8; len.div_ceil(4096)];
        assert_eq!(libc::mincore(p, len, v.as_mut_ptr()), 0);
        libc::munmap(p, len);
        v.iter().filter(|&&b| b & 1 != 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ROOT, core, store};
    use std::io::Write;

    #[test]
    fn drop_cache_values() {
        assert!(!parse_drop_cache("off").unwrap() && parse_drop_cache("release").unwrap());
        assert!(parse_drop_cache("on").unwrap_err().0.contains("drop_cache"));
    }

    #[test]
    fn dontneed_drops_the_clean_pages_of_the_range() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let p = dir.path().join("f");
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(&vec![1u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        let r = std::fs::File::open(&p).unwrap();
        assert!(reads_only(r.as_fd()) && !reads_only(f.as_fd()));
        assert_eq!(std::fs::read(&p).unwrap().len(), 1 << 20);
        // A tmpfs under the repository keeps its pages (they are the data).
        if resident(r.as_fd(), 1 << 20) == 256 {
            drop_range(r.as_fd(), 0, 1 << 19);
            let left = resident(r.as_fd(), 1 << 20);
            if left < 256 {
                assert_eq!(left, 128, "the first half dropped, the second kept");
                drop_range(r.as_fd(), 0, 0);
                assert_eq!(resident(r.as_fd(), 1 << 20), 0);
            }
        }
    }

    #[test]
    fn direct_reads_and_read_only_releases_leave_no_page_with_drop_cache() {
        let d = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut c = core(d.path(), 1 << 30);
        let data = vec![5u8; 1 << 20];
        store(&c, "k.bin", &data);
        let f = std::fs::File::open(d.path().join("k.bin")).unwrap();
        f.sync_all().unwrap();
        drop_range(f.as_fd(), 0, 0);
        if resident(f.as_fd(), 1 << 20) != 0 {
            return; // a filesystem whose pages DONTNEED cannot drop (tmpfs)
        }
        let ino = c.lookup(ROOT, std::ffi::OsStr::new("k.bin")).unwrap().ino;
        let read = |c: &Core, flags: i32| {
            let fh = c.open(ino, flags).unwrap().fh;
            assert_eq!(c.read(fh, 0, 1 << 20, flags).unwrap(), data);
            let after_read = resident(f.as_fd(), 1 << 20);
            c.release(fh);
            (after_read, resident(f.as_fd(), 1 << 20))
        };
        assert_eq!(read(&c, libc::O_RDONLY | libc::O_DIRECT), (0, 0), "an O_DIRECT READ caches nothing");
        assert_eq!(read(&c, libc::O_RDONLY), (256, 256), "drop_cache=off: a buffered read stays cached");
        drop_range(f.as_fd(), 0, 0);
        c.set_drop_cache(true);
        assert_eq!(read(&c, libc::O_RDONLY), (0, 0), "drop_cache=release: the READ keeps no copy");
        assert_eq!(std::fs::read(d.path().join("k.bin")).unwrap(), data);
        assert_eq!(resident(f.as_fd(), 1 << 20), 256);
        let fh = c.open(ino, libc::O_RDONLY).unwrap().fh;
        c.release(fh);
        assert_eq!(resident(f.as_fd(), 1 << 20), 0, "drop_cache=release: a read-only RELEASE drops the file's pages");
    }
}
