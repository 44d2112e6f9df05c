//! argv → [`Options`]. Long flags and `-o a=b,c` (what mount(8) and fstab
//! pass) set the same keys; a key given twice is an error, except `pattern`,
//! which may repeat. mount(8)'s own generic options are accepted and ignored.

use std::path::PathBuf;

use clap::Parser;

use crate::config::{self, ConfigError, Options, err};

/// Command line of the daemon.
#[derive(Parser, Debug)]
#[command(
    name = "boundfs",
    version,
    about = "Mount BACKING at MOUNTPOINT with a hard byte budget: least recently used block files are evicted",
    after_help = "Example: boundfs /data/kv /mnt/kv -o max_size=24G\n\
                  Options may also be given as -o key=value[,key=value...]: max_size, high_watermark, \
                  low_watermark, pattern, stamp_interval, threads, passthrough, attr_timeout, allow_other, shared, flush, \
                  metrics_file, metrics_interval, reconcile_interval, stale_tmp, warm_entries, log_file (and mount(8)'s rw, noexec, exec, noatime, relatime, nofail, _netdev, x-* ...).\n\
                  Sizes: bytes, or K/M/G/T = KiB/MiB/GiB/TiB (powers of 1024), fractions allowed (1.5G).\n\
                  Other commands: boundfs status MOUNTPOINT [--json]; boundfs set MOUNTPOINT max_size=SIZE"
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
    /// Mount options: key=value[,key=value...]
    #[arg(short = 'o', value_name = "OPTS")]
    pub opts: Vec<String>,
    /// Hard budget in bytes; K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024, 1.5G allowed (required).
    #[arg(long, value_name = "SIZE")]
    pub max_size: Option<String>,
    /// Fraction of max_size above which background eviction starts [default: 0.95].
    #[arg(long, value_name = "FRACTION")]
    pub high_watermark: Option<String>,
    /// Fraction of max_size background eviction brings usage down to [default: 0.90].
    #[arg(long, value_name = "FRACTION")]
    pub low_watermark: Option<String>,
    /// Glob on file names selecting evictable block files; repeatable [default: *.bin].
    #[arg(long, value_name = "GLOB")]
    pub pattern: Vec<String>,
    /// Minimum time between two mtime stamps of one file (recency persistence) [default: 60s].
    #[arg(long, value_name = "DURATION")]
    pub stamp_interval: Option<String>,
    /// FUSE event loops [default: number of CPUs].
    #[arg(long, value_name = "N")]
    pub threads: Option<String>,
    /// Let other users access the mount.
    #[arg(long)]
    pub allow_other: bool,
    /// Kernel passthrough of reads (Linux >= 6.9, root): auto or off [default: auto].
    #[arg(long, value_name = "auto|off")]
    pub passthrough: Option<String>,
    /// One of several mounts (one per node) over one shared BACKING on a distributed filesystem.
    #[arg(long)]
    pub shared: bool,
    /// FLUSH closes a duplicate of the backing fd (close-to-open on network filesystems):
    /// auto, on or off [default: auto: on for NFS, CephFS, Lustre, FUSE clients such as JuiceFS].
    #[arg(long, value_name = "auto|on|off")]
    pub flush: Option<String>,
    /// How long the kernel caches entries, misses and attributes [default: 60s].
    #[arg(long, value_name = "DURATION")]
    pub attr_timeout: Option<String>,
    /// Write Prometheus metrics to this file (node_exporter textfile collector).
    #[arg(long, value_name = "PATH")]
    pub metrics_file: Option<String>,
    /// How often the metrics file is rewritten [default: 15s].
    #[arg(long, value_name = "DURATION")]
    pub metrics_interval: Option<String>,
    /// Time between two re-walks of BACKING that correct usage for changes made behind the mount
    /// (0 disables; at least 1s) [default: 60s].
    #[arg(long, value_name = "DURATION")]
    pub reconcile_interval: Option<String>,
    /// Append the daemon's log lines to this file (created if missing) instead of
    /// syslog (daemon mode) or stderr (-f, systemd).
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<String>,
    /// Age past which an unopened engine temporary (*.tmp, *.tmp.*) is removed by the reconcile pass
    /// (0: never; at least 1s) [default: 1h].
    #[arg(long, value_name = "DURATION")]
    pub stale_tmp: Option<String>,
    /// After mounting, warm the kernel's entries of this many most recently used block files in the
    /// background, so the first loads after a restart skip their LOOKUPs (0: off) [default: 4096].
    #[arg(long, value_name = "N")]
    pub warm_entries: Option<String>,
}

/// The `-o` keys that take a value.
const KEYS: &[&str] = &[
    "max_size",
    "high_watermark",
    "low_watermark",
    "pattern",
    "stamp_interval",
    "threads",
    "passthrough",
    "attr_timeout",
    "metrics_file",
    "metrics_interval",
    "reconcile_interval",
    "stale_tmp",
    "warm_entries",
    "flush",
    "log_file",
];

/// mount(8)/fstab options that are not boundfs's: accepted, ignored. (A
/// boundfs mount is always nosuid,nodev; `exec`/`noexec` and the atime
/// family ([`ATIME`]) are applied and `ro` is refused, see [`options`].)
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
];

/// The atime family of mount(8) options, applied to the mount as the kernel's
/// mount flags (so /proc/mounts shows what was asked; mount(8) "FILESYSTEM-
/// INDEPENDENT MOUNT OPTIONS"). The last of `atime`/`relatime`/`noatime`/
/// `strictatime`/`nostrictatime` wins, as it does for mount(8).
pub const ATIME: &[&str] = &[
    "atime",
    "noatime",
    "relatime",
    "strictatime",
    "nostrictatime",
    "diratime",
    "nodiratime",
    "lazytime",
    "nolazytime",
];

/// Whether `-o` item `item` (`key` or `key=value`) is one boundfs or mount(8)
/// knows; for the mount helper's sloppy mode (`mount -s`), which drops the rest.
pub fn known_option(item: &str) -> bool {
    let k = item.split_once('=').map_or(item, |(k, _)| k).trim();
    is_key(k)
        || MOUNT_GENERIC.contains(&k)
        || ATIME.contains(&k)
        || k.starts_with("x-")
        || matches!(k, "allow_other" | "shared" | "ro" | "rw" | "exec" | "noexec" | "")
}

/// Turns parsed argv into validated [`Options`]. Errors: the first bad value,
/// one line naming the key and what to give instead.
pub fn options(args: Args) -> Result<Options, ConfigError> {
    let mut kv: Vec<(String, String)> = Vec::new();
    let flag = |k: &str, v: &Option<String>, kv: &mut Vec<(String, String)>| {
        if let Some(v) = v {
            kv.push((k.to_string(), v.clone()));
        }
    };
    flag("max_size", &args.max_size, &mut kv);
    flag("high_watermark", &args.high_watermark, &mut kv);
    flag("low_watermark", &args.low_watermark, &mut kv);
    flag("stamp_interval", &args.stamp_interval, &mut kv);
    flag("threads", &args.threads, &mut kv);
    flag("passthrough", &args.passthrough, &mut kv);
    flag("attr_timeout", &args.attr_timeout, &mut kv);
    flag("metrics_file", &args.metrics_file, &mut kv);
    flag("metrics_interval", &args.metrics_interval, &mut kv);
    flag("reconcile_interval", &args.reconcile_interval, &mut kv);
    flag("stale_tmp", &args.stale_tmp, &mut kv);
    flag("warm_entries", &args.warm_entries, &mut kv);
    flag("flush", &args.flush, &mut kv);
    flag("log_file", &args.log_file, &mut kv);
    for p in &args.pattern {
        kv.push(("pattern".into(), p.clone()));
    }
    let mut allow_other = args.allow_other;
    let mut noexec = false;
    let mut shared = args.shared;
    let mut atime = config::Atime::default();
    for group in &args.opts {
        for item in group.split(',') {
            let (k, v) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v)),
                None => (item.trim(), None),
            };
            match (k, v) {
                ("", None) => continue,
                ("allow_other", None) if allow_other => {
                    return err("option allow_other is given twice; give it once");
                }
                ("allow_other", None) => allow_other = true,
                ("allow_other", Some(_)) => return err("option allow_other takes no value: -o allow_other"),
                ("ro", None) => {
                    return err(
                        "ro is not supported: boundfs changes BACKING itself (eviction, recency stamps); mount rw",
                    );
                }
                ("shared", None) if shared => return err("option shared is given twice; give it once"),
                ("shared", None) => shared = true,
                ("shared", Some(_)) => return err("option shared takes no value: -o shared"),
                ("rw", None) => {}
                ("noexec", None) => noexec = true,
                ("exec", None) => noexec = false,
                ("atime" | "relatime" | "nostrictatime", None) => atime.mode = config::AtimeMode::Relatime,
                ("noatime", None) => atime.mode = config::AtimeMode::Noatime,
                ("strictatime", None) => atime.mode = config::AtimeMode::Strictatime,
                ("nodiratime" | "diratime", None) => atime.nodiratime = k == "nodiratime",
                ("lazytime" | "nolazytime", None) => atime.lazytime = k == "lazytime",
                (k, None) if MOUNT_GENERIC.contains(&k) || k.starts_with("x-") => continue,
                (k, _) if k.starts_with("x-") => continue,
                // mount(8) may name the mounting user (user=NAME); comment= is fstab's old x-*
                ("user" | "comment", Some(_)) => continue,
                (k, None) if is_key(k) => {
                    return err(format!("option {k} needs a value: -o {k}=VALUE"));
                }
                (k, Some(v)) if is_key(k) => kv.push((k.to_string(), v.to_string())),
                (k, _) => {
                    return err(format!("unknown option '{k}'; known: {}, allow_other, shared", KEYS.join(", ")));
                }
            }
        }
    }
    let mut o = build(args.backing, args.mountpoint, args.foreground, allow_other, noexec, &kv)?;
    o = Options { atime, shared, ..o };
    if shared {
        // Shared-tier defaults (config::SHARED_*): other nodes' stores,
        // evictions and recency stamps reach this node through the shared
        // tree, so the intervals that bound how late it sees them are shorter.
        let given = |k: &str| kv.iter().any(|(k2, _)| k2 == k);
        if !given("stamp_interval") {
            o.stamp_interval = config::SHARED_STAMP_INTERVAL;
        }
        if !given("reconcile_interval") {
            o.reconcile_interval = config::SHARED_RECONCILE_INTERVAL;
        }
        if !given("attr_timeout") {
            o.attr_timeout = config::SHARED_ATTR_TIMEOUT;
        }
    }
    Ok(o)
}

fn is_key(k: &str) -> bool {
    KEYS.contains(&k)
}

fn build(
    backing: PathBuf,
    mountpoint: PathBuf,
    foreground: bool,
    allow_other: bool,
    noexec: bool,
    kv: &[(String, String)],
) -> Result<Options, ConfigError> {
    for (i, (k, _)) in kv.iter().enumerate() {
        if k != "pattern" && kv[..i].iter().any(|(k2, _)| k2 == k) {
            return err(format!("option {k} is given twice; give it once"));
        }
    }
    let get = |k: &str| kv.iter().find(|(k2, _)| k2 == k).map(|(_, v)| v.as_str());
    let max_size = match get("max_size") {
        Some(v) => config::parse_max_size(v)?,
        None => return err("max_size is required, e.g. -o max_size=24G"),
    };
    let high_watermark = match get("high_watermark") {
        Some(v) => config::parse_fraction("high_watermark", v)?,
        None => config::DEFAULT_HIGH_WATERMARK,
    };
    let low_watermark = match get("low_watermark") {
        Some(v) => config::parse_fraction("low_watermark", v)?,
        None => config::DEFAULT_LOW_WATERMARK,
    };
    if low_watermark >= high_watermark {
        return err(format!("low_watermark ({low_watermark}) must be below high_watermark ({high_watermark})"));
    }
    let mut patterns: Vec<String> = kv.iter().filter(|(k, _)| k == "pattern").map(|(_, v)| v.clone()).collect();
    if patterns.is_empty() {
        patterns.push(config::DEFAULT_PATTERN.to_string());
    }
    config::build_matcher(&patterns)?;
    let stamp_interval = match get("stamp_interval") {
        Some(v) => config::parse_duration("stamp_interval", v)?,
        None => config::DEFAULT_STAMP_INTERVAL,
    };
    let threads = match get("threads") {
        Some(v) => config::parse_count("threads", v, 256)?,
        None => std::thread::available_parallelism().map_or(2, |n| n.get()),
    };
    let passthrough = match get("passthrough") {
        Some(v) => config::parse_auto_off("passthrough", v)?,
        None => true,
    };
    let attr_timeout = match get("attr_timeout") {
        Some(v) => config::parse_duration("attr_timeout", v)?,
        None => config::DEFAULT_ATTR_TIMEOUT,
    };
    let metrics_interval = match get("metrics_interval") {
        Some(v) => config::parse_duration("metrics_interval", v)?,
        None => config::DEFAULT_METRICS_INTERVAL,
    };
    if metrics_interval < std::time::Duration::from_secs(1) {
        return err("metrics_interval: must be at least 1s, e.g. metrics_interval=15s");
    }
    let reconcile_interval = match get("reconcile_interval") {
        Some(v) => config::parse_interval("reconcile_interval", v, std::time::Duration::from_secs(1))?,
        None => config::DEFAULT_RECONCILE_INTERVAL,
    };
    let stale_tmp = match get("stale_tmp") {
        Some(v) => config::parse_interval("stale_tmp", v, std::time::Duration::from_secs(1))?,
        None => config::DEFAULT_STALE_TMP,
    };
    let warm_entries = match get("warm_entries") {
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n <= config::MAX_WARM_ENTRIES => n,
            _ => {
                return err(format!(
                    "warm_entries: '{v}' must be a whole number from 0 (off) to {}, e.g. warm_entries=4096",
                    config::MAX_WARM_ENTRIES
                ));
            }
        },
        None => config::DEFAULT_WARM_ENTRIES,
    };
    let flush = match get("flush") {
        Some(v) => config::parse_flush(v)?,
        None => config::FlushMode::Auto,
    };
    let (backing, mountpoint) = config::check_paths(&backing, &mountpoint)?;
    let metrics_file = match get("metrics_file") {
        Some(v) => Some(config::check_metrics_file(std::path::Path::new(v), &backing, &mountpoint)?),
        None => None,
    };
    let log_file = match get("log_file") {
        Some(v) => Some(config::check_log_file(std::path::Path::new(v), &backing, &mountpoint)?),
        None => None,
    };
    Ok(Options {
        backing,
        mountpoint,
        max_size,
        high_watermark,
        low_watermark,
        patterns,
        stamp_interval,
        threads,
        reconcile_interval,
        stale_tmp,
        allow_other,
        foreground,
        passthrough,
        attr_timeout,
        noexec,
        metrics_file,
        metrics_interval,
        shared: false,
        flush,
        log_file,
        atime: config::Atime::default(),
        warm_entries,
    })
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
