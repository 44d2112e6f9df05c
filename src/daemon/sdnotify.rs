//! systemd readiness notification (`Type=notify` services), written directly:
//! one datagram of `KEY=VALUE` lines to the unix socket named by
//! `$NOTIFY_SOCKET` (protocol: sd_notify(3)). A name starting with `@` is in
//! the abstract namespace. Without `$NOTIFY_SOCKET` every call does nothing.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The socket systemd listens on, if this process was started with one.
pub struct Notify {
    addr: Option<SocketAddr>,
    /// Why `$NOTIFY_SOCKET` was set but cannot be used (logged by [`Notify::report`]).
    problem: Option<String>,
}

impl Notify {
    /// Reads `$NOTIFY_SOCKET` and removes it from the environment (so that
    /// helpers we start, like fusermount3, do not notify in our name). An
    /// address that is neither a path nor `@abstract` (e.g. `vsock:`) is
    /// ignored; [`Notify::report`] logs why. Call before any thread starts.
    pub fn from_env() -> Notify {
        let Some(raw) = std::env::var_os("NOTIFY_SOCKET") else {
            return Notify { addr: None, problem: None };
        };
        // SAFETY: called from main before any thread is started.
        unsafe { std::env::remove_var("NOTIFY_SOCKET") };
        match parse(raw.as_encoded_bytes()) {
            Ok(addr) => Notify { addr: Some(addr), problem: None },
            Err(e) => Notify { addr: None, problem: Some(e) },
        }
    }

    /// Logs why `$NOTIFY_SOCKET` is not used, if it was set but unusable
    /// (once the logger is up).
    pub fn report(&self) {
        if let Some(p) = &self.problem {
            log::warn!("{p}; not notifying systemd");
        }
    }

    /// The `$NOTIFY_SOCKET` value this process notifies (`/path` or
    /// `@name`), for a process taking over the mount (`super::upgrade`).
    pub fn socket_name(&self) -> Option<String> {
        let a = self.addr.as_ref()?;
        if let Some(p) = a.as_pathname() {
            return Some(p.display().to_string());
        }
        a.as_abstract_name().map(|n| format!("@{}", String::from_utf8_lossy(n)))
    }

    /// Whether a service manager is waiting for our notifications.
    pub fn enabled(&self) -> bool {
        self.addr.is_some()
    }

    /// Whether we were started with `$NOTIFY_SOCKET` set (usable or not):
    /// a `Type=notify` service, which must not fork.
    pub fn requested(&self) -> bool {
        self.addr.is_some() || self.problem.is_some()
    }

    /// Sends `state` (newline-separated `KEY=VALUE` lines, e.g. `READY=1`).
    /// Failures are logged, never fatal: the mount works without them.
    pub fn send(&self, state: &str) {
        let Some(addr) = &self.addr else { return };
        let r = UnixDatagram::unbound().and_then(|s| s.send_to_addr(state.as_bytes(), addr));
        if let Err(e) = r {
            log::warn!("could not notify systemd ({state}): {e}");
        }
    }
}

/// A `$NOTIFY_SOCKET` value as a socket address: `/path` or `@abstract`.
/// Errors: why it cannot be used, one line.
fn parse(raw: &[u8]) -> Result<SocketAddr, String> {
    let shown = String::from_utf8_lossy(raw);
    let r = match raw.first() {
        Some(b'/') => SocketAddr::from_pathname(std::path::Path::new(std::ffi::OsStr::from_bytes(raw))),
        Some(b'@') => SocketAddr::from_abstract_name(&raw[1..]),
        _ => return Err(format!("NOTIFY_SOCKET={shown} is not supported (only a path or @name)")),
    };
    r.map_err(|e| format!("NOTIFY_SOCKET={shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_and_abstract_sockets_receive_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        let n = Notify { addr: parse(path.as_os_str().as_bytes()).ok(), problem: None };
        n.send("READY=1");
        let mut buf = [0u8; 64];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");

        let name = format!("boundfs-test-{}", std::process::id());
        let rx = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
        let n = Notify { addr: parse(format!("@{name}").as_bytes()).ok(), problem: None };
        assert!(n.enabled());
        n.send("STOPPING=1");
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STOPPING=1");

        assert!(parse(b"vsock:2:1234").is_err());
        Notify { addr: None, problem: None }.send("READY=1"); // no socket: nothing happens
    }
}
