//! Daemon mode: the command returns once the mount is live (exit 0) or has
//! failed (exit 1, the reason on stderr), and the daemon serves on in the
//! background.
//!
//! The fork happens first, before any thread exists (forking a threaded
//! process is unsafe: only the forking thread survives, holding whatever
//! locks the others held). The child detaches (new session, cwd `/`, stdin
//! and stdout on /dev/null), mounts, and reports over a pipe; the parent only
//! waits for that word and exits with it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The child's end of the pipe to the waiting parent.
pub struct ReadyPipe {
    w: File,
}

impl ReadyPipe {
    /// Tells the parent the mount is live: it exits 0.
    pub fn ready(mut self) {
        let _ = self.w.write_all(b"OK");
    }

    /// Tells the parent the mount failed with `reason`: it prints it and exits 1.
    pub fn failed(mut self, reason: &str) {
        let _ = self.w.write_all(format!("ERR {reason}").as_bytes());
    }
}

/// Where the detached daemon's log lines can go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stderr {
    /// stderr was a file, pipe or journal stream: kept, logs keep going there.
    Kept,
    /// stderr was a terminal: now /dev/null (the command has returned; lines
    /// must not appear in the user's shell later). Log to syslog instead.
    Closed,
}

/// Forks. In the parent this never returns: it waits for the child's word
/// and exits 0 (mounted) or `failure` (failed, reason printed to stderr). In
/// the child it returns the pipe to report on, after detaching. Errors: the
/// pipe or the fork failed (nothing was started).
pub fn detach(failure: i32) -> Result<(ReadyPipe, Stderr), String> {
    // A closed stdin/stdout/stderr would hand its number to the pipe, which
    // the child's redirection to /dev/null would then overwrite.
    for fd in 0..3 {
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        }
    }
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("cannot create a pipe: {}", std::io::Error::last_os_error()));
    }
    let (r, w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    match unsafe { libc::fork() } {
        -1 => Err(format!("cannot fork the daemon: {}", std::io::Error::last_os_error())),
        0 => {
            drop(r);
            let stderr = detach_child();
            Ok((ReadyPipe { w }, stderr))
        }
        child => {
            drop(w);
            parent_wait(r, child, failure)
        }
    }
}

/// The parent: read the child's word until it closes the pipe, then exit.
fn parent_wait(mut r: File, child: libc::pid_t, failure: i32) -> ! {
    let mut word = Vec::new();
    let _ = r.read_to_end(&mut word);
    if word == b"OK" {
        std::process::exit(0);
    }
    if let Some(reason) = word.strip_prefix(b"ERR ") {
        eprintln!("boundfs: error: {}", String::from_utf8_lossy(reason));
        // Reap the child (it exits right after reporting) so a caller waiting
        // for our exit never sees it linger.
        let mut status = 0;
        unsafe { libc::waitpid(child, &mut status, 0) };
        std::process::exit(failure);
    }
    let mut status = 0;
    let how = if unsafe { libc::waitpid(child, &mut status, 0) } == child {
        if libc::WIFSIGNALED(status) {
            format!("was killed by signal {}", libc::WTERMSIG(status))
        } else {
            format!("exited with status {}", libc::WEXITSTATUS(status))
        }
    } else {
        "vanished".to_string()
    };
    eprintln!("boundfs: error: the daemon {how} before the mount was live");
    std::process::exit(failure);
}

/// The child: new session, cwd `/`, stdin/stdout on /dev/null, stderr kept
/// unless it is a terminal.
fn detach_child() -> Stderr {
    unsafe { libc::setsid() };
    let _ = std::env::set_current_dir("/");
    let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") else {
        return Stderr::Kept;
    };
    let null = OwnedFd::from(null);
    let tty = unsafe { libc::isatty(2) } == 1;
    for fd in [0, 1].into_iter().chain(tty.then_some(2)) {
        unsafe { libc::dup2(null.as_raw_fd(), fd) };
    }
    if tty { Stderr::Closed } else { Stderr::Kept }
}
