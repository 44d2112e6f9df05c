//! The validated [`Options`] handed to the core, the value parsers the one
//! clap definition of the options uses (`daemon::cli::Args`, which holds
//! their defaults and help), and the path checks. Every check here runs
//! before anything is mounted; a failure is one [`ConfigError`] line for the user.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::claim::shell_word;
use crate::exit::Exit;

mod metrics;
mod warnings;
pub use metrics::{parse_listen, parse_on_off};
pub use warnings::warnings;

/// Default `high_watermark` (the clap default of `--high-watermark`, and
/// the ledger's when built without options): fraction of `max_size` above
/// which the background evictor runs.
pub const DEFAULT_HIGH_WATERMARK: f64 = 0.95;
/// Default `low_watermark`: fraction of `max_size` the evictor brings usage down to.
pub const DEFAULT_LOW_WATERMARK: f64 = 0.90;
/// Smallest `max_size` accepted (bytes): BACKING's own directory and one
/// small block must fit.
pub const MIN_MAX_SIZE: u64 = 1 << 20;
/// Default `stamp_interval` with `-o shared` (60 s otherwise): recency is shared between
/// nodes only through the mtime stamped on the shared tree, so a block read
/// on one node must be stamped soon enough for the sweeper (another node) to
/// see it: stamp (10 s) + reconcile (10 s) stays well within a minute.
pub const SHARED_STAMP_INTERVAL: Duration = Duration::from_secs(10);
/// Default `reconcile_interval` with `-o shared` (60 s otherwise): each pass is how the
/// sweeper learns other nodes' stores and stamps, and how every node learns
/// the shared usage `df` shows; its lag is part of the stated overshoot bound.
pub const SHARED_RECONCILE_INTERVAL: Duration = Duration::from_secs(10);
/// Default `attr_timeout` with `-o shared` (60 s otherwise): other nodes create blocks all the
/// time, and the kernel caches "no such file" as long as an entry; 2 s keeps a block stored on
/// another node a hit here within 2 s. (The single-node 60 s keeps repeated existence probes
/// from the daemon; what the daemon changes itself is invalidated explicitly.)
pub const SHARED_ATTR_TIMEOUT: Duration = Duration::from_secs(2);
/// Default `warm_entries`: after a mount, the kernel's entries of this many most recently used
/// block files are resolved in the background (`workers::warm`), so an engine reloading them
/// after a restart pays no LOOKUP round trips: 4096 blocks are 8 GiB of vLLM's 2 MiB blocks,
/// and cost the daemon one inode (an `O_PATH` fd) each, plus their directories.
pub const DEFAULT_WARM_ENTRIES: usize = 4096;
/// Largest `warm_entries` accepted.
pub const MAX_WARM_ENTRIES: usize = 1 << 20;

/// A bad option or path, worded for the user (one line, says what to do),
/// and its kind (exit status): [`Exit::BadInput`] unless a mount is in the way.
#[derive(Debug, PartialEq)]
pub struct ConfigError(pub String, pub Exit);

impl std::error::Error for ConfigError {}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Shorthand for building a [`ConfigError`].
pub fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into(), Exit::BadInput))
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
    /// Where `/metrics` is served over HTTP (`metrics_listen`), if anywhere.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Whether requests and evictions are timed (`latency_histograms`, on).
    pub latency_histograms: bool,
    /// What kernel passthrough serves (`passthrough`).
    pub passthrough: Passthrough,
    /// Kernel entry and attribute cache timeout (`attr_timeout`).
    pub attr_timeout: Duration,
    /// Where the daemon appends its log lines (`log_file`), if given; its
    /// directory is canonical, outside BACKING and the mountpoint.
    pub log_file: Option<PathBuf>,
    /// The atime flags the mount gets (`noatime`, `relatime` …).
    pub atime: Atime,
    /// How many most recently used block files' kernel entries are warmed
    /// after the mount (`warm_entries`; 0: none).
    pub warm_entries: usize,
    /// One of N mounts, one per node, over one shared BACKING (`shared`):
    /// opens hold a flock that evictions on every node respect (see `fs::shared`).
    pub shared: bool,
    /// Whether FLUSH closes a duplicate of the backing fd (`flush`).
    pub flush: FlushMode,
    /// Backing files' cached pages dropped at RELEASE and after READs (`drop_cache=release`).
    pub drop_cache: bool,
    /// POSIX ACLs through the mount (`acl`, the default; `noacl`: mode bits only).
    pub acl: bool,
    /// With `shared`: the shared budget record grants each node its bytes
    /// (`shared_budget=record`, the default; `views` admits against each
    /// node's own view).
    pub shared_budget: bool,
    /// A supervisor process holds the FUSE connection and restarts a daemon
    /// that dies (`supervise`; see `daemon::supervisor`).
    pub supervise: bool,
    /// The bare mountpoint made immutable under the mount (`guard`, on; see `daemon::guard`).
    pub guard: bool,
}

/// How the kernel updates access times on the mount (mount(2) flags; the
/// kernel's own default for a new mount is `relatime`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AtimeMode {
    /// `relatime` (also `atime`, `nostrictatime`): the kernel's default.
    #[default]
    Relatime,
    /// `noatime`: MS_NOATIME.
    Noatime,
    /// `strictatime`: MS_STRICTATIME.
    Strictatime,
}

/// The atime family of mount options, as given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Atime {
    /// relatime / noatime / strictatime.
    pub mode: AtimeMode,
    /// `nodiratime`: MS_NODIRATIME.
    pub nodiratime: bool,
    /// `lazytime`: MS_LAZYTIME.
    pub lazytime: bool,
}

impl Atime {
    /// The mount(2) flags (MS_*) these options stand for.
    pub fn mount_flags(&self) -> libc::c_ulong {
        let mut f = match self.mode {
            AtimeMode::Relatime => libc::MS_RELATIME,
            AtimeMode::Noatime => libc::MS_NOATIME,
            AtimeMode::Strictatime => libc::MS_STRICTATIME,
        };
        if self.nodiratime {
            f |= libc::MS_NODIRATIME;
        }
        if self.lazytime {
            f |= libc::MS_LAZYTIME;
        }
        f
    }

    /// The same as fusermount3 `-o` words (for mounts made without root),
    /// without the default `relatime`, which fusermount3 does not know; it
    /// refuses in one line what it cannot apply.
    pub fn words(&self) -> Vec<&'static str> {
        let mut w = match self.mode {
            AtimeMode::Relatime => vec![],
            AtimeMode::Noatime => vec!["noatime"],
            AtimeMode::Strictatime => vec!["strictatime"],
        };
        if self.nodiratime {
            w.push("nodiratime");
        }
        if self.lazytime {
            w.push("lazytime");
        }
        w
    }
}

/// `flush=auto|on|off`: whether FLUSH (every close(2) on the mount) closes a
/// duplicate of the backing fd, which is what makes a filesystem that
/// commits at close (NFS, CephFS, Lustre, JuiceFS and other FUSE clients)
/// show the data to other nodes once close(2) returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMode {
    /// On when BACKING's statfs type is one of those (`fs::shared::commits_at_close`).
    Auto,
    /// Always (one extra round trip per close).
    On,
    /// Never: FLUSH is answered ENOSYS and the kernel stops sending it.
    Off,
}

/// `shared_budget=views|record` → whether the budget record is on.
/// Errors: anything else, with an example.
pub fn parse_shared_budget(v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "views" => Ok(false),
        "record" => Ok(true),
        _ => err(format!("shared_budget: '{v}' is not views or record; e.g. shared_budget=record")),
    }
}

/// Parses `flush`: `auto`, `on` or `off`.
pub fn parse_flush(v: &str) -> Result<FlushMode, ConfigError> {
    match v.trim() {
        "auto" => Ok(FlushMode::Auto),
        "on" => Ok(FlushMode::On),
        "off" => Ok(FlushMode::Off),
        _ => err(format!("flush: '{v}' is not auto, on or off; e.g. flush=auto")),
    }
}

impl Options {
    /// The compiled block-file matcher. Errors: a pattern that is not a valid glob.
    pub fn block_matcher(&self) -> Result<GlobSet, ConfigError> {
        build_matcher(&self.patterns)
    }
}

/// Compiles name globs. Errors: an empty list, an empty or invalid glob, a
/// glob with white space at either end, a glob with no wildcard (`pattern=bin` almost always means `*.bin`; a block
/// store has many block files, never one fixed name).
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
        if p.trim() != p {
            // Sizes and keys are trimmed; a glob is not, and '*.pt ' (from a
            // quoted option list or a config line) silently selects nothing.
            return err(format!(
                "pattern: '{p}' begins or ends with white space, so it selects no block file; write pattern={}",
                p.trim()
            ));
        }
        if !p.contains(['*', '?', '[', '{']) {
            return err(format!(
                "pattern: '{p}' has no wildcard (* ? [ {{), so it would select only a file named exactly \
                 '{p}'; give a glob, e.g. pattern=*.{}",
                p.trim_start_matches('.')
            ));
        }
        let g = Glob::new(p).or_else(|e| err(format!("pattern: '{p}' is not a valid glob: {e}")))?;
        b.add(g);
    }
    b.build().or_else(|e| err(format!("pattern: {e}")))
}

/// Binary size suffixes and their multipliers (powers of 1024, as tmpfs
/// `size=` and `du -h` read `K`/`M`/`G`/`T`).
const SIZE_SUFFIXES: &[(&str, u64)] = &[
    ("K", 1 << 10),
    ("M", 1 << 20),
    ("G", 1 << 30),
    ("T", 1 << 40),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

/// Parses a size in bytes: a whole number of bytes, or a number with one of
/// `K`/`M`/`G`/`T` or `KiB`/`MiB`/`GiB`/`TiB`, all powers of 1024
/// (`24G` = `24GiB` = 24 × 2^30 bytes); a fraction is allowed with a suffix
/// (`1.5G`), rounded down to whole bytes. Decimal (`10GB`, `10kB`) and
/// lowercase (`10g`, `10gb`) forms are refused with a hint, since `GB`
/// means 10^9 elsewhere and boundfs would otherwise have to guess.
/// Errors: empty, negative, zero, overflow, anything else.
pub fn parse_size(key: &str, v: &str) -> Result<u64, ConfigError> {
    let t = v.trim();
    let example = format!("e.g. {key}=24G (K/M/G/T or KiB/MiB/GiB/TiB, powers of 1024)");
    if t.is_empty() {
        return err(format!("{key}: empty value; give a size, {example}"));
    }
    if t.starts_with('-') {
        return err(format!("{key}: '{v}' is negative; give a size, {example}"));
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let mult = match SIZE_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        Some(&(_, m)) => m,
        None if suffix.is_empty() => 1,
        None => {
            let upper = suffix.to_ascii_uppercase();
            let letter = upper.chars().next().filter(|c| "KMGT".contains(*c));
            return match letter {
                Some(l) => err(format!(
                    "{key}: '{v}': write {num}{l} or {num}{l}iB (powers of 1024); decimal and lowercase \
                     units such as {num}{l}B or {num}{} are not accepted",
                    l.to_ascii_lowercase()
                )),
                None => err(format!("{key}: '{v}' is not a size; {example}")),
            };
        }
    };
    let whole = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    let n = match num.split_once('.') {
        None if whole(num) => num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult)),
        Some((i, f)) if mult > 1 && (whole(i) || i.is_empty()) && whole(f) => {
            // exact for up to 9 decimals: i × mult + f × mult / 10^len(f)
            let f = &f[..f.len().min(9)];
            let (fi, scale) = (f.parse::<u64>().unwrap_or(0), 10u64.pow(f.len() as u32));
            let ip = if i.is_empty() { Some(0) } else { i.parse::<u64>().ok() };
            ip.and_then(|i| i.checked_mul(mult))
                .and_then(|i| i.checked_add((fi as u128 * mult as u128 / scale as u128) as u64))
        }
        Some(_) if mult == 1 && whole(num.replace('.', "").as_str()) => {
            return err(format!("{key}: '{v}' is a fraction of a byte; give whole bytes or a suffix, e.g. 1.5G"));
        }
        _ => return err(format!("{key}: '{v}' is not a size; {example}")),
    };
    match n {
        None => err(format!("{key}: '{v}' is too large; {example}")),
        Some(0) => err(format!("{key}: must be greater than zero, e.g. {key}=24G")),
        Some(n) => Ok(n),
    }
}

/// Parses `max_size`: a size (see [`parse_size`]) of at least [`MIN_MAX_SIZE`].
/// Errors: anything after a comma (named), not a size, too small.
pub fn parse_max_size(v: &str) -> Result<u64, ConfigError> {
    if let Some((size, rest)) = v.split_once(',') {
        return err(format!(
            "max_size: '{v}' has more after the size (',{rest}'); give one size, e.g. max_size={size}"
        ));
    }
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
    humantime::parse_duration(t)
        .or_else(|_| err(format!("{key}: '{v}' is not a duration; give a number with a unit, e.g. 60s, 5m, 1h")))
}

/// Parses a duration (as [`parse_duration`]) of at least `min`. Errors:
/// not a duration, or shorter than `min`.
pub fn parse_min_duration(key: &str, v: &str, min: Duration) -> Result<Duration, ConfigError> {
    let d = parse_duration(key, v)?;
    if d < min {
        let m = humantime::format_duration(min);
        return err(format!("{key}: must be at least {m}, e.g. {key}=15s"));
    }
    Ok(d)
}

/// Which I/O kernel passthrough serves (`passthrough=`; Linux >= 6.9, root).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passthrough {
    /// `off`: the daemon serves every read and write.
    Off,
    /// `reads`: read-only opens; every write goes through the daemon, which reserves its bytes first.
    Reads,
    /// `auto`: reads, and the writers of block files and engine temporaries once a block size is
    /// learned, each reserving that size at its open (see `fs::passthrough`).
    Auto,
}

/// Parses `passthrough=auto|reads|off`. Errors: any other value.
pub fn parse_passthrough(v: &str) -> Result<Passthrough, ConfigError> {
    match v.trim() {
        "auto" => Ok(Passthrough::Auto),
        "reads" => Ok(Passthrough::Reads),
        "off" => Ok(Passthrough::Off),
        _ => err(format!("passthrough: '{v}' is not auto, reads or off; e.g. passthrough=reads")),
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

/// Parses `warm_entries`: a count in `0..=MAX_WARM_ENTRIES` (0: off).
/// Errors: anything else, in one line saying what to give.
pub fn parse_warm_entries(v: &str) -> Result<usize, ConfigError> {
    match v.trim().parse::<usize>() {
        Ok(n) if n <= MAX_WARM_ENTRIES => Ok(n),
        _ => err(format!(
            "warm_entries: '{v}' must be a whole number from 0 (off) to {MAX_WARM_ENTRIES}, e.g. warm_entries=4096"
        )),
    }
}

/// Parses a count in `1..=max`.
pub fn parse_count(key: &str, v: &str, max: usize) -> Result<usize, ConfigError> {
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => err(format!("{key}: '{v}' must be a whole number from 1 to {max}")),
    }
}

/// The one-line reason a failed `access(W_OK | X_OK)` of the directory
/// `path` gives, from its errno: EROFS names the read-only filesystem (root
/// is refused too) and how to find it; anything else (EACCES) the user.
fn not_writable(what: &str, path: &Path) -> String {
    let p = path.display();
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EROFS) => format!(
            "{what} {p} is on a read-only filesystem; remount that filesystem read-write (findmnt -T {p} names it) or choose another directory"
        ),
        _ => format!(
            "{what} {p} is not writable by this user (uid {}); run as its owner or root, or choose another directory",
            crate::sys::uid()
        ),
    }
}

/// Set by a process taking over a live mount (`boundfs upgrade`): its
/// mountpoint is the boundfs mount it takes over, not one in the way.
pub static TAKING_OVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Checks BACKING and MOUNTPOINT and returns them canonical. Errors: missing,
/// not a directory, BACKING not writable, one equal to or inside the other.
pub fn check_paths(backing: &Path, mountpoint: &Path) -> Result<(PathBuf, PathBuf), ConfigError> {
    let b = dir(backing, "backing directory")?;
    let m = dir(mountpoint, "mountpoint")?;
    let taking_over = TAKING_OVER.load(std::sync::atomic::Ordering::Relaxed);
    if let Some(source) = boundfs_mounted_at(&m).filter(|_| !taking_over) {
        // statfs always reaches the daemon: ENOTCONN means it died.
        let cm = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(m.as_os_str()))
            .or_else(|_| err("mountpoint: path contains a NUL byte"))?;
        let dead =
            crate::sys::statvfs(&cm).is_err() && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOTCONN);
        let (what, fix, kind) = if dead {
            ("a dead boundfs mount", "umount -l", Exit::DeadMount)
        } else {
            ("already a boundfs mount", "umount", Exit::InUse)
        };
        let msg =
            format!("mountpoint {} is {what} (of {source}); unmount it first: {fix} {}", m.display(), shell_word(&m));
        return Err(ConfigError(msg, kind));
    }
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(b.as_os_str()))
        .or_else(|_| err("backing directory: path contains a NUL byte"))?;
    if crate::sys::access(&c, libc::W_OK | libc::X_OK).is_err() {
        return err(not_writable("backing directory", &b));
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
    let fail = |e: std::io::Error| {
        let kind = if e.raw_os_error() == Some(libc::ENOTCONN) { Exit::DeadMount } else { Exit::BadInput };
        ConfigError(format!("{what} {}: {}", p.display(), lower(&e, p)), kind)
    };
    let c = p.canonicalize().map_err(fail)?;
    // canonicalize does not stat the last component: a dead FUSE mount
    // (ENOTCONN) shows up only here.
    let md = std::fs::metadata(&c).map_err(fail)?;
    if !md.is_dir() {
        return err(format!(
            "{what} {}: not a directory; give a directory (usage: boundfs BACKING MOUNTPOINT)",
            p.display()
        ));
    }
    Ok(c)
}

/// The source of a `fuse.boundfs` mount whose mount point is exactly `m`
/// (canonical), from /proc/self/mountinfo.
fn boundfs_mounted_at(m: &Path) -> Option<String> {
    crate::claim::boundfs_mounts().into_iter().find(|(_, p)| p == m).map(|(s, _)| s)
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
/// Errors: as `check_out_file`.
pub fn check_metrics_file(path: &Path, backing: &Path, mountpoint: &Path) -> Result<PathBuf, ConfigError> {
    check_out_file("metrics_file", "boundfs.prom", path, backing, mountpoint)
}

/// Checks `log_file` and returns it with its directory canonical.
/// Errors: as `check_out_file`.
pub fn check_log_file(path: &Path, backing: &Path, mountpoint: &Path) -> Result<PathBuf, ConfigError> {
    check_out_file("log_file", "boundfs.log", path, backing, mountpoint)
}

/// Checks a file the daemon writes (option `key`, example name `example`)
/// and returns it with its directory canonical. Errors: no file name, a
/// directory that is missing or not writable, a path inside BACKING (it
/// would count toward usage) or inside the mountpoint.
fn check_out_file(
    key: &str,
    example: &str,
    path: &Path,
    backing: &Path,
    mountpoint: &Path,
) -> Result<PathBuf, ConfigError> {
    let Some(name) = path.file_name() else {
        return err(format!("{key}: '{}' has no file name; give a file path, e.g. /var/log/{example}", path.display()));
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = dir(parent, &format!("{key} directory"))?.join(name);
    if dir.is_dir() {
        return err(format!(
            "{key} {} is a directory; give a file path in it, e.g. {}/{example}",
            dir.display(),
            dir.display()
        ));
    }
    if dir.starts_with(backing) || dir.starts_with(mountpoint) {
        return err(format!(
            "{key} {} is inside the backing directory or the mountpoint; write it elsewhere",
            dir.display()
        ));
    }
    let Some(d) = dir.parent() else { return err(format!("{key}: no directory")) };
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(d.as_os_str()))
        .or_else(|_| err(format!("{key}: path contains a NUL byte")))?;
    if crate::sys::access(&c, libc::W_OK | libc::X_OK).is_err() {
        return err(not_writable(&format!("{key} directory"), d));
    }
    Ok(dir)
}
