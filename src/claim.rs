//! One mount per backing directory on a machine.
//!
//! Two daemons over one BACKING each protect only their own open handles and
//! serialise only their own renames: one evicts what the other's readers
//! hold open. So a mount is refused when a live boundfs already serves the
//! same BACKING, a directory inside it, or one above it. Two checks, made
//! before the daemon detaches:
//!
//! 1. **flock(2)** `LOCK_EX | LOCK_NB` on an fd of BACKING itself, held by
//!    the daemon for its whole life ([`BackingClaim`]). The kernel drops it
//!    when the daemon dies, however it dies, so a crash never leaves a stale
//!    claim; it also sees daemons in other mount namespaces (containers).
//! 2. **/proc/self/mountinfo**: every `fuse.boundfs` mount's source is its
//!    BACKING (canonical); one whose source is an ancestor or a descendant of
//!    this BACKING, and whose daemon still answers statfs (a dead one gives
//!    ENOTCONN), refuses the mount. This catches nesting, which a lock on one
//!    directory cannot.
//!
//! A future shared-backing mode (N mounts over one BACKING on different
//! nodes of a distributed filesystem) skips [`claim`] altogether; note that a
//! flock on such a filesystem may be cluster-wide.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::exit::{Exit, Failure};

/// The held claim on a BACKING: an fd with an exclusive flock on it. Keep it
/// alive for as long as the daemon serves (dropping it releases the claim).
/// The fd number is at least 3, so redirecting stdin/stdout/stderr never
/// closes it.
#[derive(Debug)]
pub struct BackingClaim {
    _fd: OwnedFd,
}

/// Claims `backing` (canonical) for this process: refuses (one line, says
/// what to do) when a live boundfs serves it, a directory inside it or one
/// above it. Errors: [`Exit::InUse`] when the claim is held elsewhere (flock
/// EWOULDBLOCK) or by a live nested mount; [`Exit::Runtime`] when BACKING
/// cannot be opened or locked.
pub fn claim(backing: &Path) -> Result<BackingClaim, Failure> {
    let mounts = boundfs_mounts();
    for (source, point) in &mounts {
        let src = Path::new(source);
        let nested = if src == backing {
            None
        } else if backing.starts_with(src) {
            Some("inside the backing directory")
        } else if src.starts_with(backing) {
            Some("above the backing directory")
        } else {
            continue;
        };
        if !alive(point) {
            continue;
        }
        let msg = match nested {
            None => format!(
                "backing directory {} is already served by the boundfs mounted at {}; one mount per backing \
                 directory: use that mount, or unmount it first (umount {})",
                backing.display(),
                point.display(),
                shell_word(point)
            ),
            Some(rel) => format!(
                "backing directory {} is {rel} {source} that the boundfs mounted at {} serves; one mount per \
                 backing tree: use that mount, or unmount it first (umount {})",
                backing.display(),
                point.display(),
                shell_word(point)
            ),
        };
        return Err(Failure::new(Exit::InUse, msg));
    }
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(backing.as_os_str()))
        .map_err(|_| Failure::new(Exit::BadInput, "backing directory: path contains a NUL byte"))?;
    let fd = crate::sys::open(&c, libc::O_RDONLY | libc::O_DIRECTORY)
        .map_err(|e| Failure::new(Exit::Runtime, format!("cannot open {}: {e}", backing.display())))?;
    // At least 3: a daemon redirects 0-2 to /dev/null, which must not close the claim.
    let fd = if fd.as_raw_fd() < 3 {
        // SAFETY: F_DUPFD_CLOEXEC on a valid fd owned here; the result is checked below.
        let d = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
        if d < 0 {
            let e = std::io::Error::last_os_error();
            return Err(Failure::new(Exit::Runtime, format!("cannot claim {}: {e}", backing.display())));
        }
        // SAFETY: fcntl returned a new fd (checked >= 0) that nothing else owns.
        unsafe { OwnedFd::from_raw_fd(d) }
    } else {
        fd
    };
    if let Err(e) = lock_claim(fd.as_fd(), mounts.iter().any(|(s, _)| Path::new(s) == backing)) {
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let at = mounts.iter().find(|(s, _)| Path::new(s) == backing).map_or(
                "elsewhere (in another mount namespace, or detached lazily and serving files still open on it)"
                    .to_string(),
                |(_, p)| format!("at {}", p.display()),
            );
            let fix = match flock_holder(fd.as_raw_fd()) {
                Some(pid) => format!(
                    "its daemon is pid {pid}: unmount it, or stop it (kill -TERM {pid}; it exits after the last \
                     close of its open files)"
                ),
                None => "unmount that one first".to_string(),
            };
            let msg = format!(
                "backing directory {} is already served by a live boundfs mounted {at}; one mount per backing \
                 directory: {fix}",
                backing.display()
            );
            return Err(Failure::new(Exit::InUse, msg));
        }
        return Err(Failure::new(Exit::Runtime, format!("cannot claim {} (flock): {e}", backing.display())));
    }
    Ok(BackingClaim { _fd: fd })
}

/// A warning when `backing` (canonical) lies on a live boundfs mount: two
/// budgets then cover one tree, each evicting blocks the other counts
/// (found by a fresh-user check). Not refused: a boundfs stacked on another
/// is how tests watch the requests a mount sends its BACKING.
pub fn on_boundfs(backing: &Path) -> Option<String> {
    let mounts = boundfs_mounts();
    let (source, point) = mounts.iter().find(|(_, p)| backing.starts_with(p) && alive(p))?;
    let inner = match backing.strip_prefix(point) {
        Ok(rel) if !rel.as_os_str().is_empty() => Path::new(source).join(rel),
        _ => PathBuf::from(source),
    };
    Some(format!(
        "backing directory {} is on the boundfs mounted at {}: a budget inside a budget, each evicting what \
         the other counts; give its own backing path {} instead, unless stacking is what you want",
        backing.display(),
        point.display(),
        inner.display()
    ))
}

/// The PID holding the `flock` on the directory `fd` refers to, from
/// /proc/locks (`N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE ...`, device
/// numbers in hex, as fs/locks.c prints them); None if not found (another
/// PID namespace shows 0 or nothing) or unreadable.
fn flock_holder(fd: std::os::fd::RawFd) -> Option<u32> {
    // SAFETY: stat is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is the caller's open fd and `st` a writable stat alive for the call.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    let want = format!("{:02x}:{:02x}:{}", libc::major(st.st_dev), libc::minor(st.st_dev), st.st_ino);
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (kind, pid, file) = (f.get(1)?, f.get(4)?, f.get(5)?);
        (*kind == "FLOCK" && *file == want).then(|| pid.parse().ok()).flatten().filter(|&p| p > 0)
    })
}

/// How long a claim waits for a daemon that holds BACKING's flock with no
/// mount of BACKING in sight: `umount` returns before the daemon has exited
/// (it joins its worker threads first), so a remount right after an
/// unmount would otherwise be refused.
const EXITING_DAEMON_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Takes the claim's `LOCK_EX` on `fd` without blocking; when another
/// daemon holds it and `mounted` is false (no mount of BACKING in this
/// mount namespace: it may be exiting), tries again every 20 ms for at most
/// [`EXITING_DAEMON_WAIT`]. Errors: flock(2)'s, EWOULDBLOCK if still held.
fn lock_claim(fd: std::os::fd::BorrowedFd<'_>, mounted: bool) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + EXITING_DAEMON_WAIT;
    loop {
        if crate::sys::flock(fd, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) || mounted || std::time::Instant::now() >= deadline {
            return Err(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Whether the daemon behind the mount at `point` still answers (statfs
/// reaches the daemon; a dead one gives ENOTCONN).
fn alive(point: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(point.as_os_str())) else {
        return false;
    };
    let ok = crate::sys::statvfs(&c).is_ok();
    ok || std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOTCONN)
}

/// `(source, mount point)` of every `fuse.boundfs` mount in
/// /proc/self/mountinfo.
pub fn boundfs_mounts() -> Vec<(String, PathBuf)> {
    mounts().into_iter().filter(|m| m.fstype == "fuse.boundfs").map(|m| (m.source, m.point)).collect()
}

/// The `fuse.boundfs` mount at `point` in /proc/self/mountinfo (the
/// last, the one on top, when several are stacked there).
pub fn boundfs_mount_at(point: &Path) -> Option<MountEntry> {
    mounts().into_iter().rev().find(|m| m.point == point && m.fstype == "fuse.boundfs")
}

/// One line of /proc/self/mountinfo.
#[derive(Debug, Clone)]
pub struct MountEntry {
    /// The mount point (unescaped).
    pub point: PathBuf,
    /// The filesystem type (`ext4`, `fuse.boundfs` …).
    pub fstype: String,
    /// The source (for boundfs: BACKING, canonical), unescaped.
    pub source: String,
    /// The device of the mount's filesystem, `(major, minor)`: for a FUSE
    /// mount `(0, N)`, N naming its connection in /sys/fs/fuse/connections.
    pub dev: (u32, u32),
}

/// Every mount in /proc/self/mountinfo, in its order (proc(5): field 3 is
/// the device major:minor, field 5 the mount point with octal escapes;
/// fstype and source follow " - ").
/// Empty if it cannot be read.
pub fn mounts() -> Vec<MountEntry> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
    info.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut l = left.split(' ');
            let (major, minor) = l.nth(2)?.split_once(':')?;
            let dev = (major.parse().ok()?, minor.parse().ok()?);
            let point = PathBuf::from(unescape(l.nth(1)?));
            let mut r = right.split(' ');
            let (fstype, source) = (r.next()?.to_string(), unescape(r.next()?));
            Some(MountEntry { point, fstype, source, dev })
        })
        .collect()
}

/// The filesystem type of the mount that holds `path` (canonical): the
/// last-mounted entry with the longest mount point above it. Asks no
/// filesystem anything (a stat or statfs could wait on a stopped FUSE daemon).
pub fn fstype_of(path: &Path) -> Option<String> {
    let all = mounts();
    let best = all.iter().filter(|m| path.starts_with(&m.point)).map(|m| m.point.as_os_str().len()).max()?;
    all.into_iter().rev().find(|m| path.starts_with(&m.point) && m.point.as_os_str().len() == best).map(|m| m.fstype)
}

/// Undoes mountinfo's octal escapes of space, tab, newline and backslash.
pub fn unescape(f: &str) -> String {
    f.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// `p` as one shell word, for the commands error messages suggest
/// (`umount PATH`): as is when it holds only letters, digits and `_./,:@+=-`,
/// else in single quotes (a `'` inside written `'\''`), so a copied
/// command works on a mountpoint with a space in its name.
pub fn shell_word(p: &Path) -> String {
    let s = p.to_string_lossy();
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_./,:@+=-".contains(c)) {
        return s.into_owned();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_on_one_backing_is_refused_and_freed_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let first = claim(d.path()).unwrap();
        let e = claim(d.path()).unwrap_err();
        assert!(e.msg.contains("already served by a live boundfs"), "{}", e.msg);
        assert_eq!(e.exit, Exit::InUse);
        drop(first);
        assert!(claim(d.path()).is_ok());
    }

    #[test]
    fn shell_words_quote_what_the_shell_would_split() {
        assert_eq!(shell_word(Path::new("/mnt/kv-1")), "/mnt/kv-1");
        assert_eq!(shell_word(Path::new("/mnt/k v")), "'/mnt/k v'");
        assert_eq!(shell_word(Path::new("/mnt/it's")), "'/mnt/it'\\''s'");
    }

    #[test]
    fn a_mounts_device_is_its_st_dev() {
        use std::os::unix::fs::MetadataExt;
        let proc_ = mounts().into_iter().rev().find(|m| m.point == Path::new("/proc")).expect("/proc is mounted");
        let dev = std::fs::metadata("/proc").unwrap().dev();
        assert_eq!(proc_.dev, (libc::major(dev), libc::minor(dev)));
    }

    #[test]
    fn unescape_mountinfo_fields() {
        assert_eq!(unescape("/a\\040b\\134c"), "/a b\\c");
    }
}
