//! `boundfs upgrade MOUNTPOINT [--binary PATH]`: hands a running mount to a
//! new boundfs process (a new binary) without unmounting it (protocol:
//! `super::upgrade`). Starts `PATH --take-over NAME`, waits until it
//! listens, asks the running daemon through `user.boundfs.upgrade`, waits
//! for the new process's `ready PID` and `pause NS`, prints the new pid and
//! the pause. On any failure the running daemon keeps serving.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use clap::Parser;

use super::ctl::{CtlError, read_status, setxattr};
use super::takeover::{RESEND_KERNEL, kernel_version};
use crate::exit::Exit;
use crate::fs::UPGRADE_XATTR;

/// `boundfs upgrade`.
#[derive(Parser, Debug)]
#[command(
    name = "boundfs upgrade",
    bin_name = "boundfs upgrade",
    about = "Hand a running boundfs mount to a new boundfs process (a new binary) without unmounting it",
    after_help = "Requests in flight are re-sent by the kernel to the new process (Linux >= 6.9).\n\
                  Example: boundfs upgrade /mnt/kv --binary /usr/local/bin/boundfs"
)]
pub struct UpgradeArgs {
    /// The mountpoint.
    pub mountpoint: PathBuf,
    /// The boundfs binary to run (default: this one).
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
}

/// The effective uid of `pid` (None when not visible here).
fn daemon_euid(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn fail<T>(code: i32, msg: impl Into<String>) -> Result<T, CtlError> {
    Err(CtlError { code, msg: msg.into() })
}

/// Runs `boundfs upgrade`. Errors (the running daemon keeps serving): the
/// kernel is older than 6.9 (exit 1, nothing tried); not a boundfs mount;
/// the new binary cannot start, exits, or fails to take over (its reason is
/// on stderr).
pub fn upgrade(args: &UpgradeArgs) -> Result<(), CtlError> {
    let mnt = &args.mountpoint;
    match kernel_version() {
        Some(v) if v >= RESEND_KERNEL => {}
        v => {
            let k = v.map_or("unknown".into(), |(a, b)| format!("{a}.{b}"));
            return fail(
                Exit::Runtime.code(),
                format!(
                    "this kernel ({k}) has no FUSE_NOTIFY_RESEND (Linux >= 6.9): requests in flight could hang; \
                     nothing was done. Unmount and mount again to change the binary"
                ),
            );
        }
    }
    let before = read_status(mnt)?;
    if daemon_euid(before.pid).is_some_and(|u| u != 0) {
        return fail(
            Exit::Runtime.code(),
            format!(
                "the daemon (pid {}) runs as a user other than root (a fusermount3 mount), whose hand-over is not \
                 supported; nothing was done",
                before.pid
            ),
        );
    }
    if before.supervisor != 0 {
        return fail(
            Exit::Runtime.code(),
            format!(
                "the mount runs under -o supervise (supervisor pid {}), whose daemon cannot be handed to another \
                 process yet; nothing was done. Mount without supervise to upgrade in place",
                before.supervisor
            ),
        );
    }
    let binary = match &args.binary {
        Some(b) => b.clone(),
        None => std::env::current_exe().or_else(|e| fail(1, format!("cannot find this binary: {e}")))?,
    };
    let nanos = crate::fuse::handover::unix_ns();
    let name = format!("boundfs-upgrade-{}-{nanos}", std::process::id());
    let mut child = Command::new(&binary)
        .arg("--take-over")
        .arg(&name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .or_else(|e| fail(1, format!("cannot start {}: {e}; pid {} keeps serving", binary.display(), before.pid)))?;
    let Some(out) = child.stdout.take() else { return fail(1, "no pipe from the new process") };
    let mut lines = BufReader::new(out).lines();
    let mut next = |what: &str| -> Result<String, CtlError> {
        match lines.next() {
            Some(Ok(l)) => Ok(l),
            _ => fail(1, format!("the new process ({}) ended before {what}", binary.display())),
        }
    };
    let refused = |e: CtlError, child: &mut std::process::Child| {
        let status = child.wait().map_or("unknown".into(), |s| s.to_string());
        CtlError { code: e.code, msg: format!("{} ({status}); pid {} keeps serving", e.msg, before.pid) }
    };
    if let Err(e) = next("listening").and_then(|l| if l == "listening" { Ok(()) } else { fail(1, l) }) {
        return Err(refused(e, &mut child));
    }
    if let Err(e) = setxattr(mnt, UPGRADE_XATTR, name.as_bytes()) {
        let _ = child.kill();
        return Err(refused(e, &mut child));
    }
    let ready = match next("it took over") {
        Ok(l) => l,
        Err(e) => return Err(refused(e, &mut child)),
    };
    let pid = ready.strip_prefix("ready ").unwrap_or(&ready).to_string();
    let pause = next("the pause").unwrap_or_default();
    let pause = match pause.strip_prefix("pause ").and_then(|p| p.parse::<u64>().ok()) {
        Some(ns) => format!("{:.3} ms", ns as f64 / 1e6),
        None => "no request came within 1 s".into(),
    };
    println!("upgraded {}: pid {} -> {pid} ({}); pause {pause}", mnt.display(), before.pid, binary.display());
    Ok(())
}
