//! Options, their defaults, and validation. Every check here runs before
//! anything is mounted; a failure is one [`ConfigError`] line for the user.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Default `high_watermark`: fraction of `max_size` above which the background evictor runs.
pub const DEFAULT_HIGH_WATERMARK: f64 = 0.95;
/// Default `low_watermark`: fraction of `max_size` the evictor brings usage down to.
pub const DEFAULT_LOW_WATERMARK: f64 = 0.90;
/// Default `pattern`: the block files of vLLM, SGLang and llm-d.
pub const DEFAULT_PATTERN: &str = "*.bin";
/// Default `stamp_interval`: at most one mtime stamp per file per minute.
pub const DEFAULT_STAMP_INTERVAL: Duration = Duration::from_secs(60);
/// Default `metrics_interval`: node_exporter's default scrape interval.
pub const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(15);
/// Smallest `max_size` accepted (bytes): BACKING's own directory and one
/// small block must fit.
pub const MIN_MAX_SIZE: u64 = 1 << 20;
/// Default `attr_timeout`: how long the kernel may cache entries (including
/// "no such file") and attributes. Long, so that repeated existence probes
/// never reach the daemon; what the daemon changes itself (eviction, mtime
/// stamps) is invalidated explicitly, so only changes made in BACKING behind
/// the mount's back can be seen this late.
pub const DEFAULT_ATTR_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `reconcile_interval`: BACKING is re-walked once a minute (see `workers::reconcile`).
pub const DEFAULT_RECONCILE_INTERVAL: Duration = Duration::from_secs(60);
/// Default `stale_tmp`: engine temporaries untouched for an hour are removed.
pub const DEFAULT_STALE_TMP: Duration = Duration::from_secs(3600);

/// A bad option or path, worded for the user (one line, says what to do).
#[derive(Debug, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Shorthand for building a [`ConfigError`].
pub fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

/// Everything the daemon runs with, validated.
#[derive(Debug, Clone)]
pub struct Options {
    /// The backing directory, canonical.
    pub backing: PathBuf,
    /// The mountpoint, canonical.
    pub mountpoint: PathBuf,
    /// Hard budget, bytes (> 0).
    pub max_size: u64,
    /// Fraction of `max_size`, in (0, 1], above which the background evictor runs.
    pub high_watermark: f64,
    /// Fraction of `max_size`, in (0, high_watermark), it evicts down to.
    pub low_watermark: f64,
    /// Globs on the file name that select block files (non-empty).
    pub patterns: Vec<String>,
    /// Minimum time between two mtime stamps of one file.
    pub stamp_interval: Duration,
    /// FUSE event loops (>= 1).
    pub threads: usize,
    /// Time between two reconcile passes over BACKING; zero disables them.
    pub reconcile_interval: Duration,
    /// Age (by mtime) past which an unopened engine temporary is removed; zero: never.
    pub stale_tmp: Duration,
    /// Let users other than the mounting one in (`allow_other`).
    pub allow_other: bool,
    /// Stay in the foreground (`-f`).
    pub foreground: bool,
    /// Mount `noexec`.
    pub noexec: bool,
    /// Where to write the Prometheus metrics (`metrics_file`), if anywhere;
    /// its directory is canonical, outside BACKING and the mountpoint.
    pub metrics_file: Option<PathBuf>,
    /// How often the metrics file is rewritten (`metrics_interval`, ≥ 1 s).
    pub metrics_interval: Duration,
    /// Kernel passthrough for read-only opens (`passthrough=auto`), or
    /// daemon-side I/O only (`passthrough=off`).
    pub passthrough: bool,
    /// Kernel entry and attribute cache timeout (`attr_timeout`).
    pub attr_timeout: Duration,
}

impl Options {
    /// The compiled block-file matcher. Errors: a pattern that is not a valid glob.
    pub fn block_matcher(&self) -> Result<GlobSet, ConfigError> {
        build_matcher(&self.patterns)
    }
}

/// Compiles name globs. Errors: an empty list, an empty or invalid glob.
pub fn build_matcher(patterns: &[String]) -> Result<GlobSet, ConfigError> {
    if patterns.is_empty() {
        return err("pattern: at least one pattern is needed, e.g. pattern=*.bin");
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        if p.is_empty() {
            return err("pattern: empty pattern; give a glob on file names, e.g. pattern=*.bin");
        }
        if p.contains('/') {
            return err(format!("pattern: '{p}' contains '/'; patterns match file names only, e.g. *.bin"));
        }
        let g = Glob::new(p).or_else(|e| err(format!("pattern: '{p}' is not a valid glob: {e}")))?;
        b.add(g);
    }
    b.build().or_else(|e| err(format!("pattern: {e}")))
}

/// Parses a size: bytes, or with a K/M/G/T suffix (powers of 1024, as tmpfs
/// `size=` and `du -h`; `KiB`, `MB` … also accepted). Errors: empty, negative,
/// zero, overflow, garbage.
pub fn parse_size(key: &str, v: &str) -> Result<u64, ConfigError> {
    let t = v.trim();
    if t.is_empty() {
        return err(format!("{key}: empty value; give a size such as 24G"));
    }
    if t.starts_with('-') {
        return err(format!("{key}: '{v}' is negative; give a size such as 24G"));
    }
    let cfg = parse_size::Config::new().with_binary();
    let n = cfg
        .parse_size(t)
        .or_else(|e| err(format!("{key}: '{v}' is not a size ({e}); use bytes or a K/M/G/T suffix, e.g. 24G")))?;
    if n == 0 {
        return err(format!("{key}: must be greater than zero, e.g. {key}=24G"));
    }
    Ok(n)
}

/// Parses `max_size`: a size (see [`parse_size`]) of at least [`MIN_MAX_SIZE`].
pub fn parse_max_size(v: &str) -> Result<u64, ConfigError> {
    let n = parse_size("max_size", v)?;
    if n < MIN_MAX_SIZE {
        return err(format!("max_size: {v} is too small to hold a block file; give at least 1M, e.g. max_size=24G"));
    }
    Ok(n)
}

/// Parses a watermark fraction in (0, 1]. Errors: not a number, out of range.
pub fn parse_fraction(key: &str, v: &str) -> Result<f64, ConfigError> {
    let f: f64 = v
        .trim()
        .parse()
        .or_else(|_| err(format!("{key}: '{v}' is not a number; give a fraction of max_size in (0, 1], e.g. 0.9")))?;
    if !(f > 0.0 && f <= 1.0) {
        return err(format!("{key}: {v} is outside (0, 1]; give a fraction of max_size, e.g. 0.9"));
    }
    Ok(f)
}

/// Parses a duration: `60s`, `5m`, `1h`, `250ms`, or bare seconds.
pub fn parse_duration(key: &str, v: &str) -> Result<Duration, ConfigError> {
    let t = v.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(t).or_else(|e| err(format!("{key}: '{v}' is not a duration ({e}); e.g. 60s, 5m, 1h")))
}

/// Parses `auto` (true) or `off` (false).
pub fn parse_auto_off(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "auto" => Ok(true),
        "off" => Ok(false),
        _ => err(format!("{key}: '{v}' is not auto or off; e.g. {key}=off")),
    }
}

/// Parses an interval that is either 0 (off) or at least `min`, as
/// [`parse_duration`]. Errors: not a duration, or between 0 and `min`.
pub fn parse_interval(key: &str, v: &str, min: Duration) -> Result<Duration, ConfigError> {
    let d = parse_duration(key, v)?;
    if !d.is_zero() && d < min {
        return err(format!("{key}: '{v}' is too short; give 0 (off) or at least {}", humantime::format_duration(min)));
    }
    Ok(d)
}

/// Parses a count in `1..=max`.
pub fn parse_count(key: &str, v: &str, max: usize) -> Result<usize, ConfigError> {
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => err(format!("{key}: '{v}' must be a whole number from 1 to {max}")),
    }
}

/// Checks BACKING and MOUNTPOINT and returns them canonical. Errors: missing,
/// not a directory, BACKING not writable, one equal to or inside the other.
pub fn check_paths(backing: &Path, mountpoint: &Path) -> Result<(PathBuf, PathBuf), ConfigError> {
    let b = dir(backing, "backing directory")?;
    let m = dir(mountpoint, "mountpoint")?;
    if let Some(source) = boundfs_mounted_at(&m) {
        // statfs always reaches the daemon: ENOTCONN means it died.
        let mut v: libc::statvfs = unsafe { std::mem::zeroed() };
        let cm = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(m.as_os_str()))
            .or_else(|_| err("mountpoint: path contains a NUL byte"))?;
        let dead = unsafe { libc::statvfs(cm.as_ptr(), &mut v) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOTCONN);
        let (what, fix) =
            if dead { ("a dead boundfs mount", "umount -l") } else { ("already a boundfs mount", "umount") };
        return err(format!(
            "mountpoint {} is {what} (of {source}); unmount it first: {fix} {}",
            m.display(),
            m.display()
        ));
    }
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(b.as_os_str()))
        .or_else(|_| err("backing directory: path contains a NUL byte"))?;
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return err(format!("backing directory {} is not writable by this user", b.display()));
    }
    if m == b {
        return err(format!("mountpoint and backing directory are the same ({}); mount somewhere else", b.display()));
    }
    if m.starts_with(&b) {
        return err(format!(
            "mountpoint {} is inside the backing directory {}; choose a mountpoint outside it",
            m.display(),
            b.display()
        ));
    }
    if b.starts_with(&m) {
        return err(format!(
            "backing directory {} is inside the mountpoint {}; choose a backing directory outside it",
            b.display(),
            m.display()
        ));
    }
    Ok((b, m))
}

fn dir(p: &Path, what: &str) -> Result<PathBuf, ConfigError> {
    let c = p.canonicalize().or_else(|e| err(format!("{what} {}: {}", p.display(), lower(&e, p))))?;
    // canonicalize does not stat the last component: a dead FUSE mount
    // (ENOTCONN) shows up only here.
    let md = std::fs::metadata(&c).or_else(|e| err(format!("{what} {}: {}", p.display(), lower(&e, p))))?;
    if !md.is_dir() {
        return err(format!("{what} {}: not a directory", p.display()));
    }
    Ok(c)
}

/// The source of a live `fuse.boundfs` mount whose mount point is exactly
/// `m` (canonical), from /proc/self/mountinfo (proc(5): field 5 is the mount
/// point with octal escapes, then fstype and source after " - ").
fn boundfs_mounted_at(m: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let unescape =
        |f: &str| f.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\");
    info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let point = unescape(left.split(' ').nth(4)?);
        let mut r = right.split(' ');
        let (fstype, source) = (r.next()?, r.next()?);
        (fstype == "fuse.boundfs" && Path::new(&point) == m).then(|| unescape(source))
    })
}

fn lower(e: &std::io::Error, p: &Path) -> String {
    if e.raw_os_error() == Some(libc::ENOTCONN) {
        return format!(
            "transport endpoint is not connected (the FUSE daemon serving it died); detach it with \
             `umount -l {0}` (or `fusermount3 -uz {0}`) and mount again",
            p.display()
        );
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist; create it first".into(),
        _ => e.to_string(),
    }
}

/// Checks `metrics_file` and returns it with its directory canonical.
/// Errors: no file name, a directory that is missing or not writable, a path
/// inside BACKING (it would count toward usage) or inside the mountpoint.
pub fn check_metrics_file(path: &Path, backing: &Path, mountpoint: &Path) -> Result<PathBuf, ConfigError> {
    let Some(name) = path.file_name() else {
        return err(format!(
            "metrics_file: '{}' has no file name; give e.g. /var/lib/node_exporter/boundfs.prom",
            path.display()
        ));
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = dir(parent, "metrics_file directory")?.join(name);
    if dir.is_dir() {
        return err(format!(
            "metrics_file {} is a directory; give a file path in it, e.g. {}/boundfs.prom",
            dir.display(),
            dir.display()
        ));
    }
    if dir.starts_with(backing) || dir.starts_with(mountpoint) {
        return err(format!(
            "metrics_file {} is inside the backing directory or the mountpoint; write it elsewhere",
            dir.display()
        ));
    }
    let Some(d) = dir.parent() else { return err("metrics_file: no directory") };
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(d.as_os_str()))
        .or_else(|_| err("metrics_file: path contains a NUL byte"))?;
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return err(format!("metrics_file directory {} is not writable by this user", d.display()));
    }
    Ok(dir)
}
