//! Prometheus metrics in a file (`-o metrics_file=PATH`), for
//! node_exporter's textfile collector: the [`Status`] counters in the text
//! exposition format (prometheus.io/docs/instrumenting/exposition_formats),
//! rewritten every `metrics_interval` atomically (written to a hidden
//! temporary file in the same directory, then renamed over the old one, so a
//! scrape never sees half a file). Every sample carries a `mountpoint` label,
//! so several mounts can write files into one collector directory. The file
//! is removed when the daemon shuts down cleanly.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::fs::Core;
use crate::status::Status;

/// A metric family: name (with its unit), type, help text, and the value
/// taken from a [`Status`].
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&Status) -> f64,
}

const fn gauge(name: &'static str, help: &'static str, value: fn(&Status) -> f64) -> Family {
    Family { name, kind: "gauge", help, value }
}

const fn counter(name: &'static str, help: &'static str, value: fn(&Status) -> f64) -> Family {
    Family { name, kind: "counter", help, value }
}

/// Every metric, in file order. The metrics table of docs/reference.md lists the same.
const FAMILIES: &[Family] = &[
    gauge("boundfs_usage_bytes", "Bytes the backing tree occupies, as du counts them.", |s| s.usage as f64),
    gauge("boundfs_max_size_bytes", "The budget (max_size).", |s| s.max_size as f64),
    gauge("boundfs_high_watermark_bytes", "Usage above which background eviction starts.", |s| {
        s.high_watermark_bytes as f64
    }),
    gauge("boundfs_low_watermark_bytes", "Usage background eviction brings usage down to.", |s| {
        s.low_watermark_bytes as f64
    }),
    gauge("boundfs_reserved_bytes", "Bytes reserved by writes in flight.", |s| s.reserved as f64),
    gauge("boundfs_evictable_bytes", "Bytes of block files eviction could remove now.", |s| s.evictable_bytes as f64),
    gauge("boundfs_files", "Regular files in the backing tree.", |s| s.files as f64),
    gauge("boundfs_dirs", "Directories in the backing tree, the backing directory included.", |s| s.dirs as f64),
    gauge("boundfs_block_files", "Regular files whose name matches pattern.", |s| s.block_files as f64),
    gauge("boundfs_evictable_block_files", "Block files eviction could remove now (no open handle).", |s| {
        s.evictable as f64
    }),
    gauge("boundfs_open_handles", "Open file handles through the mount.", |s| s.open_handles as f64),
    counter("boundfs_evictions_total", "Block files evicted.", |s| s.evictions as f64),
    counter("boundfs_evicted_bytes_total", "Bytes freed by eviction.", |s| s.evicted_bytes as f64),
    counter(
        "boundfs_evict_skipped_total",
        "Eviction candidates skipped (opened meanwhile, renamed, relinked, vanished, unlink failed).",
        |s| s.evict_skipped as f64,
    ),
    counter(
        "boundfs_evict_skipped_open_total",
        "Eviction candidates skipped because a client opened them meanwhile.",
        |s| s.evict_skipped_open as f64,
    ),
    counter("boundfs_eviction_sweeps_total", "Background eviction sweeps.", |s| s.eviction_sweeps as f64),
    counter("boundfs_eviction_sweep_seconds_total", "Time spent in background eviction sweeps.", |s| {
        s.eviction_sweep_seconds
    }),
    counter("boundfs_enospc_total", "Requests answered ENOSPC because nothing evictable could make room.", |s| {
        s.enospc as f64
    }),
    counter("boundfs_block_opens_total", "Opens of block files (hits).", |s| s.block_opens as f64),
    counter("boundfs_lookup_misses_total", "Lookups of block-file names that found nothing (misses).", |s| {
        s.lookup_misses as f64
    }),
    counter("boundfs_passthrough_opens_total", "Opens answered with kernel passthrough.", |s| {
        s.passthrough_opens as f64
    }),
    counter("boundfs_stamps_total", "mtime stamps written (recency persistence).", |s| s.stamps as f64),
    gauge("boundfs_stamps_pending", "mtime stamps queued, not yet written.", |s| s.stamps_pending as f64),
    gauge("boundfs_indexing", "1 while the start-up index of the backing directory is being built.", |s| {
        u8::from(s.indexing) as f64
    }),
    gauge("boundfs_index_seconds", "How long the start-up index took (0 while it runs).", |s| s.index_seconds),
    gauge("boundfs_uptime_seconds", "Seconds since the mount started.", |s| s.uptime_seconds as f64),
    counter("boundfs_reconciles_total", "Reconcile passes over the backing directory.", |s| s.reconciles as f64),
    counter("boundfs_reconcile_fixes_total", "Index entries reconcile passes corrected.", |s| s.reconcile_fixes as f64),
    counter("boundfs_stale_tmp_removed_total", "Stale engine temporaries removed.", |s| s.stale_tmp_removed as f64),
    counter("boundfs_syscalls_total", "Syscalls the daemon issued on the backing directory.", |s| s.syscalls as f64),
    gauge(
        "boundfs_nonblock_over_high_watermark",
        "1 while files matching no pattern alone are above the high watermark.",
        |s| f64::from(u8::from(!s.nonblock_warning.is_empty())),
    ),
    gauge("boundfs_pattern_mismatch", "1 while most files written since mount match no pattern.", |s| {
        f64::from(u8::from(!s.pattern_warning.is_empty()))
    }),
];

/// Escapes a label value: backslash, double quote and newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The whole file for `status` of the mount at `mountpoint`.
pub fn render(status: &Status, mountpoint: &str) -> String {
    let label = format!("mountpoint=\"{}\"", escape(mountpoint));
    let mut out = String::new();
    let _ = writeln!(out, "# HELP boundfs_info boundfs version and backing directory of the mount (always 1).");
    let _ = writeln!(out, "# TYPE boundfs_info gauge");
    let _ = writeln!(
        out,
        "boundfs_info{{{label},backing=\"{}\",version=\"{}\"}} 1",
        escape(&status.backing),
        escape(&status.version)
    );
    for f in FAMILIES {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        let _ = writeln!(out, "{}{{{label}}} {}", f.name, (f.value)(status));
    }
    // One labelled family: a sample per FUSE opcode received (kernel name).
    let _ = writeln!(out, "# HELP boundfs_fuse_requests_total FUSE requests received, by opcode.");
    let _ = writeln!(out, "# TYPE boundfs_fuse_requests_total counter");
    for (op, n) in &status.requests {
        let _ = writeln!(out, "boundfs_fuse_requests_total{{{label},op=\"{}\"}} {n}", escape(op));
    }
    out
}

/// Writes `text` to `path` atomically: a hidden temporary file beside it,
/// then rename. Errors: the I/O error (the old file stays as it was).
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let r = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o644).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        std::fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Writes the metrics file now. A failure is logged (rate-limited); the old
/// file, if any, stays.
pub fn write(core: &Core, path: &Path, mountpoint: &str) {
    if let Err(e) = write_atomic(path, &render(&core.status(), mountpoint)) {
        crate::warn_limited!("cannot write the metrics file {}: {e}", path.display());
    }
}

/// The writer thread's body: rewrites the file every `interval` (the caller
/// wrote it once already, before the mount was reported live) until `stop`
/// is set (wake it with `Thread::unpark`), then removes it.
pub fn run(core: Arc<Core>, path: PathBuf, mountpoint: String, interval: Duration, stop: &AtomicBool) {
    let mut next = Instant::now() + interval;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::park_timeout(next - now);
            continue;
        }
        write(&core, &path, &mountpoint);
        next = now + interval;
    }
    if let Err(e) = std::fs::remove_file(&path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            log::warn!("cannot remove the metrics file {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_help_type_and_one_labelled_sample() {
        let mut s = Status { usage: 7, backing: "/data/\"kv\"".into(), ..Default::default() };
        s.requests.insert("LOOKUP".into(), 5);
        let text = render(&s, "/mnt/k\\v");
        assert!(text.contains("boundfs_fuse_requests_total{mountpoint=\"/mnt/k\\\\v\",op=\"LOOKUP\"} 5\n"), "{text}");
        assert!(text.contains("boundfs_usage_bytes{mountpoint=\"/mnt/k\\\\v\"} 7\n"), "{text}");
        assert!(text.contains("backing=\"/data/\\\"kv\\\"\""), "{text}");
        for f in FAMILIES {
            assert!(f.name.starts_with("boundfs_"));
            assert_eq!(f.kind == "counter", f.name.ends_with("_total"), "{}", f.name);
            assert_eq!(text.matches(&format!("# TYPE {} ", f.name)).count(), 1);
            assert_eq!(text.matches(&format!("\n{}{{", f.name)).count(), 1);
        }
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("boundfs.prom");
        write_atomic(&p, "a 1\n").unwrap();
        write_atomic(&p, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 2\n");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
