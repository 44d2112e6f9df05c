//! The removal journal of the shared tier (`-o shared`): every node publishes
//! the block files its evictions removed, and every node drops from its
//! ledger the ones its peers removed, within a fraction of a second instead
//! of at its next reconcile pass.
//!
//! Why: each node counts the whole shared tree (its own stores and evictions
//! at once, the others' at its reconcile pass). Until that pass the sweeper
//! still counted blocks another node had evicted inline for its writes, so it
//! swept that much below the low watermark (tests/sh/95, 5 minutes: lowest
//! 78.5 % of max_size with the low watermark at 90 %). With the journal the
//! sweeper reads its peers' removals before each batch of victims
//! ([`SWEEP_BATCHES`] per sweep), so it misses at most what they removed
//! during one batch.
//!
//! Layout: `BACKING/.boundfs/evicted/ID.GEN.log`, one file per node and
//! generation, ID = `host-pid-start-N` (start in Unix seconds, N the mount in the process), lines
//! `INO PATH\n` (PATH relative to BACKING, `%` and newline escaped as `%25`
//! and `%0A`). A node appends what it removed after each eviction call
//! (`open(O_APPEND)`, write, close: distributed filesystems commit at close,
//! so the lines are visible to every node once close returns) and starts a
//! new generation past [`ROTATE_BYTES`], removing the one before the last.
//! Files of nodes gone for [`STALE_AFTER`] are removed by the sweeper.
//!
//! Applying a line is idempotent and exact: the entry `(BACKING's st_dev,
//! INO)` is dropped only while it is live, unopened and has that same path,
//! so a block this node's eviction or reconcile pass already let go, or a
//! new file under the name, is left alone. The peer's `unlinkat` of that
//! name and inode succeeded, so nothing is stat'ed (this node's client may
//! still have the name in its entry cache for a second).
//!
//! Lock order: `pending` is a leaf lock (held for a push or a swap, never
//! across a syscall); `io` is taken with no other lock held and held only
//! across I/O on the journal files.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::Errno;
use parking_lot::Mutex;

use super::SharedTier;
use super::lease::LEASE_DIR;
use crate::fs::Core;
use crate::key::FileKey;
use crate::sys;

/// Directory of the journal files inside [`LEASE_DIR`].
pub const JOURNAL_DIR: &str = "evicted";
/// A node starts a new generation of its journal file past this many bytes
/// (about 10,000 removals of vLLM-style paths).
pub const ROTATE_BYTES: u64 = 1 << 20;
/// Journal files not written for this long belong to nodes that are gone;
/// the sweeper removes them.
pub const STALE_AFTER: Duration = Duration::from_secs(3600);
/// A background sweep evicts its excess in at most this many batches of
/// `excess / SWEEP_BATCHES` bytes (at least one victim each), re-reading the
/// peers' journals between them.
pub const SWEEP_BATCHES: u64 = 8;
/// Shortest time between two reads of the peers' journals outside a sweep
/// (the evictor's loop and inline eviction on a write).
pub const READ_GAP: Duration = Duration::from_millis(100);

/// This node's side of the journal. See the module docs.
#[derive(Default)]
pub struct Journal {
    /// Removals not yet published: (inode number, path relative to BACKING).
    pub(super) pending: Mutex<Vec<(u64, PathBuf)>>,
    /// The journal files' state (held across their I/O only).
    io: Mutex<Io>,
}

#[derive(Default)]
struct Io {
    /// This node's id (file name prefix), set on first use.
    id: String,
    /// This node's generation and its file's length.
    generation: u64,
    written: u64,
    /// The journal directory, opened on first use (dropped on an error).
    dir: Option<OwnedFd>,
    /// Per peer id: the generation and offset read up to.
    peers: HashMap<String, (u64, u64)>,
    last_read: Option<Instant>,
    last_clean: Option<Instant>,
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub(super) fn node_id() -> String {
    let host = if let Some(buf) = sys::hostname() {
        buf.iter().map(|&b| if b.is_ascii_alphanumeric() || b == b'-' { b as char } else { '_' }).collect()
    } else {
        "node".to_string()
    };
    // One mount per process in a daemon; several in the unit tests.
    static MOUNTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MOUNTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{host}-{}-{}-{n}", std::process::id(), unix_now())
}

/// `ID.GEN.log` → (ID, GEN).
fn parse_name(name: &[u8]) -> Option<(String, u64)> {
    let s = std::str::from_utf8(name).ok()?.strip_suffix(".log")?;
    let (id, generation) = s.rsplit_once('.')?;
    Some((id.to_string(), generation.parse().ok()?))
}

pub(super) fn escape(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in path.as_os_str().as_bytes() {
        match b {
            b'%' => out.extend_from_slice(b"%25"),
            b'\n' => out.extend_from_slice(b"%0A"),
            _ => out.push(b),
        }
    }
    out
}

pub(super) fn unescape(s: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match &s[i..] {
            [b'%', b'2', b'5', ..] => (out.push(b'%'), i += 3).1,
            [b'%', b'0', b'A', ..] => (out.push(b'\n'), i += 3).1,
            _ => (out.push(s[i]), i += 1).1,
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Parses complete lines of `buf` into (inode number, path); returns them and
/// the bytes consumed (a last line without its newline is left for later).
fn parse_lines(buf: &[u8]) -> (Vec<(u64, PathBuf)>, usize) {
    let mut out = Vec::new();
    let mut used = 0;
    while let Some(n) = buf[used..].iter().position(|&b| b == b'\n') {
        let line = &buf[used..used + n];
        used += n + 1;
        let Some(sp) = line.iter().position(|&b| b == b' ') else { continue };
        let Some(ino) = std::str::from_utf8(&line[..sp]).ok().and_then(|s| s.parse().ok()) else { continue };
        out.push((ino, unescape(&line[sp + 1..])));
    }
    (out, used)
}

impl Core {
    /// The journal directory's fd, opened (see [`Core::open_journal_dir`])
    /// on first use. Errors: the backing errno.
    fn journal_dir<'a>(&self, io: &'a mut Io) -> Result<std::os::fd::BorrowedFd<'a>, Errno> {
        if io.dir.is_none() {
            io.dir = Some(self.open_journal_dir()?);
        }
        io.dir.as_ref().map(AsFd::as_fd).ok_or(Errno::EIO)
    }

    /// Opens (creating it and its parents if needed) the journal directory
    /// beneath BACKING, never following a symlink. Errors: the backing errno.
    fn open_journal_dir(&self) -> Result<OwnedFd, Errno> {
        let root = self.root();
        for rel in [LEASE_DIR.to_string(), format!("{LEASE_DIR}/{JOURNAL_DIR}")] {
            let (parent, name) = rel.rsplit_once('/').map_or((Path::new(""), rel.as_str()), |(p, n)| (Path::new(p), n));
            let dir = sys::open_beneath(root.fd(), parent, libc::O_PATH | libc::O_DIRECTORY)?;
            let c = CString::new(name).map_err(|_| Errno::EINVAL)?;
            match sys::mkdirat(dir.as_fd(), &c, 0o755) {
                Ok(()) => {}
                Err(e) if e == Errno::EEXIST => {}
                Err(e) => return Err(e),
            }
        }
        let rel = Path::new(LEASE_DIR).join(JOURNAL_DIR);
        sys::open_beneath(root.fd(), &rel, libc::O_PATH | libc::O_DIRECTORY)
    }

    /// Appends the removals recorded since the last call to this node's
    /// journal file and closes it (which commits it on a distributed
    /// filesystem). A failure is warned about (once a minute) and the lines
    /// are dropped: peers then learn those removals at their reconcile pass.
    pub(crate) fn journal_publish(&self, tier: &SharedTier) {
        let mut io = tier.journal.io.lock();
        let lines = std::mem::take(&mut *tier.journal.pending.lock());
        if lines.is_empty() {
            return;
        }
        if let Err(e) = self.try_publish(&mut io, &lines) {
            io.dir = None;
            crate::warn_limited!(
                "shared tier: could not append {} removals to {LEASE_DIR}/{JOURNAL_DIR} in BACKING: {e:?}; \
                 other nodes see them at their next reconcile pass",
                lines.len()
            );
        }
    }

    fn try_publish(&self, io: &mut Io, lines: &[(u64, PathBuf)]) -> Result<(), Errno> {
        if io.id.is_empty() {
            io.id = node_id();
        }
        let mut buf = Vec::new();
        for (ino, path) in lines {
            buf.extend_from_slice(ino.to_string().as_bytes());
            buf.push(b' ');
            buf.extend_from_slice(&escape(path));
            buf.push(b'\n');
        }
        let (id, mut generation) = (io.id.clone(), io.generation);
        if io.written + buf.len() as u64 > ROTATE_BYTES {
            // Keep the previous generation for peers still reading it.
            if let Some(old) = generation.checked_sub(1) {
                let c = CString::new(format!("{id}.{old}.log")).map_err(|_| Errno::EINVAL)?;
                let _ = sys::unlinkat(self.journal_dir(io)?, &c, 0);
            }
            generation += 1;
            io.generation = generation;
            io.written = 0;
        }
        let c = CString::new(format!("{id}.{generation}.log")).map_err(|_| Errno::EINVAL)?;
        let fd = sys::openat(self.journal_dir(io)?, &c, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND, 0o644)?;
        // SAFETY: `fd` is open and the pointer and length describe `buf`.
        let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        io.written += n as u64;
        // close(2) is the commit on a distributed filesystem: report its error.
        let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
        // SAFETY: `raw` came from into_raw_fd, so it is closed exactly once, here.
        if unsafe { libc::close(raw) } != 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Reads what the peers appended to their journals since the last read
    /// and drops those blocks from the ledger (see the module docs). Without
    /// `force`, does nothing within [`READ_GAP`] of the last read. Returns
    /// the bytes that stopped counting. Shared mode only; errors are warned
    /// about once a minute and the reconcile pass covers what was missed.
    pub(crate) fn journal_apply(&self, tier: &SharedTier, force: bool) -> u64 {
        let lines = {
            let mut io = tier.journal.io.lock();
            if !force && io.last_read.is_some_and(|t| t.elapsed() < READ_GAP) {
                return 0;
            }
            io.last_read = Some(Instant::now());
            match self.read_peers(&mut io) {
                Ok(l) => l,
                Err(e) => {
                    io.dir = None;
                    crate::warn_limited!(
                        "shared tier: could not read other nodes' removals in {LEASE_DIR}/{JOURNAL_DIR}: {e:?}"
                    );
                    return 0;
                }
            }
        };
        let Ok(st) = sys::fstat(self.root().fd()) else { return 0 };
        let removed: Vec<(FileKey, PathBuf)> =
            lines.into_iter().map(|(ino, path)| (FileKey { dev: st.st_dev, ino }, path)).collect();
        let freed = self.accounts().drop_removed_elsewhere(&removed);
        if freed > 0 {
            log::debug!("shared tier: {freed} bytes other nodes evicted stop counting");
        }
        freed
    }

    fn read_peers(&self, io: &mut Io) -> Result<Vec<(u64, PathBuf)>, Errno> {
        if io.id.is_empty() {
            io.id = node_id();
        }
        let mut files: Vec<(String, u64, Vec<u8>)> = Vec::new();
        let list = sys::openat(self.journal_dir(io)?, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        loop {
            let batch = sys::getdents(list.as_raw_fd())?;
            if batch.is_empty() {
                break;
            }
            for e in batch {
                if let Some((id, generation)) = parse_name(&e.name)
                    && id != io.id
                {
                    files.push((id, generation, e.name));
                }
            }
        }
        files.sort();
        let clean = io.last_clean.is_none_or(|t| t.elapsed() >= STALE_AFTER / 60);
        if clean {
            io.last_clean = Some(Instant::now());
        }
        let mut out = Vec::new();
        for (id, generation, name) in files {
            let c = CString::new(name).map_err(|_| Errno::EINVAL)?;
            let (rgeneration, roff) = io.peers.get(&id).copied().unwrap_or((generation, 0));
            if generation < rgeneration {
                continue;
            }
            let from = if generation == rgeneration { roff } else { 0 };
            let Ok(fd) = sys::openat(self.journal_dir(io)?, &c, libc::O_RDONLY, 0) else { continue };
            // The size from the filesystem, not this client's attribute cache
            // (which may be a second old on JuiceFS).
            let (size, mtime) = sys::size_synced(fd.as_fd())?;
            if clean
                && self.shared.as_ref().is_some_and(|t| t.sweeping.load(std::sync::atomic::Ordering::Relaxed))
                && mtime + STALE_AFTER.as_secs() < unix_now()
            {
                let _ = sys::unlinkat(self.journal_dir(io)?, &c, 0);
                io.peers.remove(&id);
                continue;
            }
            // A file shorter than what was read was started again: read it all.
            let from = if size < from { 0 } else { from };
            let mut buf = vec![0u8; usize::try_from(size - from).map_err(|_| Errno::EFBIG)?];
            let n = sys::pread_full(fd.as_raw_fd(), &mut buf, from)?;
            let (lines, used) = parse_lines(&buf[..n]);
            out.extend(lines);
            io.peers.insert(id, (generation, from + used as u64));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;
    use crate::stats::Stats;
    use crate::testing::{ROOT, core, store};

    /// Node A, a shared core that stored x.bin, y.bin and z.bin (8 KiB
    /// each) in a fresh BACKING, and node B, a shared core over the same
    /// tree with a budget of `b_max` bytes, whose index counts all three.
    fn two_nodes_over_three_blocks(b_max: impl FnOnce(&Path) -> u64) -> (tempfile::TempDir, Core, Core) {
        let d = tempfile::tempdir().unwrap();
        let mut a = core(d.path(), 1 << 30);
        a.shared = Some(Default::default());
        for name in ["x.bin", "y.bin", "z.bin"] {
            store(&a, name, &[1u8; 8192]);
        }
        let mut b = core(d.path(), b_max(d.path()));
        b.shared = Some(Default::default());
        (d, a, b)
    }

    #[test]
    fn a_removal_another_node_published_stops_counting_once_and_only_for_that_file() {
        let (d, a, b) = two_nodes_over_three_blocks(|_| 1 << 30);
        let usage = || b.accounts().lock().usage();
        let before = usage();
        let (x, path) = a.accounts().lock().take_victim().unwrap();
        assert_eq!(path, Path::new("x.bin"));
        let freed = a.evict_victim(x, &path).unwrap().0;
        a.journal_publish(a.shared_tier().unwrap());
        assert_eq!(b.journal_apply(b.shared_tier().unwrap(), true), freed, "x.bin stops counting on node B at once");
        assert_eq!(usage(), before - freed);
        assert!(b.accounts().lock().get(&x).is_none());
        assert_eq!(b.journal_apply(b.shared_tier().unwrap(), true), 0, "a line is applied once");
        // A line whose path is not the entry's (a new file under a reused
        // inode number), or naming a file open on B, changes nothing.
        let y = a.lookup(ROOT, OsStr::new("y.bin")).unwrap();
        let z = b.lookup(ROOT, OsStr::new("z.bin")).unwrap();
        let fh = b.open(z.ino, libc::O_RDONLY).unwrap().fh;
        let ino_of = |n: &str| std::fs::metadata(d.path().join(n)).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        a.shared_tier().unwrap().journal_record(ino_of("y.bin").unwrap(), Path::new("elsewhere/y.bin"));
        a.shared_tier().unwrap().journal_record(ino_of("z.bin").unwrap(), Path::new("z.bin"));
        a.journal_publish(a.shared_tier().unwrap());
        assert_eq!(b.journal_apply(b.shared_tier().unwrap(), true), 0);
        assert_eq!(usage(), before - freed);
        b.release(fh);
        let _ = y;
    }

    #[test]
    fn an_inline_eviction_first_reads_a_sweep_published_just_after_the_last_read() {
        // Node A (the sweeper) and node B count the same three blocks; B's
        // LRU differs (it just read x.bin), and B is full.
        let (d, a, b) = two_nodes_over_three_blocks(|p| core(p, 1 << 30).accounts().lock().usage());
        let x = b.lookup(ROOT, OsStr::new("x.bin")).unwrap();
        let fh = b.open(x.ino, libc::O_RDONLY).unwrap().fh;
        b.release(fh);
        // B's evictor loop reads the journals (nothing new); within READ_GAP
        // A sweeps x.bin and publishes it.
        assert_eq!(b.journal_apply(b.shared_tier().unwrap(), false), 0);
        let (victim, path) = a.accounts().lock().take_victim().unwrap();
        assert_eq!(path, Path::new("x.bin"));
        a.evict_victim(victim, &path).unwrap();
        a.journal_publish(a.shared_tier().unwrap());
        // B's write needs one block: x.bin's room is free already, so B
        // evicts nothing (it used to evict y.bin, its own coldest).
        let r = b.reserve(8192, true).unwrap();
        assert_eq!(Stats::get(&b.stats().evictions), 0, "B evicted for room A had freed");
        assert!(d.path().join("y.bin").exists() && d.path().join("z.bin").exists());
        drop(r);
    }

    #[test]
    fn without_shared_nothing_is_written_or_read() {
        let d = tempfile::tempdir().unwrap();
        let a = core(d.path(), 1 << 30);
        store(&a, "x.bin", &[1u8; 8192]);
        let (x, path) = a.accounts().lock().take_victim().unwrap();
        a.evict_victim(x, &path).unwrap();
        assert!(a.shared_tier().is_none(), "a local mount has no shared tier to enter");
        assert!(!d.path().join(LEASE_DIR).exists(), "a single-node mount leaves no journal in BACKING");
    }

    #[test]
    fn lines_round_trip_with_escapes_and_keep_a_partial_last_line() {
        let p = PathBuf::from("a b/100%\nx.bin");
        let mut buf = b"42 ".to_vec();
        buf.extend_from_slice(&escape(&p));
        buf.extend_from_slice(b"\n7 c/d.bin\n9 part");
        let (lines, used) = parse_lines(&buf);
        assert_eq!(lines, vec![(42, p), (7, PathBuf::from("c/d.bin"))]);
        assert_eq!(&buf[used..], b"9 part");
    }

    #[test]
    fn names_carry_the_node_and_generation() {
        assert_eq!(parse_name(b"host-1-2.3.log"), Some(("host-1-2".to_string(), 3)));
        assert_eq!(parse_name(b"h.x.log"), None);
        assert_eq!(parse_name(b"h.1.tmp"), None);
    }
}
