//! Daemon mode: the command returns once the mount is live (exit 0) or has
//! failed (exit 1, the reason on stderr), and the daemon serves on in the
//! background.
//!
//! The fork happens first, before any thread exists (forking a threaded
//! process is unsafe: only the forking thread survives, holding whatever
//! locks the others held). The child detaches completely (new session, cwd
//! `/`, stdin, stdout and stderr on /dev/null, or stderr on the `log_file`),
//! mounts, and reports over a pipe; the parent only waits for that word and
//! exits with it. Keeping none of the caller's stdio matters: a caller that
//! captures the output (`out=$(boundfs ...)`, Python's `subprocess.run(...,
//! capture_output=True)`, Ansible, CI steps) waits for end-of-file on its
//! pipes, which would otherwise come only when the daemon exits.

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

/// Makes sure fds 0, 1 and 2 are open (on /dev/null if they were closed),
/// so that no file opened later gets one of those numbers and is then lost
/// to a redirection. Call first thing, before opening anything.
pub fn ensure_std_fds() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only reads the flags of a descriptor number; no pointers.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            // SAFETY: a NUL-terminated literal path; the new fd fills the lowest free slot on purpose.
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        }
    }
}

/// Forks. In the parent this never returns: it waits for the child's word
/// and exits 0 (mounted) or `failure` (failed, reason printed to stderr). In
/// the child it returns the pipe to report on, after detaching: stdin and
/// stdout on /dev/null, stderr on `log` (opened for appending) if given,
/// else on /dev/null. `note`: a line the parent prints to stderr once the
/// mount is live (never with a failure, which stays one line). Errors: the
/// pipe or the fork failed, or `log` cannot be opened (nothing was started).
pub fn detach(failure: i32, log: Option<&std::path::Path>, note: Option<String>) -> Result<ReadyPipe, String> {
    // A closed stdin/stdout/stderr would hand its number to the pipe, which
    // the child's redirection to /dev/null would then overwrite.
    ensure_std_fds();
    let log = match log {
        Some(p) => Some(OwnedFd::from(open_log(p)?)),
        None => None,
    };
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two fds pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("cannot create a pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: pipe2 succeeded, so both fds are new and owned by nothing else.
    let (r, w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    // SAFETY: no thread exists yet (see the module docs), so the child may run Rust code.
    match unsafe { libc::fork() } {
        -1 => Err(format!("cannot fork the daemon: {}", std::io::Error::last_os_error())),
        0 => {
            drop(r);
            detach_child(log);
            Ok(ReadyPipe { w })
        }
        child => {
            drop(w);
            parent_wait(r, child, failure, note)
        }
    }
}

/// The parent: read the child's word until it closes the pipe, then exit.
fn parent_wait(mut r: File, child: libc::pid_t, failure: i32, note: Option<String>) -> ! {
    let mut word = Vec::new();
    let _ = r.read_to_end(&mut word);
    if word == b"OK" {
        if let Some(n) = note {
            eprintln!("{n}");
        }
        std::process::exit(0);
    }
    if let Some(reason) = word.strip_prefix(b"ERR ") {
        eprintln!("boundfs: error: {}", String::from_utf8_lossy(reason));
        // Reap the child (it exits right after reporting) so a caller waiting
        // for our exit never sees it linger.
        let mut status = 0;
        // SAFETY: `child` is our own child and `status` a writable int.
        unsafe { libc::waitpid(child, &mut status, 0) };
        std::process::exit(failure);
    }
    let mut status = 0;
    // SAFETY: `child` is our own child and `status` a writable int.
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

/// Opens the log file for appending (created 0640 if missing). Errors: one
/// line naming the file.
pub fn open_log(p: &std::path::Path) -> Result<File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .custom_flags(libc::O_CLOEXEC)
        .open(p)
        .map_err(|e| format!("log_file {}: cannot open for appending: {e}", p.display()))
}

/// The child: new session, cwd `/`, stdin/stdout on /dev/null, stderr on
/// the log file or /dev/null: nothing of the caller's stdio is kept.
fn detach_child(log: Option<OwnedFd>) {
    // SAFETY: setsid takes no arguments; a failure leaves the session as it was.
    unsafe { libc::setsid() };
    let _ = std::env::set_current_dir("/");
    let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") else {
        // No /dev/null: close them rather than keep the caller's pipes.
        for fd in 0..3 {
            // SAFETY: closes the standard fds, which no Rust object owns here.
            unsafe { libc::close(fd) };
        }
        return;
    };
    let null = OwnedFd::from(null);
    for fd in 0..3 {
        let src = if fd == 2 { log.as_ref().unwrap_or(&null) } else { &null };
        // SAFETY: dup2 onto a standard fd from an fd borrowed for the call.
        unsafe { libc::dup2(src.as_raw_fd(), fd) };
    }
}
