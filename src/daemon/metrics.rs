//! Prometheus metrics in a file (`-o metrics_file=PATH`), for
//! node_exporter's textfile collector: the [`Status`] fields that have a
//! metric in the status table ([`FIELDS`]), in the text
//! exposition format (prometheus.io/docs/instrumenting/exposition_formats),
//! rewritten every `metrics_interval` atomically (written to a hidden
//! temporary file in the same directory, then renamed over the old one, so a
//! scrape never sees half a file). Every sample carries a `mountpoint` label,
//! so several mounts can write files into one collector directory. The file
//! is removed when the daemon shuts down cleanly. The same text, from the
//! same [`text`], is what `metrics_listen` serves at `/metrics`
//! (`metrics_http`). Besides the table's metrics: the latency histograms
//! ([`HISTOGRAMS`], `crate::latency`; left out with `latency_histograms=off`).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::fs::Core;
use crate::latency::{self, LatencySnapshot, Snapshot};
use crate::status::{FIELDS, Kind, Status};

/// The labelled families [`render`] writes besides the status table's
/// metrics: `boundfs_info{backing,version}` and one sample per opcode.
pub const LABELLED: [&str; 2] = [INFO, REQUESTS];
const INFO: &str = "boundfs_info";
const REQUESTS: &str = "boundfs_fuse_requests_total";

/// The histogram families [`render`] writes (seconds; `_bucket{le}`,
/// `_sum`, `_count`): FUSE requests per operation class (`op` label, see
/// `latency::CLASSES`), then the eviction ones in `latency::EVICTION`
/// order, with their help.
pub const HISTOGRAMS: [(&str, &str); 4] = [
    (REQUEST_SECONDS, "FUSE request latency, dispatch to reply, by operation class."),
    (
        "boundfs_inline_eviction_wait_seconds",
        "Time a request (a WRITE, CREATE ...) waited for inline eviction, one sample per request that evicted.",
    ),
    ("boundfs_eviction_victim_seconds", "Time one eviction victim took (checked and removed, or skipped)."),
    ("boundfs_eviction_sweep_duration_seconds", "Time one background eviction sweep took (sweeps that evicted)."),
];
const REQUEST_SECONDS: &str = "boundfs_fuse_request_duration_seconds";

/// The whole text for the mount at `mountpoint` now: what the metrics file
/// holds and `/metrics` answers.
pub fn text(core: &Core, mountpoint: &str) -> String {
    render(&core.status(), &core.stats().latency.snapshot(), mountpoint)
}

/// The TYPE word of a metric kind.
fn kind(k: Kind) -> &'static str {
    match k {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
    }
}

/// Escapes a label value: backslash, double quote and newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The whole text for `status` and the histograms `latency` of the mount
/// at `mountpoint`.
pub fn render(status: &Status, latency: &LatencySnapshot, mountpoint: &str) -> String {
    let label = format!("mountpoint=\"{}\"", escape(mountpoint));
    let mut out = String::new();
    let _ = writeln!(out, "# HELP {INFO} boundfs version and backing directory of the mount (always 1).");
    let _ = writeln!(out, "# TYPE {INFO} gauge");
    let _ = writeln!(
        out,
        "{INFO}{{{label},backing=\"{}\",version=\"{}\"}} 1",
        escape(&status.backing),
        escape(&status.version)
    );
    for (f, m) in FIELDS.iter().filter_map(|f| Some((f, f.metric.as_ref()?))) {
        let _ = writeln!(out, "# HELP {} {}", m.name, f.metric_help());
        let _ = writeln!(out, "# TYPE {} {}", m.name, kind(m.kind));
        let _ = writeln!(out, "{}{{{label}}} {}", m.name, (f.get)(status));
    }
    // One labelled family: a sample per FUSE opcode received (kernel name).
    let _ = writeln!(out, "# HELP {REQUESTS} FUSE requests received, by opcode.");
    let _ = writeln!(out, "# TYPE {REQUESTS} counter");
    for (op, n) in &status.requests {
        let _ = writeln!(out, "{REQUESTS}{{{label},op=\"{}\"}} {n}", escape(op));
    }
    let families = HISTOGRAMS.iter().enumerate();
    for (i, (name, help)) in families.filter(|_| !latency.ops.is_empty()) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        if i == 0 {
            for (class, h) in latency::CLASSES.iter().zip(&latency.ops) {
                histogram(&mut out, name, &format!("{label},op=\"{class}\""), h);
            }
        } else if let Some(h) = latency.eviction.get(i - 1) {
            histogram(&mut out, name, &label, h);
        }
    }
    out
}

/// The samples of one histogram `h` with the labels `labels`: cumulative
/// `_bucket{le}` up to `+Inf`, `_sum` (seconds), `_count`.
fn histogram(out: &mut String, name: &str, labels: &str, h: &Snapshot) {
    let mut cumulative = 0;
    for (i, n) in h.counts.iter().enumerate() {
        cumulative += n;
        let le = if i < latency::BUCKETS { latency::le_label(i) } else { "+Inf".to_string() };
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_seconds);
    let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
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
    if let Err(e) = write_atomic(path, &text(core, mountpoint)) {
        crate::warn_limited!("cannot write the metrics file {}: {e}", path.display());
    }
}

/// The writer thread's body: rewrites the file every `interval` (the caller
/// wrote it once already, before the mount was reported live) until `stop`
/// is set (wake it with `Thread::unpark`), then removes it; unless
/// `handing_over` is set too (an upgrade: the next daemon rewrites it
/// within its first `interval`), when it writes it a last time instead, so
/// that a scrape during the hand-over still finds the mount's metrics.
pub fn run(
    core: Arc<Core>,
    path: PathBuf,
    mountpoint: String,
    interval: Duration,
    stop: &AtomicBool,
    handing_over: &AtomicBool,
) {
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
    if handing_over.load(Ordering::Relaxed) {
        return write(&core, &path, &mountpoint);
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
        let text = render(&s, &LatencySnapshot::default(), "/mnt/k\\v");
        assert!(text.contains("boundfs_fuse_requests_total{mountpoint=\"/mnt/k\\\\v\",op=\"LOOKUP\"} 5\n"), "{text}");
        assert!(text.contains("boundfs_usage_bytes{mountpoint=\"/mnt/k\\\\v\"} 7\n"), "{text}");
        assert!(text.contains("backing=\"/data/\\\"kv\\\"\""), "{text}");
        for f in FIELDS.iter().filter_map(|f| f.metric.as_ref()) {
            assert!(f.name.starts_with("boundfs_"));
            assert_eq!(f.kind == Kind::Counter, f.name.ends_with("_total"), "{}", f.name);
            assert_eq!(text.matches(&format!("# TYPE {} ", f.name)).count(), 1);
            assert_eq!(text.matches(&format!("\n{}{{", f.name)).count(), 1);
        }
    }

    #[test]
    fn histograms_are_cumulative_with_inf_equal_to_count() {
        let l = crate::latency::Latency::default();
        assert!(!render(&Status::default(), &l.snapshot(), "/m").contains("histogram"), "off: no histograms");
        l.set_enabled(true);
        drop(l.request(crate::stats::Op::Read.class()));
        l.victim_since(l.start());
        let text = render(&Status::default(), &l.snapshot(), "/m");
        for (name, _) in HISTOGRAMS {
            assert_eq!(text.matches(&format!("# TYPE {name} histogram\n")).count(), 1, "{name}");
        }
        let read = "boundfs_fuse_request_duration_seconds_bucket{mountpoint=\"/m\",op=\"READ\",le=";
        assert!(text.contains(&format!("{read}\"8.388608\"}} 1\n")), "{text}");
        assert!(text.contains(&format!("{read}\"+Inf\"}} 1\n")), "{text}");
        assert!(text.contains("boundfs_fuse_request_duration_seconds_count{mountpoint=\"/m\",op=\"READ\"} 1\n"));
        assert!(text.contains("boundfs_fuse_request_duration_seconds_count{mountpoint=\"/m\",op=\"LOOKUP\"} 0\n"));
        assert!(text.contains("boundfs_eviction_victim_seconds_count{mountpoint=\"/m\"} 1\n"), "{text}");
        assert!(text.contains("boundfs_eviction_sweep_duration_seconds_bucket{mountpoint=\"/m\",le=\"+Inf\"} 0\n"));
        use crate::stats::Op;
        let named = [(Op::Lookup, "LOOKUP"), (Op::Create, "CREATE"), (Op::Open, "OPEN"), (Op::Read, "READ")];
        let more = [(Op::Write, "WRITE"), (Op::Release, "RELEASE"), (Op::Rename, "RENAME"), (Op::Readdir, "DIR")];
        for (op, name) in named.into_iter().chain(more).chain([(Op::Mkdir, "OTHER"), (Op::Getxattr, "XATTR")]) {
            assert_eq!(crate::latency::CLASSES[op.class()], name);
        }
        let buckets = text.lines().filter(|l| l.starts_with(read)).count();
        assert_eq!(buckets, crate::latency::BUCKETS + 1);
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
