//! The toy filesystem the spikes serve (tests/handover_spike.rs,
//! tests/crash_spike.rs): one file, `f`, read from a backing file through a
//! handle table; entries, attributes and reads uncached (TTL 0,
//! FOPEN_DIRECT_IO), so every client call reaches the daemon.
#![allow(dead_code)]

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use boundfs::fuse::handover::Negotiated;
use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyEmpty, ReplyEntry, ReplyOpen, Request, SessionACL,
};

pub const LEN: usize = 256 * 1024;
const FILE_INO: u64 = 2;

pub fn content() -> Vec<u8> {
    (0..LEN).map(|i| (i * 7 + i / 4096) as u8).collect()
}

pub struct Toy {
    /// fh → backing fd (the handle table).
    pub handles: Arc<Mutex<HashMap<u64, File>>>,
    pub next_fh: Arc<AtomicU64>,
    pub backing: PathBuf,
    pub served: Arc<AtomicU64>,
    pub negotiated: Arc<Mutex<Negotiated>>,
    /// A READ on an fh not in the table reopens the backing file (what a
    /// daemon restarted after a crash can do for a handle it never saw).
    pub reopen_unknown: Arc<AtomicBool>,
    /// Microseconds each READ takes (more requests in flight at a crash).
    pub read_delay_us: Arc<AtomicU64>,
}

/// Counts a request served (the gate in front of the toy is `Gated`'s).
macro_rules! enter {
    ($self:ident, $reply:ident) => {
        $self.served.fetch_add(1, SeqCst)
    };
}

pub fn attr(ino: u64) -> FileAttr {
    let dir = ino == 1;
    FileAttr {
        ino: INodeNo(ino),
        size: if dir { 0 } else { LEN as u64 },
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: if dir { FileType::Directory } else { FileType::RegularFile },
        perm: if dir { 0o755 } else { 0o644 },
        nlink: if dir { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Filesystem for Toy {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // The toy asks for nothing beyond fuser's own flags.
        *self.negotiated.lock().unwrap() = Negotiated::of(config, InitFlags::empty());
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _g = enter!(self, reply);
        if parent.0 == 1 && name.as_bytes() == b"f" {
            reply.entry(&Duration::ZERO, &attr(FILE_INO), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _g = enter!(self, reply);
        reply.attr(&Duration::ZERO, &attr(ino.0));
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _g = enter!(self, reply);
        let fh = self.next_fh.fetch_add(1, SeqCst);
        self.handles.lock().unwrap().insert(fh, File::open(&self.backing).unwrap());
        reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
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
        let _g = enter!(self, reply);
        std::thread::sleep(Duration::from_micros(self.read_delay_us.load(SeqCst)));
        let mut handles = self.handles.lock().unwrap();
        if !handles.contains_key(&fh.0) && self.reopen_unknown.load(SeqCst) {
            handles.insert(fh.0, File::open(&self.backing).unwrap());
        }
        let Some(f) = handles.get(&fh.0) else { return reply.error(Errno::EBADF) };
        let mut buf = vec![0; size as usize];
        let n = f.read_at(&mut buf, offset).unwrap();
        reply.data(&buf[..n]);
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
        let _g = enter!(self, reply);
        self.handles.lock().unwrap().remove(&fh.0);
        reply.ok();
    }
}

pub fn cstr(p: &Path) -> std::ffi::CString {
    std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap()
}

pub fn check(r: libc::c_int, what: &str) {
    assert!(r >= 0, "{what}: {}", std::io::Error::last_os_error());
}

/// mount(2) of a FUSE file system at `mnt`; returns the /dev/fuse fd.
pub fn mount(mnt: &Path) -> OwnedFd {
    // SAFETY: a NUL-terminated path; the returned fd is checked and owned.
    let dev = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    check(dev, "open /dev/fuse");
    // SAFETY: `dev` was just opened and is owned by nothing else.
    let dev = unsafe { OwnedFd::from_raw_fd(dev) };
    let data = std::ffi::CString::new(format!("fd={},rootmode=40000,user_id=0,group_id=0", dev.as_raw_fd())).unwrap();
    let target = cstr(mnt);
    // SAFETY: NUL-terminated strings alive for the call.
    let r = unsafe { libc::mount(c"spike".as_ptr(), target.as_ptr(), c"fuse.spike".as_ptr(), 0, data.as_ptr().cast()) };
    check(r, "mount");
    dev
}

pub fn dup(fd: &OwnedFd) -> OwnedFd {
    fd.try_clone().unwrap()
}

pub fn toy(backing: &Path, handles: Arc<Mutex<HashMap<u64, File>>>, next_fh: Arc<AtomicU64>) -> Toy {
    Toy {
        handles,
        next_fh,
        backing: backing.to_path_buf(),
        served: Default::default(),
        negotiated: Default::default(),
        reopen_unknown: Default::default(),
        read_delay_us: Default::default(),
    }
}

pub fn spike_config() -> Config {
    let mut cfg = Config::default();
    cfg.acl = SessionACL::Owner;
    cfg.n_threads = Some(2);
    cfg.clone_fd = true;
    cfg
}

/// Whether the spikes can run here: root, /dev/fuse, and a kernel with
/// FUSE_NOTIFY_RESEND (Linux 6.9 or later; without it the calls the old
/// session read would hang, not fail). Says why when not.
pub fn can_run() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/fuse").exists() {
        eprintln!("SKIP: needs root and /dev/fuse");
        return false;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = release.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    if (major, minor) < (6, 9) {
        eprintln!("SKIP: FUSE_NOTIFY_RESEND needs Linux 6.9 (this is {})", release.trim());
        return false;
    }
    true
}
