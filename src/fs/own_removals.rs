//! Names of BACKING's top entries the daemon removed itself, so the watch on
//! BACKING (`crate::workers::watch`) tells them from removals behind its back.
//!
//! Why: eviction empties hash directories and the evictor removes them
//! (`Core::reap_empty_dirs`), so under a store load the watch sees a stream
//! of IN_DELETE events for top directories of BACKING; a store that recreates
//! one of those names within the watch's batch leaves a counted block
//! beneath it, which looked like "counted blocks removed behind the daemon"
//! and asked for a full reconcile pass at once, several times a second (12
//! passes in a 300-request trace replay, a third of the daemon's syscalls).
//!
//! Each removal the daemon makes in BACKING's top directory (UNLINK, RMDIR,
//! RENAME's source, an evicted block file, a reaped directory) is noted here
//! just before its syscall; the watch takes one note per event of the same
//! name. Events left over are removals behind the daemon. A note that no
//! event took (the syscall failed) lapses after [`NOTE_LIFETIME`], so it can
//! hide at most one foreign removal of the same name for that long (the
//! periodic reconcile pass still finds it).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long a note waits for its inotify event (seconds): longer than the
/// watch's longest batch (`crate::workers::watch::MAX_BATCH`, 0.5 s) plus its
/// poll interval (0.25 s), with margin for a loaded machine.
pub const NOTE_LIFETIME: Duration = Duration::from_secs(5);

/// The notes: name → (removals not yet matched by an event, time of the last).
/// A leaf lock (see the lock order in `crate::fs`).
#[derive(Default)]
pub struct OwnRemovals {
    notes: Mutex<HashMap<OsString, (u32, Instant)>>,
}

impl OwnRemovals {
    /// The daemon is about to remove (or move away) the top entry `name`.
    pub fn note(&self, name: &OsStr) {
        let mut n = self.notes.lock();
        let e = n.entry(name.to_os_string()).or_insert((0, Instant::now()));
        e.0 += 1;
        e.1 = Instant::now();
    }

    /// Takes `events` (name → inotify removal events seen for it) and returns
    /// the names with more events than the daemon's own notes (removed behind
    /// its back). Consumes the notes matched, and drops lapsed ones.
    pub fn foreign(&self, events: HashMap<OsString, u32>) -> Vec<OsString> {
        let mut n = self.notes.lock();
        let mut out = Vec::new();
        for (name, count) in events {
            let own = match n.get_mut(&name) {
                Some(e) => {
                    let used = e.0.min(count);
                    e.0 -= used;
                    used
                }
                None => 0,
            };
            if count > own {
                out.push(name);
            }
        }
        n.retain(|_, e| e.0 > 0 && e.1.elapsed() < NOTE_LIFETIME);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(items: &[(&str, u32)]) -> HashMap<OsString, u32> {
        items.iter().map(|(n, c)| (OsString::from(n), *c)).collect()
    }

    #[test]
    fn own_removals_hide_their_events_only() {
        let o = OwnRemovals::default();
        o.note(OsStr::new("abc"));
        o.note(OsStr::new("abd"));
        // abc: ours; abd: ours and once more behind the daemon; abe: behind.
        let mut f = o.foreign(ev(&[("abc", 1), ("abd", 2), ("abe", 1)]));
        f.sort();
        assert_eq!(f, vec![OsString::from("abd"), OsString::from("abe")]);
        // The notes were used up: the same events again are all foreign.
        let mut f = o.foreign(ev(&[("abc", 1), ("abd", 1)]));
        f.sort();
        assert_eq!(f, vec![OsString::from("abc"), OsString::from("abd")]);
    }

    #[test]
    fn a_note_waits_for_a_later_batch() {
        let o = OwnRemovals::default();
        o.note(OsStr::new("abc"));
        assert!(o.foreign(ev(&[("x", 1)])) == vec![OsString::from("x")]);
        assert!(o.foreign(ev(&[("abc", 1)])).is_empty(), "the note is kept until its event comes");
    }
}
