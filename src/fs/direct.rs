//! A client's O_DIRECT writes kept O_DIRECT on the backing file, so a KV
//! tier written with O_DIRECT to stay out of memory does not fill the page
//! cache through the daemon. The handle's ordinary fd (O_DIRECT stripped,
//! see [`super::backing_flags`]) serves everything else; a second fd with
//! O_DIRECT serves WRITEs whose offset and length are multiples of
//! [`DIO_ALIGN`], copied into an aligned bounce buffer (the FUSE request
//! buffer is not aligned). Unaligned pieces, and every write where the
//! backing filesystem refuses O_DIRECT (tmpfs: EINVAL at open), go through
//! the ordinary fd; the kernel keeps the two coherent (a direct write
//! invalidates the cached pages it covers).

use std::alloc::{Layout, alloc, dealloc};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use crate::sys::{self, SysResult};

/// Offset and length alignment for a direct write, bytes: the logical block
/// size of every common disk (512 or 4096) divides it.
pub const DIO_ALIGN: usize = 4096;

/// The O_DIRECT twin of a handle's backing fd `fd`, for an open with `flags`
/// (open(2) bits) that asked O_DIRECT and writes. None when it did not ask,
/// when it appends (pwrite on an O_APPEND fd ignores the offset), or when the
/// backing filesystem refuses O_DIRECT.
pub fn twin(fd: BorrowedFd<'_>, flags: i32) -> Option<OwnedFd> {
    let writes = flags & libc::O_ACCMODE != libc::O_RDONLY;
    if flags & libc::O_DIRECT == 0 || !writes || flags & libc::O_APPEND != 0 {
        return None;
    }
    sys::reopen(fd, libc::O_WRONLY | libc::O_DIRECT).ok()
}

/// Whether a write of `len` bytes at `off` may go through the O_DIRECT twin.
pub fn aligned(off: u64, len: usize) -> bool {
    len > 0 && off % DIO_ALIGN as u64 == 0 && len % DIO_ALIGN == 0
}

/// A heap buffer aligned to [`DIO_ALIGN`], `len` bytes long.
struct Bounce {
    ptr: *mut u8,
    layout: Layout,
}

impl Bounce {
    fn new(len: usize) -> Option<Bounce> {
        let layout = Layout::from_size_align(len, DIO_ALIGN).ok()?;
        // SAFETY: layout has a non-zero size (aligned() refuses 0).
        let ptr = unsafe { alloc(layout) };
        (!ptr.is_null()).then_some(Bounce { ptr, layout })
    }

    /// The first `data.len()` bytes (at most the buffer's length) filled
    /// with `data`.
    fn fill(&mut self, data: &[u8]) -> &[u8] {
        let n = data.len().min(self.layout.size());
        // SAFETY: ptr is valid for layout.size() >= n bytes, owned by self
        // (borrowed mutably), and does not overlap data.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr, n);
            std::slice::from_raw_parts(self.ptr, n)
        }
    }
}

impl Drop for Bounce {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in new.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

thread_local! {
    /// Each FUSE thread's bounce buffer, kept between WRITEs and grown to
    /// the largest write it has served (at most max_write, 1 MiB by
    /// default): a fresh allocation per WRITE cost an mmap, a page fault
    /// per 4 KiB page and an munmap each time.
    static BOUNCE: std::cell::RefCell<Option<Bounce>> = const { std::cell::RefCell::new(None) };
}

/// Writes `data` at `off` through the O_DIRECT fd `direct` (the caller
/// checked [`aligned`]), copied through this thread's bounce buffer.
/// Errors: the errno of pwrite (EINVAL when the backing device needs a
/// larger alignment: the caller falls back), ENOMEM when no bounce buffer
/// could be had.
pub fn write(direct: &OwnedFd, data: &[u8], off: u64) -> SysResult<usize> {
    BOUNCE.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| fuser::Errno::ENOMEM)?;
        if slot.as_ref().is_none_or(|b| b.layout.size() < data.len()) {
            *slot = None;
            *slot = Some(Bounce::new(data.len()).ok_or(fuser::Errno::ENOMEM)?);
        }
        let b = slot.as_mut().ok_or(fuser::Errno::ENOMEM)?;
        sys::pwrite_full(direct.as_raw_fd(), b.fill(data), off)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn alignment_rule() {
        assert!(aligned(0, 4096) && aligned(8192, 65536));
        assert!(!aligned(0, 0) && !aligned(512, 4096) && !aligned(0, 100));
    }

    #[test]
    fn twin_only_for_direct_writers_and_writes_land() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let p = dir.path().join("f");
        let f = std::fs::File::create(&p).unwrap();
        let fd: OwnedFd = f.into();
        assert!(twin(fd.as_fd(), libc::O_WRONLY).is_none());
        assert!(twin(fd.as_fd(), libc::O_RDONLY | libc::O_DIRECT).is_none());
        assert!(twin(fd.as_fd(), libc::O_WRONLY | libc::O_DIRECT | libc::O_APPEND).is_none());
        // The filesystem under the repository may refuse O_DIRECT (tmpfs).
        if let Some(d) = twin(fd.as_fd(), libc::O_WRONLY | libc::O_DIRECT) {
            let data = vec![7u8; 8192];
            assert_eq!(write(&d, &data, 4096).unwrap(), 8192);
            assert_eq!(std::fs::read(&p).unwrap()[4096..], data[..]);
            // The thread's bounce buffer is reused: a smaller write after a
            // larger one writes only its own bytes, a larger one grows it.
            assert_eq!(write(&d, &[8u8; 4096], 0).unwrap(), 4096);
            assert_eq!(write(&d, &[9u8; 16384], 12288).unwrap(), 16384);
            let got = std::fs::read(&p).unwrap();
            assert_eq!(got.len(), 12288 + 16384);
            assert!(got[..4096].iter().all(|&b| b == 8) && got[4096..12288].iter().all(|&b| b == 7));
            assert!(got[12288..].iter().all(|&b| b == 9));
        }
    }
}
