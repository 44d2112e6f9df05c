//! Open handles across a crash (`-o supervise`). The kernel keeps the
//! file handles (fh) a dead daemon answered and sends them to the next
//! one: RELEASE always, READ/WRITE/FLUSH/FSYNC for opens that are not
//! kernel passthrough. The budget's core guarantee, files with open handles
//! are never evicted, must hold across the restart, and the next daemon
//! must not give a new open an fh still in use.
//!
//! So each supervised daemon records its open handles (fh, node id, I/O
//! mode with the passthrough backing id, budget bytes held) in an
//! [`OpenTable`]: a memfd the supervisor made and holds, mapped shared by
//! the daemon, written with atomics as handles open, settle and close
//! (nothing to flush, nothing lost with the process). The next daemon,
//! before it serves, makes every recorded handle its own under the same fh
//! ([`super::Core::adopt_held_opens`]): reads and writes through old
//! handles go on (passthrough ones in the kernel, the others through the
//! file opened again), their files stay pinned, and their RELEASE trues up
//! and unpins as usual. An inode whose recorded handle has no mode yet (the
//! daemon died between the open and its plan) gets FOPEN_DIRECT_IO alone
//! for new opens until that fh is released. A handle recorded by a daemon
//! killed after the open and before its reply is never released by the
//! kernel (it resends the OPEN): the journal of requests in flight
//! (`inflight`) names it, and the resent OPEN or CREATE releases it before
//! opening again; only a kill between the open and its journal mark leaves
//! it pinned until the unmount. A handle whose file is gone by then (it was
//! unlinked while open, and the dead daemon's fd was its last) or whose
//! inode number another object has since ([`identity`] differs) is not
//! taken: its requests fail with EBADF, and it is never bound to another
//! file.
//!
//! Layout: [`SLOTS`] slots of five u64 (fh, node id, [`info`], bytes
//! held, [`identity`]), open addressing from
//! `fh % SLOTS`; fh 0 is a free slot (fhs start at 1). A slot whose node id
//! is 0 is being written (or was, by a daemon killed in between): skipped.
//! A full table records nothing more (logged once): those handles are then
//! not protected across a crash.
//!
//! After the journal, [`SETTINGS_WORDS`] words keep the live settings
//! `boundfs set` changed (word 0: `max_size` in bytes, 0 when never set),
//! so the next daemon starts with them rather than with its argv's.
//!
//! Lock: [`HELD`] is a leaf mutex (no other lock taken under it). It is
//! taken only while [`HELD_ANY`] is set: after a crash left handles whose
//! I/O mode is not known, until the last of them is released. Every other
//! OPEN, CREATE and RELEASE (all of them on an unsupervised mount) reads
//! that flag and nothing else.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use super::passthrough::Mode;

/// Slots in the table (40 bytes each: 2.5 MiB).
pub const SLOTS: usize = 1 << 16;
/// The node id of a handle whose file was gone after a crash ([`OpenTable::kill`]).
pub const DEAD: u64 = u64::MAX;
/// u64 words per slot: fh, node id, I/O mode and backing id, budget bytes
/// held, identity ([`identity`]).
const W: usize = 5;
/// Words after the journal for the live settings (see the module docs).
pub const SETTINGS_WORDS: usize = 8;
/// Bytes of the memfd: the table, then the journal of requests in flight
/// (`inflight`), then the live settings.
const BYTES: usize = (SLOTS * W + super::inflight::WORDS + SETTINGS_WORDS) * 8;

/// The shared table of open handles (see the module docs).
pub struct OpenTable {
    words: *const AtomicU64,
    _fd: OwnedFd,
}

// SAFETY: the mapping is only accessed through atomics and lives as long as the table.
unsafe impl Send for OpenTable {}
// SAFETY: as above: shared access is atomic.
unsafe impl Sync for OpenTable {}

impl OpenTable {
    /// A new zeroed table (a memfd of `SLOTS * 40` bytes, then the
    /// journal of requests in flight, 64 KiB), for the
    /// supervisor to hold and hand to each daemon. Errors: memfd_create,
    /// ftruncate.
    pub fn create() -> std::io::Result<OwnedFd> {
        // SAFETY: a NUL-terminated name; flags are plain bits.
        let fd = unsafe { libc::memfd_create(c"boundfs-open-handles".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: memfd_create just returned this fd; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ftruncate on our own open fd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), BYTES as libc::off_t) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(fd)
    }

    /// Maps the table in `fd` (made by [`OpenTable::create`]). Errors: mmap.
    pub fn map(fd: OwnedFd) -> std::io::Result<OpenTable> {
        // SAFETY: a shared read-write mapping of the whole memfd, which is
        // BYTES long; never unmapped while the table lives.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(OpenTable { words: p.cast(), _fd: fd })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: reduced below W * SLOTS, the mapping's length in words; it
        // is page-aligned and lives as long as the table.
        unsafe { &*self.words.add(i % (W * SLOTS)) }
    }

    /// Word `i` of the region after the table (the journal, `inflight`).
    pub(super) fn extra_word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: reduced below the journal's length; the mapping holds
        // W * SLOTS + inflight::WORDS words and lives as long as the table.
        unsafe { &*self.words.add(W * SLOTS + i % super::inflight::WORDS) }
    }

    /// Settings word `i` (below [`SETTINGS_WORDS`]), after the journal.
    fn settings_word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: reduced below SETTINGS_WORDS; the mapping holds
        // W * SLOTS + inflight::WORDS + SETTINGS_WORDS words and lives as
        // long as the table.
        unsafe { &*self.words.add(W * SLOTS + super::inflight::WORDS + i % SETTINGS_WORDS) }
    }

    /// Records the live `max_size` (bytes) `boundfs set` gave.
    pub fn set_max_size(&self, max_size: u64) {
        self.settings_word(0).store(max_size, Ordering::Release);
    }

    /// The live `max_size` (bytes) a daemon recorded, if one was set.
    pub fn max_size(&self) -> Option<u64> {
        Some(self.settings_word(0).load(Ordering::Acquire)).filter(|&n| n > 0)
    }

    /// Records open handle `fh` of node `ino`, whose backing object is
    /// `ident` ([`identity`]; 0: not known). Returns false when full.
    pub fn opened(&self, fh: u64, ino: u64, ident: u64) -> bool {
        for probe in 0..SLOTS {
            let s = (fh as usize).wrapping_add(probe) % SLOTS;
            if self.word(W * s).compare_exchange(0, fh, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                self.word(W * s + 2).store(0, Ordering::Release);
                self.word(W * s + 3).store(0, Ordering::Release);
                self.word(W * s + 4).store(ident, Ordering::Release);
                self.word(W * s + 1).store(ino, Ordering::Release);
                return true;
            }
        }
        false
    }

    /// The slot of handle `fh`, if recorded.
    fn slot(&self, fh: u64) -> Option<usize> {
        (0..SLOTS)
            .map(|probe| (fh as usize).wrapping_add(probe) % SLOTS)
            .find(|&s| self.word(W * s).load(Ordering::Acquire) == fh)
    }

    /// Records how handle `fh` does its I/O ([`info`]) and the budget
    /// bytes it holds (a passthrough writer's reservation).
    pub fn set_info(&self, fh: u64, info: u64, held: u64) {
        if let Some(s) = self.slot(fh) {
            self.word(W * s + 3).store(held, Ordering::Release);
            self.word(W * s + 2).store(info, Ordering::Release);
        }
    }

    /// Marks handle `fh` dead: its file is gone, its slot stays (with node
    /// id [`DEAD`]) until the kernel releases it, so that no later daemon
    /// gives its fh number to another handle.
    pub fn kill(&self, fh: u64) {
        if let Some(s) = self.slot(fh) {
            self.word(W * s + 1).store(DEAD, Ordering::Release);
        }
    }

    /// Forgets handle `fh` (RELEASE). Returns its node id if it was there.
    pub fn closed(&self, fh: u64) -> Option<u64> {
        let s = self.slot(fh)?;
        let ino = self.word(W * s + 1).swap(0, Ordering::AcqRel);
        self.word(W * s).store(0, Ordering::Release);
        Some(ino)
    }

    /// The recorded (fh, node id, [`info`], bytes held, identity).
    pub fn live(&self) -> Vec<(u64, u64, u64, u64, u64)> {
        (0..SLOTS)
            .map(|s| {
                let w = |i| self.word(W * s + i).load(Ordering::Acquire);
                (w(0), w(1), w(2), w(3), w(4))
            })
            .filter(|&(fh, ino, ..)| fh != 0 && ino != 0)
            .collect()
    }
}

/// A handle's I/O mode and passthrough backing id as one word (0: not
/// known yet: the daemon died between the open and its plan).
pub fn info(mode: Mode, backing: Option<u32>) -> u64 {
    let m = match mode {
        Mode::Passthrough => 1u64,
        Mode::Cached => 2,
        Mode::Direct => 3,
    };
    m << 32 | u64::from(backing.unwrap_or(0))
}

/// The identity of the backing object behind `fd`: a hash of its file
/// handle (`name_to_handle_at`, which carries the inode's generation), so
/// an object given a freed inode number has another one. 0 where the
/// filesystem gives no handle.
pub fn identity(fd: std::os::fd::BorrowedFd<'_>) -> u64 {
    let Ok(h) = crate::sys::file_handle(fd) else { return 0 };
    // FNV-1a, 64 bits.
    let x = h.iter().fold(0xcbf2_9ce4_8422_2325u64, |x, &b| (x ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    x.max(1)
}

/// [`info`]'s inverse: the mode and the backing id (None: not known).
pub fn mode_of(info: u64) -> Option<(Mode, Option<u32>)> {
    let raw = (info as u32 != 0).then_some(info as u32);
    Some(match info >> 32 {
        1 => (Mode::Passthrough, raw),
        2 => (Mode::Cached, None),
        3 => (Mode::Direct, None),
        _ => return None,
    })
}

/// The raw id of a fuser `BackingId` (fuser 0.18 shows it only through its
/// `Debug`: `BackingId { channel: .., backing_id: N }`, or by giving it up
/// with `into_raw`). None if the format changed (a unit test would say).
pub fn raw_backing_id(id: &fuser::BackingId) -> Option<u32> {
    parse_backing_debug(&format!("{id:?}"))
}

fn parse_backing_debug(d: &str) -> Option<u32> {
    let rest = &d[d.find("backing_id: ")? + "backing_id: ".len()..];
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// This daemon's table, when supervised.
static TABLE: OnceLock<OpenTable> = OnceLock::new();
static FULL: AtomicBool = AtomicBool::new(false);

/// Inodes with handles a dead daemon left open in an I/O mode not known
/// (node id → how many; their opens are answered FOPEN_DIRECT_IO alone),
/// and those handles (fh → node id).
#[derive(Default)]
struct Held {
    by_fh: HashMap<u64, u64>,
    unknown: HashMap<u64, u32>,
}

static HELD: Mutex<Option<Held>> = Mutex::new(None);
/// Whether [`HELD`] has a handle in it. Set once before the daemon serves
/// (`adopt_held_opens`), cleared under the lock when its last handle is
/// released and never set again: a false read means nothing is held.
static HELD_ANY: AtomicBool = AtomicBool::new(false);

/// Makes `t` this daemon's table (once, before it serves).
pub fn install(t: OpenTable) {
    let _ = TABLE.set(t);
}

/// Records a live `max_size` (bytes, from `boundfs set`) in the
/// supervisor's memfd, for the daemon it starts after this one dies. No-op
/// when not supervised.
pub fn record_max_size(max_size: u64) {
    if let Some(t) = TABLE.get() {
        t.set_max_size(max_size);
    }
}

/// The live `max_size` (bytes) a previous daemon under the same supervisor
/// recorded; None when not supervised or never set.
pub fn recorded_max_size() -> Option<u64> {
    TABLE.get().and_then(OpenTable::max_size)
}

/// This daemon's table (None: not supervised).
pub(super) fn table() -> Option<&'static OpenTable> {
    TABLE.get()
}

/// Whether node `ino` has a handle a dead daemon left open in an I/O mode
/// not known (its kernel inode may carry a passthrough backing file whose
/// id is lost: only FOPEN_DIRECT_IO alone is sure to be accepted).
pub fn mode_unknown(ino: u64) -> bool {
    if !HELD_ANY.load(Ordering::Acquire) {
        return false;
    }
    HELD.lock().ok().is_some_and(|h| h.as_ref().is_some_and(|h| h.unknown.contains_key(&ino)))
}

impl super::Core {
    /// A handle was added (on backing file `fd`): record it.
    pub(super) fn record_open(&self, fh: u64, ino: u64, fd: std::os::fd::BorrowedFd<'_>) {
        if let Some(t) = TABLE.get() {
            if !t.opened(fh, ino, identity(fd)) && !FULL.swap(true, Ordering::Relaxed) {
                log::warn!("open handle table full ({SLOTS}): later handles are not protected across a crash");
            }
        }
    }

    /// Handle `fh` settled on `mode` (with this backing id, passthrough).
    pub(super) fn record_mode(&self, fh: u64, mode: Mode, backing: Option<&fuser::BackingId>, held: u64) {
        if let Some(t) = TABLE.get() {
            t.set_info(fh, info(mode, backing.and_then(raw_backing_id)), held);
        }
    }

    /// RELEASE (or a failed open) of `fh`: forget it.
    pub(super) fn record_close(&self, fh: u64) {
        if let Some(t) = TABLE.get() {
            t.closed(fh);
        }
        if !HELD_ANY.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut h) = HELD.lock() else { return };
        let Some(h) = h.as_mut() else { return };
        let Some(ino) = h.by_fh.remove(&fh) else { return };
        if let Some(n) = h.unknown.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                h.unknown.remove(&ino);
            }
        }
        if h.by_fh.is_empty() {
            HELD_ANY.store(false, Ordering::Release);
        }
    }

    /// After a crash, before serving: every open handle the dead daemon
    /// recorded becomes a handle of this daemon under the same fh (as an
    /// upgrade's hand-over does, `handed`): its file found by node id
    /// (`recover`) and opened again read-write (the kernel already checked
    /// the client's access mode), pinned and sized in the ledger, a
    /// passthrough writer's bytes reserved again, counted in its inode's
    /// I/O mode with its passthrough backing id (still registered on the
    /// connection: the kernel requires a new passthrough open of that inode
    /// to answer the same one, `IoModes::adopt`); new fhs start above them.
    /// RELEASE then goes the usual way (true-up, unpin). Returns (handles
    /// recorded, handles taken).
    pub fn adopt_held_opens(&self) -> (usize, usize) {
        let Some(t) = TABLE.get() else { return (0, 0) };
        let mut held = Held::default();
        let (mut n, mut taken) = (0, 0);
        let mut raw_given = std::collections::HashSet::new();
        for (fh, ino, info, bytes, ident) in t.live() {
            n += 1;
            self.next_fh.fetch_max(fh + 1, Ordering::Relaxed);
            // Its file gone (unlinked while open: the dead daemon's fd was
            // the last), or its inode number given to another object since:
            // the handle is dropped (its requests get EBADF), never bound
            // to another file; its slot stays marked dead until RELEASE, so
            // no daemon gives its fh to another handle meanwhile.
            if ino == DEAD {
                continue;
            }
            let Some(inode) = self.inodes.get(ino).filter(|i| ident == 0 || identity(i.fd()) == ident) else {
                t.kill(fh);
                log::warn!("open handle {fh} (node {ino}): its file is gone; the handle fails from now on (EBADF)");
                continue;
            };
            let fd = crate::sys::reopen(inode.fd(), libc::O_RDWR)
                .or_else(|_| crate::sys::reopen(inode.fd(), libc::O_RDONLY));
            let Ok(fd) = fd else {
                t.kill(fh);
                continue;
            };
            let mode = mode_of(info);
            if mode.is_none() {
                *held.unknown.entry(ino).or_default() += 1;
                held.by_fh.insert(fh, ino);
            }
            let k = inode.key;
            let _ = self.accounts.pin(k);
            let size = crate::sys::fstat(fd.as_fd()).map(|st| crate::sys::allocated(&st)).unwrap_or(0);
            self.accounts.opened(k, size, self.now(), self.stamp_secs);
            // Held room or not, as for a hand-over (`Core::adopt_state`).
            let kept = bytes;
            if kept > 0 && self.accounts.hold(kept) {
                self.wake_evictor();
            }
            let handle =
                super::handles::Handle::handed(super::handles::Handle::new(fd, k, ino), mode.map(|m| m.0), kept, false);
            if let Some((m, raw)) = mode {
                let raw = raw.filter(|_| m == Mode::Passthrough && raw_given.insert(ino));
                self.io.adopt(ino, m, raw);
            }
            self.handles.write().insert(fh, std::sync::Arc::new(handle));
            taken += 1;
        }
        if let Ok(mut h) = HELD.lock() {
            HELD_ANY.store(!held.by_fh.is_empty(), Ordering::Release);
            *h = Some(held);
        }
        (n, taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What one process records, another mapping of the same memfd (the
    /// next daemon) sees; a released handle is gone; probing past a taken
    /// slot works.
    #[test]
    fn a_second_mapping_sees_the_open_handles() {
        let fd = OpenTable::create().unwrap();
        let a = OpenTable::map(fd.try_clone().unwrap()).unwrap();
        assert!(a.opened(7, 100, 0));
        assert!(a.opened(7 + SLOTS as u64, 200, 42));
        assert!(a.opened(9, 300, 0));
        assert_eq!(a.closed(9), Some(300));
        let b = OpenTable::map(fd).unwrap();
        a.set_info(7, info(Mode::Passthrough, Some(3)), 5);
        let mut live = b.live();
        live.sort();
        assert_eq!(live, vec![(7, 100, info(Mode::Passthrough, Some(3)), 5, 0), (7 + SLOTS as u64, 200, 0, 0, 42)]);
        assert_eq!(b.closed(7 + SLOTS as u64), Some(200));
        assert_eq!(a.live().len(), 1);
        assert_eq!(mode_of(a.live()[0].2), Some((Mode::Passthrough, Some(3))));
        assert_eq!(mode_of(0), None);
        assert_eq!(mode_of(info(Mode::Cached, None)), Some((Mode::Cached, None)));
        // the live budget a `boundfs set` recorded, for the next daemon
        assert_eq!(b.max_size(), None, "never set");
        a.set_max_size(200 << 20);
        assert_eq!(b.max_size(), Some(200 << 20));
    }

    /// The id is read from fuser 0.18's `Debug` of a `BackingId` (no
    /// public constructor to make one without a reply).
    #[test]
    fn reads_the_raw_backing_id() {
        assert_eq!(parse_backing_debug("BackingId { channel: (Weak), backing_id: 42 }"), Some(42));
        assert_eq!(parse_backing_debug("BackingId { channel: (Weak) }"), None);
    }
}
