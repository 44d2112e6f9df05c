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
pub mod metrics;
pub mod mount_error;
pub mod mount_helper;
pub mod sdnotify;
pub mod watchdog;

#[cfg(test)]
mod docs_tests;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;

use fuser::{Config, MountOption, SessionACL};

use crate::config::{AtimeMode, Options, Passthrough};
use crate::fs::Core;
use crate::fuse::BoundFs;
use crate::key::key_of;
use crate::ledger::policy::Policy;
use crate::ledger::{Kind, Ledger};
use crate::stats::{Op, Stats};
use crate::sys;
use crate::workers::{evictor, reconcile, scan, stamp, warm, watch, writers};
use sdnotify::Notify;

enum Event {
    Signal(i32),
    Unmounted(std::io::Result<()>),
}

/// Mounts and serves until unmounted. `on_ready` runs once the mount is live
/// and served (the daemon-mode parent exits 0 then); systemd, when `notify`
/// has a socket, gets `READY=1` at the same moment and `STOPPING=1` when
/// shutdown begins. Errors: a one-line reason (BACKING unreadable, the kernel
/// refused the mount …), before `on_ready` unless the session itself fails.
pub fn run(opts: &Options, notify: &Notify, on_ready: impl FnOnce()) -> Result<(), String> {
    let nofile = sys::raise_nofile();
    if nofile < 65536 && sys::euid() != 0 {
        log::warn!(
            "open file limit is {nofile}: not root, so one fd is held per inode the kernel caches \
             (no file handles); lookups fail with EMFILE beyond it"
        );
    }
    // Modes from clients are applied exactly: their umask is applied before (by
    // the kernel, or Core::creation_mode, which skips it under a default ACL).
    // SAFETY: umask takes a plain mode and cannot fail.
    unsafe { libc::umask(0) };
    let root_c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(opts.backing.as_os_str()))
        .map_err(|_| "backing path contains a NUL byte".to_string())?;
    let root_fd = sys::open(&root_c, libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| format!("cannot open {}: {e}", opts.backing.display()))?;
    let root_key = key_of(&sys::fstat(root_fd.as_fd()).map_err(|e| format!("stat {}: {e:?}", opts.backing.display()))?);
    let matcher = opts.block_matcher().map_err(|e| e.0)?;

    // The index is built in the background once mounted (workers::scan::index);
    // until then reservations are checked against an upper bound of usage:
    // the bytes used on BACKING's whole filesystem.
    let mut ledger = Ledger::new(opts.max_size);
    let root_st = sys::fstat(root_fd.as_fd()).map_err(|e| format!("stat {}: {e:?}", opts.backing.display()))?;
    ledger.upsert(key_of(&root_st), sys::allocated(&root_st), false, None, 0);
    ledger.set_kind(key_of(&root_st), Kind::Dir);
    let used_bound = sys::fstatvfs(root_fd.as_fd())
        .map(|v| (v.f_blocks - v.f_bfree) * v.f_frsize)
        .map_err(|e| format!("statfs {}: {e:?}", opts.backing.display()))?;
    ledger.start_indexing(used_bound);
    let policy =
        Policy { max_size: opts.max_size, high_watermark: opts.high_watermark, low_watermark: opts.low_watermark };
    let stamp_root = sys::reopen(root_fd.as_fd(), libc::O_PATH).map_err(|e| format!("reopen BACKING: {e:?}"))?;
    let index_root = sys::reopen(root_fd.as_fd(), libc::O_PATH).map_err(|e| format!("reopen BACKING: {e:?}"))?;
    let flush_backing = crate::fs::shared::flush_needed(opts.flush, root_fd.as_fd());
    if flush_backing || opts.shared {
        log::info!(
            "{}FLUSH {} (BACKING is {})",
            if opts.shared { "shared tier: opens hold a flock on the backing file; " } else { "" },
            if flush_backing { "closes the backing file (close-to-open)" } else { "off" },
            crate::fs::shared::commits_at_close(root_fd.as_fd()).unwrap_or("local"),
        );
    }
    check_atime(opts, root_fd.as_fd())?;
    let mut core = Core::new(opts.backing.clone(), root_fd, root_key, ledger, policy, matcher, opts.stamp_interval);
    core.set_modes(opts.shared, flush_backing);
    core.set_drop_cache(opts.drop_cache);
    core.set_noatime(opts.atime.mode == AtimeMode::Noatime, opts.atime.nodiratime);
    let core = Arc::new(core);
    core.unevictable().set_patterns(&opts.patterns);

    // Handlers go in before the mount exists: a signal sent as soon as the
    // mount is visible must unmount, not be lost (or ignored, as SIGINT is
    // in background jobs of non-interactive shells).
    use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGUSR1]).map_err(|e| format!("signal setup: {e}"))?;
    let mut cfg = Config::default();
    cfg.acl = if opts.allow_other { SessionACL::All } else { SessionACL::Owner };
    cfg.n_threads = Some(opts.threads);
    cfg.clone_fd = true;
    let fs = BoundFs::new(core.clone(), opts.attr_timeout, passthrough_with_atime(opts, core.root().fd()));
    let mut session = if sys::euid() == 0 {
        // As root, mount(2) directly so the type reads fuse.boundfs in
        // /proc/mounts, as mount(8) and fstab expect.
        let fd = mount_kernel(opts)?;
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
    let mut unmounter = session.unmount_callable();

    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let serve = {
        let tx = tx.clone();
        thread::Builder::new()
            .name("fuse-session".into())
            .spawn(move || {
                let _ = tx.send(Event::Unmounted(session.run()));
            })
            .map_err(|e| e.to_string())?
    };
    let sig_handle = signals.handle();
    let sig_thread = thread::spawn(move || {
        for s in signals.forever() {
            if tx.send(Event::Signal(s)).is_err() {
                break;
            }
        }
    });
    let mut workers = Vec::new();
    {
        let (c, s) = (core.clone(), stop.clone());
        let backing = opts.backing.clone();
        workers.push(thread::Builder::new().name("indexer".into()).spawn(move || {
            let r = scan::index(&c, &index_root, || s.load(Ordering::Relaxed));
            log::info!(
                "indexed {} objects ({} block files, {} bytes) in {} in {:.2}s{}",
                r.objects,
                r.blocks,
                r.bytes,
                backing.display(),
                r.seconds,
                if s.load(Ordering::Relaxed) { " (stopped early)" } else { "" }
            );
        }));
    }
    // Spawned here by the main thread, after the indexer (a first request
    // finds BACKING's blocks counted sooner) and before the threads that
    // can get stuck in the kernel on the mount (the invalidator, warm): a
    // daemon killed from now on has its connection aborted if it cannot
    // close it.
    let log_to = match &opts.log_file {
        Some(p) => watchdog::LogTo::File(p.clone()),
        None if !opts.foreground && !notify.requested() => watchdog::LogTo::Syslog,
        None => watchdog::LogTo::Stderr,
    };
    let watchdog = watchdog::start(&opts.mountpoint, &log_to)
        .map_err(|e| {
            log::warn!(
                "no watchdog ({e}): if this daemon is killed while a client waits on it, the mount's clients \
                 may hang until its connection is aborted by hand (echo 1 > {}/N/abort)",
                watchdog::CTL
            )
        })
        .ok();
    {
        let (c, s) = (core.clone(), stop.clone());
        workers.push(
            thread::Builder::new().name("evictor".into()).spawn(move || evictor::run(c, || s.load(Ordering::Relaxed))),
        );
        let (c, s) = (core.clone(), stop.clone());
        workers.push(
            thread::Builder::new().name("writers".into()).spawn(move || writers::run(c, || s.load(Ordering::Relaxed))),
        );
        let c = core.clone();
        workers.push(thread::Builder::new().name("invalidator".into()).spawn(move || c.invalidator().run()));
        let (c, s) = (core.clone(), stop.clone());
        workers.push(thread::Builder::new().name("stamper".into()).spawn(move || {
            // The kernel caches attributes for attr_timeout: show it the new mtimes.
            let stamped = |keys: &[_], ns| c.stamped(keys, ns);
            stamp::run(c.stamper(), &stamp_root, || s.load(Ordering::Relaxed), stamped);
            // The session has ended: no more uses. Persist the ones the
            // stamp_interval rate limit held back, so the LRU survives.
            for (key, ns) in stamp::flush_unstamped(&c.unstamped_uses(), &stamp_root) {
                c.stamped(&[key], ns);
            }
        }));
    }
    let metrics = match &opts.metrics_file {
        Some(path) => {
            let (c, s, path) = (core.clone(), stop.clone(), path.clone());
            let (mnt, every) = (opts.mountpoint.display().to_string(), opts.metrics_interval);
            metrics::write(&core, &path, &mnt);
            let t = thread::Builder::new().name("metrics".into()).spawn(move || metrics::run(c, path, mnt, every, &s));
            Some(t.map_err(|e| format!("cannot start the metrics writer: {e}"))?)
        }
        None => None,
    };
    if !opts.reconcile_interval.is_zero() {
        let (c, rec) = (core.clone(), reconcile::Reconciler::new(opts.stale_tmp));
        let every = opts.reconcile_interval;
        workers.push(thread::Builder::new().name("reconcile".into()).spawn(move || reconcile::run(c, rec, every)));
        let (c, s) = (core.clone(), stop.clone());
        workers.push(
            thread::Builder::new().name("watch".into()).spawn(move || watch::run(c, || s.load(Ordering::Relaxed))),
        );
        let (c, s, mnt, n) = (core.clone(), stop.clone(), opts.mountpoint.clone(), opts.warm_entries);
        workers.push(thread::Builder::new().name("warm".into()).spawn(move || {
            warm::run(c, &mnt, n, || s.load(Ordering::Relaxed));
        }));
    }
    core.maybe_wake_evictor();
    log::info!(
        "mounted {} at {} (max_size {} bytes, watermarks {}/{}, {} threads{})",
        opts.backing.display(),
        opts.mountpoint.display(),
        opts.max_size,
        opts.high_watermark,
        opts.low_watermark,
        opts.threads,
        opts.metrics_file.as_ref().map_or(String::new(), |p| format!(", metrics to {}", p.display())),
    );
    on_ready();
    notify.send(&format!("READY=1\nSTATUS=serving {} at {}", opts.backing.display(), opts.mountpoint.display()));

    let mut stopping = false;
    let result = loop {
        match rx.recv() {
            Ok(Event::Signal(SIGUSR1)) => log::info!("status {}", core.stats_json()),
            Ok(Event::Signal(s)) if !stopping => {
                stopping = true;
                notify.send("STOPPING=1");
                log::info!("signal {s}: unmounting {}", opts.mountpoint.display());
                unmount(opts, &mut unmounter);
            }
            Ok(Event::Signal(s)) => {
                log::warn!("second signal {s}: exiting now without waiting for the unmount or pending stamps");
                std::process::exit(1);
            }
            Ok(Event::Unmounted(r)) => break r,
            Err(_) => break Ok(()),
        }
    };
    if !stopping {
        notify.send("STOPPING=1");
    }
    let _ = serve.join();
    // After DESTROY the kernel tears the connection down; a read racing that
    // (a RELEASE in flight at the last close of a lazily detached mount)
    // ends the session with ECONNABORTED instead of ENODEV: a clean unmount
    // all the same, which must exit 0 (systemd would mark the unit failed).
    let result = match result {
        Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) && core.stats().requests.received(Op::Destroy) > 0 => {
            log::debug!("FUSE session ended with {e} after DESTROY: a clean unmount");
            Ok(())
        }
        r => r,
    };
    stop.store(true, Ordering::Relaxed);
    core.wake_evictor();
    core.stamper().kick();
    core.reconcile_waker().stop();
    core.invalidator().stop();
    if let Some(m) = &metrics {
        m.thread().unpark();
    }
    for w in workers.into_iter().flatten().chain(metrics) {
        let _ = w.join();
    }
    sig_handle.close();
    let _ = sig_thread.join();
    // A clean end: the watchdog has nothing to watch.
    drop(watchdog);
    log::info!(
        "unmounted {}; {} stamps written; final status {}",
        opts.mountpoint.display(),
        Stats::get(&core.stats().stamps),
        core.stats_json()
    );
    result.map_err(|e| format!("FUSE session ended with an error: {e}"))
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
fn mount_kernel(opts: &Options) -> Result<std::os::fd::OwnedFd, String> {
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
    Ok(dev)
}

/// Unmounts; when busy, detaches lazily (the mount goes once no longer used).
fn unmount(opts: &Options, unmounter: &mut fuser::SessionUnmounter) {
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
