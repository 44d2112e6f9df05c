//! The live status of a mount as people read it: the table `boundfs status`
//! prints, and its number formats. The [`Status`] itself (what the
//! `user.boundfs.stats` xattr of the mountpoint's root answers as one line
//! of JSON, and what the metrics file exports) is generated from the one
//! status table in `crate::stats`.

pub use crate::stats::{FIELDS, Field, Kind, Metric, Status};

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
            (
                "daemon",
                match self.supervisor {
                    0 => format!("pid {}", self.pid),
                    s => format!("pid {} (supervisor {s}, {} restarts)", self.pid, self.restarts),
                },
            ),
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
            ("df", self.df_row()),
            (
                "a write gets",
                format!(
                    "{} now: {} free + {} by evicting blocks (df's Avail; Used is what no write can get)",
                    bytes(self.df_avail),
                    bytes(self.df_avail.saturating_sub(self.evictable_bytes)),
                    bytes(self.df_avail.min(self.evictable_bytes))
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
            (
                "passthrough",
                format!(
                    "{} opens, {} of them writers ({} outgrew their reservation)",
                    count(self.passthrough_opens),
                    count(self.passthrough_writers),
                    count(self.writer_overruns)
                ),
            ),
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
            ("latency", self.latency_row()),
            ("evict time", self.eviction_latency_row()),
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
                        let offset = self.clock_offset_ms as f64 / 1000.0;
                        format!(
                            "{} (heartbeat {}s ago; offset to its clock {offset:+.1}s)",
                            self.sweeper_holder, self.sweeper_heartbeat_age_seconds
                        )
                    }
                },
            ),
        ];
        // a daemon older than the df fields sends none: leave their rows out
        let old = |k: &str| self.df_size == 0 && (k == "df" || k == "a write gets");
        let rows = rows.into_iter().filter(|(k, _)| !old(k));
        let rows: Vec<(&str, String)> = if self.shared { rows.chain(shared).collect() } else { rows.collect() };
        let mut out = String::new();
        for (k, v) in rows {
            out.push_str(&format!("{k:<13}{v}\n"));
        }
        let warnings = [&self.backing_warning, &self.nonblock_warning, &self.pattern_warning];
        for w in warnings.into_iter().filter(|w| !w.is_empty()) {
            out.push_str(&format!("{:<13}{w}\n", "WARNING"));
        }
        out
    }
}

impl Status {
    /// The `df` row: Size, Used, Avail and Use% as `df MOUNTPOINT` shows
    /// them, and why Size is less than `max_size` when it is.
    fn df_row(&self) -> String {
        let pct = df_use_percent(self.df_used, self.df_size).map_or("-".to_string(), |p| format!("{p}%"));
        // df_size is whole blocks (up to 1 MiB on some filesystems) of max_size at most
        let why = if self.df_size + (1 << 20) <= self.max_size {
            " (Size: what BACKING's filesystem can hold for the mount, less than max_size)"
        } else {
            ""
        };
        format!(
            "Size {}, Used {}, Avail {}, Use% {pct}{why}",
            bytes(self.df_size),
            bytes(self.df_used),
            bytes(self.df_avail)
        )
    }
}

impl Status {
    /// The `latency` row: p50/p99 of the 6 most requested operation
    /// classes, or why there are none.
    fn latency_row(&self) -> String {
        let mut v: Vec<_> = self.latency.iter().collect();
        v.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
        let s: Vec<String> = v.iter().take(6).map(|(k, q)| format!("{k} {}", quantiles(q))).collect();
        if s.is_empty() {
            "none timed (latency_histograms=off, or no request yet)".to_string()
        } else {
            format!("p50/p99 {}", s.join(", "))
        }
    }

    /// The `evict time` row: p50/p99 of each eviction histogram.
    fn eviction_latency_row(&self) -> String {
        let name = |k: &str| match k {
            "inline_wait" => "requests' inline wait",
            "victim" => "per victim",
            "sweep" => "per sweep",
            _ => "other",
        };
        let s: Vec<String> = crate::latency::EVICTION
            .iter()
            .filter_map(|k| {
                Some(format!(
                    "{} {} ({})",
                    name(k),
                    quantiles(self.eviction_latency.get(*k)?),
                    count(self.eviction_latency.get(*k)?.count)
                ))
            })
            .collect();
        if s.is_empty() { "-".to_string() } else { format!("p50/p99 {}", s.join("; ")) }
    }
}

/// A histogram's p50/p99 as `21µs/1.2ms`.
fn quantiles(q: &crate::latency::Quantiles) -> String {
    format!("{}/{}", seconds(q.p50_seconds), seconds(q.p99_seconds))
}

/// A short time: `850ns`, `21µs`, `1.2ms`, `3.40s`.
pub fn seconds(s: f64) -> String {
    if s < 1e-6 {
        format!("{:.0}ns", s * 1e9)
    } else if s < 1e-3 {
        format!("{:.0}µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1}ms", s * 1e3)
    } else {
        format!("{s:.2}s")
    }
}

/// df's Use% of a filesystem with `used` of `size` bytes (Used + Avail =
/// Size): percent rounded up, as df rounds it; None for a zero size (df
/// shows `-`).
pub fn df_use_percent(used: u64, size: u64) -> Option<u64> {
    (size > 0).then(|| (used.min(size) * 100).div_ceil(size))
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
    fn df_rows() {
        let (m, k) = (1u64 << 20, 1u64 << 10);
        let mut s = Status { max_size: 64 * m, usage: 58 * m, evictable_bytes: 56 * m, ..Default::default() };
        (s.df_size, s.df_used, s.df_avail) = (64 * m, 2 * m + 4 * k, 62 * m - 4 * k);
        let t = s.table("/mnt/kv");
        assert!(t.contains("\ndf           Size 64.0 MiB, Used 2.0 MiB, Avail 62.0 MiB, Use% 4%\n"), "{t}");
        assert!(t.contains("\na write gets 62.0 MiB now: 6.0 MiB free + 56.0 MiB by evicting blocks"), "{t}");
        // a disk smaller than the budget: Size says why it is not max_size
        s.df_size = 32 * m;
        assert!(s.table("/m").contains("Size: what BACKING's filesystem can hold for the mount"));
        // an older daemon sends no df fields: no rows made of zeros
        let old = Status { max_size: 64 * m, ..Default::default() };
        assert!(!old.table("/m").contains("\ndf "));
        assert!(!old.table("/m").contains("a write gets"));
        assert_eq!((df_use_percent(1, 100), df_use_percent(0, 100), df_use_percent(0, 0)), (Some(1), Some(0), None));
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

    #[test]
    fn latency_rows() {
        use crate::latency::Quantiles;
        let mut s = Status::default();
        assert!(s.table("/m").contains("\nlatency      none timed"));
        let q = |count, p50_seconds, p99_seconds| Quantiles { count, p50_seconds, p99_seconds };
        s.latency.insert("READ".into(), q(10, 21e-6, 1.2e-3));
        s.latency.insert("LOOKUP".into(), q(20, 5e-7, 2.5));
        s.eviction_latency.insert("victim".into(), q(3, 40e-6, 90e-6));
        let t = s.table("/m");
        assert!(t.contains("\nlatency      p50/p99 LOOKUP 500ns/2.50s, READ 21µs/1.2ms\n"), "{t}");
        assert!(t.contains("\nevict time   p50/p99 per victim 40µs/90µs (3)\n"), "{t}");
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains(r#""READ":{"count":10,"p50_seconds":0.000021,"p99_seconds":0.0012}"#), "{j}");
        assert_eq!(serde_json::from_str::<Status>(&j).unwrap(), s);
    }
}
