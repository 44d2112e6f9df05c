//! Log setup: env_logger (`RUST_LOG`, default `info`) to stderr (`-f`,
//! systemd services), to the `log_file`, or, for a detached daemon without
//! one, to syslog (`/dev/log`, which journald serves: `journalctl -t
//! boundfs`); with no syslog socket there (a container), to the file
//! [`fallback_log`] names, which the mount command says once.
//!
//! One line of fuser's is demoted: `ERROR fuser::reply Failed to send FUSE
//! reply: No such file or directory`. The kernel answers a reply write with
//! ENOENT when the request it answers is gone: the client was interrupted
//! (a signal; the kernel sent INTERRUPT and dropped the request) before the
//! reply arrived (kernel `Documentation/filesystems/fuse.rst`, "Interrupting
//! filesystem operations"). Nothing was lost, so it is logged at debug.
//!
//! And, while a hand-over stops the session's readers ([`readers_stopping`],
//! `fuse::handover::stop_readers`), fuser's `ERROR fuser::request] Short
//! read of FUSE request header (0 < 40)`, once per reader thread: each
//! reader's /dev/fuse fd was replaced by /dev/null, so its read returns 0
//! bytes and its loop ends. That is how an upgrade stops them, not an
//! error: logged at debug too.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};

use env_logger::{Builder, Env, Logger, Target};
use log::{Level, Log, Metadata, Record};

/// The default filter: our info lines, fuser's errors only.
pub const DEFAULT_FILTER: &str = "info,fuser=error";

/// Where log lines go.
#[derive(Debug)]
pub enum Sink {
    /// stderr (foreground, or a detached daemon whose stderr is the log file).
    Stderr,
    /// This file, opened for appending (`log_file` in the foreground).
    File(std::fs::File),
    /// syslog via `/dev/log`; stderr when no syslog socket answers there
    /// (a container: [`syslog_available`]; the daemon's stderr is then the
    /// fallback file [`fallback_log`] names).
    Syslog,
}

/// The syslog socket.
const DEV_LOG: &str = "/dev/log";

/// Whether a syslog daemon (or journald) takes datagrams at `/dev/log`:
/// absent in most containers, where lines sent there would vanish.
pub fn syslog_available() -> bool {
    UnixDatagram::unbound().and_then(|s| s.connect(DEV_LOG)).is_ok()
}

/// Where a detached daemon logs when there is no syslog socket and no
/// `log_file`: `boundfs-MOUNTPOINT.log` (the mountpoint's `/` as `-`) in
/// the temporary directory (`$TMPDIR`, else `/tmp`).
pub fn fallback_log(mountpoint: &std::path::Path) -> std::path::PathBuf {
    let name = mountpoint.to_string_lossy().trim_matches('/').replace('/', "-");
    std::env::temp_dir().join(format!("boundfs-{}.log", if name.is_empty() { "root" } else { &name }))
}

/// Installs the logger. Call once, before any thread starts.
pub fn init(sink: Sink) {
    let mut b = Builder::from_env(Env::default().default_filter_or(DEFAULT_FILTER));
    if let Sink::File(f) = sink {
        b.target(Target::Pipe(Box::new(f)));
    } else if matches!(sink, Sink::Syslog) && syslog_available() {
        let pid = std::process::id();
        b.format(move |buf, r| {
            // facility daemon (3); severities: err 3, warning 4, info 6, debug 7
            let sev = match r.level() {
                log::Level::Error => 3,
                log::Level::Warn => 4,
                log::Level::Info => 6,
                _ => 7,
            };
            writeln!(buf, "<{}>boundfs[{pid}]: {}", 3 * 8 + sev, r.args())
        });
        b.target(Target::Pipe(Box::new(SyslogWriter::connect(std::path::Path::new(DEV_LOG)))));
    }
    let inner = b.build();
    let max = inner.filter();
    if log::set_boxed_logger(Box::new(Quiet { inner })).is_ok() {
        log::set_max_level(max);
    }
}

/// Set while a hand-over stops the session's readers (see the module docs).
static READERS_STOPPING: AtomicBool = AtomicBool::new(false);

/// Says whether the session's readers are being stopped on purpose (an
/// upgrade's hand-over): while `on`, their end-of-file reads are logged at
/// debug, not as fuser's ERROR.
pub fn readers_stopping(on: bool) {
    READERS_STOPPING.store(on, Ordering::Relaxed);
}

/// env_logger's logger with the expected lines (module docs) demoted to debug.
struct Quiet {
    inner: Logger,
}

/// Whether `r` is fuser's report of a reply to an interrupted request
/// (`Failed to send FUSE reply: ... (os error 2)`, ENOENT from /dev/fuse).
fn interrupted_reply(r: &Record) -> bool {
    if r.level() != Level::Error || !r.target().starts_with("fuser::reply") {
        return false;
    }
    let text = r.args().to_string();
    text.starts_with("Failed to send FUSE reply") && text.ends_with("(os error 2)")
}

/// Whether `r` is a reader's end-of-file read while the readers are being
/// stopped for a hand-over (`Short read of FUSE request header (0 < 40)`).
fn stopped_reader(r: &Record, stopping: bool) -> bool {
    stopping
        && r.level() == Level::Error
        && r.target().starts_with("fuser::request")
        && r.args().to_string().starts_with("Short read of FUSE request header (0 <")
}

/// Why `r` is no error (then logged at debug with that note), or None.
fn demoted(r: &Record) -> Option<&'static str> {
    if interrupted_reply(r) {
        Some("the request was interrupted; not an error")
    } else if stopped_reader(r, READERS_STOPPING.load(Ordering::Relaxed)) {
        Some("a reader stopped for a hand-over; not an error")
    } else {
        None
    }
}

impl Log for Quiet {
    fn enabled(&self, m: &Metadata) -> bool {
        self.inner.enabled(m)
    }

    fn log(&self, r: &Record) {
        let Some(note) = demoted(r) else {
            return self.inner.log(r);
        };
        let debug = Metadata::builder().level(Level::Debug).target(r.target()).build();
        if self.inner.enabled(&debug) {
            self.inner.log(
                &Record::builder()
                    .metadata(debug)
                    .module_path(r.module_path())
                    .file(r.file())
                    .line(r.line())
                    .args(format_args!("{} ({note})", r.args()))
                    .build(),
            );
        }
    }

    fn flush(&self) {
        self.inner.flush()
    }
}

/// Sends each line written to it as one datagram to `/dev/log`.
struct SyslogWriter {
    sock: Option<UnixDatagram>,
    line: Vec<u8>,
}

impl SyslogWriter {
    fn connect(path: &std::path::Path) -> Self {
        let sock = UnixDatagram::unbound().and_then(|s| s.connect(path).map(|()| s)).ok();
        SyslogWriter { sock, line: Vec::new() }
    }
}

impl Write for SyslogWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(data);
        while let Some(i) = self.line.iter().position(|&c| c == b'\n') {
            let rest = self.line.split_off(i + 1);
            if let Some(s) = &self.sock {
                let _ = s.send(&self.line[..i]);
            }
            self.line = rest;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_interrupted_reply_is_demoted() {
        let enoent = std::io::Error::from_raw_os_error(libc::ENOENT);
        let msg = format!("Failed to send FUSE reply: {enoent}");
        let rec = |level, target, text: &str| {
            interrupted_reply(&Record::builder().level(level).target(target).args(format_args!("{text}")).build())
        };
        assert!(rec(Level::Error, "fuser::reply", &msg));
        let einval = std::io::Error::from_raw_os_error(libc::EINVAL);
        assert!(!rec(Level::Error, "fuser::reply", &format!("Failed to send FUSE reply: {einval}")));
        assert!(!rec(Level::Error, "boundfs::fuse", &msg));
        assert!(!rec(Level::Warn, "fuser::reply", &msg));
        // the default filter drops the demoted line, keeps fuser's other errors
        let logger = Builder::new().parse_filters(DEFAULT_FILTER).build();
        let debug = Record::builder().level(Level::Debug).target("fuser::reply").build();
        assert!(!logger.matches(&debug));
        let error = Record::builder().level(Level::Error).target("fuser::reply").build();
        assert!(logger.matches(&error));
    }

    #[test]
    fn a_stopped_reader_is_demoted_only_during_a_hand_over() {
        let short = "Short read of FUSE request header (0 < 40)";
        let rec = |level, target, text: &str, stopping| {
            stopped_reader(
                &Record::builder().level(level).target(target).args(format_args!("{text}")).build(),
                stopping,
            )
        };
        assert!(rec(Level::Error, "fuser::request", short, true));
        assert!(!rec(Level::Error, "fuser::request", short, false), "outside a hand-over it stays an error");
        assert!(!rec(Level::Error, "fuser::request", "Short read of FUSE request header (12 < 40)", true));
        assert!(!rec(Level::Error, "fuser::request", "Short read of FUSE request (40 < 80)", true));
        assert!(!rec(Level::Error, "fuser::reply", short, true));
    }

    #[test]
    fn the_fallback_log_is_named_after_the_mountpoint() {
        let p = fallback_log(std::path::Path::new("/mnt/kv/"));
        assert_eq!(p.file_name().and_then(|n| n.to_str()), Some("boundfs-mnt-kv.log"));
        assert_eq!(p.parent(), Some(std::env::temp_dir().as_path()));
    }

    #[test]
    fn one_datagram_per_line() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("log");
        let rx = UnixDatagram::bind(&path).unwrap();
        let mut w = SyslogWriter::connect(&path);
        w.write_all(b"<30>boundfs[1]: one\n<30>boundfs[1]: tw").unwrap();
        w.write_all(b"o\n").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"<30>boundfs[1]: one");
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"<30>boundfs[1]: two");
        // no socket: lines are dropped, writing never fails
        let mut w = SyslogWriter::connect(&d.path().join("absent"));
        assert!(w.write_all(b"x\n").is_ok());
    }
}
