//! `-o supervise`: the mount survives the daemon's death (SIGKILL, an OOM
//! kill, a panic). The process that mounts becomes a small supervisor: it
//! holds the /dev/fuse fd and nothing that touches the filesystem (one
//! thread, no FUSE request served), and runs the daemon as its child (this
//! binary again, with [`SOCK_ENV`] naming a unix socket to it). The design
//! and the kernel facts: docs/design/upgrade.md §2b and §5.
//!
//! The exchange, one SOCK_SEQPACKET message each way per daemon:
//!
//! - supervisor → daemon: `S`, the connection and the open handle table
//!   (`fs::held`; first start: the daemon answers the kernel's FUSE_INIT),
//!   or `R`, the negotiated INIT, the connection, the table and the dead
//!   daemon's /dev/fuse files (a restart:
//!   `daemon::resume` builds the session on the live connection, sends
//!   FUSE_NOTIFY_RESEND before reading anything, then closes them);
//! - daemon → supervisor, once it serves: `Y`, the negotiated INIT and all
//!   its /dev/fuse files, the per-thread clones included: a request a dead
//!   daemon's clone had read is resent only if that clone is still open at
//!   the RESEND (its last close ends its requests with ECONNABORTED), so
//!   the supervisor keeps them until the next daemon has resent.
//!
//! Death is seen on the daemon's main thread, not on waitpid: a daemon
//! killed while its invalidator waits in `fuse_reverse_inval_entry` on a
//! directory lock a client holds while its MKDIR waits for a reply is not
//! reaped until that MKDIR is answered, which only the next daemon can do
//! (after the RESEND). So the supervisor polls the main thread's state
//! every [`TICK`] besides `waitpid`, and restarts as soon as it is a zombie.
//! The watchdog (`watchdog`, which would abort the connection) is not
//! started under a supervisor.
//!
//! Stopping: SIGINT/SIGTERM to the supervisor unmounts (lazily when busy);
//! the daemon's session ends, it exits 0, and so does the supervisor. A
//! daemon that exits 0 by itself (an external `umount`, SIGTERM sent to the
//! daemon) ends the supervisor too. A daemon that cannot start 5 times in a
//! row (never reports serving) makes the supervisor unmount and exit 1.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::sdnotify::Notify;
use crate::config::Options;
use crate::fuse::handover::{Negotiated, fuse_fds_except, recv_fds, send_fds};
use crate::sys;

/// Environment variable naming the daemon's end of the supervisor's socket
/// (an fd number); set only by the supervisor.
pub const SOCK_ENV: &str = "BOUNDFS_SUPERVISOR_FD";
/// Environment variable telling the daemon how the supervisor logs
/// (`syslog`, `stderr` or `file`).
pub const LOG_ENV: &str = "BOUNDFS_SUPERVISOR_LOG";
/// Environment variable: how many times the daemon was restarted before this one.
pub const RESTARTS_ENV: &str = "BOUNDFS_RESTARTS";
/// Environment variable naming the `metrics_listen` socket (an fd number)
/// a supervised daemon serves: bound once by the supervisor and kept by it,
/// so the port stays open across a daemon's death.
pub const METRICS_ENV: &str = "BOUNDFS_SUPERVISOR_METRICS_FD";
/// How often the supervisor looks at the daemon's main thread.
pub const TICK: Duration = Duration::from_millis(10);
/// How long a starting daemon may take to report serving.
pub const READY_WAIT: Duration = Duration::from_secs(60);
/// Failed starts in a row after which the supervisor gives up.
pub const MAX_FAILED_STARTS: u32 = 5;

const START: u8 = b'S';
const RESUME: u8 = b'R';
const READY: u8 = b'Y';

static SUPERVISED: AtomicBool = AtomicBool::new(false);
static CONNECTION: Mutex<Option<OwnedFd>> = Mutex::new(None);
static NEGOTIATED: OnceLock<Arc<OnceLock<Negotiated>>> = OnceLock::new();
/// The daemon's /dev/fuse fds before its session ran (its clones come on top).
static FDS_BEFORE: OnceLock<usize> = OnceLock::new();

/// Whether this daemon runs under a supervisor (then it starts no watchdog).
pub fn supervised() -> bool {
    SUPERVISED.load(Ordering::Relaxed)
}

/// The connection the supervisor mounted, for this daemon's first start
/// (taken once; None when not supervised or after a restart).
pub fn take_connection() -> Option<OwnedFd> {
    CONNECTION.lock().ok()?.take()
}

/// The daemon records where its INIT lands (`BoundFs::negotiated`), for
/// the report to the supervisor, and (supervised) how many /dev/fuse fds it
/// has before its session runs and makes a clone per reader thread.
pub fn started(n: &Arc<OnceLock<Negotiated>>) {
    let _ = NEGOTIATED.set(n.clone());
    if supervised() {
        let _ = FDS_BEFORE.set(fuse_fds_except(-1).len());
    }
}

/// One message: tag, minor (4 bytes), flags (8 bytes), native order.
pub fn encode(tag: u8, n: Negotiated) -> Vec<u8> {
    let mut b = vec![tag];
    b.extend_from_slice(&n.minor.to_ne_bytes());
    b.extend_from_slice(&n.flags.to_ne_bytes());
    b
}

/// [`encode`]'s inverse; None for a message of another length.
pub fn decode(b: &[u8]) -> Option<(u8, Negotiated)> {
    if b.len() != 13 {
        return None;
    }
    let minor = u32::from_ne_bytes(b[1..5].try_into().ok()?);
    let flags = u64::from_ne_bytes(b[5..13].try_into().ok()?);
    Some((b[0], Negotiated { flags, minor }))
}

/// This process's end of the supervisor's socket, if it was started as a
/// supervised daemon ([`SOCK_ENV`] set; removed from the environment).
/// Call before any thread exists.
pub fn daemon_socket() -> Option<OwnedFd> {
    let fd: RawFd = std::env::var(SOCK_ENV).ok()?.parse().ok()?;
    // SAFETY: called from main before any thread is started.
    unsafe { std::env::remove_var(SOCK_ENV) };
    // SAFETY: F_GETFD only reads the flags of a descriptor number.
    if fd < 3 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: the supervisor left this fd open for us alone; nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: F_SETFD on our own open fd.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    Some(sock)
}

/// In a supervised daemon: the `metrics_listen` socket its supervisor
/// bound ([`METRICS_ENV`]), made close-on-exec again.
fn metrics_socket() -> Option<OwnedFd> {
    let fd: RawFd = std::env::var(METRICS_ENV).ok()?.parse().ok()?;
    // SAFETY: F_GETFD only reads the flags of a descriptor number.
    if fd < 3 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: the supervisor left this fd open for this daemon; nothing else here owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: F_SETFD on our own open fd.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    Some(sock)
}

/// Environment variables with the supervisor's checked BACKING and
/// mountpoint (canonical), and the directory it was started in.
const PATH_ENV: [&str; 3] = ["BOUNDFS_SUPERVISOR_BACKING", "BOUNDFS_SUPERVISOR_MOUNTPOINT", "BOUNDFS_SUPERVISOR_CWD"];

/// In a supervised daemon (before [`daemon_socket`]): the BACKING and
/// mountpoint its supervisor checked and mounted, used as they are (a check
/// would stat the live mount, which waits for this daemon).
pub fn handed_paths() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    std::env::var_os(SOCK_ENV)?;
    Some((std::env::var_os(PATH_ENV[0])?.into(), std::env::var_os(PATH_ENV[1])?.into()))
}

/// In the supervisor, before any thread and before detaching: the
/// directory relative paths in argv start from, for its daemons.
pub fn note_cwd() {
    if let Ok(d) = std::env::current_dir() {
        // SAFETY: called from main before any thread is started.
        unsafe { std::env::set_var(PATH_ENV[2], d) };
    }
}

/// How the supervised daemon logs: as its supervisor does ([`LOG_ENV`]).
pub fn daemon_log_sink(opts: &Options) -> crate::logging::Sink {
    match std::env::var(LOG_ENV).as_deref() {
        Ok("syslog") => crate::logging::Sink::Syslog,
        Ok("file") => match opts.log_file.as_deref().map(super::daemonize::open_log) {
            Some(Ok(f)) => crate::logging::Sink::File(f),
            _ => crate::logging::Sink::Stderr,
        },
        _ => crate::logging::Sink::Stderr,
    }
}

/// The supervised daemon: takes the connection from `sock`, serves it (a
/// first start answers the kernel's INIT; a restart resumes it, see
/// `daemon::resume`), reports serving with its /dev/fuse files, and serves
/// until unmounted. Errors: a bad message from the supervisor, and
/// `daemon::run_from`'s.
pub fn daemon_main(opts: &Options, notify: &Notify, sock: OwnedFd) -> Result<(), String> {
    SUPERVISED.store(true, Ordering::Relaxed);
    let mut buf = [0u8; 64];
    let (n, mut fds) = recv_fds(sock.as_fd(), &mut buf).map_err(|e| format!("from the supervisor: {e}"))?;
    let (tag, negotiated) = decode(&buf[..n]).ok_or("a bad message from the supervisor")?;
    if fds.is_empty() {
        return Err("the supervisor sent no FUSE connection".into());
    }
    let fuse = fds.remove(0);
    if fds.is_empty() {
        return Err("the supervisor sent no open handle table".into());
    }
    let table = crate::fs::held::OpenTable::map(fds.remove(0)).map_err(|e| format!("open handle table: {e}"))?;
    crate::fs::held::install(table);
    let mut opts = opts.clone();
    super::live_max_size(&mut opts, crate::fs::held::recorded_max_size(), "the previous daemon's");
    let opts = &opts;
    let resume = if tag == START {
        *CONNECTION.lock().map_err(|_| "poisoned")? = Some(fuse);
        None
    } else {
        Some(super::Resume { fuse, negotiated, old_fuse_fds: fds, state: None })
    };
    let threads = opts.threads;
    let listener = metrics_socket().map(super::metrics_http::Listener::from_fd);
    super::run_from(opts, notify, listener, || report_serving(sock.as_fd(), threads), resume)
}

/// Tells the supervisor this daemon serves: the negotiated INIT and every
/// /dev/fuse file it has (waits up to 1 s for the session to make its
/// `threads - 1` clones, on top of the fds it had before: the count alone
/// was reached by the connection and the session's own fd, so a report
/// could go out before the clone, which then died with the daemon and took
/// the request it had read down with ECONNABORTED).
fn report_serving(sock: BorrowedFd<'_>, threads: usize) {
    let start = Instant::now();
    let want = FDS_BEFORE.get().copied().unwrap_or(1) + threads.saturating_sub(1);
    let mut fds = fuse_fds_except(sock.as_raw_fd());
    while fds.len() < want && start.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(1));
        fds = fuse_fds_except(sock.as_raw_fd());
    }
    let n = NEGOTIATED.get().and_then(|n| n.get().copied()).unwrap_or_default();
    // SAFETY: the session's /dev/fuse fds stay open while it runs (it runs).
    let borrowed: Vec<_> = fds.iter().map(|&fd| unsafe { BorrowedFd::borrow_raw(fd) }).collect();
    if let Err(e) = send_fds(sock, &encode(READY, n), &borrowed) {
        log::warn!("cannot report to the supervisor: {e}");
    }
}

/// One running daemon.
struct Daemon {
    child: Child,
    sock: OwnedFd,
    since: Instant,
}

/// How a daemon ended.
enum End {
    /// It exited 0: the mount is gone (unmounted).
    Clean,
    /// It died; why.
    Died(String),
}

/// The supervisor: mounts (root only), starts the daemon, restarts it on the
/// live connection whenever it dies, until the mount is unmounted (see the
/// module docs). `argv`: the daemon's command line (this one); `on_ready`
/// runs once the first daemon serves; `listener`: the `metrics_listen`
/// socket, kept here and served by each daemon. Errors: not root, the mount refused,
/// the daemon could not start [`MAX_FAILED_STARTS`] times in a row.
pub fn run(
    opts: &Options,
    notify: &Notify,
    argv: &[OsString],
    listener: Option<super::metrics_http::Listener>,
    on_ready: impl FnOnce(),
) -> Result<(), String> {
    if sys::euid() != 0 {
        return Err("supervise needs root (the supervisor mounts with mount(2) itself)".into());
    }
    let signal = Arc::new(AtomicUsize::new(0));
    for s in [libc::SIGINT, libc::SIGTERM] {
        signal_hook::flag::register_usize(s, signal.clone(), s as usize).map_err(|e| format!("signal setup: {e}"))?;
    }
    let table = crate::fs::held::OpenTable::create().map_err(|e| format!("open handle table: {e}"))?;
    let fuse = super::mount_kernel(opts)?;
    let conn = crate::claim::boundfs_mount_at(&opts.mountpoint).map(|m| m.dev);
    let metrics = listener.map(super::metrics_http::Listener::into_fd);
    let mut sup = Supervisor {
        opts,
        argv,
        fuse,
        table,
        metrics,
        negotiated: None,
        clones: Vec::new(),
        restarts: 0,
        dead: Vec::new(),
        conn,
    };
    let mut daemon = match sup.start_retrying() {
        Ok(d) => d,
        Err(e) => {
            unmount(opts);
            return Err(e);
        }
    };
    log::info!(
        "supervisor {} serves {} through daemon {}",
        std::process::id(),
        opts.mountpoint.display(),
        daemon.child.id()
    );
    on_ready();
    notify.send("READY=1");
    let mut stopping = false;
    loop {
        match sup.watch(&mut daemon, &signal, &mut stopping, opts) {
            End::Clean => break,
            End::Died(how) if stopping => {
                log::warn!("daemon {} {how} while stopping; not restarted", daemon.child.id());
                break;
            }
            End::Died(how) => {
                let t0 = Instant::now();
                let old = daemon.child.id();
                let lived = daemon.since.elapsed();
                sup.dead.push(daemon.child);
                sup.restarts += 1;
                drop_kernel_caches();
                daemon = match sup.start_retrying() {
                    Ok(d) => d,
                    Err(e) => {
                        unmount(opts);
                        return Err(e);
                    }
                };
                log::warn!(
                    "daemon {old} {how} after {:.1}s; daemon {} serves {} again {:.1} ms later (restart {})",
                    lived.as_secs_f64(),
                    daemon.child.id(),
                    opts.mountpoint.display(),
                    t0.elapsed().as_secs_f64() * 1e3,
                    sup.restarts
                );
            }
        }
    }
    notify.send("STOPPING=1");
    let _ = daemon.child.wait();
    Ok(())
}

struct Supervisor<'a> {
    opts: &'a Options,
    argv: &'a [OsString],
    /// The mount's connection (held for the mount's life).
    fuse: OwnedFd,
    /// The daemons' table of open handles (`fs::held`).
    table: OwnedFd,
    /// The `metrics_listen` socket each daemon serves.
    metrics: Option<OwnedFd>,
    /// What the first daemon's INIT settled.
    negotiated: Option<Negotiated>,
    /// The running daemon's /dev/fuse files (closed after the next one's RESEND).
    clones: Vec<OwnedFd>,
    restarts: u64,
    /// Dead daemons not yet reaped (a wedged one exits only after the
    /// next daemon answered what it left).
    dead: Vec<Child>,
    /// The mount's device in /proc/self/mountinfo (0, the connection's
    /// number), if found after mounting.
    conn: Option<(u32, u32)>,
}

impl Supervisor<'_> {
    /// [`Supervisor::start`], retried up to [`MAX_FAILED_STARTS`] times.
    fn start_retrying(&mut self) -> Result<Daemon, String> {
        let mut last = String::new();
        for _ in 0..MAX_FAILED_STARTS {
            match self.start() {
                Ok(d) => return Ok(d),
                Err(e) => {
                    log::error!("daemon did not start: {e}");
                    last = e;
                }
            }
        }
        Err(format!("the daemon failed to start {MAX_FAILED_STARTS} times in a row; last: {last}"))
    }

    /// Starts a daemon (first start, or a restart on the live connection)
    /// and waits until it serves. Errors: the spawn, the socket, the daemon
    /// died or did not report within [`READY_WAIT`].
    fn start(&mut self) -> Result<Daemon, String> {
        let (ours, theirs) = socketpair()?;
        let their_fd = theirs.as_raw_fd();
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0("boundfs")
            .args(self.argv.iter().skip(1))
            .env(SOCK_ENV, their_fd.to_string())
            .env(RESTARTS_ENV, self.restarts.to_string())
            .env("BOUNDFS_SUPERVISOR_PID", std::process::id().to_string())
            .env(PATH_ENV[0], &self.opts.backing)
            .env(PATH_ENV[1], &self.opts.mountpoint);
        if let Some(d) = std::env::var_os(PATH_ENV[2]) {
            cmd.current_dir(d);
        }
        let metrics_fd = self.metrics.as_ref().map(|m| m.as_raw_fd());
        if let Some(m) = metrics_fd {
            cmd.env(METRICS_ENV, m.to_string());
        }
        // SAFETY: between fork and exec only fcntl, async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                for fd in std::iter::once(their_fd).chain(metrics_fd) {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| format!("cannot start the daemon: {e}"))?;
        drop(theirs);
        let (msg, fds) = match self.negotiated {
            None => (encode(START, Negotiated::default()), vec![self.fuse.as_fd(), self.table.as_fd()]),
            Some(n) => {
                let mut fds = vec![self.fuse.as_fd(), self.table.as_fd()];
                fds.extend(self.clones.iter().map(|f| f.as_fd()).take(crate::fuse::handover::MAX_FDS - 2));
                (encode(RESUME, n), fds)
            }
        };
        let sent = send_fds(ours.as_fd(), &msg, &fds).map_err(|e| format!("to the daemon: {e}"));
        let ready = sent.and_then(|()| wait_ready(&ours, &mut child));
        let (n, clones) = match ready {
            Ok(r) => r,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        self.negotiated.get_or_insert(n);
        // The previous daemon's files close only now: the new one has resent.
        self.clones = clones;
        Ok(Daemon { child, sock: ours, since: Instant::now() })
    }

    /// Whether the mount is still there (in /proc/self/mountinfo; a lazy
    /// unmount takes it out at once). True when its device was not found.
    fn mounted(&self) -> bool {
        self.conn.is_none_or(|dev| crate::claim::mounts().iter().any(|m| m.dev == dev))
    }

    /// Waits until `d` ends (see [`End`]), unmounting on SIGINT/SIGTERM and
    /// reaping dead daemons as they finish exiting.
    fn watch(&mut self, d: &mut Daemon, signal: &AtomicUsize, stopping: &mut bool, opts: &Options) -> End {
        let pid = d.child.id() as libc::pid_t;
        let mut hup = false;
        loop {
            let s = signal.swap(0, Ordering::Relaxed);
            if s != 0 {
                log::info!("signal {s}: unmounting {}", opts.mountpoint.display());
                *stopping = true;
                unmount(opts);
            }
            if hup {
                std::thread::sleep(TICK);
            } else {
                hup = wait_readable(d.sock.as_fd(), TICK);
            }
            self.dead.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
            match d.child.try_wait() {
                Ok(Some(st)) if st.success() => return End::Clean,
                Ok(Some(st)) => return End::Died(format!("ended ({st})")),
                Ok(None) | Err(_) => {}
            }
            // A daemon ending after the unmount loses its main thread
            // before it is reaped, too: that is no death while the mount is
            // gone (the loop reaps it).
            if main_thread_dead(pid) && self.mounted() {
                return End::Died("died (its main thread is gone, a thread is still in the kernel)".into());
            }
        }
    }
}

/// After a daemon's death, before the next one starts: the kernel's unused
/// dentries and inodes are dropped (`vm.drop_caches = 2`, every filesystem
/// of the node; page cache kept). Why: the dead daemon's `O_PATH` fds kept
/// the inode numbers the kernel holds from being reused by BACKING's
/// filesystem; with them gone, a file the next daemon evicts (unlinks) frees
/// its number, a new block gets it, and the kernel, still caching the old
/// inode under that node id with the same generation, serves the new block
/// through the old inode: wrong bytes (seen in crash-recovery.sh, 2 runs of
/// 3 at 20 kills; none without eviction, none with this drop). Inodes still
/// in use (open files, a cwd) stay; their files are pinned (`fs::held`)
/// unless a client unlinks one. Cost: other workloads of the node look
/// their dentries up again; measured below 0.6 s here. A targeted drop
/// (FUSE_NOTIFY_INVAL_ENTRY for every entry of BACKING) would spare them.
fn drop_kernel_caches() {
    let t = Instant::now();
    match std::fs::write("/proc/sys/vm/drop_caches", "2") {
        Ok(()) => log::info!("dropped the kernel's unused dentries and inodes in {} ms", t.elapsed().as_millis()),
        Err(e) => log::warn!(
            "cannot drop the kernel's dentries and inodes ({e}): a reused inode number may be served through a stale inode"
        ),
    }
}

/// Waits for the daemon's "serving" and returns its INIT and files.
fn wait_ready(sock: &OwnedFd, child: &mut Child) -> Result<(Negotiated, Vec<OwnedFd>), String> {
    let start = Instant::now();
    while start.elapsed() < READY_WAIT {
        if wait_readable(sock.as_fd(), Duration::from_millis(50)) {
            let mut buf = [0u8; 64];
            let (n, fds) = recv_fds(sock.as_fd(), &mut buf).map_err(|e| format!("from the daemon: {e}"))?;
            return match decode(&buf[..n]) {
                Some((READY, neg)) => Ok((neg, fds)),
                _ if n == 0 => Err(format!("the daemon ended before serving ({:?})", child.try_wait())),
                _ => Err("a bad message from the daemon".into()),
            };
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("the daemon ended before serving ({st})"));
        }
    }
    Err(format!("the daemon did not serve within {} s", READY_WAIT.as_secs()))
}

/// Whether `fd` is readable or hung up within `t`.
fn wait_readable(fd: BorrowedFd<'_>, t: Duration) -> bool {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd alive for the call.
    unsafe { libc::poll(&mut p, 1, t.as_millis() as libc::c_int) > 0 }
}

/// Whether process `pid`'s main thread has exited (zombie or gone) while
/// the process may still have a thread in the kernel.
pub fn main_thread_dead(pid: libc::pid_t) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/stat")) {
        Ok(s) => s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

fn socketpair() -> Result<(OwnedFd, OwnedFd), String> {
    let mut sv = [0; 2];
    // SAFETY: `sv` is a writable array of two ints.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) } != 0 {
        return Err(format!("socketpair: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both fds were just made and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) })
}

/// Unmounts the mountpoint; lazily when busy.
fn unmount(opts: &Options) {
    let Ok(m) = super::cpath(&opts.mountpoint) else { return };
    // SAFETY: a NUL-terminated path alive for the call.
    if unsafe { libc::umount2(m.as_ptr(), 0) } != 0 {
        // SAFETY: a NUL-terminated path alive for the call.
        unsafe { libc::umount2(m.as_ptr(), libc::MNT_DETACH) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let n = Negotiated { flags: 1 << 39 | 5, minor: 45 };
        assert_eq!(decode(&encode(RESUME, n)), Some((RESUME, n)));
        assert_eq!(decode(b"Y"), None);
    }

    /// A process whose main thread exited while another thread lives is
    /// seen dead (what waitpid cannot tell); a live one is not.
    #[test]
    fn sees_a_dead_main_thread() {
        assert!(!main_thread_dead(std::process::id() as libc::pid_t));
        let mut c = Command::new("true").spawn().unwrap();
        let pid = c.id() as libc::pid_t;
        let start = Instant::now();
        while !main_thread_dead(pid) {
            assert!(start.elapsed() < Duration::from_secs(5), "an exited, unreaped child is a zombie");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(c.try_wait().ok().flatten().map(|s| s.success()), Some(true), "not reaped before");
    }
}
