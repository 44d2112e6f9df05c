//! The live status of a mount: what the `user.boundfs.stats` xattr of the
//! mountpoint's root answers (one line of JSON), what `boundfs status` prints
//! as a table, and what the metrics file exports.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::{LedgerCounts, Stats};

/// Prometheus type of a [`Metric`] (prometheus.io/docs/concepts/metric_types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (since the mount started); its name ends in `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
}

/// A metric the `metrics_file` exports for a [`Status`] field.
#[derive(Debug)]
pub struct Metric {
    /// Metric name, unit in the name (`boundfs_usage_bytes`).
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// Its own help, when the field's doc does not fit a sample.
    pub help: Option<&'static str>,
}

/// One row of the status table [`FIELDS`]: a [`Status`] field.
#[derive(Debug)]
pub struct Field {
    /// JSON key and field name.
    pub name: &'static str,
    /// What it means (the field's doc comment, on one line).
    pub help: &'static str,
    /// The metric exported for it, if any.
    pub metric: Option<Metric>,
    /// Its value as a sample: numbers as they are, `true` as 1, a non-empty text as 1.
    pub get: fn(&Status) -> f64,
}

impl Field {
    /// The metric's one-line help: its own, or the field's.
    pub fn metric_help(&self) -> &'static str {
        self.metric.as_ref().and_then(|m| m.help).unwrap_or(self.help).trim()
    }
}

/// A status value as a Prometheus sample.
trait Sample {
    fn sample(&self) -> f64;
}
impl Sample for u64 {
    fn sample(&self) -> f64 {
        *self as f64
    }
}
impl Sample for u32 {
    fn sample(&self) -> f64 {
        f64::from(*self)
    }
}
impl Sample for f64 {
    fn sample(&self) -> f64 {
        *self
    }
}
impl Sample for bool {
    fn sample(&self) -> f64 {
        f64::from(u8::from(*self))
    }
}
impl Sample for String {
    fn sample(&self) -> f64 {
        f64::from(u8::from(!self.is_empty()))
    }
}
impl Sample for BTreeMap<String, u64> {
    fn sample(&self) -> f64 {
        self.values().sum::<u64>() as f64
    }
}

/// The one table of status fields. Each row
/// `/// doc` `name: type [source] => Counter|Gauge "metric_name" help "…";` makes:
/// the [`Status`] field (JSON key `name`, the doc its meaning), its row of
/// [`FIELDS`] (the metric, if `=> Counter|Gauge` is given; its help is the
/// doc unless `help` is), and, for `[stats]` and `[ledger]`, the copy from
/// the [`Stats`] counter or the [`LedgerCounts`] field of the same name in
/// [`Status::fill`]. The human table ([`Status::table`]) reads the fields.
macro_rules! status_table {
    ($(
        $(#[doc = $doc:literal])*
        $(#[serde($($serde:tt)*)])?
        $field:ident : $ty:ty $([$src:ident])? $(=> $kind:ident $metric:literal $(help $help:literal)?)? ;
    )*) => {
        /// One snapshot of a mount. Sizes are bytes, times seconds; counters
        /// (`evictions` … `stamps`) count since the mount started. Fields missing from
        /// an older daemon's JSON read as 0. Every field is a row of [`FIELDS`].
        #[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
        #[serde(default)]
        pub struct Status {
            $( $(#[doc = $doc])* $(#[serde($($serde)*)])? pub $field: $ty, )*
        }

        /// Every [`Status`] field in JSON order, with its metric: what
        /// `boundfs status --json`, the metrics file and docs/reference.md
        /// (checked by a test) list.
        pub const FIELDS: &[Field] = &[ $( Field {
            name: stringify!($field),
            help: concat!($($doc),*),
            metric: opt!($( Metric { name: $metric, kind: Kind::$kind, help: opt!($($help)?) } )?),
            get: |s: &Status| Sample::sample(&s.$field),
        }, )* ];

        impl Status {
            /// Copies the rows marked `[stats]` from `stats` and those marked
            /// `[ledger]` from `ledger` (same names).
            pub fn fill(&mut self, stats: &Stats, ledger: &LedgerCounts) {
                let _ = (&stats, &ledger);
                $( $( copy!($src, self.$field, stats.$field, ledger.$field); )? )*
            }
        }
    };
}
macro_rules! opt {
    () => {
        None
    };
    ($x:expr) => {
        Some($x)
    };
}
macro_rules! copy {
    (stats, $to:expr, $s:expr, $l:expr) => {
        $to = Stats::get(&$s)
    };
    (ledger, $to:expr, $s:expr, $l:expr) => {
        $to = $l
    };
}

status_table! {
    /// Version of the daemon serving the mount.
    version: String;
    /// The backing directory (canonical path).
    backing: String;
    /// The mountpoint (canonical path). Filled in by `boundfs status` from
    /// the path it was given; the daemon's xattr leaves it empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    mountpoint: String;
    /// Process id of the daemon serving the mount (for `kill -USR1`,
    /// `kill -TERM`; fstab mounts run as `mount.fuse.boundfs`, which
    /// `pgrep boundfs` misses).
    pid: u32;
    /// Bytes the backing tree occupies, as `du -s --block-size=1 BACKING` counts them.
    usage: u64 [ledger] => Gauge "boundfs_usage_bytes";
    /// The budget (`max_size`), bytes.
    max_size: u64 => Gauge "boundfs_max_size_bytes";
    /// Fraction of `max_size` above which background eviction starts.
    high_watermark: f64;
    /// Fraction of `max_size` background eviction brings usage down to.
    low_watermark: f64;
    /// `high_watermark × max_size`, bytes.
    high_watermark_bytes: u64 => Gauge "boundfs_high_watermark_bytes";
    /// `low_watermark × max_size`, bytes.
    low_watermark_bytes: u64 => Gauge "boundfs_low_watermark_bytes";
    /// Bytes reserved by writes in flight (usage + reserved never passes max_size).
    reserved: u64 [ledger] => Gauge "boundfs_reserved_bytes";
    /// Regular files in the backing tree.
    files: u64 [ledger] => Gauge "boundfs_files";
    /// Directories in the backing tree, BACKING itself included.
    dirs: u64 [ledger] => Gauge "boundfs_dirs";
    /// Symlinks, fifos, sockets and device nodes.
    others: u64 [ledger];
    /// Regular files whose name matches `pattern`.
    block_files: u64 [ledger] => Gauge "boundfs_block_files";
    /// Block files eviction could remove now (no open handle).
    evictable: u64 [ledger] => Gauge "boundfs_evictable_block_files";
    /// Bytes of the evictable block files.
    evictable_bytes: u64 => Gauge "boundfs_evictable_bytes";
    /// Open file handles through the mount.
    open_handles: u64 [ledger] => Gauge "boundfs_open_handles";
    /// Block files evicted.
    evictions: u64 [stats] => Counter "boundfs_evictions_total";
    /// Bytes freed by eviction.
    evicted_bytes: u64 [stats] => Counter "boundfs_evicted_bytes_total";
    /// Eviction candidates skipped, all reasons (`evict_skipped_open` included).
    evict_skipped: u64 [stats] => Counter "boundfs_evict_skipped_total";
    /// Eviction candidates skipped because a client opened them meanwhile.
    evict_skipped_open: u64 [stats] => Counter "boundfs_evict_skipped_open_total";
    /// Background eviction sweeps.
    eviction_sweeps: u64 [stats] => Counter "boundfs_eviction_sweeps_total";
    /// Time spent in background eviction sweeps, seconds.
    eviction_sweep_seconds: f64 => Counter "boundfs_eviction_sweep_seconds_total";
    /// Requests answered ENOSPC because nothing evictable could make room.
    enospc: u64 [stats] => Counter "boundfs_enospc_total";
    /// Opens of block files (cache hits).
    block_opens: u64 [stats] => Counter "boundfs_block_opens_total";
    /// Lookups of block-file names that found nothing (cache misses).
    lookup_misses: u64 [stats] => Counter "boundfs_lookup_misses_total";
    /// Opens answered with kernel passthrough (reads bypass the daemon).
    passthrough_opens: u64 [stats] => Counter "boundfs_passthrough_opens_total";
    /// mtime stamps written (recency persistence).
    stamps: u64 [stats] => Counter "boundfs_stamps_total";
    /// mtime stamps queued, not yet written.
    stamps_pending: u64 => Gauge "boundfs_stamps_pending";
    /// The start-up index of BACKING is still being built (usage is an
    /// upper bound until it completes).
    indexing: bool => Gauge "boundfs_indexing";
    /// How long the start-up index took, seconds (0 while it runs).
    index_seconds: f64 => Gauge "boundfs_index_seconds";
    /// Seconds since the mount started.
    uptime_seconds: u64 => Gauge "boundfs_uptime_seconds";
    /// Reconcile passes over BACKING (`reconcile_interval`).
    reconciles: u64 [stats] => Counter "boundfs_reconciles_total";
    /// One of several nodes over one shared BACKING (`-o shared`): `usage`
    /// is then the shared tree's usage as this node last learned it.
    shared: bool;
    /// Shared mode: bytes of files created through this node's mount still
    /// in the shared tree (this node's part of `usage`).
    node_bytes: u64;
    /// Shared mode: this node holds the sweeper lease (runs eviction sweeps).
    sweeper: bool;
    /// Shared mode: the sweeper as its lease file says (`host pid N since
    /// UNIX-SECONDS`); empty when no node ever took the lease.
    sweeper_holder: String;
    /// Shared mode: seconds since the sweeper's last heartbeat (rewritten
    /// every 5 s; much more means a stuck holder).
    sweeper_heartbeat_age_seconds: u64;
    /// Shared mode: eviction candidates made most recent instead because
    /// another node had used them (one LRU across nodes).
    evict_reranked: u64 [stats];
    /// Index entries reconcile passes corrected (adopted, dropped, resized, renamed).
    reconcile_fixes: u64 [stats] => Counter "boundfs_reconcile_fixes_total";
    /// Stale engine temporaries removed (`stale_tmp`).
    stale_tmp_removed: u64 [stats] => Counter "boundfs_stale_tmp_removed_total";
    /// FUSE requests received since the mount started, per opcode by its
    /// kernel protocol name (`LOOKUP`, `CREATE`, … see `stats::OPS`); opcodes
    /// never received are left out.
    requests: BTreeMap<String, u64>;
    /// Syscalls the daemon issued on BACKING since it started (close(2) of
    /// dropped fds and the FUSE device's reads and writes not counted).
    syscalls: u64 => Counter "boundfs_syscalls_total";
    /// While files matching no `pattern` alone are above the high watermark
    /// (eviction then frees only what `max_size` needs): the warning, naming
    /// the biggest of them and the pattern. Empty otherwise.
    nonblock_warning: String => Gauge "boundfs_nonblock_over_high_watermark" help "1 while files matching no pattern alone are above the high watermark.";
    /// When most regular files written since mount match no `pattern`: how
    /// many, an example and the option to set. Empty otherwise.
    pattern_warning: String => Gauge "boundfs_pattern_mismatch" help "1 while most files written since mount match no pattern.";
}

impl Status {
    /// `block_opens / (block_opens + lookup_misses)`, None before any of either.
    pub fn hit_ratio(&self) -> Option<f64> {
        let all = self.block_opens + self.lookup_misses;
        (all > 0).then(|| self.block_opens as f64 / all as f64)
    }

    /// The `n` most frequent FUSE opcodes as `LOOKUP 12, OPEN 3`, or `-`.
    pub fn top_requests(&self, n: usize) -> String {
        let mut v: Vec<_> = self.requests.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let s: Vec<String> = v.iter().take(n).map(|(k, c)| format!("{k} {}", count(**c))).collect();
        if s.is_empty() { "-".to_string() } else { s.join(", ") }
    }

    /// The human table of `boundfs status`, for the mount at `mountpoint`.
    pub fn table(&self, mountpoint: &str) -> String {
        let pct = |n: u64| if self.max_size == 0 { 0.0 } else { n as f64 * 100.0 / self.max_size as f64 };
        let rows = [
            ("mount", format!("{} on {} (boundfs {})", self.backing, mountpoint, self.version)),
            ("daemon", format!("pid {}", self.pid)),
            (
                "usage",
                format!(
                    "{} of {}  {}  {:.1}%",
                    bytes(self.usage),
                    bytes(self.max_size),
                    bar(self.usage, self.max_size, 30),
                    pct(self.usage)
                ),
            ),
            (
                "watermarks",
                format!(
                    "high {} ({:.0}%), low {} ({:.0}%)",
                    bytes(self.high_watermark_bytes),
                    self.high_watermark * 100.0,
                    bytes(self.low_watermark_bytes),
                    self.low_watermark * 100.0
                ),
            ),
            (
                "files",
                format!("{} regular, {} dirs, {} other", count(self.files), count(self.dirs), count(self.others)),
            ),
            (
                "block files",
                format!(
                    "{}, {} evictable ({})",
                    count(self.block_files),
                    count(self.evictable),
                    bytes(self.evictable_bytes)
                ),
            ),
            ("open handles", count(self.open_handles)),
            (
                "evictions",
                format!(
                    "{} files, {} in {} sweeps ({:.1}s); skipped {} ({} opened meanwhile)",
                    count(self.evictions),
                    bytes(self.evicted_bytes),
                    count(self.eviction_sweeps),
                    self.eviction_sweep_seconds,
                    count(self.evict_skipped),
                    count(self.evict_skipped_open)
                ),
            ),
            ("ENOSPC", format!("{} answers", count(self.enospc))),
            (
                "block hits",
                format!(
                    "{} opens, {} lookups missed, hit ratio {}",
                    count(self.block_opens),
                    count(self.lookup_misses),
                    self.hit_ratio().map_or("-".to_string(), |r| format!("{:.1}%", r * 100.0))
                ),
            ),
            ("passthrough", format!("{} opens", count(self.passthrough_opens))),
            ("stamps", format!("{} written, {} pending", count(self.stamps), count(self.stamps_pending))),
            (
                "index",
                if self.indexing {
                    "building (usage counts what is indexed so far)".to_string()
                } else {
                    format!("complete in {:.2}s", self.index_seconds)
                },
            ),
            (
                "reconcile",
                format!(
                    "{} passes, {} entries corrected, {} stale temporaries removed",
                    count(self.reconciles),
                    count(self.reconcile_fixes),
                    count(self.stale_tmp_removed)
                ),
            ),
            (
                "requests",
                format!(
                    "{} FUSE requests ({}), {} syscalls",
                    count(self.requests.values().sum()),
                    self.top_requests(4),
                    count(self.syscalls)
                ),
            ),
            ("uptime", duration(self.uptime_seconds)),
        ];
        let shared = [
            (
                "shared",
                format!(
                    "usage is the shared tier's; this node's part {}; {} candidates re-ranked by other nodes' use",
                    bytes(self.node_bytes),
                    count(self.evict_reranked)
                ),
            ),
            (
                "sweeper",
                match (self.sweeper, self.sweeper_holder.is_empty()) {
                    (true, _) => format!("this node ({})", self.sweeper_holder),
                    (false, true) => "none yet".to_string(),
                    (false, false) => {
                        format!("{} (heartbeat {}s ago)", self.sweeper_holder, self.sweeper_heartbeat_age_seconds)
                    }
                },
            ),
        ];
        let rows: Vec<(&str, String)> =
            if self.shared { rows.into_iter().chain(shared).collect() } else { rows.into_iter().collect() };
        let mut out = String::new();
        for (k, v) in rows {
            out.push_str(&format!("{k:<13}{v}\n"));
        }
        for w in [&self.nonblock_warning, &self.pattern_warning].into_iter().filter(|w| !w.is_empty()) {
            out.push_str(&format!("{:<13}{w}\n", "WARNING"));
        }
        out
    }
}

/// `n` bytes with a binary unit: `512 B`, `1.5 KiB`, `24.0 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

/// `n` with thousands separators: `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `[#####-----]`: `part` of `whole` in `width` cells (full when part ≥ whole).
pub fn bar(part: u64, whole: u64, width: usize) -> String {
    let filled = if whole == 0 { 0 } else { ((part as f64 / whole as f64) * width as f64).round() as usize };
    let filled = filled.min(width);
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

/// Seconds as `3d 4h 5m 6s` (leading zero units left out).
pub fn duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (n, unit) in [(d, "d"), (h, "h"), (m, "m")] {
        if n > 0 || !out.is_empty() {
            out.push_str(&format!("{n}{unit} "));
        }
    }
    out.push_str(&format!("{s}s"));
    out
}

/// What the start-up index's walk found (`crate::workers::scan`).
#[derive(Debug, Default, Clone)]
pub struct ScanReport {
    /// Objects indexed (files, directories, symlinks …), BACKING included.
    pub objects: u64,
    /// Block files among them.
    pub blocks: u64,
    /// Bytes allocated in total (what du reports).
    pub bytes: u64,
    /// Directories that could not be read (permissions, races).
    pub unreadable: u64,
    /// Wall time of the walk, seconds.
    pub seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(24 << 30), "24.0 GiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(count(0), "0");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(123), "123");
        assert_eq!(bar(1, 2, 10), "[#####-----]");
        assert_eq!(bar(3, 2, 4), "[####]");
        assert_eq!(bar(0, 0, 2), "[--]");
        assert_eq!(duration(59), "59s");
        assert_eq!(duration(3600 + 5), "1h 0m 5s");
        assert_eq!(duration(2 * 86400 + 61), "2d 0h 1m 1s");
    }

    #[test]
    fn json_round_trip_and_old_daemons() {
        let s = Status { usage: 5, max_size: 10, block_opens: 3, lookup_misses: 1, ..Default::default() };
        let j = serde_json::to_string(&s).unwrap();
        assert!(!j.contains('\n'));
        assert_eq!(serde_json::from_str::<Status>(&j).unwrap(), s);
        let old: Status = serde_json::from_str(r#"{"usage":7,"max_size":9}"#).unwrap();
        assert_eq!((old.usage, old.max_size, old.dirs), (7, 9, 0));
        assert_eq!(s.hit_ratio(), Some(0.75));
        assert!(s.table("/mnt/kv").contains("hit ratio 75.0%"));
        let mut r = Status { syscalls: 9, ..Default::default() };
        r.requests.insert("LOOKUP".into(), 1200);
        r.requests.insert("OPEN".into(), 3);
        let j = serde_json::to_string(&r).unwrap();
        assert!(j.contains(r#""requests":{"LOOKUP":1200,"OPEN":3},"syscalls":9"#), "{j}");
        assert!(r.table("/m").contains("1,203 FUSE requests (LOOKUP 1,200, OPEN 3), 9 syscalls"));
    }
}
