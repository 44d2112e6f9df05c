use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use fuser::{Config, Filesystem, InitFlags, KernelConfig, Request};

use super::*;

/// Records what its `init` was offered.
struct Offered(Arc<Mutex<Option<(u64, u32)>>>);

impl Filesystem for Offered {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        *self.0.lock().unwrap() = Some((config.capabilities().bits(), config.kernel_abi().1));
        Ok(())
    }
}

fn pair(kind: libc::c_int) -> (OwnedFd, OwnedFd) {
    let mut sv = [0; 2];
    // SAFETY: `sv` is a writable array of two ints.
    assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, kind | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) }, 0);
    // SAFETY: both fds were just made and are owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) }
}

fn ino(fd: BorrowedFd<'_>) -> (u64, u64) {
    let st = crate::sys::fstat(fd).unwrap();
    (st.st_dev, st.st_ino)
}

#[test]
fn the_synthetic_init_is_a_fuse_init_of_104_bytes() {
    let n = Negotiated { flags: (1 << 39) | 1, minor: 45 };
    let b = synthetic_init(&n);
    assert_eq!(b.len(), 104);
    let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap());
    assert_eq!((u32_at(0), u32_at(4)), (104, 26));
    assert_eq!((u32_at(40), u32_at(44)), (7, 45));
    assert_eq!(u32_at(52), 1 | (1 << 30), "low flags with FUSE_INIT_EXT");
    assert_eq!(u32_at(56), 1 << 7, "flags2: bit 39");
}

#[test]
fn a_session_on_a_live_fd_sees_the_negotiated_flags_and_serves_that_fd() {
    let seen = Arc::new(Mutex::new(None));
    let (live, _peer) = pair(libc::SOCK_SEQPACKET);
    let flags = (InitFlags::FUSE_ASYNC_READ | InitFlags::FUSE_DONT_MASK | InitFlags::FUSE_PASSTHROUGH).bits();
    let n = Negotiated { flags, minor: 41 };
    let s = session_on_live_fd(Offered(seen.clone()), live.try_clone().unwrap(), Config::default(), &n).unwrap();
    let (caps, minor) = seen.lock().unwrap().expect("init ran");
    assert_eq!(caps & !InitFlags::FUSE_INIT_EXT.bits(), flags);
    assert_eq!(minor, 41);
    assert_eq!(ino(s.as_fd()), ino(live.as_fd()), "the session's fd is the live connection now");
}

#[test]
fn notify_resend_writes_a_bare_notification_with_code_7() {
    let (a, b) = pair(libc::SOCK_SEQPACKET);
    notify_resend(a.as_fd()).unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: a writable buffer of 64 bytes.
    let n = unsafe { libc::read(b.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(n, 16);
    assert_eq!(u32::from_ne_bytes(buf[0..4].try_into().unwrap()), 16);
    assert_eq!(i32::from_ne_bytes(buf[4..8].try_into().unwrap()), 7);
    assert_eq!(u64::from_ne_bytes(buf[8..16].try_into().unwrap()), 0);
}

#[test]
fn a_closed_gate_waits_for_requests_in_flight_and_lets_none_start() {
    let gate = Arc::new(Gate::default());
    let g = gate.clone();
    let started = std::thread::spawn(move || {
        let _in = g.enter().expect("open gate");
        std::thread::sleep(Duration::from_millis(50));
    });
    std::thread::sleep(Duration::from_millis(10));
    let t = Instant::now();
    gate.close_and_drain();
    assert!(t.elapsed() >= Duration::from_millis(20), "drain waited for the request in flight");
    started.join().unwrap();
    assert!(gate.enter().is_none());
    assert_eq!(gate.left(), 1);
}

#[test]
fn fds_sent_over_a_socket_are_the_same_open_files() {
    let (a, b) = pair(libc::SOCK_SEQPACKET);
    let (x, y) = pair(libc::SOCK_STREAM);
    send_fds(a.as_fd(), b"table", &[x.as_fd(), y.as_fd()]).unwrap();
    let mut buf = [0u8; 16];
    let (n, fds) = recv_fds(b.as_fd(), &mut buf).unwrap();
    assert_eq!(&buf[..n], b"table");
    assert_eq!(fds.len(), 2);
    assert_eq!(ino(fds[0].as_fd()), ino(x.as_fd()));
    assert_eq!(ino(fds[1].as_fd()), ino(y.as_fd()));
    send_fds(a.as_fd(), b"none", &[]).unwrap();
    let (n, fds) = recv_fds(b.as_fd(), &mut buf).unwrap();
    assert_eq!((&buf[..n], fds.len()), (&b"none"[..], 0));
}
