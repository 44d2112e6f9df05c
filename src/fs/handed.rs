//! The core's state a new daemon needs to serve a live connection another
//! process served (an upgrade, `daemon::upgrade`; the design:
//! docs/design/upgrade.md §3): the inode table (node ids and lookup counts
//! the kernel holds), the handle table (file handles the kernel will send),
//! the directory streams and the raw passthrough backing ids. [`HandedState`]
//! is plain data (serialized as JSON); the fds it names travel beside it
//! over SCM_RIGHTS, in the order of [`Collected::fds`] (indices in the
//! state). The ledger is not handed: the new daemon re-counts BACKING
//! (its start-up index), the open handles pin their keys again.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::passthrough::Mode;
use super::{Core, DirStream, Handle};
use crate::key::FileKey;
use crate::sys;

/// One inode the kernel holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandedInode {
    /// FUSE node id.
    pub ino: u64,
    /// Backing `(st_dev, st_ino)`.
    pub key: (u64, u64),
    /// `st_mode & S_IFMT`.
    pub fmt: u32,
    /// The kernel's lookup count (FORGETs to come).
    pub nlookup: u64,
    /// Index of its `O_PATH` fd among the fds sent, if it was hot.
    pub fd: Option<usize>,
    /// Its file handle (`name_to_handle_at` bytes), if one was made.
    pub handle: Option<Vec<u8>>,
}

/// One open file handle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandedHandle {
    /// The file handle the kernel sends.
    pub fh: u64,
    /// Index of the backing fd among the fds sent.
    pub fd: usize,
    /// Index of its O_DIRECT twin, if any.
    pub direct: Option<usize>,
    /// Backing `(st_dev, st_ino)`.
    pub key: (u64, u64),
    /// FUSE inode it was opened on.
    pub ino: u64,
    /// Counted I/O mode: `"passthrough"`, `"cached"`, `"direct"`, or none.
    pub mode: Option<String>,
    /// Budget bytes a passthrough writer holds.
    pub held: u64,
    /// Whether its size at RELEASE teaches passthrough writers.
    pub learns: bool,
    /// Shared tier: the file was the old daemon's own (in its net), with
    /// its path relative to BACKING (bytes) and whether it is a block file.
    /// The next daemon counts it as its own from the hand-over (a store in
    /// flight goes on growing in its net), and the old one leaves it out of
    /// what it leaves behind. Absent from an older daemon's state.
    #[serde(default)]
    pub own: Option<(Vec<u8>, bool)>,
}

/// One open directory stream (reopened at the kernel's next offset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandedDir {
    /// The file handle the kernel sends.
    pub fh: u64,
    /// Index of the directory's fd among the fds sent.
    pub fd: usize,
}

/// The hand-over state's format: the version this binary writes, and the
/// newest it reads (every older one reads too).
/// - 1: written before states carried a version (no `version` field):
///   `next_fh`, inodes, handles (with `own`), directory streams, backing
///   ids, `emptied`, `max_size`.
/// - 2: the `version` field itself; the rest as in 1.
pub const STATE_VERSION: u32 = 2;

/// The version of a state without a `version` field.
fn unversioned() -> u32 {
    1
}

/// Whether a binary that reads up to version `knows` reads a state of
/// version `version`. Errors: one line naming both versions and what to do
/// (the running daemon is newer than the binary it would hand over to).
pub fn check_version(version: u32, knows: u32) -> Result<(), String> {
    if version > knows {
        return Err(format!(
            "the running daemon hands over state version {version}, this boundfs reads up to version {knows}: \
             upgrade to a boundfs at least as new as the running one"
        ));
    }
    Ok(())
}

/// What the next daemon takes over (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandedState {
    /// The format ([`STATE_VERSION`] when this binary wrote it); absent,
    /// read as 1, from a state written before states carried a version.
    #[serde(default = "unversioned")]
    pub version: u32,
    /// The next file handle to give (above every one handed).
    pub next_fh: u64,
    /// The inodes the kernel holds (the root excluded).
    pub inodes: Vec<HandedInode>,
    /// The open file handles.
    pub handles: Vec<HandedHandle>,
    /// The open directory streams.
    pub dirs: Vec<HandedDir>,
    /// Raw passthrough backing ids registered on the connection, by inode.
    pub backing: Vec<(u64, u32)>,
    /// Directories eviction emptied that wait for the kernel to forget
    /// them (`Core::reap_empty_dirs`): paths relative to BACKING, as bytes
    /// (a name need not be UTF-8). Absent from an older daemon's state.
    #[serde(default)]
    pub emptied: Vec<Vec<u8>>,
    /// The live budget (bytes): argv's `max_size`, or what `boundfs set`
    /// changed it to; the next daemon starts with it. Absent (None) from an
    /// older daemon's state: argv's then.
    #[serde(default)]
    pub max_size: Option<u64>,
}

impl Default for HandedState {
    /// An empty state of this binary's [`STATE_VERSION`].
    fn default() -> Self {
        HandedState {
            version: STATE_VERSION,
            next_fh: 0,
            inodes: Vec::new(),
            handles: Vec::new(),
            dirs: Vec::new(),
            backing: Vec::new(),
            emptied: Vec::new(),
            max_size: None,
        }
    }
}

impl HandedState {
    /// Reads a state from its JSON, of any version up to `knows` (this
    /// binary's [`STATE_VERSION`] but in a test). Errors (one line): the
    /// state's version is newer than `knows` ([`check_version`]), or the
    /// JSON is not a state.
    pub fn from_json(json: &[u8], knows: u32) -> Result<HandedState, String> {
        /// Only the version, read before the rest (whose shape it decides).
        #[derive(Deserialize)]
        struct Probe {
            #[serde(default = "unversioned")]
            version: u32,
        }
        let probe: Probe = serde_json::from_slice(json).map_err(|e| format!("hand-over state: {e}"))?;
        check_version(probe.version, knows)?;
        serde_json::from_slice(json).map_err(|e| format!("hand-over state version {}: {e}", probe.version))
    }
}

/// [`Core::collect_state`]'s result: the state and the fds it indexes.
pub struct Collected {
    /// The state.
    pub state: HandedState,
    /// Duplicates of the fds, in index order.
    pub fds: Vec<OwnedFd>,
}

/// `FUSE_DEV_IOC_BACKING_CLOSE`: `_IOW(229, 2, uint32_t)` (include/uapi/linux/fuse.h).
const BACKING_CLOSE: libc::c_ulong = (1 << 30) | (4 << 16) | (229 << 8) | 2;

/// The connection handed backing ids are closed on (set once by the daemon
/// that took the mount over).
static CONNECTION: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();

/// Gives the connection's fd for closing handed backing ids.
pub fn set_connection(fd: OwnedFd) {
    let _ = CONNECTION.set(fd);
}

fn mode_name(m: Option<Mode>) -> Option<String> {
    m.map(|m| match m {
        Mode::Passthrough => "passthrough".into(),
        Mode::Cached => "cached".into(),
        Mode::Direct => "direct".into(),
    })
}

fn mode_of(s: &Option<String>) -> Option<Mode> {
    match s.as_deref() {
        Some("passthrough") => Some(Mode::Passthrough),
        Some("cached") => Some(Mode::Cached),
        Some("direct") => Some(Mode::Direct),
        _ => None,
    }
}

fn key(k: (u64, u64)) -> FileKey {
    FileKey { dev: k.0, ino: k.1 }
}

impl Core {
    /// The state to hand over, with duplicates of its fds; `backing`: the
    /// raw backing ids taken out of the adapter's ids (`IoModes::
    /// take_all_backing`, converted by the caller). Only once no request
    /// runs (the gate is closed and drained). Errors: a dup failed (EMFILE).
    pub fn collect_state(&self, backing: Vec<(u64, u32)>) -> std::io::Result<Collected> {
        let mut fds = Vec::new();
        let mut push = |fd: std::os::fd::BorrowedFd<'_>| -> std::io::Result<usize> {
            fds.push(fd.try_clone_to_owned()?);
            Ok(fds.len() - 1)
        };
        let mut inodes = Vec::new();
        for e in self.inodes.export() {
            let fd = match &e.hot {
                Some(i) => Some(push(i.fd())?),
                None => None,
            };
            let (k, handle) = ((e.key.dev, e.key.ino), e.handle.map(|h| h.to_vec()));
            inodes.push(HandedInode { ino: e.ino, key: k, fmt: e.fmt, nlookup: e.nlookup, fd, handle });
        }
        let handles: Vec<(u64, Arc<Handle>)> = self.handles.read().iter().map(|(f, h)| (*f, h.clone())).collect();
        let mut hs = Vec::new();
        for (fh, h) in handles {
            let (mode, held, learns) = h.parts();
            let fd = push(h.fd.as_fd())?;
            let direct = match &h.direct {
                Some(d) => Some(push(d.as_fd())?),
                None => None,
            };
            let (key, ino, mode) = ((h.key.dev, h.key.ino), h.ino, mode_name(mode));
            let own = match self.shared() {
                true => self.accounts.own_entry(h.key).map(|(p, b)| (p.into_os_string().into_vec(), b)),
                false => None,
            };
            hs.push(HandedHandle { fh, fd, direct, key, ino, mode, held, learns, own });
        }
        let streams: Vec<_> = self.dirs.read().iter().map(|(f, d)| (*f, d.clone())).collect();
        let mut dirs = Vec::new();
        for (fh, d) in streams {
            let fd = push(d.lock().fd())?;
            dirs.push(HandedDir { fh, fd });
        }
        let next_fh = self.next_fh.load(std::sync::atomic::Ordering::Relaxed);
        let emptied = self.emptied_queued().into_iter().map(|p| p.into_os_string().into_vec()).collect();
        let max_size = Some(self.policy().max_size);
        let state =
            HandedState { version: STATE_VERSION, next_fh, inodes, handles: hs, dirs, backing, emptied, max_size };
        Ok(Collected { state, fds })
    }

    /// Takes over `state` with `fds` (indexed by it) from the daemon that
    /// served the connection: node ids and lookup counts, file handles
    /// (their keys pinned and sized in the ledger again, a passthrough
    /// writer's reservation held again, room or not), directory streams,
    /// backing ids. Before the session serves. Returns how many entries
    /// could not be taken (an index out of range; logged), which the kernel
    /// will meet as ESTALE or EBADF.
    pub fn adopt_state(&self, state: HandedState, fds: Vec<OwnedFd>) -> usize {
        let mut fds: Vec<Option<OwnedFd>> = fds.into_iter().map(Some).collect();
        let mut take = |i: usize| fds.get_mut(i).and_then(Option::take);
        let mut lost = 0;
        for i in state.inodes {
            let fd = i.fd.and_then(&mut take);
            let handle = i.handle.map(Vec::into_boxed_slice);
            if !self.inodes.adopt(i.ino, key(i.key), i.fmt, i.nlookup, fd, handle) {
                lost += 1;
            }
        }
        let backing: std::collections::HashMap<u64, u32> = state.backing.into_iter().collect();
        let mut raw_given = std::collections::HashSet::new();
        for h in state.handles {
            let Some(fd) = take(h.fd) else {
                lost += 1;
                continue;
            };
            let k = key(h.key);
            let _ = self.accounts.pin(k);
            let size = sys::fstat(fd.as_fd()).map(|st| sys::allocated(&st)).unwrap_or(0);
            self.accounts.opened(k, size, self.now(), self.stamp_secs);
            if let Some((path, block)) = h.own.filter(|_| self.shared()) {
                let path = std::ffi::OsString::from_vec(path).into();
                self.accounts.take_over_own(k, size, block, path, self.now());
            }
            let mode = mode_of(&h.mode);
            // The writer goes on writing in the kernel whatever this daemon
            // answers: its reservation is held, room or not (a handed writer
            // left with none was never checked nor trued up, its bytes in no
            // count; faults/upgrade-cap), and the evictor makes the room.
            let held = h.held;
            if held > 0 && self.accounts.hold(held) {
                self.wake_evictor();
            }
            let direct = h.direct.and_then(&mut take);
            let handle = Handle::handed(Handle::new(fd, k, h.ino).with_direct(direct), mode, held, h.learns);
            if let Some(m) = mode {
                let raw = (m == Mode::Passthrough && raw_given.insert(h.ino)).then(|| backing.get(&h.ino).copied());
                self.io.adopt(h.ino, m, raw.flatten());
            }
            self.handles.write().insert(h.fh, Arc::new(handle));
        }
        for d in state.dirs {
            match take(d.fd) {
                Some(fd) => {
                    let s = Arc::new(parking_lot::Mutex::new(DirStream::handed(fd)));
                    self.dirs.write().insert(d.fh, s);
                }
                None => lost += 1,
            }
        }
        // Shared budget: files taken over as own and writers' reservations
        // go in this daemon's grant before it serves; the old daemon leaves
        // them out of what it moves to the drift once it leaves.
        if let Some(t) = self.shared_tier()
            && self.accounts.grant_state().held > 0
        {
            self.grant_cover(t);
        }
        self.next_fh.fetch_max(state.next_fh, std::sync::atomic::Ordering::Relaxed);
        if !state.emptied.is_empty() {
            log::info!(
                "hand-over: {} emptied directories wait for the kernel to forget them before their removal",
                state.emptied.len()
            );
        }
        for rel in state.emptied {
            self.queue_emptied(std::ffi::OsString::from_vec(rel).into());
        }
        if lost > 0 {
            log::warn!("hand-over: {lost} inodes, handles or directory streams could not be taken over");
        }
        lost
    }

    /// Closes the handed backing ids no open holds any more (after a
    /// RELEASE), on the connection [`set_connection`] gave.
    pub(super) fn close_orphans(&self) {
        let ids = self.io.take_orphans();
        let Some(dev) = CONNECTION.get() else { return };
        for id in ids {
            // SAFETY: FUSE_DEV_IOC_BACKING_CLOSE reads one u32 from a live
            // local; the fd is this mount's connection.
            if unsafe { libc::ioctl(dev.as_raw_fd(), BACKING_CLOSE, &id) } != 0 {
                log::debug!("closing handed backing id {id}: {}", std::io::Error::last_os_error());
            }
        }
    }

    /// The raw backing id a previous daemon registered for `ino`, for the
    /// next open that needs one (see `IoModes::take_handed`).
    pub fn handed_backing(&self, ino: u64) -> Option<u32> {
        self.io.take_handed(ino)
    }

    /// Gives back the ids [`Core::take_backing_ids`] took (a hand-over that
    /// failed): this process goes on serving and owns them again.
    pub fn restore_backing_ids(&self, ids: Vec<(u64, u32)>) {
        self.io.restore_handed(&ids);
    }

    /// Takes every backing id out of the I/O modes for a hand-over: the
    /// process must exit after it without closing them. `raw` turns an id
    /// into its number (`fuser::BackingId::into_raw`); one still shared
    /// (an open in flight: none after the gate drained) is kept, not sent.
    pub fn take_backing_ids(&self, raw: impl Fn(fuser::BackingId) -> u32) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        for (ino, b) in self.io.take_all_backing() {
            match b {
                Err(r) => out.push((ino, r)),
                Ok(b) => match Arc::try_unwrap(b) {
                    Ok(b) => out.push((ino, raw(b))),
                    Err(b) => std::mem::forget(b),
                },
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "handed_tests.rs"]
mod tests;
