//! Live status and control through extended attributes of the mountpoint's
//! root, so no socket is needed:
//!
//! - `user.boundfs.stats` (read): the [`Status`] as one line of JSON;
//! - `user.boundfs.max_size` (read, write): the budget in bytes; writing a
//!   size (`32G`, `34359738368`) changes it live. The watermarks keep their
//!   fractions; when usage is now above the high watermark the evictor is
//!   woken at once. Only root and the user the daemon runs as may write it.
//!
//! - `user.boundfs.upgrade` (write): hand the mount over to a new boundfs
//!   process listening on the abstract socket named by the value (`boundfs
//!   upgrade`, `daemon::upgrade`); root and the daemon's user only. The
//!   SETXATTR is answered first; the hand-over runs on the daemon's main
//!   thread.
//!
//! These names exist on the root only and are not listed by listxattr there:
//! tools that copy xattrs (`cp -a`, `rsync -X`, `tar --xattrs`) must not
//! carry a budget from one mount to another.

use std::ffi::OsStr;

use fuser::Errno;

use super::{Core, OpResult};
use crate::config;
use crate::stats::Stats;
use crate::status::Status;

/// Name of the status xattr on the mount's root.
pub const STATS_XATTR: &str = "user.boundfs.stats";
/// Name of the budget xattr on the mount's root.
pub const MAX_SIZE_XATTR: &str = "user.boundfs.max_size";
/// Name of the upgrade xattr on the mount's root (write only).
pub const UPGRADE_XATTR: &str = "user.boundfs.upgrade";

/// What a write of [`UPGRADE_XATTR`] calls: the daemon's hand-over request
/// (false: the daemon no longer takes them).
type UpgradeHook = Box<dyn Fn(String) -> bool + Send + Sync>;
static UPGRADE_HOOK: std::sync::OnceLock<UpgradeHook> = std::sync::OnceLock::new();

/// Sets where [`UPGRADE_XATTR`] writes go (once per process: the daemon).
pub fn set_upgrade_hook(hook: UpgradeHook) {
    let _ = UPGRADE_HOOK.set(hook);
}

/// Prefix reserved for boundfs on the mount's root.
pub const XATTR_PREFIX: &str = "user.boundfs.";

impl Core {
    /// A snapshot of the live status.
    pub fn status(&self) -> Status {
        let (c, evictable_bytes, node_bytes, granted) = {
            let l = self.accounts.lock();
            let node_bytes = if self.shared.is_some() { l.local_bytes() } else { 0 };
            (l.counts(), l.evictable_bytes(), node_bytes, l.granted().unwrap_or(0))
        };
        let (sweeper_holder, sweeper_heartbeat_age_seconds) = self.sweeper_holder().unwrap_or_default();
        let p = self.policy();
        let s = &self.stats;
        let index = self.index_report();
        let space = self.space().unwrap_or_default();
        let latency = s.latency.snapshot();
        let mut st = Status {
            version: env!("CARGO_PKG_VERSION").to_string(),
            backing: self.root_path.display().to_string(),
            pid: std::process::id(),
            supervisor: live_supervisor(),
            restarts: std::env::var("BOUNDFS_RESTARTS").ok().and_then(|v| v.parse().ok()).unwrap_or(0),
            max_size: p.max_size,
            high_watermark: p.high_watermark,
            low_watermark: p.low_watermark,
            high_watermark_bytes: p.high_bytes(),
            low_watermark_bytes: p.low_bytes(),
            evictable_bytes,
            df_size: space.size,
            df_used: space.used,
            df_avail: space.avail,
            eviction_sweep_seconds: Stats::get(&s.eviction_sweep_micros) as f64 / 1e6,
            stamps_pending: self.stamper.pending() as u64,
            indexing: index.is_none(),
            index_seconds: index.map_or(0.0, |r| (r.seconds * 1000.0).round() / 1000.0),
            uptime_seconds: self.start.elapsed().as_secs(),
            shared: self.shared.is_some(),
            node_bytes,
            // The net is the bytes of the objects made here (ledger_grant.rs).
            shared_net: node_bytes as i64,
            shared_granted: granted,
            sweeper: self.shared.as_ref().is_some_and(|t| t.sweeping.load(std::sync::atomic::Ordering::Relaxed)),
            sweeper_holder,
            sweeper_heartbeat_age_seconds,
            clock_offset_ms: self.clock().offset_ns().0 / 1_000_000,
            requests: s.requests.snapshot(),
            latency: latency.op_quantiles(),
            eviction_latency: latency.eviction_quantiles(),
            syscalls: crate::sys::syscalls(),
            nonblock_warning: self.unevictable.nonblock_warning(),
            pattern_warning: self.unevictable.pattern_warning(),
            backing_warning: self.backing_warning(),
            ..Status::default()
        };
        // the rows of status::FIELDS marked [stats] and [ledger]
        st.fill(s, &c);
        st
    }

    /// A warning while BACKING was removed behind the mount (`rm -rf
    /// BACKING`: its directory, still held open by the daemon, has no link
    /// left, so every new file fails ENOENT as in a deleted directory);
    /// empty otherwise.
    fn backing_warning(&self) -> String {
        match crate::sys::fstat(self.root().fd()) {
            Ok(st) if st.st_nlink == 0 => format!(
                "BACKING {} was removed while mounted: new files fail with ENOENT; unmount, recreate it and \
                 mount again",
                self.root_path.display()
            ),
            _ => String::new(),
        }
    }

    /// The live status as one line of JSON (see [`Status`] for the fields).
    pub fn stats_json(&self) -> String {
        // Serializing plain numbers and strings cannot fail.
        serde_json::to_string(&self.status()).unwrap_or_default()
    }

    /// Changes the budget to `max_size` bytes (> 0) live. The watermarks keep
    /// their fractions; the evictor is woken so usage above the new high
    /// watermark falls to the new low watermark at once, and writes that would
    /// pass the new budget evict inline or fail with ENOSPC from now on.
    /// Returns the previous budget. The new budget lasts until the unmount:
    /// recorded for the next daemon of a supervisor (`held`) and handed
    /// over at an upgrade (`HandedState::max_size`).
    pub fn set_max_size(&self, max_size: u64) -> u64 {
        super::held::record_max_size(max_size);
        let old = self.accounts().set_max_size(max_size);
        let p = self.policy();
        log::info!(
            "max_size changed from {old} to {max_size} bytes (high watermark now {} bytes, low {} bytes)",
            p.high_bytes(),
            p.low_bytes()
        );
        self.wake_evictor();
        old
    }

    /// GETXATTR of a control name on the root: the value, or None when `name`
    /// is not one (the caller passes it through to BACKING).
    pub(super) fn control_get(&self, name: &OsStr) -> Option<Vec<u8>> {
        if name == STATS_XATTR {
            Some(self.stats_json().into_bytes())
        } else if name == MAX_SIZE_XATTR {
            Some(self.policy().max_size.to_string().into_bytes())
        } else {
            None
        }
    }

    /// SETXATTR of a `user.boundfs.*` name on the root by `uid`. Errors: EPERM
    /// for a user other than root and the daemon's own, and for names other
    /// than `user.boundfs.max_size` and `user.boundfs.upgrade`; EINVAL for a
    /// value that is not a size (or a socket name); ENOTSUP when this
    /// process takes no upgrade requests (no daemon).
    pub(super) fn control_set(&self, name: &OsStr, value: &[u8], uid: u32) -> OpResult<()> {
        if name != MAX_SIZE_XATTR && name != UPGRADE_XATTR {
            return Err(Errno::EPERM);
        }
        if uid != 0 && uid != self.euid {
            crate::warn_limited!("uid {uid} may not set {name:?} (only root and uid {} may)", self.euid);
            return Err(Errno::EPERM);
        }
        let text = String::from_utf8_lossy(value);
        let text = text.trim_matches(|c: char| c.is_whitespace() || c == '\0');
        if name == UPGRADE_XATTR {
            if text.is_empty() || text.len() > 100 {
                return Err(Errno::EINVAL);
            }
            log::info!("upgrade asked by uid {uid}: handing over to the process at @{text}");
            let sent = UPGRADE_HOOK.get().is_some_and(|h| h(text.to_string()));
            return if sent { Ok(()) } else { Err(Errno::ENOTSUP) };
        }
        match config::parse_max_size(text) {
            Ok(n) => {
                self.set_max_size(n);
                Ok(())
            }
            Err(e) => {
                log::warn!("refused a new max_size from uid {uid}: {e}");
                Err(Errno::EINVAL)
            }
        }
    }
}

/// The supervisor's process id while it lives, 0 otherwise: the
/// supervisor (`daemon::supervisor`) names itself in its daemons'
/// `BOUNDFS_SUPERVISOR_PID` and is their parent. Once it died (killed), the
/// daemon serves on, reparented, with no one to restart it: status must
/// not show a supervisor then.
fn live_supervisor() -> u32 {
    let named: u32 = std::env::var("BOUNDFS_SUPERVISOR_PID").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    if named != 0 && crate::sys::ppid() == named { named } else { 0 }
}
