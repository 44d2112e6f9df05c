//! The old daemon's side of `boundfs upgrade` (the protocol and the order:
//! `super::upgrade`): runs on the daemon's main thread when
//! `user.boundfs.upgrade` is set. On success the process exits; on a
//! failure it serves on, whatever step failed.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use super::metrics_http::Listener;
use super::resume::{self, Resume};
use super::sdnotify::Notify;
use super::threads::Threads;
use super::upgrade::{self, Header, Hello};
use super::{Serving, passthrough_with_atime};
use crate::config::Options;
use crate::fs::Core;
use crate::fs::handed::STATE_VERSION;
use crate::fuse::BoundFs;
use crate::fuse::handover::{Gate, Negotiated, stop_readers, unix_ns};

/// What the running daemon hands over or keeps.
pub(super) struct Live {
    /// The background threads and watchdog (None while stopped).
    pub threads: Option<Threads>,
    /// The gate the session's requests pass.
    pub gate: Arc<Gate>,
    /// The connection's INIT (set at INIT).
    pub negotiated: Arc<OnceLock<Negotiated>>,
    /// The session's /dev/fuse fd.
    pub fuse: std::os::fd::RawFd,
    /// A second fd of the `metrics_listen` socket (handed over with the
    /// connection; served again after a failed hand-over).
    pub metrics_fd: Option<OwnedFd>,
}

fn err(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Hands the mount over to the process listening on `name`, then exits
/// (status 0). Returns only when it failed (one line), with the mount served
/// by this process again: before the gate closed nothing changed; after
/// the readers stopped, this process starts a session on its own live fd
/// and resends (as the new process would have).
pub(super) fn hand_over(
    serving: &mut Serving,
    live: &mut Live,
    opts: &Options,
    notify: &Notify,
    core: &Arc<Core>,
    name: &str,
) -> Result<(), String> {
    let t0 = Instant::now();
    let sock = upgrade::connect(name).map_err(err("cannot reach the new process"))?;
    let hello = Hello {
        argv: upgrade::argv(),
        notify_socket: notify.socket_name(),
        pid: std::process::id(),
        state_version: STATE_VERSION,
    };
    let hello = serde_json::to_vec(&hello).map_err(|e| e.to_string())?;
    upgrade::send(sock.as_fd(), &hello).map_err(err("hello"))?;
    let answer = upgrade::recv(sock.as_fd()).map_err(err("no answer from the new process"))?;
    if answer != b"ok" {
        return Err(format!("the new process refused: {}", String::from_utf8_lossy(&answer)));
    }
    let Some(negotiated) = live.negotiated.get().copied() else {
        return Err("the connection's INIT is not known".into());
    };
    // The watchdog first (it would abort the connection once this process
    // exits slowly), then the threads: the stamper writes its pending
    // stamps, so the LRU order survives in BACKING's mtimes.
    if let Some(t) = live.threads.take() {
        t.stop_for_hand_over(core);
    }
    let stopped_at = t0.elapsed();
    live.gate.close_and_drain();
    let drained_ns = unix_ns();
    let dup = |fd| -> Result<OwnedFd, String> {
        // SAFETY: the session's fd is open while this process serves.
        unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned().map_err(err("dup of the connection"))
    };
    let fuse = dup(live.fuse)?;
    let session = &serving.session;
    let old = match stop_readers(fuse.as_raw_fd(), libc::SIGUSR2, || session.is_finished()) {
        Ok(old) => old,
        Err(e) => return take_back(serving, live, opts, notify, core, fuse, vec![], negotiated, format!("{e}")),
    };
    let backing = core.take_backing_ids(fuser::BackingId::into_raw);
    let collected = core.collect_state(backing.clone()).map_err(err("collecting the state"));
    let sent = (|| -> Result<(), String> {
        let c = collected.as_ref().map_err(Clone::clone)?;
        let json = upgrade::state_json(&c.state);
        let mut fds: Vec<BorrowedFd<'_>> = vec![fuse.as_fd()];
        fds.extend(old.iter().map(|f| f.as_fd()));
        fds.extend(c.fds.iter().map(|f| f.as_fd()));
        fds.extend(live.metrics_fd.as_ref().map(|f| f.as_fd()));
        let stderr = std::io::stderr();
        fds.push(stderr.as_fd());
        let left = live.gate.left();
        let metrics = live.metrics_fd.is_some();
        let (old_fuse, json_len, n) = (old.len(), json.len(), fds.len());
        let header = Header { negotiated, old_fuse, json_len, fds: n, drained_ns, left, metrics, stderr: true };
        upgrade::send_state(sock.as_fd(), &header, &json, &fds).map_err(err("sending the state"))?;
        let ok = upgrade::recv(sock.as_fd()).map_err(err("no word from the new process after the state"))?;
        if ok != b"resent" {
            return Err(format!("the new process failed: {}", String::from_utf8_lossy(&ok)));
        }
        log::info!(
            "upgrade: handed over ({} inodes, {} handles, {} directory streams, {} backing ids, {left} requests \
             left for the resend); threads stopped in {:.1} ms, gate to resent {:.1} ms; exiting",
            c.state.inodes.len(),
            c.state.handles.len(),
            c.state.dirs.len(),
            backing.len(),
            stopped_at.as_secs_f64() * 1e3,
            (t0.elapsed() - stopped_at).as_secs_f64() * 1e3,
        );
        Ok(())
    })();
    match sent {
        // Exit without dropping anything: the backing ids stay registered
        // (their BackingId wrappers were taken apart), the new process holds
        // the connection and the clones.
        Ok(()) => {
            // Shared tier: leave the budget record only now that the next
            // daemon serves (its own line) and no request runs here; left
            // while requests still flowed, a store put this node's line back
            // and it outlived the process by RECLAIM_AFTER.
            // The files open here it counted as its own are the next one's.
            if let Some(t) = core.shared_tier() {
                let given: Vec<crate::key::FileKey> = collected
                    .iter()
                    .flat_map(|c| &c.state.handles)
                    .filter(|h| h.own.is_some())
                    .map(|h| crate::key::FileKey { dev: h.key.0, ino: h.key.1 })
                    .collect();
                core.grant_leave_except(t, &given);
            }
            std::process::exit(0)
        }
        Err(e) => {
            core.restore_backing_ids(backing);
            take_back(serving, live, opts, notify, core, fuse, old, negotiated, e)
        }
    }
}

/// The hand-over failed after this process's readers stopped: serve the
/// connection again with a new session on `fuse` (a resend brings back what
/// the gate left), start the threads again (no new index). Returns `why`
/// as the error, or why even that failed.
#[allow(clippy::too_many_arguments)]
fn take_back(
    serving: &mut Serving,
    live: &mut Live,
    opts: &Options,
    notify: &Notify,
    core: &Arc<Core>,
    fuse: OwnedFd,
    old: Vec<OwnedFd>,
    negotiated: Negotiated,
    why: String,
) -> Result<(), String> {
    log::warn!("upgrade failed after the readers stopped ({why}); taking the connection back");
    let fs = BoundFs::new(core.clone(), opts.attr_timeout, passthrough_with_atime(opts, core.root().fd()));
    let r = Resume { fuse, negotiated, old_fuse_fds: old, state: None };
    let started = resume::resume(opts, core, fs, r).map_err(|e| format!("{why}; taking it back failed too: {e}"))?;
    (live.gate, live.negotiated, live.fuse) = (started.gate, started.negotiated, started.fuse);
    serving.restart(started.session)?;
    let listener = match &live.metrics_fd {
        Some(fd) => Some(Listener::from_fd(fd.try_clone().map_err(|e| format!("{why}; metrics_listen: {e}"))?)),
        None => None,
    };
    live.threads = Some(Threads::start(opts, notify, core, listener, false)?);
    Err(why)
}
