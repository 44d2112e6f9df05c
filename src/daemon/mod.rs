//! The daemon's life: index BACKING, mount, start the mount's watchdog
//! process (`watchdog`), run the event loops and the background threads
//! (evictor, invalidator, stamper, metrics writer), report readiness, wait
//! for SIGINT/SIGTERM or an external `umount`, then stop everything in order
//! (the watchdog last) and report.
//!
//! Signals: SIGINT/SIGTERM unmount (lazily when busy, with a log line), let
//! the stamper write the pending mtime stamps, and exit 0; a second one exits
//! at once (status 1). SIGUSR1 logs the live status once.

pub mod cli;
pub mod ctl;
pub mod daemonize;
pub mod guard;
mod handoff;
pub mod metrics;
pub mod metrics_http;
pub mod mount_error;
pub mod mount_helper;
pub mod resume;
pub mod sdnotify;
pub mod supervisor;
pub mod takeover;
pub mod threads;
pub mod upgrade;
pub mod upgrade_cmd;
pub mod watchdog;

#[cfg(test)]
mod docs_tests;

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;

use fuser::MountOption;

use crate::config::{AtimeMode, Options, Passthrough};
use crate::fs::{self, Core};
use crate::fuse::BoundFs;
use crate::fuse::gated::Gated;
use crate::stats::{Op, Stats};
use crate::sys;
pub use resume::Resume;
use sdnotify::Notify;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};

enum Event {
    Signal(i32),
    /// The session numbered so ended.
    Unmounted(u64, std::io::Result<()>),
    /// `user.boundfs.upgrade` was set: hand over to the process listening
    /// on this abstract socket name (`upgrade`).
    Upgrade(String),
}

/// Mounts and serves until unmounted, in named steps: open the core over
/// BACKING, mount, serve (the FUSE session and signals on their own
/// threads), start the background threads, wait for the unmount, shut
/// down. `on_ready` runs once the mount is live and served (the daemon-mode
/// parent exits 0 then); systemd, when `notify` has a socket, gets
/// `READY=1` at the same moment and `STOPPING=1` when shutdown begins.
/// `listener`: the `metrics_listen` port, bound before the fork.
/// Errors: a one-line reason (BACKING unreadable, the kernel refused the
/// mount …), before `on_ready` unless the session itself fails.
pub fn run(
    opts: &Options,
    notify: &Notify,
    listener: Option<metrics_http::Listener>,
    on_ready: impl FnOnce(),
) -> Result<(), String> {
    run_from(opts, notify, listener, on_ready, None)
}

/// [`run`], but with `resume` on a live connection another process
/// initialised instead of mounting (see [`resume::resume`]): the core is
/// opened as at start-up (the ledger re-counts BACKING), the handed tables
/// adopted, the session built on the connection, the requests the previous
/// daemon left unanswered resent, then it serves as [`run`] does. Errors:
/// as [`run`], and [`resume::resume`]'s.
pub fn run_from(
    opts: &Options,
    notify: &Notify,
    listener: Option<metrics_http::Listener>,
    on_ready: impl FnOnce(),
    resume: Option<Resume>,
) -> Result<(), String> {
    prepare_process();
    let core = Arc::new(open_core(opts)?);
    core.stats().latency.set_enabled(opts.latency_histograms);
    // Handlers go in before the mount exists: a signal sent as soon as the
    // mount is visible must unmount, not be lost (or ignored, as SIGINT is
    // in background jobs of non-interactive shells).
    let signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGUSR1]).map_err(|e| format!("signal setup: {e}"))?;
    let fs = BoundFs::new(core.clone(), opts.attr_timeout, passthrough_with_atime(opts, core.root().fd()));
    let mut started = match resume {
        None => mount(opts, &core, fs)?,
        Some(r) => resume::resume(opts, &core, fs, r)?,
    };
    supervisor::started(&started.negotiated);
    let mut unmounter = started.session.unmount_callable();
    let serving = Serving::start(started.session, signals)?;
    serving.take_upgrade_requests();
    let metrics_fd = listener.as_ref().map(metrics_http::Listener::dup).transpose()?;
    let threads = threads::Threads::start(opts, notify, &core, listener, true)?;
    let mut live = handoff::Live {
        threads: Some(threads),
        gate: started.gate,
        negotiated: started.negotiated,
        fuse: started.fuse,
        metrics_fd,
    };
    core.maybe_wake_evictor();
    log::info!(
        "{} {} at {} (max_size {} bytes, watermarks {}/{}, {} threads{})",
        if resume::resumed() { "serving (taken over)" } else { "mounted" },
        opts.backing.display(),
        opts.mountpoint.display(),
        opts.max_size,
        opts.high_watermark,
        opts.low_watermark,
        opts.threads,
        opts.metrics_file.as_ref().map_or(String::new(), |p| format!(", metrics to {}", p.display())),
    );
    if let Some(a) = opts.metrics_listen {
        log::info!("serving metrics at http://{a}/metrics");
    }
    on_ready();
    notify.send(&format!("READY=1\nSTATUS=serving {} at {}", opts.backing.display(), opts.mountpoint.display()));
    let result = serving.wait(opts, notify, &core, &mut unmounter, &mut live);
    if let Some(t) = live.threads.take() {
        t.stop(&core);
    }
    log::info!(
        "unmounted {}; {} stamps written; final status {}",
        opts.mountpoint.display(),
        Stats::get(&core.stats().stamps),
        core.stats_json()
    );
    result.map_err(|e| format!("FUSE session ended with an error: {e}"))
}

/// Process-wide settings before anything is opened: the open file limit
/// raised (warned about when low and not root: one fd per cached inode),
/// and umask 0, so that modes from clients are applied exactly (their umask
/// is applied before, by the kernel or `Core::creation_mode`, which skips it
/// under a default ACL).
/// Makes `live` (bytes: the budget a previous daemon of this mount served
/// with, from `boundfs set` or argv) the budget this daemon starts with, in
/// place of argv's `max_size`, and logs a change; `whose` names the source.
/// The README's promise: a `set` lasts until the unmount (upgrades and
/// supervised restarts included).
pub(crate) fn live_max_size(opts: &mut Options, live: Option<u64>, whose: &str) {
    let Some(n) = live.filter(|&n| n > 0 && n != opts.max_size) else { return };
    log::info!(
        "max_size {n} bytes ({whose} live budget, from boundfs set) in place of the options' {} bytes",
        opts.max_size
    );
    opts.max_size = n;
}

fn prepare_process() {
    let nofile = sys::raise_nofile();
    if nofile < 65536 && sys::euid() != 0 {
        log::warn!(
            "open file limit is {nofile}: not root, so one fd is held per inode the kernel caches \
             (no file handles); lookups fail with EMFILE beyond it"
        );
    }
    // SAFETY: umask takes a plain mode and cannot fail.
    unsafe { libc::umask(0) };
}

/// The core over BACKING, its atime mode checked. Errors: as
/// [`Core::start`] and [`check_atime`].
fn open_core(opts: &Options) -> Result<Core, String> {
    let core = Core::start(fs::Config::from_options(opts))?;
    check_atime(opts, core.root().fd())?;
    test_clock_skew(&core);
    Ok(core)
}

/// Tests only (tests/sh/shared/clock-skew.sh): `BOUNDFS_TEST_CLOCK_SKEW_SECS`
/// makes this daemon's own clock for recency stamps run that many seconds
/// ahead (negative: behind), a node whose clock is wrong (see
/// `fs::clock`). Not an option: a real node's clock is what it is.
fn test_clock_skew(core: &Core) {
    let Some(secs) = std::env::var("BOUNDFS_TEST_CLOCK_SKEW_SECS").ok().and_then(|v| v.parse::<i64>().ok()) else {
        return;
    };
    log::warn!("BOUNDFS_TEST_CLOCK_SKEW_SECS: this node's clock for recency stamps is {secs:+}s off (tests only)");
    core.clock().set_skew(secs.saturating_mul(1_000_000_000));
}

/// Mounts `core` at the mountpoint: as root by mount(2) itself, so the type
/// reads fuse.boundfs in /proc/mounts as mount(8) and fstab expect; else
/// through fusermount3. The core's invalidations go to the new session.
/// Errors: the kernel's refusal, worded by `mount_error`.
fn mount(opts: &Options, core: &Arc<Core>, fs: BoundFs) -> Result<resume::Started, String> {
    let mut cfg = resume::session_config(opts);
    let negotiated = fs.negotiated.clone();
    let gate = Arc::new(crate::fuse::handover::Gate::default());
    let fs = Gated { inner: fs, gate: gate.clone() };
    let session = if sys::euid() == 0 {
        // Under a supervisor the connection it mounted (see `supervisor`).
        let fd = match supervisor::take_connection() {
            Some(fd) => fd,
            None => mount_kernel(opts)?,
        };
        fuser::Session::from_fd(fs, fd, cfg.acl, cfg)
    } else {
        cfg.mount_options = vec![
            MountOption::FSName(opts.backing.display().to_string()),
            MountOption::Subtype("boundfs".into()),
            MountOption::DefaultPermissions,
            MountOption::RW,
        ];
        if opts.noexec {
            cfg.mount_options.push(MountOption::NoExec);
        }
        cfg.mount_options.extend(opts.atime.words().into_iter().map(|w| MountOption::CUSTOM(w.into())));
        fuser::Session::new(fs, &opts.mountpoint, &cfg)
    }
    .map_err(|e| mount_error::user(opts, &e))?;
    core.invalidator().set_notifier(session.notifier());
    let fuse = std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(&session));
    Ok(resume::Started { session, gate, negotiated, fuse })
}

/// The FUSE session and the signal handler, each on its own thread, both
/// reporting to one channel.
struct Serving {
    events: mpsc::Receiver<Event>,
    /// Where the session thread and the upgrade hook report.
    tx: mpsc::Sender<Event>,
    /// The running session's number (a hand-over that fails after the
    /// readers stopped starts another on the same connection).
    generation: u64,
    session: thread::JoinHandle<()>,
    signals: signal_hook::iterator::Handle,
    signal_thread: thread::JoinHandle<()>,
}

impl Serving {
    /// Starts serving `session` and forwarding `signals`. Errors: a thread
    /// could not be started.
    fn start(
        session: fuser::Session<Gated<BoundFs>>,
        mut signals: signal_hook::iterator::Signals,
    ) -> Result<Serving, String> {
        let (tx, events) = mpsc::channel();
        let session = Self::spawn_session(session, tx.clone(), 0)?;
        let (handle, tx_out) = (signals.handle(), tx.clone());
        let signal_thread = thread::spawn(move || {
            for s in signals.forever() {
                if tx.send(Event::Signal(s)).is_err() {
                    break;
                }
            }
        });
        Ok(Serving { events, tx: tx_out, generation: 0, session, signals: handle, signal_thread })
    }

    /// Runs `session` on its own thread, reporting its end as `generation`.
    fn spawn_session(
        session: fuser::Session<Gated<BoundFs>>,
        tx: mpsc::Sender<Event>,
        generation: u64,
    ) -> Result<thread::JoinHandle<()>, String> {
        thread::Builder::new()
            .name("fuse-session".into())
            .spawn(move || {
                let _ = tx.send(Event::Unmounted(generation, session.run()));
            })
            .map_err(|e| e.to_string())
    }

    /// Serves `session` instead of the one whose readers were stopped.
    /// Errors: its thread could not be started.
    fn restart(&mut self, session: fuser::Session<Gated<BoundFs>>) -> Result<(), String> {
        self.generation += 1;
        self.session = Self::spawn_session(session, self.tx.clone(), self.generation)?;
        Ok(())
    }

    /// Routes `user.boundfs.upgrade` (see `fs::control`) to this loop (root
    /// daemons only: the hook is never set otherwise, ENOTSUP).
    fn take_upgrade_requests(&self) {
        if sys::euid() != 0 {
            // fuser unmounts a fusermount3 mount when the session's loop
            // ends: the readers' stop would take the mount away.
            return;
        }
        let tx = parking_lot::Mutex::new(self.tx.clone());
        crate::fs::set_upgrade_hook(Box::new(move |name| tx.lock().send(Event::Upgrade(name)).is_ok()));
    }

    /// Serves until the mount is gone: SIGUSR1 logs the status, a first
    /// SIGINT or SIGTERM unmounts, a second one exits at once (status 1).
    /// Returns how the session ended; a session ended by ECONNABORTED after
    /// DESTROY is a clean unmount (a RELEASE in flight at the last close
    /// of a lazily detached mount races the kernel's teardown), which must
    /// exit 0, or systemd would mark the unit failed.
    fn wait(
        self,
        opts: &Options,
        notify: &Notify,
        core: &Arc<Core>,
        unmounter: &mut fuser::SessionUnmounter,
        live: &mut handoff::Live,
    ) -> std::io::Result<()> {
        let mut stopping = false;
        let mut this = self;
        let result = loop {
            match this.events.recv() {
                Ok(Event::Signal(SIGUSR1)) => log::info!("status {}", core.stats_json()),
                Ok(Event::Signal(s)) if !stopping => {
                    stopping = true;
                    notify.send("STOPPING=1");
                    log::info!("signal {s}: unmounting {}", opts.mountpoint.display());
                    unmount(opts, unmounter);
                }
                Ok(Event::Signal(s)) => {
                    log::warn!("second signal {s}: exiting now without waiting for the unmount or pending stamps");
                    std::process::exit(1);
                }
                Ok(Event::Unmounted(g, r)) if g == this.generation => break r,
                Ok(Event::Unmounted(..)) => {}
                Ok(Event::Upgrade(name)) if !stopping => {
                    if let Err(e) = handoff::hand_over(&mut this, live, opts, notify, core, &name) {
                        log::error!("upgrade: {e}; this daemon (pid {}) goes on serving", std::process::id());
                    }
                }
                Ok(Event::Upgrade(_)) => log::warn!("upgrade asked while unmounting: refused"),
                Err(_) => break Ok(()),
            }
        };
        if !stopping {
            notify.send("STOPPING=1");
        }
        let _ = this.session.join();
        this.signals.close();
        let _ = this.signal_thread.join();
        match result {
            Err(e)
                if e.raw_os_error() == Some(libc::ECONNABORTED) && core.stats().requests.received(Op::Destroy) > 0 =>
            {
                log::debug!("FUSE session ended with {e} after DESTROY: a clean unmount");
                Ok(())
            }
            r => r,
        }
    }
}

/// Refuses an atime mode the mount cannot give. Access times seen through
/// the mount are BACKING's: its own mount decides when a read updates them
/// (the kernel applies the FUSE mount's flags to its cached copy only), and
/// the daemon can only hold them still (O_NOATIME: `noatime`, `nodiratime`).
/// So `strictatime` holds only over a BACKING mounted strictatime; the
/// default `relatime` follows BACKING (relatime on almost every system).
fn check_atime(opts: &Options, root: std::os::fd::BorrowedFd<'_>) -> Result<(), String> {
    if opts.atime.mode != AtimeMode::Strictatime {
        return Ok(());
    }
    let backing = match backing_atime(root).map_err(|e| format!("statfs {}: {e:?}", opts.backing.display()))? {
        AtimeMode::Strictatime => return Ok(()),
        AtimeMode::Noatime => "noatime",
        AtimeMode::Relatime => "relatime",
    };
    Err(format!(
        "strictatime: access times on the mount are BACKING's, and its filesystem is mounted {backing}; \
         remount it with strictatime (mount -o remount,strictatime $(findmnt -no TARGET -T {})) or drop strictatime",
        opts.backing.display()
    ))
}

/// The atime mode of the filesystem BACKING is on (its statvfs flags).
/// Errors: the errno of fstatvfs.
fn backing_atime(root: std::os::fd::BorrowedFd<'_>) -> Result<AtimeMode, fuser::Errno> {
    let v = sys::fstatvfs(root)?;
    Ok(if v.f_flag & libc::ST_NOATIME != 0 {
        AtimeMode::Noatime
    } else if v.f_flag & libc::ST_RELATIME != 0 {
        AtimeMode::Relatime
    } else {
        AtimeMode::Strictatime
    })
}

/// Whether kernel passthrough may serve reads under the mount's atime
/// options: the kernel opens its own backing file for a passthrough open,
/// with the client's flags (`fuse_passthrough_open`, fs/fuse/passthrough.c),
/// so its reads update BACKING's atime as BACKING's mount says, whatever
/// O_NOATIME the daemon's fd has. Under `noatime` over a BACKING not mounted
/// noatime, reads are therefore served by the daemon (logged once).
fn passthrough_with_atime(opts: &Options, root: std::os::fd::BorrowedFd<'_>) -> Passthrough {
    if opts.passthrough == Passthrough::Off || opts.atime.mode != AtimeMode::Noatime {
        return opts.passthrough;
    }
    let backing_noatime = backing_atime(root) == Ok(AtimeMode::Noatime);
    if !backing_noatime {
        log::info!(
            "kernel passthrough off: under noatime its reads would update BACKING's atimes; \
             mount BACKING's filesystem noatime to keep both"
        );
        return Passthrough::Off;
    }
    opts.passthrough
}

fn cpath(p: &std::path::Path) -> Result<std::ffi::CString, std::io::Error> {
    std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// mount(2) of type `fuse.boundfs` with BACKING as the source; returns the
/// /dev/fuse fd to serve. Options follow the kernel's fuse mount parameters
/// (Documentation/filesystems/fuse.rst): fd, rootmode, user_id, group_id.
/// Errors: one line naming the cause and the fix ([`mount_error`]).
pub(crate) fn mount_kernel(opts: &Options) -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::AsRawFd;
    let dev = sys::open(c"/dev/fuse", libc::O_RDWR).map_err(|e| mount_error::dev_fuse(opts, &e))?;
    let data = format!(
        "fd={},rootmode=40000,user_id={},group_id={},default_permissions{}",
        dev.as_raw_fd(),
        sys::euid(),
        sys::egid(),
        if opts.allow_other { ",allow_other" } else { "" }
    );
    let bad = |e: std::io::Error| mount_error::kernel(opts, &e);
    let (src, target) = (cpath(&opts.backing).map_err(bad)?, cpath(&opts.mountpoint).map_err(bad)?);
    // The directory the mount will cover, for the guard (see `guard`).
    let bare = guard::open_bare(&target).map_err(bad)?;
    let data = std::ffi::CString::new(data).map_err(|e| bad(e.into()))?;
    let mut flags = libc::MS_NOSUID | libc::MS_NODEV | opts.atime.mount_flags();
    if opts.noexec {
        flags |= libc::MS_NOEXEC;
    }
    let r =
        // SAFETY: NUL-terminated source, target, type and options strings alive for the call.
        unsafe { libc::mount(src.as_ptr(), target.as_ptr(), c"fuse.boundfs".as_ptr(), flags, data.as_ptr().cast()) };
    if r != 0 {
        return Err(mount_error::kernel(opts, &std::io::Error::last_os_error()));
    }
    guard::apply(std::os::fd::AsFd::as_fd(&bare), opts.guard, &opts.mountpoint);
    Ok(dev)
}

/// Unmounts; when busy, detaches lazily (the mount goes once no longer used).
fn unmount(opts: &Options, unmounter: &mut fuser::SessionUnmounter) {
    if sys::euid() != 0 && resume::resumed() {
        // A session on a handed-over connection has no fusermount3 mount of
        // its own to undo: ask fusermount3 by the mountpoint.
        match std::process::Command::new("fusermount3").arg("-u").arg(&opts.mountpoint).status() {
            Ok(s) if s.success() => {}
            r => log::warn!("fusermount3 -u {} failed: {r:?}", opts.mountpoint.display()),
        }
        return;
    }
    if sys::euid() != 0 {
        if let Err(e) = unmounter.unmount() {
            log::warn!("unmount of {} failed: {e}", opts.mountpoint.display());
        }
        return;
    }
    let Ok(m) = cpath(&opts.mountpoint) else { return };
    // SAFETY: a NUL-terminated path alive for the call.
    if unsafe { libc::umount2(m.as_ptr(), 0) } != 0 {
        let e = std::io::Error::last_os_error();
        log::warn!(
            "unmount of {} failed ({e}); detaching lazily: it goes once no longer busy",
            opts.mountpoint.display()
        );
        // SAFETY: a NUL-terminated path alive for the call.
        unsafe { libc::umount2(m.as_ptr(), libc::MNT_DETACH) };
    }
}
