//! What eviction can't remove, said rather than hidden.
//!
//! - **Non-block usage above the high watermark** (a 195 MiB log in a 200M
//!   mount, the engine's files under the wrong `pattern`): the low watermark
//!   can't be reached by evicting blocks, so the background evictor evicts
//!   only what `max_size` itself needs (every new block would otherwise be
//!   evicted right after its store); writes that cross `max_size` still evict
//!   inline or fail with ENOSPC. It warns once per episode (log, status
//!   `nonblock_warning`, metric `boundfs_nonblock_over_high_watermark`) with
//!   the biggest non-block files and the `pattern` in force.
//! - **Files written that match no pattern**: regular files created or
//!   renamed into place through the mount (engine temporaries, see
//!   `crate::workers::reconcile::TMP_PATTERNS`, left out) are counted; once at least
//!   [`HINT_MIN_FILES`] were and most of them match no pattern, status
//!   (`pattern_warning`) and the log (once) say so, with an example name and
//!   the option to set.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::fs::Core;
use crate::sys;

/// Files written since mount before the pattern hint may appear.
pub const HINT_MIN_FILES: u64 = 10;

/// How often the evictor may recount non-block bytes (an O(index) scan)
/// while usage stays above the high watermark.
pub const RECOUNT_EVERY: Duration = Duration::from_secs(2);

/// How often, at most, the warning's list of the biggest non-block files is
/// refreshed by a walk of BACKING while the episode lasts (its amounts are
/// refreshed at every recount, [`RECOUNT_EVERY`]).
pub const REWALK_EVERY: Duration = Duration::from_secs(30);

/// How many of the biggest non-block files the warning names.
const BIGGEST: usize = 3;

/// The state behind both warnings (one per mount, in `Core`).
#[derive(Default)]
pub struct Unevictable {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The `pattern` option in force, for messages.
    patterns: Vec<String>,
    /// Non-block bytes at the last count, and when it was made.
    nonblock: u64,
    counted: Option<Instant>,
    /// The warning of the episode in progress (empty: none), and the high
    /// watermark (bytes) it names: `boundfs set` changes it, and the warning.
    nonblock_warning: String,
    warned_high: u64,
    /// What the last walk found (the biggest files, the directories), named
    /// in the warning, and when it was made: refreshed with the amount.
    walked: Option<(String, Instant)>,
    /// Regular files written since mount, and those matching no pattern.
    written: u64,
    unmatched: u64,
    example: Option<OsString>,
    hinted: bool,
}

impl Unevictable {
    /// Sets the `pattern` list named in the messages.
    pub fn set_patterns(&self, patterns: &[String]) {
        self.state.lock().patterns = patterns.to_vec();
    }

    fn patterns(s: &State) -> String {
        if s.patterns.is_empty() { "*.bin".to_string() } else { s.patterns.join(",") }
    }

    /// Whether non-block usage alone is above the high watermark, so the
    /// background evictor must evict only what `max_size` needs. Cheap unless
    /// usage not evictable now (non-block, open or linked twice) is above the
    /// high watermark; then non-block bytes are recounted (O(index), at most
    /// every [`RECOUNT_EVERY`]). Logs a warning once per episode, and again
    /// when the high watermark changes (`boundfs set`); the status warning
    /// carries the live amount (as of the last recount).
    pub fn over_high(&self, core: &Core) -> bool {
        let high = core.policy().high_bytes();
        let unevictable = core.accounts().unevictable_bytes();
        let due = self.state.lock().counted.is_none_or(|t| t.elapsed() >= RECOUNT_EVERY);
        if unevictable > high && due {
            let n = core.accounts().nonblock_bytes();
            let mut s = self.state.lock();
            s.nonblock = n;
            s.counted = Some(Instant::now());
        }
        let nonblock = self.state.lock().nonblock;
        if unevictable <= high || nonblock <= high {
            self.state.lock().nonblock_warning.clear();
            return false;
        }
        let (new_episode, walk_due) = {
            let s = self.state.lock();
            let new = s.nonblock_warning.is_empty() || s.warned_high != high;
            (new, new || s.walked.as_ref().is_none_or(|(_, t)| t.elapsed() >= REWALK_EVERY))
        };
        // The biggest files come from a walk of BACKING: made when the
        // episode starts or the high watermark changes, then at most every
        // REWALK_EVERY; the amounts are the live ones at every recount.
        if walk_due {
            let found = biggest_nonblock(core, BIGGEST);
            let names: Vec<String> =
                found.biggest.iter().map(|(p, n)| format!("{} ({})", p.display(), crate::status::bytes(*n))).collect();
            let what = format!(
                "{}{}",
                if names.is_empty() { "none".to_string() } else { names.join(", ") },
                match found.dirs {
                    0 => String::new(),
                    n => format!("; {n} directories take {}", crate::status::bytes(found.dir_bytes)),
                },
            );
            self.state.lock().walked = Some((what, Instant::now()));
        }
        let mut s = self.state.lock();
        let what = s.walked.as_ref().map_or("none", |(w, _)| w.as_str());
        let msg = format!(
            "{} of files that match no pattern ({}) and directories is above the high watermark ({}): \
             eviction frees only what max_size needs; biggest files: {what}. Remove them, raise max_size, or \
             add their pattern (-o pattern=...)",
            crate::status::bytes(nonblock),
            Self::patterns(&s),
            crate::status::bytes(high),
        );
        if new_episode {
            // Logged once per episode (and per high watermark), not at every recount.
            log::warn!("{msg}");
        }
        s.nonblock_warning = msg;
        s.warned_high = high;
        true
    }

    /// Usage is below the high watermark: the episode, if any, is over.
    pub fn clear(&self) {
        self.state.lock().nonblock_warning.clear();
    }

    /// Non-block bytes at the last count (0 before one was needed).
    pub fn nonblock_bytes(&self) -> u64 {
        self.state.lock().nonblock
    }

    /// The warning while non-block usage is above the high watermark, else "".
    pub fn nonblock_warning(&self) -> String {
        self.state.lock().nonblock_warning.clone()
    }

    /// A regular file named `name` was written through the mount (created,
    /// or renamed into place); `block`: it matches `pattern`. Temporaries
    /// (`tmp`: named like an engine temporary) are not counted.
    pub fn written(&self, name: &OsStr, block: bool, tmp: bool) {
        if tmp || is_tmp_name(name) {
            return;
        }
        let msg = {
            let mut s = self.state.lock();
            s.written += 1;
            if !block {
                s.unmatched += 1;
                s.example = Some(name.to_os_string());
            }
            let m = Self::hint(&s);
            if m.is_empty() || s.hinted {
                return;
            }
            s.hinted = true;
            m
        };
        log::warn!("{msg}");
    }

    /// The pattern hint now, or "" when most files written match a pattern.
    pub fn pattern_warning(&self) -> String {
        Self::hint(&self.state.lock())
    }

    fn hint(s: &State) -> String {
        let Some(ex) = s.example.as_deref().filter(|_| s.written >= HINT_MIN_FILES && 2 * s.unmatched > s.written)
        else {
            return String::new();
        };
        let glob = match Path::new(ex).extension() {
            Some(e) => format!("*.{}", e.to_string_lossy()),
            None => "*".to_string(),
        };
        format!(
            "{} of {} files created since mount match no pattern ({}), e.g. {}: set -o pattern={glob}",
            s.unmatched,
            s.written,
            Self::patterns(s),
            ex.to_string_lossy(),
        )
    }
}

/// Whether `name` looks like an engine temporary: `crate::workers::reconcile::TMP_PATTERNS`
/// (`*.tmp`, `*.tmp.*`) without a glob matcher.
pub fn is_tmp_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    b.ends_with(b".tmp") || b.windows(5).any(|w| w == b".tmp.")
}

/// What takes the non-block part of usage, from one walk of BACKING.
#[derive(Debug, Default)]
pub struct NonBlock {
    /// The biggest regular files that match no pattern, by allocated bytes,
    /// biggest first (paths relative to BACKING).
    pub biggest: Vec<(PathBuf, u64)>,
    /// Directories beneath BACKING (BACKING itself left out).
    pub dirs: u64,
    /// Their allocated bytes (a many-level hash tree of small blocks can
    /// hold more in directories than in files).
    pub dir_bytes: u64,
}

/// The `n` biggest regular files of BACKING that match no pattern and the
/// directories' count and bytes. Walks the whole tree through directory fds,
/// beneath BACKING, never following a symlink.
pub fn biggest_nonblock(core: &Core, n: usize) -> NonBlock {
    let mut out = NonBlock::default();
    let top = &mut out.biggest;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(dir) = sys::open_beneath(core.root().fd(), &rel, libc::O_RDONLY | libc::O_DIRECTORY) else { continue };
        while let Ok(batch) = sys::getdents(dir.as_raw_fd()) {
            if batch.is_empty() {
                break;
            }
            for e in batch {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                let Ok(c) = CString::new(e.name.clone()) else { continue };
                let Ok(st) = sys::fstatat(dir.as_fd(), &c) else { continue };
                let name = OsStr::from_bytes(&e.name);
                match st.st_mode & libc::S_IFMT {
                    libc::S_IFDIR => {
                        out.dirs += 1;
                        out.dir_bytes += sys::allocated(&st);
                        stack.push(rel.join(name));
                    }
                    libc::S_IFREG if !core.is_block_name(name) => {
                        top.push((rel.join(name), sys::allocated(&st)));
                        top.sort_by(|a, b| b.1.cmp(&a.1));
                        top.truncate(n);
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_hint_needs_most_files_unmatched() {
        let u = Unevictable::default();
        u.set_patterns(&["*.bin".into()]);
        for i in 0..9 {
            u.written(OsStr::new(&format!("k{i}.pt")), false, false);
            u.written(OsStr::new("k.pt.tmp"), false, true);
        }
        assert_eq!(u.pattern_warning(), "", "fewer than 10 files written");
        u.written(OsStr::new("foo.pt"), false, false);
        assert_eq!(
            u.pattern_warning(),
            "10 of 10 files created since mount match no pattern (*.bin), e.g. foo.pt: set -o pattern=*.pt"
        );
        for _ in 0..10 {
            u.written(OsStr::new("b.bin"), true, false);
        }
        assert_eq!(u.pattern_warning(), "", "half match a pattern");
    }
}
