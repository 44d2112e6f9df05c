//! Kernel passthrough (FUSE_PASSTHROUGH, Linux ≥ 6.9): which I/O mode each
//! open of a file gets, and the one backing id per inode shared by its
//! passthrough opens.
//!
//! Rules, from the kernel's per-inode I/O modes (`fs/fuse/iomode.c`):
//! - an inode open in passthrough mode rejects opens that are not passthrough
//!   (EINVAL in the kernel), and an inode with cached (page cache) opens
//!   rejects passthrough opens (ETXTBSY in the kernel);
//! - all passthrough opens of one inode must carry the same backing id.
//!
//! Reads get passthrough; writes go through the daemon, which reserves their
//! bytes first, except for the writers of block files and engine
//! temporaries once their size is known ([`IoModes::plan_pass_writer`]):
//! those get passthrough too, with the file's expected size reserved at the
//! open and trued up at RELEASE (see `super::handles`). So:
//! - a read-only open gets passthrough, unless the inode has cached opens (a
//!   writer opened first): then it is cached too, served by the daemon;
//! - an open for writing gets cached mode, unless readers hold the inode in
//!   passthrough mode: then it joins them with FOPEN_PASSTHROUGH and
//!   FOPEN_DIRECT_IO, which the kernel documents as "FOPEN_DIRECT_IO overrides
//!   FOPEN_PASSTHROUGH": its reads and writes are FUSE requests to the
//!   daemon (counted against the budget), only its mmap maps the backing file.
//!
//! - an open for writing only (O_WRONLY) that joins no passthrough readers
//!   gets FOPEN_DIRECT_IO alone ([`Plan::Direct`]): such an open takes no
//!   I/O mode in the kernel ("FOPEN_DIRECT_IO without FOPEN_PASSTHROUGH"
//!   is left out of the inode's mode in `fuse_file_io_open`), so readers
//!   may still get passthrough beside it, and its writes skip the kernel's
//!   `file_remove_privs` (the daemon kills suid/sgid instead, see
//!   FUSE_HANDLE_KILLPRIV_V2 in `crate::fuse`).
//!
//! Lock order: `IoModes::state` is a leaf lock; the backing id is created and
//! dropped (each an ioctl) outside it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// How many recent block sizes a passthrough writer's reservation is the
/// largest of (see [`IoModes::writer_reservation`]).
pub const LEARNED: usize = 32;

/// How one open file handle does its I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The inode's passthrough mode: reads go straight to the backing file
    /// (or, with FOPEN_DIRECT_IO for a writer, to the daemon).
    Passthrough,
    /// Page-cache mode: reads and writes are FUSE requests served by the daemon.
    Cached,
    /// FOPEN_DIRECT_IO alone (a write-only open): no kernel I/O mode, writes
    /// are FUSE requests served by the daemon.
    Direct,
}

/// What an open should answer. `direct` asks for FOPEN_DIRECT_IO beside
/// FOPEN_PASSTHROUGH (a writer joining passthrough readers).
#[derive(Debug)]
pub enum Plan<B> {
    /// Answer with this backing id (already counted).
    Passthrough { id: Arc<B>, direct: bool },
    /// Passthrough, but no backing id exists yet: create one and call
    /// [`IoModes::install`] (or [`IoModes::abandon`] if that fails).
    NeedBacking { direct: bool },
    /// Answer without passthrough (already counted).
    Cached,
    /// Answer FOPEN_DIRECT_IO without passthrough (not counted: it takes no
    /// I/O mode of the inode).
    Direct,
    /// Refuse with ETXTBSY: the inode is in passthrough mode but no backing
    /// id could be made for it (only after the kernel refused one).
    Busy,
}

struct InodeIo<B> {
    backing: Option<Arc<B>>,
    passthrough: u32,
    cached: u32,
}

/// The I/O counts of every inode with open handles (the handles themselves,
/// with their mode, are in the core's one handle table).
#[derive(Default)]
struct State<B> {
    inodes: HashMap<u64, InodeIo<B>>,
    /// Raw backing ids a previous daemon registered on this connection
    /// (an upgrade, `super::handed`), by inode, until an open adopts one.
    handed: HashMap<u64, u32>,
    /// Handed ids whose inode's passthrough opens all went before any open
    /// here adopted them: to close (`Core::release`).
    orphans: Vec<u32>,
}

/// Per-inode I/O modes of open handles. `B` is the backing id type
/// (`fuser::BackingId`; tests use a stand-in).
pub struct IoModes<B> {
    enabled: AtomicBool,
    /// FUSE_HANDLE_KILLPRIV_V2 was negotiated: write-only opens may get
    /// [`Plan::Direct`] (see [`IoModes::plan_open`]).
    direct_writers: AtomicBool,
    /// Writers of block files and engine temporaries may get passthrough.
    pass_writers: AtomicBool,
    /// The allocated sizes, bytes, of the last [`LEARNED`] block files or
    /// engine temporaries written through the mount (0: none yet), a ring
    /// written at `learned_at`: the largest is what a passthrough writer
    /// reserves. A window rather than an all-time maximum, so that one odd
    /// large file makes the next writers reserve (and evict) too much only
    /// until [`LEARNED`] more have been written.
    learned: [AtomicU64; LEARNED],
    learned_at: AtomicU64,
    state: Mutex<State<B>>,
}

impl<B> IoModes<B> {
    /// Modes with passthrough on or off.
    pub fn new(enabled: bool) -> Self {
        IoModes {
            enabled: AtomicBool::new(enabled),
            direct_writers: AtomicBool::new(false),
            pass_writers: AtomicBool::new(false),
            learned: Default::default(),
            learned_at: AtomicU64::new(0),
            state: Mutex::new(State { inodes: HashMap::new(), handed: HashMap::new(), orphans: Vec::new() }),
        }
    }

    /// Lets write-only opens be answered FOPEN_DIRECT_IO alone (the adapter
    /// negotiated FUSE_HANDLE_KILLPRIV_V2, so the daemon kills privileges).
    pub fn allow_direct_writers(&self) {
        self.direct_writers.store(true, Ordering::Relaxed);
    }

    /// Lets writers of block files and engine temporaries get passthrough
    /// (when passthrough is enabled at all).
    pub fn allow_pass_writers(&self, on: bool) {
        self.pass_writers.store(on, Ordering::Relaxed);
    }

    /// Bytes a passthrough writer reserves now: the largest of the last
    /// [`LEARNED`] block files or engine temporaries written, or `None`
    /// while no size is known
    /// (the first ones go through the daemon) or writers may not pass.
    pub fn writer_reservation(&self) -> Option<u64> {
        if !self.pass_writers.load(Ordering::Relaxed) || !self.enabled() {
            return None;
        }
        Some(self.learned.iter().map(|b| b.load(Ordering::Relaxed)).max().unwrap_or(0)).filter(|&b| b > 0)
    }

    /// A block file or engine temporary written through the mount was
    /// released allocating `bytes`: the next [`LEARNED`] passthrough writers
    /// reserve at least that.
    pub fn learn(&self, bytes: u64) {
        let i = self.learned_at.fetch_add(1, Ordering::Relaxed) as usize % LEARNED;
        self.learned[i].store(bytes, Ordering::Relaxed);
    }

    /// Plans a passthrough writer of inode `ino` (FOPEN_PASSTHROUGH without
    /// FOPEN_DIRECT_IO: its reads and writes go to the backing file in the
    /// kernel). `None` when the inode has cached opens (the kernel would
    /// refuse with ETXTBSY) or passthrough is off; nothing is counted then.
    pub fn plan_pass_writer(&self, ino: u64) -> Option<Plan<B>> {
        let mut s = self.state.lock();
        if !self.enabled() || s.inodes.get(&ino).is_some_and(|io| io.cached > 0) {
            return None;
        }
        let io = s.inodes.entry(ino).or_insert(InodeIo { backing: None, passthrough: 0, cached: 0 });
        io.passthrough += 1;
        Some(match &io.backing {
            Some(b) => Plan::Passthrough { id: b.clone(), direct: false },
            None => Plan::NeedBacking { direct: false },
        })
    }

    /// Plans an open of inode `ino` with `flags` (open(2) bits): a write-only
    /// one through [`IoModes::plan_writer`] once direct writers are allowed,
    /// any other through [`IoModes::plan`].
    pub fn plan_open(&self, ino: u64, flags: i32) -> Plan<B> {
        if self.direct_writers.load(Ordering::Relaxed) && flags & libc::O_ACCMODE == libc::O_WRONLY {
            self.plan_writer(ino)
        } else {
            self.plan(ino, read_only(flags))
        }
    }

    /// Whether read-only opens currently get passthrough.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turns passthrough on or off for later opens (the adapter's setting).
    pub fn enable(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Turns passthrough off for later opens (the kernel or our privileges
    /// refused it). Returns true the first time, so the caller logs once.
    pub fn disable(&self) -> bool {
        self.enabled.swap(false, Ordering::Relaxed)
    }

    /// Decides the mode of an open of inode `ino` (`read_only`: O_RDONLY
    /// without O_TRUNC) and counts it, except for `Busy`.
    pub fn plan(&self, ino: u64, read_only: bool) -> Plan<B> {
        let mut s = self.state.lock();
        let io = s.inodes.entry(ino).or_insert(InodeIo { backing: None, passthrough: 0, cached: 0 });
        let join = io.passthrough > 0;
        if join || (read_only && io.cached == 0 && self.enabled()) {
            io.passthrough += 1;
            let direct = !read_only;
            return match &io.backing {
                Some(b) => Plan::Passthrough { id: b.clone(), direct },
                None => Plan::NeedBacking { direct },
            };
        }
        io.cached += 1;
        Plan::Cached
    }

    /// Decides the mode of a write-only open of inode `ino`: it joins
    /// passthrough readers as [`IoModes::plan`] would, else [`Plan::Direct`].
    pub fn plan_writer(&self, ino: u64) -> Plan<B> {
        {
            let s = self.state.lock();
            if !s.inodes.get(&ino).is_some_and(|io| io.passthrough > 0) {
                return Plan::Direct;
            }
        }
        // Readers left meanwhile: plan() then counts it as cached, which is
        // also correct (only less cheap).
        self.plan(ino, false)
    }

    /// Records the backing id created after [`Plan::NeedBacking`]; returns
    /// the one to answer with (another open may have installed one first;
    /// then `b` is dropped, outside the lock, by the caller).
    pub fn install(&self, ino: u64, b: B) -> (Arc<B>, Option<B>) {
        let mut s = self.state.lock();
        let Some(io) = s.inodes.get_mut(&ino) else {
            return (Arc::new(b), None);
        };
        match &io.backing {
            Some(existing) => (existing.clone(), Some(b)),
            None => {
                let b = Arc::new(b);
                io.backing = Some(b.clone());
                (b, None)
            }
        }
    }

    /// Undoes a [`Plan::NeedBacking`] whose backing id could not be created,
    /// and plans the open again without passthrough if it can.
    pub fn abandon(&self, ino: u64, direct: bool) -> Plan<B> {
        let mut s = self.state.lock();
        let Some(io) = s.inodes.get_mut(&ino) else {
            return Plan::Cached;
        };
        io.passthrough = io.passthrough.saturating_sub(1);
        if io.passthrough > 0 {
            // Other readers are in passthrough: this one can only join them.
            return match io.backing.clone() {
                Some(id) => {
                    io.passthrough += 1;
                    Plan::Passthrough { id, direct }
                }
                None => Plan::Busy,
            };
        }
        io.cached += 1;
        Plan::Cached
    }

    /// RELEASE of a handle of inode `ino` answered in `mode`: uncounts it.
    /// Returns the backing id when this was the inode's last passthrough
    /// open; the caller drops it (closing it in the kernel) after the lock is
    /// released.
    pub fn release(&self, ino: u64, mode: Mode) -> Option<Arc<B>> {
        Self::uncount(&mut self.state.lock(), ino, mode)
    }

    /// Counts a handle handed over by a previous daemon (an upgrade) in
    /// `mode`; `raw`: the backing id its passthrough opens of `ino` carry,
    /// which the next passthrough open of `ino` here must reuse
    /// ([`IoModes::take_handed`]: the kernel refuses a second backing file
    /// on one inode with EBUSY).
    pub fn adopt(&self, ino: u64, mode: Mode, raw: Option<u32>) {
        let mut s = self.state.lock();
        if let Some(raw) = raw {
            s.handed.insert(ino, raw);
        }
        let io = s.inodes.entry(ino).or_insert(InodeIo { backing: None, passthrough: 0, cached: 0 });
        match mode {
            Mode::Passthrough => io.passthrough += 1,
            Mode::Cached => io.cached += 1,
            Mode::Direct => {}
        }
    }

    /// The handed-over raw backing id of `ino` to wrap for an open that
    /// needs one (then owned by the wrapper), if no id is installed yet.
    pub fn take_handed(&self, ino: u64) -> Option<u32> {
        let mut s = self.state.lock();
        if s.inodes.get(&ino).is_some_and(|io| io.backing.is_some()) {
            return None;
        }
        s.handed.remove(&ino)
    }

    /// Handed ids no open holds any more, to close (see `State::orphans`).
    pub fn take_orphans(&self) -> Vec<u32> {
        std::mem::take(&mut self.state.lock().orphans)
    }

    /// Gives back raw ids [`IoModes::take_all_backing`] took (a hand-over
    /// that failed): the next passthrough open of each inode adopts its id.
    pub fn restore_handed(&self, ids: &[(u64, u32)]) {
        self.state.lock().handed.extend(ids.iter().copied());
    }

    /// The installed backing ids by inode (and handed ids not yet adopted,
    /// as `Err`), taken out for a hand-over: the process exits after it.
    pub fn take_all_backing(&self) -> Vec<(u64, Result<Arc<B>, u32>)> {
        let mut s = self.state.lock();
        let mut out: Vec<_> = s.handed.drain().map(|(ino, raw)| (ino, Err(raw))).collect();
        out.extend(s.inodes.iter_mut().filter_map(|(ino, io)| Some((*ino, Ok(io.backing.take()?)))));
        out
    }

    fn uncount(s: &mut State<B>, ino: u64, mode: Mode) -> Option<Arc<B>> {
        let io = s.inodes.get_mut(&ino)?;
        match mode {
            Mode::Passthrough => io.passthrough = io.passthrough.saturating_sub(1),
            Mode::Cached => io.cached = io.cached.saturating_sub(1),
            Mode::Direct => {}
        }
        let (backing, gone) = if io.passthrough == 0 { (io.backing.take(), io.cached == 0) } else { (None, false) };
        if io.passthrough == 0 && io.backing.is_none() {
            // Its last handed-over passthrough open went: close the id.
            s.orphans.extend(s.handed.remove(&ino));
        }
        if gone {
            s.inodes.remove(&ino);
        }
        backing
    }
}

/// Whether an open with `flags` only reads (O_RDONLY without O_TRUNC):
/// only those get passthrough.
pub fn read_only(flags: i32) -> bool {
    flags & libc::O_ACCMODE == libc::O_RDONLY && flags & libc::O_TRUNC == 0
}

#[cfg(test)]
#[path = "passthrough_tests.rs"]
mod tests;
