//! Handing a live FUSE connection from one process to another (an
//! upgrade, or recovery from a crash; the facts and the plan:
//! docs/design/upgrade.md). The pieces fuser 0.18
//! lacks, made without patching it:
//!
//! - [`session_on_live_fd`]: a session on a connection another process
//!   initialised (fuser's handshake gets a synthetic FUSE_INIT from a
//!   socketpair, then the live fd is put under the session's fd number);
//! - [`stop_readers`]: the old session's readers leave fuser's loop without
//!   taking another request;
//! - [`notify_resend`]: FUSE_NOTIFY_RESEND (Linux 6.9), the requests read and
//!   not answered back on the pending queue;
//! - [`Gate`]: no request is started once the hand-over begins; those read
//!   after it are left unanswered for the resend;
//! - [`send_fds`], [`recv_fds`]: fds over a unix socket (SCM_RIGHTS).
//!
//! `tests/handover_spike.rs` runs them end to end on a toy filesystem.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::time::{Duration, Instant};

use fuser::{Config, Filesystem, InitFlags, KernelConfig, Session};

/// FUSE_INIT's opcode (`enum fuse_opcode`, include/uapi/linux/fuse.h).
const FUSE_INIT: u32 = 26;
/// `enum fuse_notify_code` (include/uapi/linux/fuse.h, Linux 6.9).
const FUSE_NOTIFY_RESEND: i32 = 7;
/// `sizeof(struct fuse_in_header) + sizeof(struct fuse_init_in)`.
const INIT_LEN: usize = 40 + 64;

/// What the connection's INIT settled, which the next process must be told
/// (the kernel sends INIT once per mount).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Negotiated {
    /// The flags both sides have (kernel offer ∩ what was asked).
    pub flags: u64,
    /// The kernel's protocol minor version.
    pub minor: u32,
}

impl Negotiated {
    /// At INIT: what `config`'s kernel offers of `asked` (what the
    /// filesystem asked for plus fuser's own: ASYNC_READ, BIG_WRITES,
    /// MAX_PAGES when offered; fuser lib.rs `default_init_flags`).
    pub fn of(config: &KernelConfig, asked: InitFlags) -> Self {
        let fusers = InitFlags::FUSE_ASYNC_READ | InitFlags::FUSE_BIG_WRITES | InitFlags::FUSE_MAX_PAGES;
        Negotiated { flags: (config.capabilities() & (asked | fusers)).bits(), minor: config.kernel_abi().1 }
    }
}

/// The capabilities `BoundFs::init` asks for (`passthrough`: it asked for
/// FUSE_PASSTHROUGH too), for [`Negotiated::of`].
pub fn asked(passthrough: bool) -> InitFlags {
    let mut f = InitFlags::FUSE_DONT_MASK
        | InitFlags::FUSE_POSIX_ACL
        | InitFlags::FUSE_PARALLEL_DIROPS
        | InitFlags::FUSE_ASYNC_DIO
        | InitFlags::FUSE_HANDLE_KILLPRIV_V2;
    if passthrough {
        f |= InitFlags::FUSE_PASSTHROUGH;
    }
    f
}

/// A FUSE_INIT request offering exactly `n`: `fuse_in_header` then
/// `fuse_init_in` (flags2 through FUSE_INIT_EXT), native byte order.
pub fn synthetic_init(n: &Negotiated) -> Vec<u8> {
    let flags = n.flags | InitFlags::FUSE_INIT_EXT.bits();
    let mut b = Vec::with_capacity(INIT_LEN);
    b.extend_from_slice(&(INIT_LEN as u32).to_ne_bytes());
    b.extend_from_slice(&FUSE_INIT.to_ne_bytes());
    b.extend_from_slice(&1u64.to_ne_bytes()); // unique
    b.extend_from_slice(&0u64.to_ne_bytes()); // nodeid
    b.extend_from_slice(&[0; 16]); // uid, gid, pid, total_extlen, padding
    b.extend_from_slice(&7u32.to_ne_bytes()); // major
    b.extend_from_slice(&n.minor.to_ne_bytes());
    b.extend_from_slice(&(128u32 * 1024).to_ne_bytes()); // max_readahead (the kernel keeps its own)
    b.extend_from_slice(&(flags as u32).to_ne_bytes());
    b.extend_from_slice(&((flags >> 32) as u32).to_ne_bytes());
    b.extend_from_slice(&[0; 44]); // unused
    b
}

/// Unix time now, ns.
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn last_error<T>(what: &str) -> std::io::Result<T> {
    let e = std::io::Error::last_os_error();
    Err(std::io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// A session serving `live`, a connection another session initialised with
/// `n`: `Session::from_fd` runs its handshake on a socketpair carrying
/// [`synthetic_init`] (its INIT reply goes into the socket, unread), then
/// `dup3` puts the live connection under the session's fd number before any
/// thread reads it (fuser's `File` keeps the number; the file behind it
/// changes once, before use). `fs.init` sees the negotiated flags as the
/// kernel's offer, so it decides as the connection has it. Errors: the
/// socketpair, the handshake (the filesystem's `init`), the dup3.
pub fn session_on_live_fd<FS: Filesystem>(
    fs: FS,
    live: OwnedFd,
    cfg: Config,
    n: &Negotiated,
) -> std::io::Result<Session<FS>> {
    let mut sv = [0; 2];
    // SAFETY: `sv` is a writable array of two ints.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) } != 0 {
        return last_error("socketpair");
    }
    // SAFETY: both fds were just made by socketpair and are owned by nothing else.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    let init = synthetic_init(n);
    // SAFETY: a live buffer of init.len() bytes.
    if unsafe { libc::write(theirs.as_raw_fd(), init.as_ptr().cast(), init.len()) } != init.len() as isize {
        return last_error("write of the synthetic INIT");
    }
    let acl = cfg.acl;
    let session = Session::from_fd(fs, ours, acl, cfg)?;
    // SAFETY: both fds are open; dup3 closes the socket under the session's
    // number and makes the number refer to the live connection, atomically.
    if unsafe { libc::dup3(live.as_raw_fd(), session.as_fd().as_raw_fd(), libc::O_CLOEXEC) } < 0 {
        return last_error("dup3 of the live connection");
    }
    Ok(session)
}

/// This process's /dev/fuse fds other than `keep`.
pub fn fuse_fds_except(keep: RawFd) -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return vec![] };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let fd: RawFd = e.file_name().to_str()?.parse().ok()?;
        (fd != keep && std::fs::read_link(e.path()).ok()? == Path::new("/dev/fuse")).then_some(fd)
    })
    .collect()
}

/// Thread ids of fuser's event loops (`fuser-N`).
fn fuser_threads() -> Vec<libc::pid_t> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return vec![] };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        comm.starts_with("fuser-").then(|| e.file_name().to_str()?.parse().ok())?
    })
    .collect()
}

extern "C" fn wake(_: libc::c_int) {}

/// Stops the session's readers without their taking another request: each
/// /dev/fuse fd but `keep` is replaced by `/dev/null` and the `fuser-N`
/// threads get `signal` (its handler set here, without SA_RESTART), so a
/// blocked `read` returns EINTR, fuser retries it on `/dev/null`, reads 0
/// bytes and ends its loop. Repeats until `stopped()` (the session's thread
/// has finished). Only once the requests in flight are answered: their
/// replies go out on the same fd numbers. Returns the session's /dev/fuse
/// files, to close only after [`notify_resend`]: the last close of a cloned
/// /dev/fuse file ends the requests on its processing list with
/// ECONNABORTED (`fuse_dev_release`, fs/fuse/dev.c). Errors: sigaction,
/// dup3, or the readers still running after 5 s.
pub fn stop_readers(keep: RawFd, signal: libc::c_int, stopped: impl Fn() -> bool) -> std::io::Result<Vec<OwnedFd>> {
    // SAFETY: a zeroed sigaction with a plain handler and no SA_RESTART.
    let r = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = wake as *const () as usize;
        libc::sigaction(signal, &sa, std::ptr::null_mut())
    };
    if r != 0 {
        return last_error("sigaction");
    }
    let null = std::fs::File::open("/dev/null")?;
    // Each reader's end-of-file read is expected from here (crate::logging).
    crate::logging::readers_stopping(true);
    let stopped_all = stop_all(keep, signal, &null, &stopped);
    crate::logging::readers_stopping(false);
    stopped_all
}

/// [`stop_readers`] once its handler is set.
fn stop_all(
    keep: RawFd,
    signal: libc::c_int,
    null: &std::fs::File,
    stopped: &impl Fn() -> bool,
) -> std::io::Result<Vec<OwnedFd>> {
    let mut kept = Vec::new();
    for fd in fuse_fds_except(keep) {
        // SAFETY: `fd` is open: fuser's fds close only when its session ends,
        // and this one is still running.
        kept.push(unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?);
        // SAFETY: both fds are open; fuser's File keeps its number, which
        // now reads end-of-file.
        if unsafe { libc::dup3(null.as_raw_fd(), fd, libc::O_CLOEXEC) } < 0 {
            return last_error("dup3 of /dev/null");
        }
    }
    let start = Instant::now();
    while !stopped() {
        if start.elapsed() > Duration::from_secs(5) {
            return Err(std::io::Error::other("the session's readers did not stop within 5 s"));
        }
        for tid in fuser_threads() {
            // SAFETY: a signal to a thread of this process; its handler does nothing.
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, signal) };
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(kept)
}

/// FUSE_NOTIFY_RESEND on `dev`: every request read from the connection and
/// not answered goes back on the pending queue, its unique marked
/// FUSE_UNIQUE_RESEND (`fuse_resend`, fs/fuse/dev.c). It takes the requests
/// of every reader of the connection: send it before the new session reads
/// anything. Errors: EINVAL before Linux 6.9.
pub fn notify_resend(dev: BorrowedFd<'_>) -> std::io::Result<()> {
    let mut h = Vec::with_capacity(16);
    h.extend_from_slice(&16u32.to_ne_bytes());
    h.extend_from_slice(&FUSE_NOTIFY_RESEND.to_ne_bytes());
    h.extend_from_slice(&0u64.to_ne_bytes());
    // SAFETY: a live buffer of 16 bytes.
    if unsafe { libc::write(dev.as_raw_fd(), h.as_ptr().cast(), h.len()) } < 0 {
        return last_error("FUSE_NOTIFY_RESEND");
    }
    Ok(())
}

/// Most fds one message may carry (`SCM_MAX_FD`, include/net/scm.h).
pub const MAX_FDS: usize = 253;

/// Sends `data` with `fds` (at most [`MAX_FDS`]) over the unix socket
/// `sock` (SCM_RIGHTS: the receiver gets the same open files). Errors: as
/// sendmsg(2); EINVAL for too many fds.
pub fn send_fds(sock: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    let bytes = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: msghdr is plain data; all-zero is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer is `space` bytes, 8-aligned, room for one
        // header and `fds.len()` ints (CMSG_SPACE), which are written in it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes) as _;
            let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
            std::ptr::copy_nonoverlapping(raw.as_ptr().cast::<u8>(), libc::CMSG_DATA(c), bytes as usize);
        }
    }
    // SAFETY: `msg` points at live buffers (data, control) for the call.
    if unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) } < 0 {
        return last_error("sendmsg");
    }
    Ok(())
}

/// Receives one message into `buf` and the fds it carries (close-on-exec).
/// Returns the data's length (0: the peer is gone) and the fds. Errors: as
/// recvmsg(2); EMSGSIZE when data or fds were cut.
pub fn recv_fds(sock: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    let space = unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: msghdr is plain data; all-zero is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at live, writable buffers for the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return last_error("recvmsg");
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `control` with well-formed headers up to
    // msg_controllen; each SCM_RIGHTS payload is that many new fds, now ours.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                fds.extend((0..count).map(|i| OwnedFd::from_raw_fd(data.add(i).read_unaligned())));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    Ok((n as usize, fds))
}

/// Requests in flight, and the gate a hand-over closes: a request that
/// enters a closed gate is neither done nor answered (the caller forgets
/// its reply: fuser answers EIO for a dropped one), so the resend brings it
/// to the next process.
#[derive(Debug, Default)]
pub struct Gate {
    closed: AtomicBool,
    inflight: AtomicUsize,
    left: AtomicUsize,
    /// Unix time (ns) the first request entered, 0 before.
    first_ns: AtomicU64,
}

/// A request in flight; leaving drops it.
#[derive(Debug)]
pub struct InFlight<'a>(&'a Gate);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, SeqCst);
    }
}

impl Gate {
    /// A request starts (None: the gate is closed; leave it unanswered).
    pub fn enter(&self) -> Option<InFlight<'_>> {
        if self.first_ns.load(Relaxed) == 0 {
            self.first_ns.store(unix_ns(), Relaxed);
        }
        self.inflight.fetch_add(1, SeqCst);
        if self.closed.load(SeqCst) {
            self.inflight.fetch_sub(1, SeqCst);
            self.left.fetch_add(1, SeqCst);
            return None;
        }
        Some(InFlight(self))
    }

    /// Closes the gate and waits until the requests in flight are done.
    pub fn close_and_drain(&self) {
        self.closed.store(true, SeqCst);
        while self.inflight.load(SeqCst) != 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Opens the gate again (a hand-over that failed before the readers
    /// stopped: the requests left since it closed are still unanswered and
    /// are never answered by this process; see `daemon::upgrade`).
    pub fn reopen(&self) {
        self.closed.store(false, SeqCst);
    }

    /// Unix time (ns) the first request entered the gate; 0: none yet.
    pub fn first_ns(&self) -> u64 {
        self.first_ns.load(Relaxed)
    }

    /// Requests left unanswered since the gate closed.
    pub fn left(&self) -> usize {
        self.left.load(SeqCst)
    }
}

#[cfg(test)]
#[path = "handover_tests.rs"]
mod tests;
