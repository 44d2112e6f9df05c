//! argv → [`Options`]: one typed clap definition ([`Args`]) holds every
//! option, its default, its parser and its help. `-o a=b,c` (what mount(8),
//! fstab and the mount helper pass) is rewritten into the same long
//! arguments (`--a=b --c`) before clap parses ([`expand`], after
//! mountpoint-s3's fstab handling), so both spellings go through one parser:
//! a key given twice is an error whichever way it came, except `pattern`,
//! which may repeat. mount(8)'s own generic options are accepted and ignored.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};

use crate::config::{self, AtimeMode, ConfigError, FlushMode, Options, err};
use crate::exit::{Exit, Failure};

/// Help heading of the options that `-o key=value` sets (boundfs's own).
pub const MOUNT_OPTIONS: &str = "Mount options (also as -o key=value)";
/// Help heading of mount(8)'s flags boundfs applies (`-o noexec` …).
pub const MOUNT_FLAGS: &str = "mount(8) flags (also as -o flag)";

/// Command line of the daemon. Every field under [`MOUNT_OPTIONS`] or
/// [`MOUNT_FLAGS`] is also an `-o` key (its id, with `_`).
#[derive(Parser, Debug)]
#[command(
    name = "boundfs",
    version,
    about = "Mount BACKING at MOUNTPOINT with a hard byte budget: least recently used block files are evicted",
    after_help = "Example: boundfs /data/kv /mnt/kv -o max_size=24G\n\
                  Every option above may also be given as -o key=value[,key=value...] (fstab style: \
                  max_size=24G,allow_other), and mount(8)'s generic options are accepted there \
                  (rw, nofail, _netdev, x-* ...). A comma inside braces or double quotes belongs to \
                  the value: -o pattern=*.{bin,pt}.\n\
                  Sizes: bytes, or K/M/G/T = KiB/MiB/GiB/TiB (powers of 1024), fractions allowed (1.5G).\n\
                  Durations: 250ms, 60s, 5m, 1h, or bare seconds.\n\
                  Other commands: boundfs status MOUNTPOINT [--json]; boundfs set MOUNTPOINT max_size=SIZE; \
                  boundfs upgrade MOUNTPOINT [--binary PATH]\n\
                  Exit status: 0 ok, 1 runtime failure, 2 bad input, 3 already served, 4 a dead mount in the way."
)]
pub struct Args {
    /// Backing directory (where the files really live).
    pub backing: PathBuf,
    /// Mountpoint (point the engine's root_dir here).
    pub mountpoint: PathBuf,
    /// Stay in the foreground. Without it the command returns once the mount
    /// is live and the daemon serves in the background (under systemd's
    /// NOTIFY_SOCKET it stays in the foreground).
    #[arg(short = 'f', long)]
    pub foreground: bool,
    /// Mount options: key=value[,key=value...] (rewritten into the long options before parsing).
    #[arg(short = 'o', value_name = "OPTS")]
    pub opts: Vec<String>,
    /// Hard budget in bytes, at least 1M; K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024, 1.5G allowed (required).
    #[arg(long, value_name = "SIZE", value_parser = config::parse_max_size, help_heading = MOUNT_OPTIONS)]
    pub max_size: Option<u64>,
    /// Fraction of max_size in (0, 1] above which background eviction starts.
    #[arg(long, value_name = "FRACTION", default_value_t = config::DEFAULT_HIGH_WATERMARK,
          value_parser = |v: &str| config::parse_fraction("high_watermark", v), help_heading = MOUNT_OPTIONS)]
    pub high_watermark: f64,
    /// Fraction of max_size, below high_watermark, background eviction brings usage down to.
    #[arg(long, value_name = "FRACTION", default_value_t = config::DEFAULT_LOW_WATERMARK,
          value_parser = |v: &str| config::parse_fraction("low_watermark", v), help_heading = MOUNT_OPTIONS)]
    pub low_watermark: f64,
    /// Glob on file names selecting evictable block files; repeatable.
    #[arg(long, value_name = "GLOB", default_value = "*.bin", help_heading = MOUNT_OPTIONS)]
    pub pattern: Vec<String>,
    /// Minimum time between two mtime stamps of one file (recency persistence); 10s with shared.
    #[arg(long, value_name = "DURATION", default_value = "60s",
          value_parser = |v: &str| config::parse_duration("stamp_interval", v), help_heading = MOUNT_OPTIONS)]
    pub stamp_interval: Duration,
    /// FUSE event loops, 1 to 256 [default: number of CPUs].
    #[arg(long, value_name = "N", value_parser = |v: &str| config::parse_count("threads", v, 256),
          help_heading = MOUNT_OPTIONS)]
    pub threads: Option<usize>,
    /// Let other users access the mount.
    #[arg(long, help_heading = MOUNT_OPTIONS)]
    pub allow_other: bool,
    /// Kernel passthrough (Linux >= 6.9, root): auto (reads and block writes), reads, or off.
    #[arg(long, value_name = "auto|reads|off", default_value = "auto", action = clap::ArgAction::Set,
          value_parser = config::parse_passthrough, help_heading = MOUNT_OPTIONS)]
    pub passthrough: config::Passthrough,
    /// One of several mounts (one per node) over one shared BACKING on a distributed filesystem.
    #[arg(long, help_heading = MOUNT_OPTIONS)]
    pub shared: bool,
    /// FLUSH closes a duplicate of the backing fd (close-to-open on network filesystems):
    /// auto (on for NFS, CephFS, Lustre, FUSE clients such as JuiceFS), on or off.
    #[arg(long, value_name = "auto|on|off", default_value = "auto", value_parser = config::parse_flush,
          help_heading = MOUNT_OPTIONS)]
    pub flush: FlushMode,
    /// Backing file page cache: off (kept after a close, as on a plain directory) or release (a read-only
    /// handle's RELEASE drops the file's cached pages, and the daemon's READs keep no copy of theirs).
    #[arg(long, value_name = "off|release", default_value = "off", action = clap::ArgAction::Set,
          value_parser = crate::fs::pagecache::parse_drop_cache, help_heading = MOUNT_OPTIONS)]
    pub drop_cache: bool,
    /// With shared: record (a budget record in the shared directory grants each node its bytes: hard at any
    /// store rate) or views (each node admits writes against its own view of the tree).
    #[arg(long, value_name = "views|record", default_value = "record", action = clap::ArgAction::Set,
          value_parser = config::parse_shared_budget, help_heading = MOUNT_OPTIONS)]
    pub shared_budget: bool,
    /// How long the kernel caches entries, misses and attributes; 2s with shared.
    #[arg(long, value_name = "DURATION", default_value = "60s",
          value_parser = |v: &str| config::parse_duration("attr_timeout", v), help_heading = MOUNT_OPTIONS)]
    pub attr_timeout: Duration,
    /// Write Prometheus metrics to this file (node_exporter textfile collector).
    #[arg(long, value_name = "PATH", help_heading = MOUNT_OPTIONS)]
    pub metrics_file: Option<PathBuf>,
    /// How often the metrics file is rewritten (at least 1s).
    #[arg(long, value_name = "DURATION", default_value = "15s",
          value_parser = |v: &str| config::parse_min_duration("metrics_interval", v, Duration::from_secs(1)),
          help_heading = MOUNT_OPTIONS)]
    pub metrics_interval: Duration,
    /// Serve the same Prometheus metrics over HTTP at http://ADDRESS/metrics (IP:PORT, e.g.
    /// 127.0.0.1:9567); the port is bound before mounting.
    #[arg(long, value_name = "IP:PORT", value_parser = config::parse_listen, help_heading = MOUNT_OPTIONS)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Latency histograms of FUSE requests and eviction (metrics and status): on or off.
    #[arg(long, value_name = "on|off", default_value = "on", action = clap::ArgAction::Set,
          value_parser = |v: &str| config::parse_on_off("latency_histograms", v), help_heading = MOUNT_OPTIONS)]
    pub latency_histograms: bool,
    /// Time between two re-walks of BACKING that correct usage for changes made behind the mount
    /// (0 disables; at least 1s); 10s with shared.
    #[arg(long, value_name = "DURATION", default_value = "60s",
          value_parser = |v: &str| config::parse_interval("reconcile_interval", v, Duration::from_secs(1)),
          help_heading = MOUNT_OPTIONS)]
    pub reconcile_interval: Duration,
    /// Append the daemon's log lines to this file (created if missing) instead of
    /// syslog (daemon mode) or stderr (-f, systemd).
    #[arg(long, value_name = "PATH", help_heading = MOUNT_OPTIONS)]
    pub log_file: Option<PathBuf>,
    /// Age past which an unopened engine temporary (*.tmp, *.tmp.*) is removed by the reconcile pass,
    /// by the later of its mtime and ctime (0: never; at least 1s).
    #[arg(long, value_name = "DURATION", default_value = "1h",
          value_parser = |v: &str| config::parse_interval("stale_tmp", v, Duration::from_secs(1)),
          help_heading = MOUNT_OPTIONS)]
    pub stale_tmp: Duration,
    /// After mounting, warm the kernel's entries of this many most recently used block files in the
    /// background, so the first loads after a restart skip their LOOKUPs (0: off); 0 with shared.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_WARM_ENTRIES,
          value_parser = config::parse_warm_entries, help_heading = MOUNT_OPTIONS)]
    pub warm_entries: usize,
    /// Keep the mount across a daemon crash: a small supervisor holds the FUSE connection and starts a new
    /// daemon on it within a second (root, Linux >= 6.9; see docs/design/upgrade.md).
    #[arg(long, help_heading = MOUNT_OPTIONS)]
    pub supervise: bool,
    /// Make the bare mountpoint under the mount immutable (chattr +i; root), so that once the mount is
    /// gone writers get EPERM instead of filling its filesystem: on or off (off clears boundfs' own guard).
    #[arg(long, value_name = "on|off", default_value = "on", action = clap::ArgAction::Set,
          value_parser = |v: &str| config::parse_on_off("guard", v), help_heading = MOUNT_OPTIONS)]
    pub guard: bool,
    /// Mount noexec (the last of noexec and exec wins).
    #[arg(long, overrides_with_all = ["noexec", "exec"], help_heading = MOUNT_FLAGS)]
    pub noexec: bool,
    /// Mount exec (the default).
    #[arg(long, overrides_with_all = ["noexec", "exec"], help_heading = MOUNT_FLAGS)]
    pub exec: bool,
    /// Access times as relatime, the kernel's default (the last of the atime family wins).
    #[arg(long, overrides_with_all = ATIME_MODES, help_heading = MOUNT_FLAGS)]
    pub atime: bool,
    /// No access-time updates (MS_NOATIME).
    #[arg(long, overrides_with_all = ATIME_MODES, help_heading = MOUNT_FLAGS)]
    pub noatime: bool,
    /// Access times updated when older than mtime or a day (MS_RELATIME).
    #[arg(long, overrides_with_all = ATIME_MODES, help_heading = MOUNT_FLAGS)]
    pub relatime: bool,
    /// Access times updated on every access (MS_STRICTATIME).
    #[arg(long, overrides_with_all = ATIME_MODES, help_heading = MOUNT_FLAGS)]
    pub strictatime: bool,
    /// The same as relatime.
    #[arg(long, overrides_with_all = ATIME_MODES, help_heading = MOUNT_FLAGS)]
    pub nostrictatime: bool,
    /// Directory access times not updated (MS_NODIRATIME).
    #[arg(long, overrides_with_all = ["nodiratime", "diratime"], help_heading = MOUNT_FLAGS)]
    pub nodiratime: bool,
    /// Directory access times updated (the default).
    #[arg(long, overrides_with_all = ["nodiratime", "diratime"], help_heading = MOUNT_FLAGS)]
    pub diratime: bool,
    /// Times kept in memory, written lazily (MS_LAZYTIME).
    #[arg(long, overrides_with_all = ["lazytime", "nolazytime"], help_heading = MOUNT_FLAGS)]
    pub lazytime: bool,
    /// No lazytime (the default).
    #[arg(long, overrides_with_all = ["lazytime", "nolazytime"], help_heading = MOUNT_FLAGS)]
    pub nolazytime: bool,
    /// POSIX ACLs enforced through the mount (the default; FUSE_POSIX_ACL).
    #[arg(long, overrides_with_all = ["acl", "noacl"], help_heading = MOUNT_FLAGS)]
    pub acl: bool,
    /// No POSIX ACLs, as ext4's noacl: the mode bits alone decide access, and getfacl/setfacl of
    /// system.posix_acl_* through the mount fail with EOPNOTSUPP (the last of acl and noacl wins).
    #[arg(long, overrides_with_all = ["acl", "noacl"], help_heading = MOUNT_FLAGS)]
    pub noacl: bool,
}

/// The atime modes: the last one given wins (mount(8), "FILESYSTEM-INDEPENDENT MOUNT OPTIONS").
const ATIME_MODES: [&str; 5] = ["atime", "noatime", "relatime", "strictatime", "nostrictatime"];

/// mount(8)/fstab options that are not boundfs's: accepted in `-o`, ignored
/// (mount(8) and systemd act on the ones that concern them; a boundfs mount
/// is always nosuid,nodev). `ro` is refused (see [`expand`]).
const MOUNT_GENERIC: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "_netdev",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "nodev",
    "nosuid",
    "dev",
    "suid",
    "async",
    "default_permissions",
    "rw",
];

/// The `-o` keys: the ids of the [`Args`] fields under [`MOUNT_OPTIONS`]
/// and [`MOUNT_FLAGS`], with whether each takes a value.
pub fn keys() -> Vec<(String, bool)> {
    Args::command()
        .get_arguments()
        .filter(|a| matches!(a.get_help_heading(), Some(MOUNT_OPTIONS | MOUNT_FLAGS)))
        .map(|a| (a.get_id().to_string(), a.get_action().takes_values()))
        .collect()
}

/// Whether `-o` item `item` (`key` or `key=value`) is one boundfs or mount(8)
/// knows; for the mount helper's sloppy mode (`mount -s`), which drops the rest.
pub fn known_option(item: &str) -> bool {
    let (k, v) = split(item);
    k.is_empty()
        || keys().iter().any(|(key, _)| key == k)
        || MOUNT_GENERIC.contains(&k)
        || k.starts_with("x-")
        || k == "ro"
        || (v.is_some() && matches!(k, "user" | "comment"))
}

fn split(item: &str) -> (&str, Option<&str>) {
    match item.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v)),
        None => (item.trim(), None),
    }
}

/// Splits one `-o` group into its items at the commas outside braces and
/// double quotes, so every value the long option takes can be given with
/// `-o`: `pattern=*.{bin,pt}` (a glob's alternatives) and
/// `log_file="/var/log/kv,1.log"` stay one item each. Empty items are kept
/// (the caller skips them).
pub fn split_items(group: &str) -> Vec<&str> {
    let (mut items, mut start, mut depth, mut quoted) = (Vec::new(), 0, 0usize, false);
    for (i, c) in group.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '{' if !quoted => depth += 1,
            '}' if !quoted => depth = depth.saturating_sub(1),
            ',' if !quoted && depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// A value as given in `-o key="value"`: without its enclosing double quotes.
fn unquote(v: &str) -> &str {
    v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v)
}

/// Rewrites every `-o a=b,c` (also `-oa=b,c`) of argv into `--a=b --c`,
/// dropping mount(8)'s generic options; items are split by [`split_items`]. Errors (one line naming the key):
/// an unknown key, a value given to a flag or missing from a key that needs
/// one, `ro`.
pub fn expand(argv: &[OsString]) -> Result<Vec<OsString>, ConfigError> {
    let keys = keys();
    let mut out = Vec::with_capacity(argv.len());
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let group = match a.to_str() {
            Some("-o") => match it.next() {
                Some(g) => {
                    g.to_str().ok_or_else(|| ConfigError("mount options are not valid UTF-8".into(), Exit::BadInput))?
                }
                None => return err("option -o needs a value: -o key=value[,key=value...]"),
            },
            Some(s) if s.starts_with("-o") && !s.starts_with("--") => &s[2..],
            _ => {
                out.push(a.clone());
                continue;
            }
        };
        for item in split_items(group) {
            let (k, v) = split(item);
            let v = v.map(unquote);
            let known = keys.iter().find(|(key, _)| key == k);
            match (k, v, known) {
                ("", None, _) => {}
                ("ro", None, _) => {
                    return err(
                        "ro is not supported: boundfs changes BACKING itself (eviction, recency stamps); mount rw",
                    );
                }
                (k, None, _) if MOUNT_GENERIC.contains(&k) => {}
                (k, _, _) if k.starts_with("x-") => {}
                // mount(8) may name the mounting user (user=NAME); comment= is fstab's old x-*
                ("user" | "comment", Some(_), _) => {}
                (k, Some(v), Some((_, true))) => out.push(format!("--{}={v}", k.replace('_', "-")).into()),
                (k, None, Some((_, true))) => return err(format!("option {k} needs a value: -o {k}=VALUE")),
                (k, None, Some((_, false))) => out.push(format!("--{}", k.replace('_', "-")).into()),
                (k, Some(_), Some((_, false))) => return err(format!("option {k} takes no value: -o {k}")),
                (k, _, None) => {
                    let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
                    return err(format!("unknown option '{k}'; known: {}", names.join(", ")));
                }
            }
        }
    }
    Ok(out)
}

/// Why argv gave no [`Options`].
#[derive(Debug)]
pub enum CliError {
    /// `--help` or `--version`: print it and exit 0.
    Display(clap::Error),
    /// Bad input: one line naming the option and what to give instead.
    Bad(String),
    /// A mount in the way ([`Exit::InUse`], [`Exit::DeadMount`]): one line saying which and what to do.
    Refused(Failure),
}

/// argv (program name first) → validated [`Options`]: [`expand`], clap,
/// then [`options`].
pub fn parse(argv: &[OsString]) -> Result<Options, CliError> {
    let argv = expand(argv).map_err(|e| CliError::Bad(e.0))?;
    let matches = Args::command().try_get_matches_from(argv).map_err(clap_error)?;
    let args = Args::from_arg_matches(&matches).map_err(clap_error)?;
    options(args, &matches).map_err(|e| match e.1 {
        Exit::BadInput => CliError::Bad(e.0),
        kind => CliError::Refused(Failure::new(kind, e.0)),
    })
}

/// clap's error as [`CliError`]: our parsers' own message when a value was
/// refused, "given twice" for a repeated option, else clap's first paragraph.
fn clap_error(e: clap::Error) -> CliError {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            return CliError::Display(e);
        }
        ErrorKind::ValueValidation => {
            if let Some(c) = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<ConfigError>()) {
                return CliError::Bad(c.0.clone());
            }
        }
        ErrorKind::ArgumentConflict => {
            let arg = |k| match e.get(k) {
                Some(ContextValue::String(s)) => Some(s.clone()),
                _ => None,
            };
            if let (Some(a), Some(b)) = (arg(ContextKind::InvalidArg), arg(ContextKind::PriorArg)) {
                if a == b {
                    let name = a.trim_start_matches('-').split([' ', '=']).next().unwrap_or("").replace('-', "_");
                    return CliError::Bad(format!("option {name} is given twice; give it once"));
                }
            }
        }
        ErrorKind::UnknownArgument => {
            // `boundfs B M max_size=24G`: an option without its -o
            if let Some(ContextValue::String(a)) = e.get(ContextKind::InvalidArg) {
                if a.contains('=') && !a.starts_with('-') {
                    return CliError::Bad(format!(
                        "unexpected argument '{a}': mount options go after -o, e.g. boundfs BACKING MOUNTPOINT -o {a}"
                    ));
                }
            }
        }
        _ => {}
    }
    CliError::Bad(format!("{} (see boundfs --help)", first_line(&e.to_string())))
}

/// clap's error as one line: its first paragraph (some errors continue on
/// indented lines, e.g. the missing arguments), without "error: " and usage.
pub fn first_line(text: &str) -> String {
    let para: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
    let line = para.join(" ");
    let line = line.trim_start_matches("error: ");
    if line.is_empty() { "bad arguments".to_string() } else { line.to_string() }
}

/// Parsed argv → validated [`Options`] (`matches` tells given values from
/// defaults, for the shared-tier defaults). Errors: the first bad value or
/// combination, one line naming the key and what to give instead.
pub fn options(a: Args, matches: &ArgMatches) -> Result<Options, ConfigError> {
    if let Some(o) = a.opts.first() {
        // parse() rewrites every -o first; Args parsed without it would drop them
        return err(format!("-o {o} was not rewritten into options (argv must go through cli::parse)"));
    }
    let Some(max_size) = a.max_size else { return err("max_size is required, e.g. -o max_size=24G") };
    // A high watermark given alone at or below the default low one takes a
    // low one 5 points under it (the defaults' gap) instead of a refusal
    // about a value nobody gave.
    let mut a = a;
    if matches.value_source("low_watermark") == Some(ValueSource::DefaultValue) && a.low_watermark >= a.high_watermark {
        a.low_watermark = if a.high_watermark > 0.1 { a.high_watermark - 0.05 } else { a.high_watermark / 2.0 };
    }
    if a.low_watermark >= a.high_watermark {
        return err(format!("low_watermark ({}) must be below high_watermark ({})", a.low_watermark, a.high_watermark));
    }
    config::build_matcher(&a.pattern)?;
    // Shared-tier defaults (config::SHARED_*): other nodes' stores, evictions
    // and recency stamps reach this node through the shared tree, so the
    // intervals that bound how late it sees them are shorter.
    let default = |id: &str| matches.value_source(id) == Some(ValueSource::DefaultValue);
    let shared_default = |id: &str, given: Duration, shared: Duration| {
        if a.shared && default(id) { shared } else { given }
    };
    let atime = config::Atime {
        mode: if a.noatime {
            AtimeMode::Noatime
        } else if a.strictatime {
            AtimeMode::Strictatime
        } else {
            AtimeMode::Relatime
        },
        nodiratime: a.nodiratime,
        lazytime: a.lazytime,
    };
    // A supervised daemon takes the paths its supervisor checked: the
    // mountpoint is then its live mount (a stat of it would wait for us).
    let (backing, mountpoint) = match crate::daemon::supervisor::handed_paths() {
        Some(p) => p,
        None => config::check_paths(&a.backing, &a.mountpoint)?,
    };
    let metrics_file = match &a.metrics_file {
        Some(p) => Some(config::check_metrics_file(p, &backing, &mountpoint)?),
        None => None,
    };
    let log_file = match &a.log_file {
        Some(p) => Some(config::check_log_file(p, &backing, &mountpoint)?),
        None => None,
    };
    Ok(Options {
        max_size,
        high_watermark: a.high_watermark,
        low_watermark: a.low_watermark,
        stamp_interval: shared_default("stamp_interval", a.stamp_interval, config::SHARED_STAMP_INTERVAL),
        threads: a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        reconcile_interval: shared_default(
            "reconcile_interval",
            a.reconcile_interval,
            config::SHARED_RECONCILE_INTERVAL,
        ),
        stale_tmp: a.stale_tmp,
        // Shared tier: entries live 2 s (attr_timeout), a warm would only load the shared filesystem.
        warm_entries: if a.shared && default("warm_entries") { 0 } else { a.warm_entries },
        allow_other: a.allow_other,
        foreground: a.foreground,
        passthrough: a.passthrough,
        attr_timeout: shared_default("attr_timeout", a.attr_timeout, config::SHARED_ATTR_TIMEOUT),
        noexec: a.noexec,
        metrics_file,
        metrics_interval: a.metrics_interval,
        metrics_listen: a.metrics_listen,
        latency_histograms: a.latency_histograms,
        shared: a.shared,
        flush: a.flush,
        drop_cache: a.drop_cache,
        acl: !a.noacl,
        shared_budget: a.shared_budget,
        supervise: a.supervise,
        guard: a.guard,
        log_file,
        atime,
        patterns: a.pattern,
        backing,
        mountpoint,
    })
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
