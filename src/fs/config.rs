//! What the core runs with ([`Config`], built once from the mount options)
//! and the start-up that makes a core of it ([`Core::start`]).

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, RwLock};

use super::accounts::Accounts;
use super::dirlock::DirLocks;
use super::inode::InodeTable;
use super::passthrough::IoModes;
use super::stamps::Stamper;
use super::{Core, RELEASE_WAIT};
use crate::config::{AtimeMode, FlushMode, Options};
use crate::key::FileKey;
use crate::key::key_of;
use crate::ledger::policy::Policy;
use crate::ledger::{Kind, Ledger};
use crate::notify::Invalidator;
use crate::stats::Stats;
use crate::status::ScanReport;
use crate::sys;
use crate::wake::Signal;

/// The core's part of the mount options. Each field's default is the
/// option's (`crate::daemon::cli` holds them).
#[derive(Clone, Debug)]
pub struct Config {
    /// BACKING, canonical. No default.
    pub backing: PathBuf,
    /// Budget and watermarks: `max_size` (bytes, no default) and the
    /// fractions of it `high_watermark` (0.95) and `low_watermark` (0.90).
    pub policy: Policy,
    /// Globs on the file name that select block files (`pattern`, default
    /// `*.bin`); non-empty.
    pub patterns: Vec<String>,
    /// Minimum time between two mtime stamps of one file (`stamp_interval`,
    /// 60 s; 10 s with `shared`).
    pub stamp_interval: Duration,
    /// One of several mounts over one shared BACKING (`shared`, off): opens
    /// hold a flock and eviction takes one (see `super::shared`).
    pub shared: bool,
    /// Whether FLUSH closes a duplicate of the backing fd (`flush`, auto:
    /// when BACKING's filesystem commits at close).
    pub flush: FlushMode,
    /// Backing files' cached pages dropped at RELEASE and after READs
    /// (`drop_cache=release`, off).
    pub drop_cache: bool,
    /// No backing file or directory opened for a client has its atime
    /// updated (`noatime`, off).
    pub noatime: bool,
    /// No backing directory opened for a client has its atime updated
    /// (`nodiratime`, off).
    pub nodiratime: bool,
    /// With `shared`, writes are admitted within grants from the shared
    /// budget record (`shared_budget=record`; default `views`, off).
    pub shared_budget: bool,
    /// POSIX ACLs through the mount (`acl`, on); off (`noacl`), the kernel
    /// checks the mode bits alone and `system.posix_acl_*` is EOPNOTSUPP.
    pub acl: bool,
}

impl Config {
    /// A config over `backing` with a budget of `max_size` bytes and every
    /// other field at its option's default (tests and tools).
    pub fn new(backing: PathBuf, max_size: u64) -> Config {
        Config {
            backing,
            policy: Policy {
                max_size,
                high_watermark: crate::config::DEFAULT_HIGH_WATERMARK,
                low_watermark: crate::config::DEFAULT_LOW_WATERMARK,
            },
            patterns: vec!["*.bin".into()],
            stamp_interval: Duration::from_secs(60),
            shared: false,
            flush: FlushMode::Auto,
            drop_cache: false,
            noatime: false,
            nodiratime: false,
            shared_budget: true,
            acl: true,
        }
    }

    /// The core's part of `opts`.
    pub fn from_options(opts: &Options) -> Config {
        Config {
            backing: opts.backing.clone(),
            policy: Policy {
                max_size: opts.max_size,
                high_watermark: opts.high_watermark,
                low_watermark: opts.low_watermark,
            },
            patterns: opts.patterns.clone(),
            stamp_interval: opts.stamp_interval,
            shared: opts.shared,
            flush: opts.flush,
            drop_cache: opts.drop_cache,
            noatime: opts.atime.mode == AtimeMode::Noatime,
            nodiratime: opts.atime.nodiratime,
            shared_budget: opts.shared_budget,
            acl: opts.acl,
        }
    }
}

impl Core {
    /// The start-up: opens BACKING (an `O_PATH` directory fd), seeds the
    /// ledger with its root and, until the background index
    /// (`workers::scan::index`) completes, an upper bound of its usage (the
    /// bytes used on BACKING's whole filesystem, so no reservation passes
    /// the budget meanwhile), and applies `config`. Errors: one line for the
    /// user (BACKING cannot be opened or stat'ed, a pattern is no glob).
    pub fn start(config: Config) -> Result<Core, String> {
        let backing = config.backing.display().to_string();
        let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(config.backing.as_os_str()))
            .map_err(|_| "backing path contains a NUL byte".to_string())?;
        let root =
            sys::open(&c, libc::O_PATH | libc::O_DIRECTORY).map_err(|e| format!("cannot open {backing}: {e}"))?;
        let st = sys::fstat(root.as_fd()).map_err(|e| format!("stat {backing}: {e:?}"))?;
        let mut ledger = Ledger::with_policy(config.policy);
        ledger.upsert(key_of(&st), sys::allocated(&st), false, None, 0);
        ledger.set_kind(key_of(&st), Kind::Dir);
        let used_bound = sys::fstatvfs(root.as_fd())
            .map(|v| (v.f_blocks - v.f_bfree) * v.f_frsize)
            .map_err(|e| format!("statfs {backing}: {e:?}"))?;
        ledger.start_indexing(used_bound);
        Core::new(config, Started { root, root_key: key_of(&st), ledger })
    }

    /// A core running `config` over what the start-up opened (`started`): BACKING's
    /// root and a ledger, with `config.policy`, that is either built
    /// (`workers::scan::scan`) or being built (`Ledger::start_indexing`, then
    /// `workers::scan::index`). Errors: a pattern is no glob (one line).
    pub(crate) fn new(config: Config, started: Started) -> Result<Self, String> {
        let Started { root: root_fd, root_key, ledger } = started;
        let matcher = crate::config::build_matcher(&config.patterns).map_err(|e| e.0)?;
        let flush_backing = super::shared::flush_needed(config.flush, root_fd.as_fd());
        if flush_backing || config.shared {
            log::info!(
                "{}FLUSH {} (BACKING is {})",
                if config.shared { "shared tier: opens hold a flock on the backing file; " } else { "" },
                if flush_backing { "closes the backing file (close-to-open)" } else { "off" },
                super::shared::commits_at_close(root_fd.as_fd()).unwrap_or("local"),
            );
        }
        let indexing = ledger.indexing();
        let core = Core {
            root_path: config.backing,
            inodes: InodeTable::new(root_fd, root_key),
            accounts: Accounts::new(ledger),
            dirlocks: DirLocks::default(),
            matcher,
            stats: Stats::default(),
            inval: Invalidator::default(),
            stamper: Stamper::default(),
            clock: Default::default(),
            evict_wake: Signal::default(),
            empty_dirs: Default::default(),
            reconcile: Default::default(),
            own_removals: Default::default(),
            warm_tid: Default::default(),
            unevictable: Default::default(),
            shared: None,
            flush_backing: false,
            open_extra: (0, 0),
            drop_cache: false,
            noacl: !config.acl,
            index: (Mutex::new((!indexing).then(ScanReport::default)), Condvar::new()),
            handles: RwLock::new(HashMap::new()),
            io: IoModes::new(false),
            dirs: RwLock::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            start: Instant::now(),
            stamp_secs: config.stamp_interval.as_secs().min(u32::MAX as u64) as u32,
            euid: sys::euid(),
            release_wait: RELEASE_WAIT,
        };
        let mut core = core;
        core.set_modes(config.shared, flush_backing);
        if let Some(t) = core.shared.as_mut().filter(|_| config.shared_budget) {
            // The shared budget: nothing is held before the record grants it.
            t.budget = true;
            core.accounts.set_granted(Some(0));
        }
        core.set_drop_cache(config.drop_cache);
        core.set_noatime(config.noatime, config.nodiratime);
        core.unevictable().set_patterns(&config.patterns);
        Ok(core)
    }
}

/// What the start-up opened for a core ([`Core::new`]).
pub(crate) struct Started {
    /// BACKING, an `O_PATH` directory fd.
    pub root: OwnedFd,
    /// BACKING's backing identity.
    pub root_key: FileKey,
    /// The ledger, with the config's policy.
    pub ledger: Ledger,
}
