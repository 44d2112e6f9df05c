//! Starting the daemon on a live FUSE connection another process
//! initialised, instead of mounting: the upgrade's new daemon
//! (`daemon::upgrade`), or a supervisor restarting a killed one. The
//! facts: docs/design/upgrade.md.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use fuser::{Config, SessionACL};

use crate::config::Options;
use crate::fs::Core;
use crate::fs::handed::HandedState;
use crate::fuse::BoundFs;
use crate::fuse::gated::Gated;
use crate::fuse::handover::{Gate, Negotiated, notify_resend, session_on_live_fd};

/// What a daemon needs to serve a connection it did not mount.
pub struct Resume {
    /// The connection (a /dev/fuse fd of the mount, e.g. received over
    /// SCM_RIGHTS).
    pub fuse: OwnedFd,
    /// What its INIT settled (the kernel sends no second one).
    pub negotiated: Negotiated,
    /// The previous daemon's other /dev/fuse files (its per-thread clones):
    /// closed only after FUSE_NOTIFY_RESEND, since the last close of a clone
    /// ends the requests on its list with ECONNABORTED.
    pub old_fuse_fds: Vec<OwnedFd>,
    /// The previous daemon's tables and the fds they index (an upgrade), or
    /// None (after a crash: the kernel's node ids and file handles are then
    /// unknown here and answer ESTALE/EBADF).
    pub state: Option<(HandedState, Vec<OwnedFd>)>,
}

/// How the session was started, for the daemon's later hand-over.
pub struct Started {
    /// The session, not yet running.
    pub session: fuser::Session<Gated<BoundFs>>,
    /// The gate its requests pass.
    pub gate: Arc<Gate>,
    /// What INIT settled (set by `BoundFs::init`).
    pub negotiated: Arc<std::sync::OnceLock<Negotiated>>,
    /// The connection's fd (the session's own; for a later hand-over).
    pub fuse: std::os::fd::RawFd,
}

/// The gate of the last session [`resume`] started, for the take-over's
/// pause measurement (`super::takeover`).
static LAST_GATE: std::sync::Mutex<Option<Arc<Gate>>> = std::sync::Mutex::new(None);

/// The gate of the last session [`resume`] started, if any.
pub fn last_gate() -> Option<Arc<Gate>> {
    LAST_GATE.lock().ok().and_then(|g| g.clone())
}

/// Whether this process serves a connection it did not mount.
static RESUMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process serves a connection it did not mount (its
/// unmount then goes through fusermount3 by path when not root).
pub fn resumed() -> bool {
    RESUMED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The session config the daemon serves with (both ways of starting).
pub fn session_config(opts: &Options) -> Config {
    let mut cfg = Config::default();
    cfg.acl = if opts.allow_other { SessionACL::All } else { SessionACL::Owner };
    cfg.n_threads = Some(opts.threads);
    cfg.clone_fd = true;
    cfg
}

/// Takes over `r` for `core` (already opened: its ledger re-counts
/// BACKING): the handed tables adopted, the session built on the live fd,
/// FUSE_NOTIFY_RESEND sent before anything is read (the requests the
/// previous daemon read and left unanswered come back), the old clones
/// closed after it. Errors: one line (the session could not be built; the
/// kernel has no FUSE_NOTIFY_RESEND: Linux >= 6.9 is needed).
pub fn resume(opts: &Options, core: &Arc<Core>, fs: BoundFs, r: Resume) -> Result<Started, String> {
    let Resume { fuse, negotiated, old_fuse_fds, state } = r;
    if state.is_none() {
        // After a crash: the kernel's node ids are found again in BACKING.
        core.recover_node_ids(Box::new(crate::workers::walk::map_inos))?;
        let (held, taken) = core.adopt_held_opens();
        let done = crate::fs::inflight::take_done();
        log::info!(
            "{held} open handles left by the previous daemon, {taken} taken over; {done} requests it had done and not answered"
        );
    }
    if let Some((state, fds)) = state {
        let (inodes, handles) = (state.inodes.len(), state.handles.len());
        let lost = core.adopt_state(state, fds);
        log::info!("took over {inodes} inodes and {handles} open handles ({lost} lost)");
    }
    let gate = Arc::new(Gate::default());
    let recorded = fs.negotiated.clone();
    let live = fuse.try_clone().map_err(|e| format!("dup of the FUSE connection: {e}"))?;
    let session = session_on_live_fd(Gated { inner: fs, gate: gate.clone() }, live, session_config(opts), &negotiated)
        .map_err(|e| format!("cannot start a session on the live connection: {e}"))?;
    let fd = session.as_fd().as_raw_fd();
    // BOUNDFS_TEST_NO_RESEND (tests only, not an option): skip the resend,
    // to show what it is for (the requests the previous daemon read and
    // left unanswered then never return).
    if std::env::var_os("BOUNDFS_TEST_NO_RESEND").is_none() {
        notify_resend(fuse.as_fd()).map_err(|e| format!("{e} (Linux >= 6.9 is needed to take over a mount)"))?;
    }
    drop(old_fuse_fds);
    crate::fs::handed::set_connection(fuse);
    core.invalidator().set_notifier(session.notifier());
    RESUMED.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Ok(mut g) = LAST_GATE.lock() {
        *g = Some(gate.clone());
    }
    Ok(Started { session, gate, negotiated: recorded, fuse: fd })
}
