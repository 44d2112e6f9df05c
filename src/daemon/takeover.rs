//! `boundfs --take-over NAME`: the new process of `boundfs upgrade`
//! (protocol: `super::upgrade`). It listens on the abstract socket `NAME`,
//! reports on stdout to the `boundfs upgrade` that started it, one line at
//! a time: `listening`, then `ready PID`, then `pause NS` (from the old
//! daemon's last answer to this one's first request, ns; `pause -` when no
//! request came within a second), and closes stdout. Errors go to stderr,
//! with exit status 1; the old daemon then serves on.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use super::metrics_http::Listener;
use super::resume::Resume;
use super::sdnotify::Notify;
use super::upgrade::{self, Hello};
use super::{cli, daemonize};
use crate::fs::handed::{HandedState, STATE_VERSION, check_version};
use crate::logging;

/// The lowest kernel with FUSE_NOTIFY_RESEND (major, minor).
pub const RESEND_KERNEL: (u32, u32) = (6, 9);

/// This kernel's (major, minor) from uname(2); None if unreadable.
pub fn kernel_version() -> Option<(u32, u32)> {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut it = r.trim().split(['.', '-']);
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn fail(msg: &str) -> ! {
    eprintln!("boundfs --take-over: error: {msg}");
    std::process::exit(1);
}

/// Test hook (tests/sh/faults/upgrade-under-load.sh): `BOUNDFS_TEST_TAKEOVER_FAIL`
/// = `hello` (refuse after the hello), `version` (read state versions up
/// to 1 only, so a versioned hello is refused as too new) or `state` (exit
/// once the state came, after the old daemon's readers stopped), so the
/// old daemon's recovery is exercised. Not an option.
fn test_fail(at: &str) -> bool {
    std::env::var("BOUNDFS_TEST_TAKEOVER_FAIL").is_ok_and(|v| v == at)
}

/// Runs the take-over; never returns.
pub fn main(name: &str) -> ! {
    daemonize::ensure_std_fds();
    let listener = upgrade::listen(name).unwrap_or_else(|e| fail(&format!("listen on @{name}: {e}")));
    say("listening");
    let (sock, uid) = upgrade::accept(listener.as_fd(), upgrade::PEER_TIMEOUT)
        .unwrap_or_else(|e| fail(&format!("no daemon came: {e}")));
    drop(listener);
    if uid != 0 && uid != crate::sys::euid() {
        fail(&format!("refused a hand-over from uid {uid}"));
    }
    let hello: Hello = upgrade::recv(sock.as_fd())
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| fail("no hello from the running daemon"));
    let refuse = |msg: String| -> ! {
        let _ = upgrade::send(sock.as_fd(), format!("error: {msg}").as_bytes());
        fail(&msg)
    };
    if kernel_version().is_some_and(|v| v < RESEND_KERNEL) {
        refuse("Linux >= 6.9 is needed (FUSE_NOTIFY_RESEND)".into());
    }
    if test_fail("hello") {
        refuse("BOUNDFS_TEST_TAKEOVER_FAIL=hello".into());
    }
    // `version`: as a binary that reads only version 1 states would.
    let knows = if test_fail("version") { 1 } else { STATE_VERSION };
    if let Err(e) = check_version(hello.state_version, knows) {
        refuse(e);
    }
    crate::config::TAKING_OVER.store(true, std::sync::atomic::Ordering::Relaxed);
    let argv: Vec<OsString> = hello.argv.iter().map(OsString::from).collect();
    let mut opts = match cli::parse(&argv) {
        Ok(o) => o,
        Err(cli::CliError::Bad(e)) => refuse(format!("the running daemon's options: {e}")),
        Err(cli::CliError::Refused(f)) => refuse(format!("the running daemon's options: {}", f.msg)),
        Err(cli::CliError::Display(_)) => refuse("the running daemon's command line only prints".into()),
    };
    upgrade::set_argv(argv);
    let _ = upgrade::send(sock.as_fd(), b"ok");
    let (header, json, mut fds) = upgrade::recv_state(sock.as_fd()).unwrap_or_else(|e| fail(&format!("state: {e}")));
    if test_fail("state") {
        fail("BOUNDFS_TEST_TAKEOVER_FAIL=state");
    }
    let state = HandedState::from_json(&json, knows).unwrap_or_else(|e| fail(&e));
    if fds.len() < 1 + header.old_fuse {
        fail("the state came without the connection");
    }
    let mut rest = fds.split_off(1 + header.old_fuse);
    if header.stderr {
        adopt_stderr(rest.pop());
    }
    let metrics = if header.metrics { rest.pop().map(Listener::from_fd) } else { None };
    let old_fuse_fds = fds.split_off(1);
    let Some(fuse) = fds.pop() else { fail("the state came without the connection") };
    if let Some(n) = &hello.notify_socket {
        // SAFETY: no thread exists yet in this process.
        unsafe { std::env::set_var("NOTIFY_SOCKET", n) };
    }
    let notify = Notify::from_env();
    logging::init(sink(&opts, &hello));
    notify.report();
    claim_later(&opts);
    log::info!(
        "taking over {} from pid {} ({} requests left for the resend)",
        opts.mountpoint.display(),
        hello.pid,
        header.left
    );
    super::live_max_size(&mut opts, state.max_size, "the running daemon's");
    let r = Resume { fuse, negotiated: header.negotiated, old_fuse_fds, state: Some((state, rest)) };
    let pid = std::process::id();
    let result = super::run_from(&opts, &notify, metrics, || on_ready(&notify, &sock, pid, header.drained_ns), Some(r));
    if let Err(e) = result {
        log::error!("{e}");
        fail(&e);
    }
    std::process::exit(0)
}

/// The mount serves here: systemd learns the new main pid, the old daemon
/// may exit, `boundfs upgrade` gets the pid and (from a thread, within a
/// second) the pause.
fn on_ready(notify: &Notify, sock: &OwnedFd, pid: u32, drained_ns: u64) {
    notify.send(&format!("MAINPID={pid}"));
    let _ = upgrade::send(sock.as_fd(), b"resent");
    say(&format!("ready {pid}"));
    let gate = super::resume::last_gate();
    let _ = std::thread::Builder::new().name("upgrade-pause".into()).spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        let first = loop {
            let f = gate.as_ref().map_or(0, |g| g.first_ns());
            if f != 0 || std::time::Instant::now() > deadline {
                break f;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        if first == 0 {
            log::info!("upgrade: serving; no request within 1 s");
            say("pause -");
        } else {
            let pause = first.saturating_sub(drained_ns);
            log::info!(
                "upgrade pause: {:.3} ms (old daemon's last answer to the first request here)",
                pause as f64 / 1e6
            );
            say(&format!("pause {pause}"));
        }
        close_stdout();
    });
}

/// Makes `old` (the old daemon's stderr) this process's stderr, in place
/// of the `boundfs upgrade` caller's.
fn adopt_stderr(old: Option<OwnedFd>) {
    if let Some(fd) = old {
        // SAFETY: both fds are open; fd 2 is replaced atomically.
        unsafe { libc::dup2(fd.as_raw_fd(), 2) };
    }
}

/// Points stdout at /dev/null (`boundfs upgrade` reads it to its end).
fn close_stdout() {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        // SAFETY: both fds are open; fd 1 is replaced atomically.
        unsafe { libc::dup2(null.as_raw_fd(), 1) };
    }
}

/// Logs go where the old daemon's went: the log file if given; stderr
/// under systemd or in the foreground; else syslog.
fn sink(opts: &crate::config::Options, hello: &Hello) -> logging::Sink {
    match opts.log_file.as_deref().map(daemonize::open_log) {
        Some(Ok(f)) => logging::Sink::File(f),
        Some(Err(e)) => fail(&e),
        None if opts.foreground || hello.notify_socket.is_some() => logging::Sink::Stderr,
        None => logging::Sink::Syslog,
    }
}

/// Takes the BACKING claim (`crate::claim`) once the old daemon has exited
/// and dropped it, from a thread; held until this process exits.
fn claim_later(opts: &crate::config::Options) {
    if opts.shared {
        return;
    }
    let backing = opts.backing.clone();
    let _ = std::thread::Builder::new().name("claim".into()).spawn(move || {
        let Ok(dir) = std::fs::File::open(&backing) else { return };
        // SAFETY: flock on our own open fd; blocks until the old daemon exits.
        if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX) } == 0 {
            std::mem::forget(dir);
        }
    });
}
