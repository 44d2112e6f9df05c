//! The watchdog: a small process, started at mount time, that aborts the
//! mount's FUSE connection when the daemon dies without closing it.
//!
//! Why it is needed: the kernel aborts a connection when the last /dev/fuse
//! descriptor closes, and a process's descriptors close only once its last
//! thread has exited. A thread can be stuck in the kernel where a SIGKILL
//! does not reach it: the invalidator's `FUSE_NOTIFY_INVAL_ENTRY` write locks
//! the parent directory's inode (`fuse_reverse_inval_entry`, fs/fuse/dev.c,
//! an uninterruptible lock), which a client's MKDIR, CREATE or RENAME in that
//! directory holds while it waits for the daemon's reply. Killed at that
//! moment (SIGKILL, an OOM kill), the daemon's other threads die, the reply
//! never comes, the invalidator never gets the lock, /dev/fuse never closes:
//! every client of the mount waits forever (the warm thread's lookups through
//! the mount can wait the same way, on a directory's lock in the kernel's
//! lookup). Aborting the connection through
//! fusectl (`/sys/fs/fuse/connections/N/abort`, N the mount's device minor)
//! ends the pending requests, which frees the lock, which lets the stuck
//! thread finish exiting.
//!
//! How: the daemon's main thread spawns `/proc/self/exe` as
//! `boundfs-watchdog` with the `abort` file of its connection open on fd 3
//! and nothing else: no /dev/fuse (holding one would keep the connection
//! alive), no claim flock, cwd `/`. An open `abort` file does not keep the
//! connection alive, and once the connection is gone it reaches nothing,
//! not even a later connection given the same number (fs/fuse/control.c
//! clears the file's connection when it removes the directory). The
//! watchdog asks to be sent SIGUSR2 when its parent thread (the daemon's
//! main thread) exits (`PR_SET_PDEATHSIG`); that thread exits only when the
//! process dies, and dies even when another thread is stuck. It then gives
//! the daemon [`GRACE`] to finish exiting (the kernel aborts the connection
//! itself then), and otherwise writes to `abort` and logs a warning. A clean
//! shutdown ends the watchdog first ([`Watchdog`]'s drop). It ignores
//! SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 (a Ctrl-C in the terminal or
//! systemd's stop reach the whole process group or cgroup; the watchdog
//! goes with the daemon).
//!
//! Needs fusectl mounted at /sys/fs/fuse/connections: a root daemon mounts
//! it if it is not; a daemon that is not root (fusermount3) uses it if it is
//! there (systemd mounts it at boot; the connection's files belong to the
//! user who mounted), else runs without a watchdog and says so. While a
//! watchdog runs, fusectl cannot be unmounted (its `abort` file is open).

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::claim;
use crate::logging;

/// Where fusectl is mounted.
pub const CTL: &str = "/sys/fs/fuse/connections";
/// How long a dying daemon gets to close its connection itself before the
/// watchdog aborts it.
pub const GRACE: Duration = Duration::from_secs(1);
/// The name the watchdog runs under (argv\[0\]; its thread name is
/// `boundfs-watch`).
pub const ARGV0: &str = "boundfs-watchdog";
/// The fd the watchdog finds its connection's `abort` file on.
const ABORT_FD: libc::c_int = 3;
/// The parent-death signal (its default action would end the watchdog; it
/// is blocked before it is asked for).
const WAKE: libc::c_int = libc::SIGUSR2;

/// Where the watchdog logs (as the daemon does).
pub enum LogTo {
    /// stderr, inherited from the daemon (`-f`, systemd, a detached daemon
    /// whose stderr is its log file).
    Stderr,
    /// Appended to this file (`log_file`).
    File(PathBuf),
    /// syslog (a detached daemon without `log_file`).
    Syslog,
}

/// The running watchdog of a mount. Dropping it (a clean shutdown) ends it.
pub struct Watchdog {
    child: Child,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the watchdog of the mount at `mountpoint` (canonical, mounted by
/// this process; it asks the mount nothing). Call it from the main thread,
/// before any thread that could wait on the mount in the kernel starts: the
/// watchdog acts when the thread that started it exits. Errors
/// (a one-line reason; the daemon serves on without a watchdog): the mount
/// is not in /proc/self/mountinfo, fusectl is not mounted and cannot be
/// (not root), its `abort` file cannot be opened, the spawn failed.
pub fn start(mountpoint: &Path, log: &LogTo) -> Result<Watchdog, String> {
    let m = claim::boundfs_mount_at(mountpoint).ok_or("the mount is not in /proc/self/mountinfo")?;
    if m.dev.0 != 0 {
        return Err(format!("the mount's device {}:{} is not a FUSE connection's", m.dev.0, m.dev.1));
    }
    mount_fusectl()?;
    let path = format!("{CTL}/{}/abort", m.dev.1);
    let abort = open_abort(&path)?;
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0(ARGV0)
        .arg(std::process::id().to_string())
        .arg(m.dev.1.to_string())
        .arg(mountpoint)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    match log {
        LogTo::Stderr => {}
        LogTo::File(p) => {
            cmd.arg(OsStr::new("file")).arg(p);
        }
        LogTo::Syslog => {
            cmd.arg("syslog");
        }
    }
    let fd = abort.as_raw_fd();
    // SAFETY: between fork and exec only async-signal-safe calls (dup2,
    // fcntl, close_range), no allocation.
    unsafe {
        cmd.pre_exec(move || {
            if fd == ABORT_FD {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, ABORT_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Everything above it closes at the exec: the /dev/fuse fds
            // (fuser's clones, fusermount3's) and the claim's flock.
            libc::syscall(libc::SYS_close_range, ABORT_FD as u32 + 1, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| format!("cannot start it: {e}"))?;
    log::debug!("watchdog {} watches FUSE connection {} ({path})", child.id(), m.dev.1);
    Ok(Watchdog { child })
}

/// Mounts fusectl at [`CTL`] unless it is there. Errors: not root, or the
/// mount failed.
fn mount_fusectl() -> Result<(), String> {
    if claim::mounts().iter().any(|m| m.fstype == "fusectl" && m.point == Path::new(CTL)) {
        return Ok(());
    }
    if crate::sys::euid() != 0 {
        return Err(format!("fusectl is not mounted at {CTL} (as root: mount -t fusectl fusectl {CTL})"));
    }
    let target = CString::new(CTL).map_err(|e| e.to_string())?;
    // SAFETY: NUL-terminated source, target and type; null data is allowed for fusectl.
    let r = unsafe { libc::mount(c"fusectl".as_ptr(), target.as_ptr(), c"fusectl".as_ptr(), 0, std::ptr::null()) };
    if r != 0 {
        return Err(format!("cannot mount fusectl at {CTL}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn open_abort(path: &str) -> Result<OwnedFd, String> {
    let c = CString::new(path).map_err(|e| e.to_string())?;
    crate::sys::open(&c, libc::O_WRONLY).map_err(|e| format!("cannot open {path}: {e}"))
}

/// Whether this process was started as the watchdog (argv\[0\] is [`ARGV0`]).
pub fn invoked_as_watchdog(argv0: &OsStr) -> bool {
    argv0 == ARGV0
}

/// The watchdog process: `boundfs-watchdog PID N MOUNTPOINT [syslog | file
/// PATH]`, the `abort` file of connection N on fd 3. Waits until the daemon
/// PID (its parent) dies, aborts the connection if the daemon has not
/// finished exiting within [`GRACE`], and exits 0 (2 if started wrongly).
pub fn main(argv: &[OsString]) -> ! {
    // Any fd the exec did not close (a kernel without CLOSE_RANGE_CLOEXEC).
    // SAFETY: close_range on fds above ABORT_FD, which no Rust object owns in this fresh process.
    unsafe { libc::syscall(libc::SYS_close_range, ABORT_FD as u32 + 1, u32::MAX, 0) };
    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"boundfs-watch".as_ptr()) };
    let arg = |i: usize| argv.get(i).map(|a| a.as_os_str());
    let (Some(pid), Some(conn), Some(mnt)) = (
        arg(1).and_then(|a| a.to_str()?.parse::<libc::pid_t>().ok()),
        arg(2).and_then(|a| a.to_str()).map(str::to_string),
        arg(3).map(Path::new),
    ) else {
        eprintln!("{ARGV0}: started by boundfs only (PID N MOUNTPOINT [syslog | file PATH])");
        std::process::exit(2);
    };
    // SAFETY: F_GETFD only reads the flags of a descriptor number; no pointers.
    if unsafe { libc::fcntl(ABORT_FD, libc::F_GETFD) } < 0 {
        eprintln!("{ARGV0}: no abort file on fd {ABORT_FD}");
        std::process::exit(2);
    }
    let sink = match arg(4).map(OsStr::as_bytes) {
        Some(b"syslog") => logging::Sink::Syslog,
        Some(b"file") => match arg(5).map(|p| std::fs::OpenOptions::new().append(true).open(p)) {
            Some(Ok(f)) => logging::Sink::File(f),
            _ => logging::Sink::Stderr,
        },
        _ => logging::Sink::Stderr,
    };
    logging::init(sink);
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGPIPE] {
        // SAFETY: SIG_IGN installs no handler code.
        unsafe { libc::signal(s, libc::SIG_IGN) };
    }
    // SAFETY: sigset_t is plain data; all-zero is a valid value (emptied below).
    let mut wake: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: the set and the pointers are valid locals; blocking WAKE affects this thread only.
    unsafe {
        libc::sigemptyset(&mut wake);
        libc::sigaddset(&mut wake, WAKE);
        libc::sigprocmask(libc::SIG_BLOCK, &wake, std::ptr::null_mut());
        // Asked for after the block, so it cannot end us. A death before
        // this call shows below: the main thread (the process's first, its
        // id the process id) is a zombie while another thread is still in
        // the kernel, and we have another parent once all have exited.
        libc::prctl(libc::PR_SET_PDEATHSIG, WAKE as libc::c_ulong);
    }
    // /proc shows the daemon's threads only if it belongs to our pid
    // namespace; otherwise the parent-death signal alone tells.
    let proc_ours = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| s.split(' ').next()?.parse::<u32>().ok())
        .is_some_and(|p| p == std::process::id());
    let mut parent_died = false;
    while !(parent_died || gone(pid) || (proc_ours && state(pid, pid) == Some('Z'))) {
        // The timeout only bounds a wake-up lost in a way not foreseen.
        let t = libc::timespec { tv_sec: 10, tv_nsec: 0 };
        // SAFETY: siginfo_t is plain data; all-zero is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `wake`, `info` and `t` are valid locals alive for the call.
        if unsafe { libc::sigtimedwait(&wake, &mut info, &t) } == WAKE {
            // Sent by the kernel on behalf of the exiting parent thread (its
            // process id), not by someone's kill.
            // SAFETY: `info` was filled by sigtimedwait for the WAKE signal, whose si_pid is set.
            parent_died = unsafe { info.si_pid() } == pid;
        }
    }
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if gone(pid) {
            std::process::exit(0);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a 1-byte buffer to ABORT_FD, which this process holds open.
    let r = unsafe { libc::write(ABORT_FD, b"1".as_ptr().cast(), 1) };
    let stuck = if proc_ours { stuck_threads(pid) } else { "threads unknown: /proc is another pid namespace's".into() };
    if r == 1 {
        log::warn!(
            "daemon {pid} died and had not finished exiting {} ms later ({stuck}): aborted its FUSE connection \
             {conn} so that the clients of {} stop waiting (they get ECONNABORTED, then ENOTCONN; \
             detach it with `umount -l`)",
            GRACE.as_millis(),
            mnt.display()
        );
    } else {
        log::warn!("daemon {pid} died; aborting FUSE connection {conn} failed: {}", std::io::Error::last_os_error());
    }
    std::process::exit(0);
}

/// Whether every thread of daemon `pid` has exited: we were handed to
/// another parent (only then are its descriptors closed).
fn gone(pid: libc::pid_t) -> bool {
    // SAFETY: getppid takes no arguments and cannot fail.
    unsafe { libc::getppid() != pid }
}

/// The state letter of thread `tid` of process `pid` (proc(5)).
fn state(pid: libc::pid_t, tid: libc::pid_t) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    s.rsplit_once(") ")?.1.chars().next()
}

/// The daemon's threads still there, with their state: "invalidator D".
fn stuck_threads(pid: libc::pid_t) -> String {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return "no thread left".into() };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse().ok()) else { continue };
        let name = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        match state(pid, tid) {
            Some('Z' | 'X') | None => {}
            Some(s) => out.push(format!("thread {} {s}", name.trim())),
        }
    }
    if out.is_empty() { "no thread left".into() } else { out.join(", ") }
}
