//! What a node leaves in the shared budget when it unmounts (`-o shared`,
//! `shared_budget=record`; the record is [`super::grants`]).
//!
//! A node that leaves moves its net into the record's drift: its objects
//! stay in the tree, and no node counts them any more. A node that removes
//! one later takes its bytes off the drift (see [`super::grants`],
//! "Removals across nodes"), so the drift comes down as they are evicted;
//! until then the budget the live nodes share is smaller by what the left
//! node held, and no node can evict those blocks for its own grant.
//!
//! So the leaving node also lists its objects, one line each
//! (`INO BYTES PATH\n`, PATH relative to BACKING and escaped as in the
//! removal journal) in `BACKING/.boundfs/orphans/ID` (written to a
//! temporary name and renamed, so a reader sees all of it or nothing). The
//! sweeper, at its beat, claims each such file by renaming it to a name of
//! its own (one sweeper wins a claim even while two overlap in a takeover),
//! and for each line:
//! - an object its ledger knows at that path becomes its own (its bytes
//!   join its net, and its evictions free its grant);
//! - an object gone from the path (or replaced by another inode) was taken
//!   off the drift by the node that removed it, or was removed behind the
//!   mounts and stays in the drift (on the safe side);
//! - an object there that its ledger does not know yet (a node that stored
//!   and unmounted within one reconcile pass) is tried again after each of
//!   the sweeper's next [`PENDING_PASSES`] reconcile passes, which learn it;
//!   what is still unknown then stays in the drift until a node removes it.
//!
//! The bytes of the adopted objects come off the drift and into the
//! sweeper's grant (a line is never written below what its node holds) in
//! the beat's transaction, after the adoption, so the tree is never counted
//! short, nor those bytes offered again from the pool. A
//! node that dies (SIGKILL, a crash) writes no list: its line is reclaimed
//! into the drift (see [`super::grants`], "Dead nodes"), and its objects
//! leave the drift as nodes remove them.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use fuser::Errno;

use super::journal::{escape, unescape};
use crate::fs::Core;
use crate::key::{FileKey, key_of};
use crate::stats::Stats;
use crate::sys;

/// Directory of the leaving nodes' lists inside the lease directory.
pub const ORPHANS_DIR: &str = "orphans";

/// Reconcile passes after which the sweeper stops trying to adopt a left
/// node's objects its ledger did not know when it claimed the list.
pub const PENDING_PASSES: u32 = 3;

/// A left node's objects the sweeper claimed but did not know yet, kept in
/// its memory (lost with it: they then stay in the drift, on the safe side).
#[derive(Default)]
pub(super) struct Pending {
    /// `(inode number, bytes, path)`, as listed.
    lines: Vec<(u64, u64, PathBuf)>,
    /// The node's reconcile count at the last try.
    at_pass: u64,
    /// Tries left, one per reconcile pass.
    passes_left: u32,
}

/// Renders a list of objects, `(inode number, bytes, path)`, one line each.
fn render(objects: &[(u64, u64, PathBuf)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (ino, bytes, path) in objects {
        out.extend_from_slice(format!("{ino} {bytes} ").as_bytes());
        out.extend_from_slice(&escape(path));
        out.push(b'\n');
    }
    out
}

/// Parses the lines [`render`] wrote; a torn or malformed line is skipped.
fn parse(buf: &[u8]) -> Vec<(u64, u64, PathBuf)> {
    let mut out = Vec::new();
    for line in buf.split(|&b| b == b'\n') {
        let mut f = line.splitn(3, |&b| b == b' ');
        let num = |x: Option<&[u8]>| std::str::from_utf8(x?).ok()?.parse::<u64>().ok();
        if let (Some(ino), Some(bytes), Some(path)) = (num(f.next()), num(f.next()), f.next())
            && !path.is_empty()
        {
            out.push((ino, bytes, unescape(path)));
        }
    }
    out
}

/// Opens (with `create`, making it) the orphans directory in the lease
/// directory `lease`. Errors: the backing errno (ENOENT without `create`
/// when there is none).
fn orphans_dir_in(lease: BorrowedFd<'_>, create: bool) -> Result<OwnedFd, Errno> {
    let name = CString::new(ORPHANS_DIR).map_err(|_| Errno::EINVAL)?;
    if create {
        match sys::mkdirat(lease, &name, 0o755) {
            Ok(()) => {}
            Err(e) if e == Errno::EEXIST => {}
            Err(e) => return Err(e),
        }
    }
    sys::openat(lease, &name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)
}

impl Core {
    /// Opens (with `create`, making it) the orphans directory beneath BACKING.
    /// Errors: the backing errno (ENOENT without `create` when there is none).
    fn orphans_dir(&self, create: bool) -> Result<OwnedFd, Errno> {
        orphans_dir_in(super::lease::lease_dir(self)?.as_fd(), create)
    }

    /// Unmount, after this node's line left the record and its net went to
    /// the drift: lists `objects` (`(key, bytes, path)`) under `id` for the
    /// sweeper to adopt. Errors: the backing errno (the bytes then stay in
    /// the drift).
    pub(super) fn orphans_leave(&self, id: &str, objects: &[(FileKey, u64, PathBuf)]) -> Result<(), Errno> {
        if objects.is_empty() {
            return Ok(());
        }
        let lines: Vec<(u64, u64, PathBuf)> = objects.iter().map(|(k, b, p)| (k.ino, *b, p.clone())).collect();
        let text = render(&lines);
        let dir = self.orphans_dir(true)?;
        let tmp = CString::new(format!(".{id}.tmp")).map_err(|_| Errno::EINVAL)?;
        let fd = sys::openat(
            dir.as_fd(),
            &tmp,
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644,
        )?;
        sys::pwrite_full(fd.as_raw_fd(), &text, 0)?;
        sys::fsync(fd.as_raw_fd(), true)?;
        drop(fd);
        let name = CString::new(id).map_err(|_| Errno::EINVAL)?;
        sys::renameat2(dir.as_fd(), &tmp, dir.as_fd(), &name, 0)
    }

    /// The sweeper's beat, in the lease directory `lease`: claims every
    /// list of a node that left, adopts what it can (see the module docs)
    /// and removes the list. Returns the
    /// bytes to take off the drift. Errors are logged; what was not read
    /// stays in the drift.
    pub(super) fn orphans_adopt(&self, lease: BorrowedFd<'_>, me: &str, pending: &mut Pending) -> i64 {
        let mut off_drift = self.adopt_pending(pending);
        let dir = match orphans_dir_in(lease, false) {
            Ok(d) => d,
            Err(e) if e == Errno::ENOENT => return off_drift,
            Err(e) => {
                crate::warn_limited!("shared tier: could not open {ORPHANS_DIR} in the lease directory: {e:?}");
                return off_drift;
            }
        };
        let names = match sys::getdents(dir.as_raw_fd()) {
            Ok(n) => n,
            Err(e) => {
                crate::warn_limited!("shared tier: could not list {ORPHANS_DIR}: {e:?}");
                return off_drift;
            }
        };
        for ent in names.iter().filter(|e| !e.name.starts_with(b".")) {
            let (Ok(name), Ok(claimed)) = (
                CString::new(ent.name.clone()),
                CString::new([b".".as_slice(), &ent.name, b".taken-by-", me.as_bytes()].concat()),
            ) else {
                continue;
            };
            // RENAME_NOREPLACE: one claimant wins; the others see ENOENT.
            if sys::renameat2(dir.as_fd(), &name, dir.as_fd(), &claimed, libc::RENAME_NOREPLACE).is_err() {
                continue;
            }
            match self.read_claimed(&dir, &claimed) {
                Ok(lines) => {
                    let (adopted, unknown) = self.adopt_lines(&lines);
                    off_drift += adopted;
                    if !unknown.is_empty() {
                        pending.lines.extend(unknown);
                        pending.at_pass = Stats::get(&self.stats().reconciles);
                        pending.passes_left = PENDING_PASSES;
                    }
                }
                Err(e) => {
                    crate::warn_limited!("shared tier: could not read a left node's list in {ORPHANS_DIR}: {e:?}")
                }
            }
            let _ = sys::unlinkat(dir.as_fd(), &claimed, 0);
        }
        off_drift
    }

    /// The record was booked afresh: removes the lists left for the one
    /// before (the booking counted their objects as the tree it found).
    pub(super) fn orphans_clear(&self) {
        let Ok(dir) = self.orphans_dir(false) else { return };
        for ent in sys::getdents(dir.as_raw_fd()).unwrap_or_default() {
            if let Ok(name) = CString::new(ent.name.clone())
                && ent.name != b"."
                && ent.name != b".."
            {
                let _ = sys::unlinkat(dir.as_fd(), &name, 0);
            }
        }
    }

    fn read_claimed(&self, dir: &OwnedFd, name: &CString) -> Result<Vec<(u64, u64, PathBuf)>, Errno> {
        let fd = sys::openat(dir.as_fd(), name, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0)?;
        let (size, _) = sys::size_synced(fd.as_fd())?;
        let mut buf = vec![0u8; usize::try_from(size).map_err(|_| Errno::EFBIG)?];
        let n = sys::pread_full(fd.as_raw_fd(), &mut buf, 0)?;
        Ok(parse(&buf[..n]))
    }

    /// Tries `pending` again once a reconcile pass has run since the last
    /// try; returns the bytes adopted.
    fn adopt_pending(&self, pending: &mut Pending) -> i64 {
        let pass = Stats::get(&self.stats().reconciles);
        if pending.lines.is_empty() || pass == pending.at_pass {
            return 0;
        }
        let (adopted, unknown) = self.adopt_lines(&std::mem::take(&mut pending.lines));
        pending.at_pass = pass;
        pending.passes_left = pending.passes_left.saturating_sub(1);
        if pending.passes_left > 0 {
            pending.lines = unknown;
        } else if !unknown.is_empty() {
            log::info!(
                "shared tier: {} objects of nodes that left are still not known here after {PENDING_PASSES} \
                 reconcile passes; their bytes leave the drift when a node removes them",
                unknown.len()
            );
        }
        adopted
    }

    /// Adopts `lines` (see the module docs); returns the bytes listed of
    /// those adopted, and the lines of objects still at their path that the
    /// ledger does not know yet.
    fn adopt_lines(&self, lines: &[(u64, u64, PathBuf)]) -> (i64, Vec<(u64, u64, PathBuf)>) {
        let Ok(root) = sys::fstat(self.root().fd()) else { return (0, Vec::new()) };
        let (mut adopted, mut gone, mut unknown) = (0i64, 0i64, Vec::new());
        for (ino, bytes, path) in lines {
            let key = FileKey { dev: root.st_dev, ino: *ino };
            if self.accounts().adopt_local(key, path) {
                adopted += *bytes as i64;
            } else if self.gone_from(key, path) {
                gone += *bytes as i64;
            } else {
                unknown.push((*ino, *bytes, path.clone()));
            }
        }
        let kept: u64 = unknown.iter().map(|l| l.1).sum();
        log::info!(
            "shared tier: a node that left had {} objects: {adopted} bytes adopted here, {gone} bytes gone, \
             {kept} bytes not known here yet (tried again after the next reconcile passes)",
            lines.len()
        );
        (adopted, unknown)
    }

    /// Whether the object `key` is no longer at `path` beneath BACKING.
    fn gone_from(&self, key: FileKey, path: &Path) -> bool {
        let (parent, name) = match (path.parent(), path.file_name()) {
            (Some(p), Some(n)) => (p, n),
            _ => return false,
        };
        let Ok(c) = CString::new(name.as_bytes()) else { return false };
        let dir = match sys::open_beneath(self.root().fd(), parent, libc::O_PATH | libc::O_DIRECTORY) {
            Ok(d) => d,
            Err(e) => return e == Errno::ENOENT || e == Errno::ENOTDIR,
        };
        match sys::fstatat(dir.as_fd(), &c) {
            Ok(st) => key_of(&st) != key,
            Err(e) => e == Errno::ENOENT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, render};
    use std::path::PathBuf;

    #[test]
    fn a_list_reads_back_and_a_torn_line_is_skipped() {
        let l = vec![(7, 4096, PathBuf::from("a b/c%d\ne.bin")), (8, 2 << 20, PathBuf::from("x.bin"))];
        let text = render(&l);
        assert_eq!(parse(&text), l);
        let torn = [text.as_slice(), b"9 12"].concat();
        assert_eq!(parse(&torn), l);
    }
}
