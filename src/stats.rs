//! The one status table ([`FIELDS`], written with `status_table!`): every
//! field of a mount's [`Status`] once, with its meaning, its source and its
//! metric. From it come the `Status` struct (the JSON of `boundfs status
//! --json` and the `user.boundfs.stats` xattr), the [`Stats`] counters of the
//! daemon's work (monotonic, logged at shutdown), the copy of those and of
//! the ledger's counts into a status ([`Status::fill`]) and the metrics
//! file's families; a test checks docs/reference.md against it. Also the
//! FUSE opcodes counted.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

/// Generates [`Stats`] from the rows of the status table marked `[stats]`
/// (one `AtomicU64` each, the row's doc its doc), plus the two counters the
/// status shows differently: sweep time (in seconds) and requests per opcode.
macro_rules! stats_struct {
    ([$($done:tt)*]) => {
        /// Event counters (relaxed atomics: each is independent): one per
        /// status row marked `[stats]`, copied into it by [`Status::fill`].
        #[derive(Default, Debug)]
        pub struct Stats {
            $($done)*
            /// Time spent in background eviction sweeps, microseconds
            /// (the status shows `eviction_sweep_seconds`).
            pub eviction_sweep_micros: AtomicU64,
            /// FUSE requests received, per opcode (the status's `requests`).
            pub requests: Requests,
            /// Latency histograms (the status's `latency` and
            /// `eviction_latency`, the metrics' `*_duration_seconds`).
            pub latency: crate::latency::Latency,
        }
    };
    ([$($done:tt)*] (stats ; $f:ident ; [$($doc:literal)*]) $($rest:tt)*) => {
        stats_struct!([$($done)* $(#[doc = $doc])* pub $f: AtomicU64,] $($rest)*);
    };
    ([$($done:tt)*] ($($o:ident)? ; $f:ident ; [$($doc:literal)*]) $($rest:tt)*) => {
        stats_struct!([$($done)*] $($rest)*);
    };
}

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
    /// The metric's one-line help: its own, or the field's doc without
    /// markdown code quotes.
    pub fn metric_help(&self) -> String {
        self.metric.as_ref().and_then(|m| m.help).unwrap_or(self.help).trim().replace('`', "")
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
impl Sample for i64 {
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
impl Sample for BTreeMap<String, crate::latency::Quantiles> {
    fn sample(&self) -> f64 {
        self.values().map(|q| q.count).sum::<u64>() as f64
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

        stats_struct!([] $( ($($src)? ; $field ; [$($doc)*]) )*);

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
    /// Process id of the supervisor holding the mount's connection
    /// (`supervise`; 0 without one, and once it died).
    supervisor: u32;
    /// Times the supervisor restarted a dead daemon on the live connection.
    restarts: u64;
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
    /// df's Size for the mount, bytes: `max_size`, or what BACKING's
    /// filesystem can hold for it (`usage` + its free space) when that is
    /// less; whole blocks, as STATFS reports it.
    df_size: u64 => Gauge "boundfs_df_size_bytes";
    /// df's Used, bytes: what no write can get (`usage + reserved −
    /// evictable_bytes`: open files, files matching no `pattern`,
    /// directories), rounded up to whole blocks; `df_size − df_avail`.
    df_used: u64;
    /// df's Avail (`f_bavail` = `f_bfree`), bytes: what a write can get now,
    /// free room plus the evictable block files; `df_size − df_used`.
    df_avail: u64 => Gauge "boundfs_df_avail_bytes";
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
    /// Background eviction sweeps that evicted at least one file.
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
    /// Opens for writing answered with kernel passthrough (their writes
    /// bypass the daemon; each held a reservation of the learned block size).
    passthrough_writers: u64 [stats] => Counter "boundfs_passthrough_writers_total";
    /// Checks that found a passthrough writer's file grown past its reservation.
    writer_overruns: u64 [stats] => Counter "boundfs_writer_overruns_total";
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
    shared: bool => Gauge "boundfs_shared";
    /// Shared mode: bytes of files created through this node's mount still
    /// in the shared tree (this node's part of `usage`).
    node_bytes: u64 => Gauge "boundfs_shared_node_bytes";
    /// Shared mode: this node's net, bytes its own stores added to the
    /// shared tree less what its removals freed (negative on a node that
    /// evicts other nodes' blocks); see `shared_granted`.
    shared_net: i64 => Gauge "boundfs_shared_net_bytes";
    /// Shared mode: the bytes the shared budget record grants this node
    /// (its net plus its reservations stay within it).
    shared_granted: i64 => Gauge "boundfs_shared_granted_bytes";
    /// Shared mode: this node holds the sweeper lease (runs eviction sweeps).
    sweeper: bool => Gauge "boundfs_shared_sweeper";
    /// Shared mode: the sweeper as its lease file says (`host pid N since
    /// UNIX-SECONDS`); empty when no node ever took the lease.
    sweeper_holder: String;
    /// Shared mode: seconds since the sweeper's last heartbeat (rewritten
    /// every 5 s; much more means a stuck holder).
    sweeper_heartbeat_age_seconds: u64 => Gauge "boundfs_shared_sweeper_heartbeat_age_seconds";
    /// Shared mode: the sweeper's reference time minus this node's own
    /// clock, in ms, as measured from its heartbeats (recency stamps are
    /// written in that time, `crate::fs::clock`); 0 until measured.
    clock_offset_ms: i64;
    /// Shared mode: eviction candidates made most recent instead because
    /// another node had used them (one LRU across nodes).
    evict_reranked: u64 [stats] => Counter "boundfs_evict_reranked_total";
    /// Index entries reconcile passes corrected (adopted, dropped, resized, renamed).
    reconcile_fixes: u64 [stats] => Counter "boundfs_reconcile_fixes_total";
    /// Directories reconcile passes read (getdents and an fstatat per entry).
    reconcile_dirs_read: u64 [stats] => Counter "boundfs_reconcile_dirs_read_total";
    /// Shared mode: directories reconcile passes skipped as unchanged since
    /// the pass that last read them (their mtime, ctime, size and inode).
    reconcile_dirs_skipped: u64 [stats] => Counter "boundfs_reconcile_dirs_skipped_total";
    /// Stale engine temporaries removed (`stale_tmp`).
    stale_tmp_removed: u64 [stats] => Counter "boundfs_stale_tmp_removed_total";
    /// FUSE requests received since the mount started, per opcode by its
    /// kernel protocol name (`LOOKUP`, `CREATE`, … see `stats::OPS`); opcodes
    /// never received are left out.
    requests: BTreeMap<String, u64>;
    /// Syscalls the daemon issued on BACKING since it started (close(2) of
    /// dropped fds and the FUSE device's reads and writes not counted).
    syscalls: u64 => Counter "boundfs_syscalls_total";
    /// FUSE request latency per operation class (`LOOKUP`, `CREATE`, …,
    /// `DIR`, `XATTR`, `OTHER`; see `latency::CLASSES`): samples, p50 and
    /// p99 in seconds, from the histogram buckets; classes never timed are
    /// left out, and all of them with `latency_histograms=off`.
    latency: BTreeMap<String, crate::latency::Quantiles>;
    /// The same for eviction: `inline_wait` (what a request waited for
    /// inline eviction, one sample per request that evicted), `victim` (one
    /// eviction victim tried), `sweep` (one background sweep that evicted).
    eviction_latency: BTreeMap<String, crate::latency::Quantiles>;
    /// While files matching no `pattern` alone are above the high watermark
    /// (eviction then frees only what `max_size` needs): the warning, naming
    /// the biggest of them and the pattern. Empty otherwise.
    nonblock_warning: String => Gauge "boundfs_nonblock_over_high_watermark" help "1 while files matching no pattern and directories alone are above the high watermark.";
    /// When most regular files written since mount match no `pattern`: how
    /// many, an example and the option to set. Empty otherwise.
    pattern_warning: String => Gauge "boundfs_pattern_mismatch" help "1 while most files written since mount match no pattern.";
    /// When BACKING itself was removed behind the mount (its directory has
    /// no link left): what happens and what to do. Empty otherwise.
    backing_warning: String => Gauge "boundfs_backing_removed" help "1 while BACKING has been removed behind the mount.";
}

/// The ledger's counts (`ledger::Ledger::counts`), copied into the status
/// rows marked `[ledger]` of the same name (`status::Status::fill`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LedgerCounts {
    /// Bytes of the backing tree (allocated), as du counts them.
    pub usage: u64,
    /// Bytes reserved by writes in flight.
    pub reserved: u64,
    /// Regular files indexed.
    pub files: u64,
    /// Directories indexed (BACKING itself included).
    pub dirs: u64,
    /// Symlinks, fifos, sockets and device nodes indexed.
    pub others: u64,
    /// Block files indexed.
    pub block_files: u64,
    /// Block files that could be evicted now (in the LRU).
    pub evictable: u64,
    /// Open handles through the mount.
    pub open_handles: u64,
}

/// The FUSE opcodes boundfs counts, by their kernel protocol names
/// (`include/uapi/linux/fuse.h` without the `FUSE_` prefix), in [`Op`] order.
/// RENAME counts RENAME and RENAME2; FORGET counts FORGET and BATCH_FORGET
/// messages, a batch once however many nodes it carries (fuser 0.18 hands
/// the nodes over one by one with the batch's header: `crate::fuse` counts
/// a request id once). Opcodes boundfs leaves
/// to fuser's defaults (GETLK, BMAP, POLL, COPY_FILE_RANGE …) are not counted.
pub const OPS: [&str; 34] = [
    "INIT",
    "LOOKUP",
    "FORGET",
    "GETATTR",
    "SETATTR",
    "READLINK",
    "SYMLINK",
    "MKNOD",
    "MKDIR",
    "UNLINK",
    "RMDIR",
    "RENAME",
    "LINK",
    "OPEN",
    "READ",
    "WRITE",
    "STATFS",
    "RELEASE",
    "FSYNC",
    "SETXATTR",
    "GETXATTR",
    "LISTXATTR",
    "REMOVEXATTR",
    "FLUSH",
    "OPENDIR",
    "READDIR",
    "RELEASEDIR",
    "FSYNCDIR",
    "ACCESS",
    "CREATE",
    "IOCTL",
    "FALLOCATE",
    "LSEEK",
    "DESTROY",
];

/// A counted FUSE opcode: its index in [`OPS`] and `Stats::requests`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Op {
    Init,
    Lookup,
    Forget,
    Getattr,
    Setattr,
    Readlink,
    Symlink,
    Mknod,
    Mkdir,
    Unlink,
    Rmdir,
    Rename,
    Link,
    Open,
    Read,
    Write,
    Statfs,
    Release,
    Fsync,
    Setxattr,
    Getxattr,
    Listxattr,
    Removexattr,
    Flush,
    Opendir,
    Readdir,
    Releasedir,
    Fsyncdir,
    Access,
    Create,
    Ioctl,
    Fallocate,
    Lseek,
    Destroy,
}

impl Op {
    /// Its latency class: the index in `latency::CLASSES` (the opcodes of
    /// a store, a load and an eviction each their own; the directory ones
    /// `DIR`, the xattr ones `XATTR`, the rest `OTHER`).
    pub fn class(self) -> usize {
        match self {
            Op::Lookup => 0,
            Op::Getattr => 1,
            Op::Setattr => 2,
            Op::Create => 3,
            Op::Open => 4,
            Op::Read => 5,
            Op::Write => 6,
            Op::Flush => 7,
            Op::Fsync => 8,
            Op::Release => 9,
            Op::Rename => 10,
            Op::Unlink => 11,
            Op::Opendir | Op::Readdir | Op::Releasedir | Op::Fsyncdir => 12,
            Op::Setxattr | Op::Getxattr | Op::Listxattr | Op::Removexattr => 13,
            _ => 14,
        }
    }
}

/// FUSE requests received per opcode (relaxed atomics, indexed by [`Op`]).
pub struct Requests([AtomicU64; OPS.len()]);

impl Default for Requests {
    fn default() -> Self {
        Requests(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.snapshot()).finish()
    }
}

impl Requests {
    /// Counts one request of `op`.
    pub fn count(&self, op: Op) {
        self.0[op as usize].fetch_add(1, Relaxed);
    }

    /// How many requests of `op` were received.
    pub fn received(&self, op: Op) -> u64 {
        self.0[op as usize].load(Relaxed)
    }

    /// Every opcode received at least once, by kernel name, with its count.
    pub fn snapshot(&self) -> std::collections::BTreeMap<String, u64> {
        OPS.iter().zip(&self.0).map(|(name, c)| (name.to_string(), c.load(Relaxed))).filter(|&(_, n)| n > 0).collect()
    }
}

impl Stats {
    /// Adds `n` to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Reads a counter.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Relaxed)
    }
}
