//! Warming the kernel's entries after a mount: an engine
//! restarted over a kept KV tier first reloads the blocks it used last, and on
//! a fresh mount each of those loads costs a LOOKUP round trip per path
//! component (three for a vLLM-style `h[0:3]/h[3:5]/h.bin`) before its OPEN.
//! Once the start-up index is complete, this thread resolves the
//! `warm_entries` most recently used block files through the mount itself
//! (an `O_PATH` open: LOOKUPs only, no OPEN; the daemon knows its own
//! LOOKUPs by the thread id in their header and does not count them as uses,
//! so the LRU order and the mtimes stay as they were), so the
//! kernel holds their entries for `attr_timeout` and the engine's first
//! loads cost GETATTR, OPEN and RELEASE: the block's own attributes are
//! answered valid for 0 s (`crate::fuse`), so its first stat, access or open
//! still reaches the daemon and counts as a use, as a LOOKUP would.
//!
//! It resolves them in a private copy of the mount namespace
//! (`unshare(CLONE_NEWNS)` for this thread alone, propagation made private),
//! so its references hold the copy of the mount and never the mount itself:
//! an `umount` of the mountpoint is never refused as busy because of it. The
//! copy keeps the filesystem alive until this thread ends (at most
//! `warm_entries` lookups), so the daemon exits that much later after an
//! early umount. Needs CAP_SYS_ADMIN (the daemon runs as root); without it
//! nothing is warmed.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::fs::Core;
use crate::sys;

/// `statfs.f_type` of a FUSE mount (`include/uapi/linux/magic.h`).
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Resolves the `count` most recently used block files of `core` through
/// `mountpoint` once the start-up index is complete (0: does nothing).
/// Returns the number of entries resolved. Stops early when `stop` returns
/// true, or at the first error that is not ENOENT (the mount went away).
pub fn run(core: Arc<Core>, mountpoint: &Path, count: usize, stop: impl Fn() -> bool) -> usize {
    if count == 0 {
        return 0;
    }
    while !core.wait_indexed_for(Duration::from_secs(1)) {
        if stop() {
            return 0;
        }
    }
    let paths = core.accounts().recent_block_paths(count);
    if paths.is_empty() {
        return 0;
    }
    let t0 = Instant::now();
    let root = match private_view(mountpoint) {
        Ok(fd) => fd,
        Err(why) => {
            log::info!("not warming the kernel's entries of recent block files: {why}");
            return 0;
        }
    };
    // Its LOOKUPs reach the daemon with this thread's id: they are not uses
    // of the blocks (the LRU order and the mtimes stay as they were).
    let tid = sys::tid();
    core.warm_tid().store(tid, Ordering::Relaxed);
    let mut warmed = 0;
    for p in &paths {
        if stop() {
            break;
        }
        match sys::open_beneath(root.as_fd(), p, libc::O_PATH) {
            Ok(_) => warmed += 1,
            Err(e) if e.code() == libc::ENOENT || e.code() == libc::ENOTDIR || e.code() == libc::ELOOP => {}
            Err(_) => break,
        }
    }
    core.warm_tid().store(0, Ordering::Relaxed);
    log::info!(
        "warmed the kernel's entries of {warmed} most recently used block files in {:.3}s",
        t0.elapsed().as_secs_f64()
    );
    warmed
}

/// Moves this thread into a private copy of the mount namespace and opens
/// the copy of `mountpoint` (`O_PATH`), checked to be a FUSE mount.
/// Errors: a one-line reason.
fn private_view(mountpoint: &Path) -> Result<OwnedFd, String> {
    let os = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: plain syscalls on this thread's own namespace and fs state.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(os("unshare(CLONE_NEWNS)"));
    }
    let slash = c"/";
    let flags = libc::MS_REC | libc::MS_PRIVATE;
    // SAFETY: a NUL-terminated target and null source, type and data, as MS_PRIVATE allows.
    if unsafe { libc::mount(std::ptr::null(), slash.as_ptr(), std::ptr::null(), flags, std::ptr::null()) } != 0 {
        return Err(os("making the private mount namespace private"));
    }
    let c = CString::new(mountpoint.as_os_str().as_bytes()).map_err(|_| "mountpoint has a NUL byte".to_string())?;
    let fd = sys::open(&c, libc::O_PATH | libc::O_DIRECTORY).map_err(|_| os("open mountpoint"))?;
    let sfs = sys::fstatfs(fd.as_fd()).map_err(|_| os("fstatfs mountpoint"))?;
    if sfs.f_type as i64 != FUSE_SUPER_MAGIC {
        return Err("the mountpoint is not a FUSE mount in the copied namespace".into());
    }
    Ok(fd)
}
