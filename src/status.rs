//! The live status of a mount: what the `user.boundfs.stats` xattr of the
//! mountpoint's root answers (one line of JSON), what `boundfs status` prints
//! as a table, and what the metrics file exports.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One snapshot of a mount. Sizes are bytes, times seconds; counters
/// (`evictions` … `stamps`) count since the mount started. Fields missing from
/// an older daemon's JSON read as 0.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Status {
    /// Version of the daemon serving the mount.
    pub version: String,
    /// The backing directory (canonical path).
    pub backing: String,
    /// The mountpoint (canonical path). Filled in by `boundfs status` from
    /// the path it was given; the daemon's xattr leaves it empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mountpoint: String,
    /// Process id of the daemon serving the mount (for `kill -USR1`,
    /// `kill -TERM`; fstab mounts run as `mount.fuse.boundfs`, which
    /// `pgrep boundfs` misses).
    pub pid: u32,
    /// Bytes the backing tree occupies, as `du -s --block-size=1 BACKING` counts them.
    pub usage: u64,
    /// The budget (`max_size`), bytes.
    pub max_size: u64,
    /// Fraction of `max_size` above which background eviction starts.
    pub high_watermark: f64,
    /// Fraction of `max_size` background eviction brings usage down to.
    pub low_watermark: f64,
    /// `high_watermark × max_size`, bytes.
    pub high_watermark_bytes: u64,
    /// `low_watermark × max_size`, bytes.
    pub low_watermark_bytes: u64,
    /// Bytes reserved by writes in flight (usage + reserved never passes max_size).
    pub reserved: u64,
    /// Regular files in the backing tree.
    pub files: u64,
    /// Directories in the backing tree, BACKING itself included.
    pub dirs: u64,
    /// Symlinks, fifos, sockets and device nodes.
    pub others: u64,
    /// Regular files whose name matches `pattern`.
    pub block_files: u64,
    /// Block files eviction could remove now (no open handle).
    pub evictable: u64,
    /// Bytes of the evictable block files.
    pub evictable_bytes: u64,
    /// Open file handles through the mount.
    pub open_handles: u64,
    /// Block files evicted.
    pub evictions: u64,
    /// Bytes freed by eviction.
    pub evicted_bytes: u64,
    /// Eviction candidates skipped, all reasons (`evict_skipped_open` included).
    pub evict_skipped: u64,
    /// Eviction candidates skipped because a client opened them meanwhile.
    pub evict_skipped_open: u64,
    /// Background eviction sweeps.
    pub eviction_sweeps: u64,
    /// Time spent in background eviction sweeps, seconds.
    pub eviction_sweep_seconds: f64,
    /// Requests answered ENOSPC because nothing evictable could make room.
    pub enospc: u64,
    /// Opens of block files (cache hits).
    pub block_opens: u64,
    /// Lookups of block-file names that found nothing (cache misses).
    pub lookup_misses: u64,
    /// Opens answered with kernel passthrough (reads bypass the daemon).
    pub passthrough_opens: u64,
    /// mtime stamps written (recency persistence).
    pub stamps: u64,
    /// mtime stamps queued, not yet written.
    pub stamps_pending: u64,
    /// The start-up index of BACKING is still being built (usage is an
    /// upper bound until it completes).
    pub indexing: bool,
    /// How long the start-up index took, seconds (0 while it runs).
    pub index_seconds: f64,
    /// Seconds since the mount started.
    pub uptime_seconds: u64,
    /// Reconcile passes over BACKING (`reconcile_interval`).
    pub reconciles: u64,
    /// One of several nodes over one shared BACKING (`-o shared`): `usage`
    /// is then the shared tree's usage as this node last learned it.
    pub shared: bool,
    /// Shared mode: bytes of files created through this node's mount still
    /// in the shared tree (this node's part of `usage`).
    pub node_bytes: u64,
    /// Shared mode: this node holds the sweeper lease (runs eviction sweeps).
    pub sweeper: bool,
    /// Shared mode: the sweeper as its lease file says (`host pid N since
    /// UNIX-SECONDS`); empty when no node ever took the lease.
    pub sweeper_holder: String,
    /// Shared mode: seconds since the sweeper's last heartbeat (rewritten
    /// every 5 s; much more means a stuck holder).
    pub sweeper_heartbeat_age_seconds: u64,
    /// Shared mode: eviction candidates made most recent instead because
    /// another node had used them (one LRU across nodes).
    pub evict_reranked: u64,
    /// Index entries reconcile passes corrected (adopted, dropped, resized, renamed).
    pub reconcile_fixes: u64,
    /// Stale engine temporaries removed (`stale_tmp`).
    pub stale_tmp_removed: u64,
    /// FUSE requests received since the mount started, per opcode by its
    /// kernel protocol name (`LOOKUP`, `CREATE`, … see `stats::OPS`); opcodes
    /// never received are left out.
    pub requests: BTreeMap<String, u64>,
    /// Syscalls the daemon issued on BACKING since it started (close(2) of
    /// dropped fds and the FUSE device's reads and writes not counted).
    pub syscalls: u64,
    /// While files matching no `pattern` alone are above the high watermark
    /// (eviction then frees only what `max_size` needs): the warning, naming
    /// the biggest of them and the pattern. Empty otherwise.
    pub nonblock_warning: String,
    /// When most regular files written since mount match no `pattern`: how
    /// many, an example and the option to set. Empty otherwise.
    pub pattern_warning: String,
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
