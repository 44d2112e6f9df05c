//! The daemon's life: index BACKING, mount, run the event loops and the
//! background threads (evictor, invalidator, stamper), wait for SIGINT/SIGTERM
//! or an external `umount`, then stop everything in order and report.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

use fuser::{Config, MountOption, SessionACL};

use crate::cache::{evictor, ledger::Ledger, policy::Policy, scan};
use crate::config::Options;
use crate::fs::{Core, key_of, sys};
use crate::fuse::BoundFs;
use crate::stats::Stats;

enum Event {
    Signal(i32),
    Unmounted(std::io::Result<()>),
}

/// Mounts and serves until unmounted. Errors: a one-line reason (BACKING
/// unreadable, the kernel refused the mount …).
pub fn run(opts: &Options) -> Result<(), String> {
    sys::raise_nofile();
    // Modes from clients are applied exactly (the kernel already applied their umask).
    unsafe { libc::umask(0) };
    let root_c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(opts.backing.as_os_str()))
        .map_err(|_| "backing path contains a NUL byte".to_string())?;
    let root_fd = {
        let fd = unsafe { libc::open(root_c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(format!("cannot open {}: {}", opts.backing.display(), std::io::Error::last_os_error()));
        }
        unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
    };
    let root_key = key_of(&sys::fstat(root_fd.as_fd()).map_err(|e| format!("stat {}: {e:?}", opts.backing.display()))?);
    let matcher = opts.block_matcher().map_err(|e| e.0)?;

    let t0 = Instant::now();
    let mut ledger = Ledger::new(opts.max_size);
    let report = scan::scan(&root_fd, &matcher, &mut ledger);
    log::info!(
        "indexed {} objects ({} block files, {} bytes) in {} in {:.2}s",
        report.objects,
        report.blocks,
        report.bytes,
        opts.backing.display(),
        t0.elapsed().as_secs_f64()
    );
    let policy =
        Policy { max_size: opts.max_size, high_watermark: opts.high_watermark, low_watermark: opts.low_watermark };
    let stamp_root = sys::reopen(root_fd.as_fd(), libc::O_PATH).map_err(|e| format!("reopen BACKING: {e:?}"))?;
    let core =
        Arc::new(Core::new(opts.backing.clone(), root_fd, root_key, ledger, policy, matcher, opts.stamp_interval));

    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::FSName(opts.backing.display().to_string()),
        MountOption::Subtype("boundfs".into()),
        MountOption::DefaultPermissions,
    ];
    cfg.acl = if opts.allow_other { SessionACL::All } else { SessionACL::Owner };
    cfg.n_threads = Some(opts.threads);
    cfg.clone_fd = true;
    let mut session = fuser::Session::new(BoundFs::new(core.clone()), &opts.mountpoint, &cfg)
        .map_err(|e| format!("mount at {} failed: {e}", opts.mountpoint.display()))?;
    core.inval.set_notifier(session.notifier());
    let mut unmounter = session.unmount_callable();
    log::info!(
        "mounted {} at {} (max_size {} bytes, watermarks {}/{}, {} threads)",
        opts.backing.display(),
        opts.mountpoint.display(),
        opts.max_size,
        opts.high_watermark,
        opts.low_watermark,
        opts.threads
    );

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
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
        .map_err(|e| format!("signal setup: {e}"))?;
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
        workers.push(
            thread::Builder::new().name("evictor".into()).spawn(move || evictor::run(c, || s.load(Ordering::Relaxed))),
        );
        let c = core.clone();
        workers.push(thread::Builder::new().name("invalidator".into()).spawn(move || c.inval.run()));
        let (c, s) = (core.clone(), stop.clone());
        workers.push(thread::Builder::new().name("stamper".into()).spawn(move || {
            c.stamper.run(&stamp_root, || s.load(Ordering::Relaxed), |n| Stats::add(&c.stats.stamps, n))
        }));
    }
    core.maybe_wake_evictor();

    let result = match rx.recv() {
        Ok(Event::Signal(s)) => {
            log::info!("signal {s}: unmounting {}", opts.mountpoint.display());
            if let Err(e) = unmounter.unmount() {
                log::warn!("unmount failed ({e}); detaching lazily: the mount goes once it is no longer busy");
                let m = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(opts.mountpoint.as_os_str()))
                    .unwrap_or_default();
                unsafe { libc::umount2(m.as_ptr(), libc::MNT_DETACH) };
            }
            match rx.recv() {
                Ok(Event::Unmounted(r)) => r,
                _ => Ok(()),
            }
        }
        Ok(Event::Unmounted(r)) => r,
        Err(_) => Ok(()),
    };
    let _ = serve.join();
    stop.store(true, Ordering::Relaxed);
    core.wake_evictor();
    core.stamper.kick();
    core.inval.stop();
    for w in workers.into_iter().flatten() {
        let _ = w.join();
    }
    sig_handle.close();
    let _ = sig_thread.join();
    log::info!("unmounted; final status {}", core.stats_json());
    result.map_err(|e| format!("FUSE session ended with an error: {e}"))
}
