//! `/metrics` over HTTP (`-o metrics_listen=IP:PORT`): the text the
//! metrics file holds (`metrics::text`, one function for both, so the two
//! never differ), rendered fresh for each scrape. The port is bound by
//! [`Listener::bind`] before the daemon forks and mounts (a port in use is
//! a one-line error at mount time and no mount; a plain socket, no thread
//! before the fork); requests are answered one at a time on the
//! `metrics-http` thread by tiny_http (a blocking HTTP/1.1 server: the
//! daemon has no async runtime). `GET /metrics` (also `/`)
//! answers 200 with the text; anything else 404, a method other than GET
//! or HEAD 405.

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tiny_http::{Header, Method, Response, Server};

use super::metrics;
use crate::fs::Core;

/// The Content-Type of the Prometheus text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A bound `metrics_listen` port, not serving yet.
pub struct Listener {
    socket: std::net::TcpListener,
}

impl Listener {
    /// Binds `addr`. Errors: one line naming the option, the address and
    /// the OS's reason (EADDRINUSE: "Address already in use"; an address
    /// no interface has: "Cannot assign requested address"; a port below
    /// 1024 without CAP_NET_BIND_SERVICE: "Permission denied").
    pub fn bind(addr: SocketAddr) -> Result<Listener, String> {
        let socket =
            std::net::TcpListener::bind(addr).map_err(|e| format!("metrics_listen={addr}: cannot listen: {e}"))?;
        Ok(Listener { socket })
    }

    /// A second fd of the bound socket, kept by the daemon to hand the port
    /// to the next process on `boundfs upgrade` (or to serve it again after
    /// a failed one) without closing it: scrapers see no refused
    /// connection. Errors: the dup failed (EMFILE).
    pub fn dup(&self) -> Result<OwnedFd, String> {
        self.socket.as_fd().try_clone_to_owned().map_err(|e| format!("metrics_listen: dup of the socket: {e}"))
    }

    /// The listener on a socket fd another boundfs process bound and
    /// handed over ([`Listener::dup`]).
    pub fn from_fd(fd: OwnedFd) -> Listener {
        Listener { socket: std::net::TcpListener::from(fd) }
    }

    /// The bound socket's fd (the supervisor keeps it for its daemons).
    pub fn into_fd(self) -> OwnedFd {
        self.socket.into()
    }

    /// Serves the metrics of `core` (samples labelled with `mountpoint`) on
    /// a thread of its own until [`Serving::stop`]. Errors: tiny_http or
    /// the thread could not be started.
    pub fn serve(self, core: Arc<Core>, mountpoint: String) -> Result<Serving, String> {
        let server = Arc::new(Server::from_listener(self.socket, None).map_err(|e| e.to_string())?);
        let serving = server.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new().name("metrics-http".into()).spawn(move || {
            loop {
                match serving.recv() {
                    Ok(request) => answer(&core, &mountpoint, request),
                    // unblocked by stop, or one connection's error (serve on)
                    Err(_) if !stopping.load(Ordering::Acquire) => continue,
                    Err(_) => break,
                }
            }
            // Scrapes already read are answered, not dropped (tiny_http
            // answers a dropped request 500): on `boundfs upgrade` the
            // socket lives on in the next process, so nothing is refused.
            while let Ok(Some(request)) = serving.try_recv() {
                answer(&core, &mountpoint, request);
            }
        });
        Ok(Serving { server, stop, thread: thread.map_err(|e| e.to_string())? })
    }
}

/// The serving thread ([`Listener::serve`]).
pub struct Serving {
    server: Arc<Server>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Serving {
    /// Stops serving and waits for the thread (a scrape in progress is
    /// answered first); the port is closed when the last handle drops.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.server.unblock();
        let _ = self.thread.join();
    }
}

/// Answers one request.
fn answer(core: &Core, mountpoint: &str, request: tiny_http::Request) {
    let path = request.url().split('?').next().unwrap_or("");
    let response = match (request.method(), path) {
        (Method::Get | Method::Head, "/metrics" | "/") => {
            let mut r = Response::from_string(metrics::text(core, mountpoint));
            if let Ok(h) = Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE.as_bytes()) {
                r.add_header(h);
            }
            r
        }
        (Method::Get | Method::Head, _) => {
            Response::from_string("not found: boundfs serves /metrics\n").with_status_code(404)
        }
        _ => Response::from_string("method not allowed\n").with_status_code(405),
    };
    if let Err(e) = request.respond(response) {
        log::debug!("metrics_listen: a scrape's connection failed: {e}");
    }
}
