//! The hand-over of a live mount to a new boundfs process (`boundfs
//! upgrade`; docs/design/upgrade.md §2c), the old daemon's side, and the
//! protocol both sides speak over a unix `SOCK_SEQPACKET` socket in the
//! abstract namespace, which the new process listens on (`--take-over
//! NAME`, `super::takeover`):
//!
//! 1. old → new: [`Hello`] (the old daemon's argv, its `$NOTIFY_SOCKET`);
//!    new → old: `ok`, or `error: …` (the old daemon goes on serving);
//! 2. the old daemon stops its watchdog and background threads, closes its
//!    gate, waits for the requests in flight, stops its readers;
//! 3. old → new: [`Header`] (negotiated INIT, counts), then the
//!    [`HandedState`] as JSON in chunks, with the fds (the connection, the
//!    old clones, the state's fds) at most [`MAX_FDS`] a message;
//! 4. new → old: `resent` once it has sent FUSE_NOTIFY_RESEND (and told
//!    systemd its pid); the old process exits without closing its backing
//!    ids. If the new process fails before that, the old one takes the
//!    connection back itself (a session on its live fd and a resend).
//!
//! Lock order: none held here; the core's own locks are taken by its calls.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::fs::handed::HandedState;
use crate::fuse::handover::{MAX_FDS, Negotiated, recv_fds, send_fds};

/// Bytes of state JSON per message.
const CHUNK: usize = 32 * 1024;

/// How long each side waits for the other's next message.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(30);

/// The first message: what the new process needs to parse the same
/// options and report to the same systemd.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    /// The old daemon's command line (options as it parsed them).
    pub argv: Vec<String>,
    /// The old daemon's `$NOTIFY_SOCKET`, if systemd gave one.
    pub notify_socket: Option<String>,
    /// The old daemon's pid.
    pub pid: u32,
    /// The version of the state it will send (`handed::STATE_VERSION`):
    /// a new process that cannot read it refuses here, before the old
    /// daemon stops anything. Absent (1) from a daemon before versions.
    #[serde(default = "v1")]
    pub state_version: u32,
}

/// The state version of a hello without one.
fn v1() -> u32 {
    1
}

/// What precedes the state.
#[derive(Debug, Serialize, Deserialize)]
pub struct Header {
    /// The connection's INIT.
    pub negotiated: Negotiated,
    /// The old daemon's /dev/fuse clones, after the connection's fd.
    pub old_fuse: usize,
    /// Bytes of state JSON that follow.
    pub json_len: usize,
    /// fds that follow in all (1 + `old_fuse` + the state's).
    pub fds: usize,
    /// Unix time (ns) the old daemon answered its last request (its gate
    /// drained), for the pause.
    pub drained_ns: u64,
    /// Requests the old daemon read after its gate closed (left for the resend).
    pub left: usize,
    /// Whether the last fd is the `metrics_listen` socket (kept open
    /// across the hand-over, so scrapes are never refused).
    #[serde(default)]
    pub metrics: bool,
    /// Whether the very last fd is the old daemon's stderr: the new one
    /// writes its log lines and messages where the old one did, and holds
    /// nothing of the `boundfs upgrade` caller's (a caller that captures
    /// the command's output waits for the end of its pipes).
    #[serde(default)]
    pub stderr: bool,
}

/// The command line the daemon was started with (set once by `main`).
static ARGV: OnceLock<Vec<OsString>> = OnceLock::new();

/// Records the command line a new process must parse to serve as this one.
pub fn set_argv(argv: Vec<OsString>) {
    let _ = ARGV.set(argv);
}

/// The recorded command line (empty if never set).
pub fn argv() -> Vec<String> {
    ARGV.get().map(|a| a.iter().map(|s| s.to_string_lossy().into_owned()).collect()).unwrap_or_default()
}

fn abstract_addr(name: &str) -> std::io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain data; all-zero is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = name.as_bytes();
    if b.is_empty() || b.len() + 1 > a.sun_path.len() || b.contains(&0) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad socket name"));
    }
    for (i, c) in b.iter().enumerate() {
        a.sun_path[i + 1] = *c as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + b.len();
    Ok((a, len as libc::socklen_t))
}

fn seqpacket() -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_timeout(fd.as_fd(), PEER_TIMEOUT)?;
    Ok(fd)
}

/// Sets the socket's receive timeout. Errors: as setsockopt(2).
pub fn set_timeout(fd: BorrowedFd<'_>, t: Duration) -> std::io::Result<()> {
    let tv = libc::timeval { tv_sec: t.as_secs() as libc::time_t, tv_usec: t.subsec_micros() as libc::suseconds_t };
    let size = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
    // SAFETY: a live timeval of `size` bytes.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            size,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Listens on the abstract unix name `name` (SOCK_SEQPACKET). Errors: as
/// bind(2) (EADDRINUSE: the name is taken).
pub fn listen(name: &str) -> std::io::Result<OwnedFd> {
    let fd = seqpacket()?;
    let (a, len) = abstract_addr(name)?;
    // SAFETY: a live sockaddr_un of `len` bytes.
    if unsafe { libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: plain listen(2) on our socket.
    if unsafe { libc::listen(fd.as_raw_fd(), 1) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// Accepts one connection on `l` within `t` and returns it with the peer's
/// uid. Errors: EAGAIN after `t`; as accept4(2).
pub fn accept(l: BorrowedFd<'_>, t: Duration) -> std::io::Result<(OwnedFd, u32)> {
    let mut p = libc::pollfd { fd: l.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one live pollfd.
    if unsafe { libc::poll(&mut p, 1, t.as_millis() as libc::c_int) } <= 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EAGAIN));
    }
    // SAFETY: accept4 on our listening socket; no address asked for.
    let fd = unsafe { libc::accept4(l.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_timeout(fd.as_fd(), PEER_TIMEOUT)?;
    // SAFETY: ucred is plain data; getsockopt fills `size` bytes of it.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut size = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a live ucred of `size` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut size,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((fd, cred.uid))
}

/// Connects to the abstract unix name `name`. Errors: ECONNREFUSED when no
/// process listens there; as connect(2).
pub fn connect(name: &str) -> std::io::Result<OwnedFd> {
    let fd = seqpacket()?;
    let (a, len) = abstract_addr(name)?;
    // SAFETY: a live sockaddr_un of `len` bytes.
    if unsafe { libc::connect(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// Sends one message of plain bytes. Errors: as sendmsg(2).
pub fn send(sock: BorrowedFd<'_>, data: &[u8]) -> std::io::Result<()> {
    send_fds(sock, data, &[])
}

/// Receives one message of plain bytes (fds it carries are closed).
/// Errors: EPIPE when the peer is gone; EAGAIN on the timeout.
pub fn recv(sock: BorrowedFd<'_>) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; CHUNK + 4096];
    let (n, _) = recv_fds(sock, &mut buf)?;
    if n == 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EPIPE));
    }
    buf.truncate(n);
    Ok(buf)
}

/// Sends `header`, then `json` in chunks with `fds` (at most [`MAX_FDS`] a
/// message). Errors: as sendmsg(2).
pub fn send_state(sock: BorrowedFd<'_>, header: &Header, json: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    send(sock, &serde_json::to_vec(header).map_err(std::io::Error::other)?)?;
    let (mut at, mut fd_at) = (0, 0);
    while at < json.len() || fd_at < fds.len() {
        let end = (at + CHUNK).min(json.len());
        let fend = (fd_at + MAX_FDS).min(fds.len());
        // An empty data part would read as the peer's end: send one byte
        // the receiver skips ("chunk with fds only" is marked by a lone NUL).
        let data: &[u8] = if at == end { b"\0" } else { &json[at..end] };
        send_fds(sock, data, &fds[fd_at..fend])?;
        (at, fd_at) = (end, fend);
    }
    Ok(())
}

/// Receives what [`send_state`] sent: the header, the JSON, the fds.
/// Errors: EPIPE (the peer went), EAGAIN (timeout), EMSGSIZE, EPROTO (a
/// message that is not what it should be).
pub fn recv_state(sock: BorrowedFd<'_>) -> std::io::Result<(Header, Vec<u8>, Vec<OwnedFd>)> {
    let header: Header = serde_json::from_slice(&recv(sock)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad header: {e}")))?;
    let (mut json, mut fds) = (Vec::with_capacity(header.json_len), Vec::with_capacity(header.fds));
    let mut buf = vec![0u8; CHUNK + 4096];
    while json.len() < header.json_len || fds.len() < header.fds {
        let (n, got) = recv_fds(sock, &mut buf)?;
        if n == 0 {
            return Err(std::io::Error::from_raw_os_error(libc::EPIPE));
        }
        if !(n == 1 && buf[0] == 0 && json.len() == header.json_len) {
            json.extend_from_slice(&buf[..n]);
        }
        fds.extend(got);
        if json.len() > header.json_len || fds.len() > header.fds {
            return Err(std::io::Error::from_raw_os_error(libc::EPROTO));
        }
    }
    Ok((header, json, fds))
}

/// The state as JSON (plain data: cannot fail).
pub fn state_json(s: &HandedState) -> Vec<u8> {
    serde_json::to_vec(s).unwrap_or_default()
}

#[cfg(test)]
#[path = "upgrade_tests.rs"]
mod tests;
