//! `boundfs status MOUNTPOINT [--json]` and `boundfs set MOUNTPOINT
//! max_size=SIZE`: talk to a running mount through the extended attributes
//! of its root (see `fs::control`), so they work wherever the mount is
//! visible, with no socket and no daemon pid.

use std::ffi::{CString, OsString};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;

use crate::config;
use crate::exit::Exit;
use crate::fs::{MAX_SIZE_XATTR, STATS_XATTR};
use crate::status::{Status, bytes};

/// `boundfs status`.
#[derive(Parser, Debug)]
#[command(name = "boundfs status", bin_name = "boundfs status", about = "Show the live status of a boundfs mount")]
pub struct StatusArgs {
    /// The mountpoint.
    pub mountpoint: PathBuf,
    /// Print the status as one line of JSON (fields: docs/reference.md).
    #[arg(long)]
    pub json: bool,
}

/// `boundfs set`.
#[derive(Parser, Debug)]
#[command(
    name = "boundfs set",
    bin_name = "boundfs set",
    about = "Change a running boundfs mount's budget",
    after_help = "Example: boundfs set /mnt/kv max_size=32G"
)]
pub struct SetArgs {
    /// The mountpoint.
    pub mountpoint: PathBuf,
    /// key=value; only max_size can change live.
    #[arg(required = true, value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
}

/// A failed command: the exit code (`crate::exit::Exit`: 1 runtime, 2 bad
/// input, 4 a dead mount) and one line.
#[derive(Debug)]
pub struct CtlError {
    /// Exit code.
    pub code: i32,
    /// What went wrong and what to do.
    pub msg: String,
}

fn fail<T>(code: i32, msg: impl Into<String>) -> Result<T, CtlError> {
    Err(CtlError { code, msg: msg.into() })
}

/// The subcommands (each in `--help`'s "Other commands" and the README's
/// Usage lines: `docs_tests`).
pub const COMMANDS: [&str; 3] = ["status", "set", "upgrade"];

/// Whether argv names a subcommand (`boundfs status …`, `boundfs set …`).
/// A backing directory called `status` or `set` is given as `./status`.
pub fn subcommand(argv: &[OsString]) -> Option<&str> {
    argv.get(1).and_then(|a| a.to_str()).filter(|a| COMMANDS.contains(a))
}

/// The one-line error when argv's first word reads as a mistyped or
/// unknown subcommand rather than a backing directory: a bare word (no `/`)
/// naming nothing that exists, which is close to a subcommand (`statu`,
/// `stat`, `sett`) or comes without any mount option (`boundfs show
/// /mnt/kv`). None otherwise (a mount, whose paths are checked later).
pub fn unknown_subcommand(argv: &[OsString]) -> Option<String> {
    let word = argv.get(1)?.to_str()?;
    if word.is_empty() || word.starts_with('-') || word.contains('/') || Path::new(word).symlink_metadata().is_ok() {
        return None;
    }
    let close = COMMANDS
        .into_iter()
        // nearest first; at equal distance, a command the word begins
        // (`stat` is as near `set` as `status`)
        .map(|c| (strsim::damerau_levenshtein(word, c), !c.starts_with(word), c))
        .filter(|&(d, _, c)| d <= 2 && d < c.len())
        .min()
        .map(|(_, _, c)| c);
    let mounting = argv[2..].iter().any(|a| {
        let a = a.to_string_lossy();
        a.starts_with("-o") || a.starts_with("--max-size")
    });
    if close.is_none() && mounting {
        return None;
    }
    let hint = match close {
        Some(c) => format!("did you mean `boundfs {c}`? "),
        None if word == "help" => "see boundfs --help; ".to_string(),
        None => String::new(),
    };
    Some(format!(
        "unknown command '{word}'; {hint}commands: status, set, upgrade (boundfs --help); to mount a backing directory \
         named {word}, give it as a path: boundfs ./{word} MOUNTPOINT -o max_size=SIZE"
    ))
}

/// Reads and parses the status of the mount at `mnt`. Errors (exit 1): not
/// a boundfs mount, the daemon is gone (ENOTCONN), unreadable.
pub fn read_status(mnt: &Path) -> Result<Status, CtlError> {
    let raw = getxattr(mnt, STATS_XATTR)?;
    serde_json::from_slice(&raw).or_else(|e| {
        fail(1, format!("{}: the status of this mount is not JSON boundfs understands ({e})", mnt.display()))
    })
}

/// The boundfs mount that holds `path`: the mountpoint of the innermost
/// `fuse.boundfs` mount (in /proc/self/mountinfo) that `path` is in or
/// below, so `boundfs status /mnt/kv/sub` shows `/mnt/kv`; `path` as
/// given when it is in none (the error then names it).
pub fn mount_of(path: &Path) -> PathBuf {
    let abs = path.canonicalize().or_else(|_| std::path::absolute(path)).unwrap_or_else(|_| path.to_path_buf());
    crate::claim::mounts()
        .into_iter()
        .filter(|e| e.fstype == "fuse.boundfs" && abs.starts_with(&e.point))
        .max_by_key(|e| e.point.as_os_str().len())
        .map_or_else(|| path.to_path_buf(), |e| e.point)
}

/// `boundfs status`: the table (or JSON) on stdout, of the mount that
/// holds the path given ([`mount_of`]).
pub fn status(args: &StatusArgs) -> Result<(), CtlError> {
    // The path as the user gave it may be relative or inside the mount:
    // show the mountpoint, absolute.
    let mnt = mount_of(&args.mountpoint);
    if args.json {
        let raw = getxattr(&mnt, STATS_XATTR)?;
        let raw = String::from_utf8_lossy(&raw);
        let raw = raw.trim_end();
        // The daemon's JSON with "mountpoint" put first, its fields kept as they are.
        match raw.strip_prefix('{') {
            Some(rest) if serde_json::from_str::<serde_json::Value>(raw).is_ok_and(|v| v.is_object()) => {
                let m = serde_json::Value::from(mnt.display().to_string());
                let sep = if rest.trim_start().starts_with('}') { "" } else { "," };
                println!("{{\"mountpoint\":{m}{sep}{rest}");
            }
            _ => {
                return fail(1, format!("{}: the status of this mount is not JSON boundfs understands", mnt.display()));
            }
        }
        return Ok(());
    }
    let mut s = read_status(&mnt)?;
    s.mountpoint = mnt.display().to_string();
    print!("{}", s.table(&s.mountpoint));
    Ok(())
}

/// How long `boundfs set` waits for the eviction it started to settle
/// before it reports usage as still falling.
const SETTLE_WAIT: Duration = Duration::from_secs(30);
/// Eviction has settled once neither usage nor the eviction count changed
/// for this long (it cannot reach the low watermark: open or non-block files).
const SETTLE_QUIET: Duration = Duration::from_secs(1);

/// `boundfs set`: validates every setting (a `,` separates settings as in
/// `-o`), then applies them to the mount that holds the path given
/// ([`mount_of`]) and prints the change once the eviction it
/// starts has settled (usage at the low watermark, or no longer falling),
/// or says eviction is still running after [`SETTLE_WAIT`]. Errors: exit 2
/// for an unknown key or bad value, 1 when the mount refuses (EPERM: not
/// root nor the mount's owner), 4 for a dead mount.
pub fn set(args: &SetArgs) -> Result<(), CtlError> {
    let mut new_max = None;
    for kv in args.settings.iter().flat_map(|s| super::cli::split_items(s)).filter(|s| !s.is_empty()) {
        match kv.split_once('=') {
            Some(("max_size", _)) if new_max.is_some() => {
                return fail(2, "max_size is given twice; give it once");
            }
            Some(("max_size", v)) => {
                let n = config::parse_max_size(v).or_else(|e| fail(2, e.0))?;
                new_max = Some((v.trim().to_string(), n));
            }
            Some((k, _)) => {
                return fail(2, format!("'{k}' cannot be changed live; only max_size can (e.g. max_size=32G)"));
            }
            None => {
                return fail(2, format!("'{kv}' is not key=value; only max_size can change live (e.g. max_size=32G)"));
            }
        }
    }
    let Some((text, n)) = new_max else { return Ok(()) };
    // The mount's root: the control names pass through to BACKING elsewhere.
    let mnt = mount_of(&args.mountpoint);
    let before = read_status(&mnt)?;
    setxattr(&mnt, MAX_SIZE_XATTR, text.as_bytes())?;
    let (s, settled) = settle(&mnt, &before)?;
    let mut line = format!(
        "{}: max_size {} -> {} (high watermark {}, low {}); ",
        mnt.display(),
        bytes(before.max_size),
        bytes(n),
        bytes(s.high_watermark_bytes),
        bytes(s.low_watermark_bytes),
    );
    let evicted = s.evictions.saturating_sub(before.evictions);
    if evicted > 0 {
        line.push_str(&format!(
            "evicted {evicted} files ({}); ",
            bytes(s.evicted_bytes.saturating_sub(before.evicted_bytes))
        ));
    }
    line.push_str(&format!("usage {}", bytes(s.usage)));
    // What eviction cannot free: block files held open, files matching no pattern.
    let kept = s.usage.saturating_sub(s.evictable_bytes);
    if s.usage > s.high_watermark_bytes && kept > s.low_watermark_bytes {
        line.push_str(&format!(
            ": eviction can free only {} (block files not open); the other {} (open, or matching no pattern) \
             stays, so writes fail with ENOSPC until usage is below max_size (see boundfs status)",
            bytes(s.evictable_bytes),
            bytes(kept)
        ));
    } else if !settled {
        line.push_str(&format!(
            ", still evicting down to the low watermark after {}s (see boundfs status)",
            SETTLE_WAIT.as_secs()
        ));
    }
    println!("{line}");
    Ok(())
}

/// Waits until the eviction a new budget started has settled: usage at or
/// below the low watermark, a sweep ended and usage at or below the high
/// watermark, or usage and the eviction count unchanged for
/// [`SETTLE_QUIET`] (nothing more can go); at most [`SETTLE_WAIT`]. Returns
/// the last status and whether it settled.
fn settle(mnt: &Path, before: &Status) -> Result<(Status, bool), CtlError> {
    let deadline = Instant::now() + SETTLE_WAIT;
    let mut s = read_status(mnt)?;
    let mut last = ((s.usage, s.evictions), Instant::now());
    loop {
        // A sweep runs only above the high watermark; below it nothing is
        // evicted. A sweep that ended since the change (eviction_sweeps
        // counts each at its end) evicted down to the low watermark, where
        // a steady store load may already have pushed usage back up.
        let started = s.evictions > before.evictions;
        let swept = s.eviction_sweeps > before.eviction_sweeps;
        if s.usage <= s.low_watermark_bytes || (s.usage <= s.high_watermark_bytes && (swept || !started)) {
            return Ok((s, true));
        }
        if last.1.elapsed() >= SETTLE_QUIET {
            return Ok((s, true));
        }
        if Instant::now() >= deadline {
            return Ok((s, false));
        }
        std::thread::sleep(Duration::from_millis(50));
        s = read_status(mnt)?;
        if (s.usage, s.evictions) != last.0 {
            last = ((s.usage, s.evictions), Instant::now());
        }
    }
}

fn cpath(p: &Path) -> Result<CString, CtlError> {
    CString::new(p.as_os_str().as_encoded_bytes()).or_else(|_| fail(2, "path contains a NUL byte"))
}

/// One line for an errno from the mount's root.
fn explain(mnt: &Path, e: std::io::Error, writing: bool) -> CtlError {
    let m = mnt.display();
    let msg = match e.raw_os_error() {
        Some(libc::ENODATA) | Some(libc::EOPNOTSUPP) => {
            format!("{m} is not a boundfs mount (no {STATS_XATTR}); give the mountpoint itself, see /proc/mounts")
        }
        Some(libc::ENOTCONN) => {
            // The dead mount may be above the path given: name its mountpoint
            // (from mountinfo; a stat there would fail the same way).
            let abs = std::path::absolute(mnt).unwrap_or_else(|_| mnt.to_path_buf());
            let point = crate::claim::mounts()
                .into_iter()
                .filter(|e| e.fstype == "fuse.boundfs" && abs.starts_with(&e.point))
                .max_by_key(|e| e.point.as_os_str().len())
                .map_or_else(|| mnt.to_path_buf(), |e| e.point);
            let msg = format!(
                "{m}: transport endpoint is not connected (the daemon died); detach with `umount -l {}` and mount \
                 again",
                crate::claim::shell_word(&point)
            );
            return CtlError { code: Exit::DeadMount.code(), msg };
        }
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => {
            let msg = format!("{m} does not exist; give the mountpoint of a boundfs mount (grep boundfs /proc/mounts)");
            return CtlError { code: Exit::BadInput.code(), msg };
        }
        Some(libc::EPERM) | Some(libc::EACCES) if writing => {
            format!("{m}: not permitted; only root or the user who mounted it may change it")
        }
        Some(libc::EACCES) => format!(
            "{m}: permission denied: the mount belongs to another user and was made without allow_other; \
             run this as that user, or mount with -o allow_other"
        ),
        Some(libc::EINVAL) => format!("{m}: the daemon refused the value (see its log)"),
        _ => format!("{m}: {e}"),
    };
    CtlError { code: 1, msg }
}

fn getxattr(mnt: &Path, name: &str) -> Result<Vec<u8>, CtlError> {
    let (p, n) = (cpath(mnt)?, CString::new(name).unwrap_or_default());
    // The value can grow between the size query and the read: retry on ERANGE.
    for _ in 0..8 {
        // SAFETY: NUL-terminated path and name; a null buffer of length 0 asks for the size.
        let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
        if len < 0 {
            return Err(explain(mnt, std::io::Error::last_os_error(), false));
        }
        let mut buf = vec![0u8; len as usize + 256];
        // SAFETY: NUL-terminated path and name; the pointer and length describe `buf`.
        let got = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if got >= 0 {
            buf.truncate(got as usize);
            return Ok(buf);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ERANGE) {
            return Err(explain(mnt, e, false));
        }
    }
    fail(1, format!("{}: the status kept changing size; try again", mnt.display()))
}

pub(crate) fn setxattr(mnt: &Path, name: &str, value: &[u8]) -> Result<(), CtlError> {
    let (p, n) = (cpath(mnt)?, CString::new(name).unwrap_or_default());
    // SAFETY: NUL-terminated path and name; the pointer and length describe `value`.
    if unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) } != 0 {
        return Err(explain(mnt, std::io::Error::last_os_error(), true));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(args: &[&str]) -> Option<String> {
        let mut argv = vec![OsString::from("boundfs")];
        argv.extend(args.iter().map(OsString::from));
        unknown_subcommand(&argv)
    }

    #[test]
    fn a_mistyped_or_unknown_subcommand_is_named() {
        let m = unknown(&["statu", "/mnt/kv"]).unwrap();
        assert!(m.starts_with("unknown command 'statu'; did you mean `boundfs status`?"), "{m}");
        let m = unknown(&["stat", "/mnt/kv"]).unwrap_or_default();
        assert!(m.starts_with("unknown command 'stat'; did you mean `boundfs status`?"), "{m}");
        assert!(unknown(&["sett", "/mnt/kv", "max_size=1G"]).unwrap().contains("`boundfs set`"));
        assert!(unknown(&["show", "/mnt/kv"]).unwrap().starts_with("unknown command 'show'; commands"));
        // a mount: a path, an option, or a bare word far from any command with mount options
        assert_eq!(unknown(&["/data/kv", "/mnt/kv"]), None);
        assert_eq!(unknown(&["-f", "kv", "/mnt/kv"]), None);
        assert_eq!(unknown(&["kv", "/mnt/kv", "-o", "max_size=1G"]), None);
        assert_eq!(unknown(&["./statu", "/mnt/kv"]), None);
        assert_eq!(unknown(&[]), None);
        // close to a command, even with mount options: named
        assert!(unknown(&["stauts", "/mnt/kv", "-o", "max_size=1G"]).is_some());
    }
}
