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

/// A heap buffer aligned to [`DIO_ALIGN`].
struct Bounce {
    ptr: *mut u8,
    layout: Layout,
}

impl Bounce {
    fn copy_of(data: &[u8]) -> Option<Bounce> {
        let layout = Layout::from_size_align(data.len(), DIO_ALIGN).ok()?;
        // SAFETY: layout has a non-zero size (aligned() refuses 0).
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: ptr holds data.len() bytes, freshly allocated, no overlap.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
        Some(Bounce { ptr, layout })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for layout.size() initialized bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }
}

impl Drop for Bounce {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in copy_of.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Writes `data` at `off` through the O_DIRECT fd `direct` (the caller
/// checked [`aligned`]). Errors: the errno of pwrite (EINVAL when the
/// backing device needs a larger alignment: the caller falls back), ENOMEM
/// when no bounce buffer could be had.
pub fn write(direct: &OwnedFd, data: &[u8], off: u64) -> SysResult<usize> {
    let b = Bounce::copy_of(data).ok_or(fuser::Errno::ENOMEM)?;
    sys::pwrite_full(direct.as_raw_fd(), b.as_slice(), off)
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
        }
    }
}
