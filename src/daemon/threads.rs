//! The daemon's background threads, started once the mount serves and
//! stopped after it is gone: the start-up index, the watchdog process, the
//! evictor, the check on passthrough writers, the invalidator, the stamp
//! writer, the metrics writer, the `/metrics` server, and (unless `reconcile_interval=0`) the
//! reconcile pass, the watch on BACKING and the warming of kernel entries.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use super::sdnotify::Notify;
use super::{metrics, metrics_http, watchdog};
use crate::config::Options;
use crate::fs::Core;
use crate::sys;
use crate::workers::{evictor, reconcile, scan, stamp, warm, watch, writers};

/// The running background threads. See the module docs.
pub struct Threads {
    stop: Arc<AtomicBool>,
    /// Set before `stop` by [`Threads::stop_for_hand_over`]: the session
    /// goes on in another process.
    handing_over: Arc<AtomicBool>,
    workers: Vec<std::io::Result<thread::JoinHandle<()>>>,
    metrics: Option<thread::JoinHandle<()>>,
    http: Option<metrics_http::Serving>,
    watchdog: Option<watchdog::Watchdog>,
}

impl Threads {
    /// Starts them over `core` as `opts` say (`notify`: where the watchdog
    /// logs when no log file is given; `listener`: the `metrics_listen`
    /// port, bound before the mount; `index`: run the start-up index, not
    /// when they are started again after a failed hand-over). Errors: BACKING cannot be reopened
    /// for the indexer or the stamp writer, or the metrics writer or server
    /// cannot start (a worker that fails to start is logged when joined).
    pub fn start(
        opts: &Options,
        notify: &Notify,
        core: &Arc<Core>,
        listener: Option<metrics_http::Listener>,
        index: bool,
    ) -> Result<Threads, String> {
        let stamp_root = sys::reopen(core.root().fd(), libc::O_PATH).map_err(|e| format!("reopen BACKING: {e:?}"))?;
        let index_root = sys::reopen(core.root().fd(), libc::O_PATH).map_err(|e| format!("reopen BACKING: {e:?}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let handing_over = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        if index {
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
        // Under a supervisor the connection must outlive this daemon: no abort.
        let watchdog = (!super::supervisor::supervised())
            .then(|| watchdog::start(&opts.mountpoint, &log_to))
            .transpose()
            .map_err(|e| {
                log::warn!(
                    "no watchdog ({e}): if this daemon is killed while a client waits on it, the mount's clients \
                     may hang until its connection is aborted by hand (echo 1 > {}/N/abort)",
                    watchdog::CTL
                )
            })
            .ok()
            .flatten();
        {
            let (c, s, h) = (core.clone(), stop.clone(), handing_over.clone());
            workers.push(
                thread::Builder::new()
                    .name("evictor".into())
                    .spawn(move || evictor::run(c, || s.load(Ordering::Relaxed), || !h.load(Ordering::Relaxed))),
            );
            let (c, s) = (core.clone(), stop.clone());
            workers.push(
                thread::Builder::new()
                    .name("writers".into())
                    .spawn(move || writers::run(c, || s.load(Ordering::Relaxed))),
            );
            let c = core.clone();
            workers.push(thread::Builder::new().name("invalidator".into()).spawn(move || c.invalidator().run()));
            let (c, s) = (core.clone(), stop.clone());
            workers.push(thread::Builder::new().name("stamper".into()).spawn(move || {
                // The kernel caches attributes for attr_timeout: show it the new mtimes.
                let stamped = |keys: &[_], ns| c.stamped(keys, ns);
                let now = || c.clock().now_ns();
                stamp::run(c.stamper(), &stamp_root, || s.load(Ordering::Relaxed), now, stamped);
                // The session has ended: no more uses. Persist the ones the
                // stamp_interval rate limit held back, so the LRU survives.
                for (key, ns) in stamp::flush_unstamped(&c.unstamped_uses(), &stamp_root, c.clock().now_ns()) {
                    c.stamped(&[key], ns);
                }
            }));
        }
        let metrics = match &opts.metrics_file {
            Some(path) => {
                let (c, s, h, path) = (core.clone(), stop.clone(), handing_over.clone(), path.clone());
                let (mnt, every) = (opts.mountpoint.display().to_string(), opts.metrics_interval);
                metrics::write(core, &path, &mnt);
                let t = thread::Builder::new()
                    .name("metrics".into())
                    .spawn(move || metrics::run(c, path, mnt, every, &s, &h));
                Some(t.map_err(|e| format!("cannot start the metrics writer: {e}"))?)
            }
            None => None,
        };
        let http = match listener {
            Some(l) => Some(
                l.serve(core.clone(), opts.mountpoint.display().to_string())
                    .map_err(|e| format!("cannot start the metrics server: {e}"))?,
            ),
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
        Ok(Threads { stop, handing_over, workers, metrics, http, watchdog })
    }

    /// A hand-over (`daemon::handoff`): stops them as [`Threads::stop`]
    /// does, but the session goes on in the next process, so the emptied
    /// directories waiting for the kernel to forget them are not removed
    /// (at an unmount they are; removing them here took directories from
    /// under clients still storing into them: `makedirs` found the name
    /// (EEXIST) and then no directory), and the metrics file stays.
    pub fn stop_for_hand_over(self, core: &Core) {
        self.handing_over.store(true, Ordering::Relaxed);
        self.stop(core)
    }

    /// Stops every thread (each finishes what it is doing: the stamp writer
    /// persists the uses the rate limit held back) and waits for them; then
    /// the watchdog goes, a clean end leaving it nothing to watch.
    pub fn stop(self, core: &Core) {
        self.stop.store(true, Ordering::Relaxed);
        core.wake_evictor();
        core.stamper().kick();
        core.reconcile_waker().stop();
        core.invalidator().stop();
        if let Some(m) = &self.metrics {
            m.thread().unpark();
        }
        if let Some(h) = self.http {
            h.stop();
        }
        for w in self.workers.into_iter().flatten().chain(self.metrics) {
            let _ = w.join();
        }
        drop(self.watchdog);
    }
}
