//! STATFS: what `df MOUNTPOINT` shows, and the same figures in `boundfs
//! status` (its `df` row and the `df_*` fields), from one computation
//! ([`Space::of`]).
//!
//! df prints Size = `f_blocks`, Used = `f_blocks − f_bfree`, Avail =
//! `f_bavail`, and Use% = Used / (Used + Avail), rounded up. For those to add
//! up in every state, `f_bfree` = `f_bavail` = what a write can get now
//! before background eviction begins: the room below the high watermark
//! plus the evictable block files (eviction frees them at once), and Size is
//! the budget, or what BACKING's filesystem can hold for the mount when that
//! is less. Used is then Size − Avail: what no write can get (files held
//! open, files matching no `pattern`, directories, writes in flight) plus
//! the headroom above the high watermark. An application that sizes its own
//! cache from df (a fraction of `f_bavail` on an empty mount) then stays
//! below the high watermark and never meets boundfs' eviction (a choice
//! against DESIGN.md's "what a write can get now", which counted the
//! headroom too; status/df-columns checks the columns).

use super::{Core, OpResult};

/// What STATFS answers, in blocks of `bsize` bytes (see the module docs):
/// `bfree == bavail`, so df's Used + Avail is its Size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    /// Total blocks (`f_blocks`, df's Size): [`Space::size`] / bsize.
    pub blocks: u64,
    /// Free blocks (`f_bfree`): the same as `bavail`, so df's Used
    /// (`blocks − bfree`) is what no write can get before background
    /// eviction begins.
    pub bfree: u64,
    /// Available blocks (`f_bavail`, df's Avail, and the free space engines
    /// that gate writes on it read, e.g. SGLang HiCacheFile's
    /// `min_free_space`): [`Space::avail`] / bsize, what a write can get now
    /// below the high watermark.
    pub bavail: u64,
    /// Inodes of BACKING.
    pub files: u64,
    /// Free inodes of BACKING.
    pub ffree: u64,
    /// Block size of BACKING (bytes, at least 512); also the fragment size.
    pub bsize: u32,
    /// Longest name of BACKING.
    pub namelen: u32,
}

/// The mount's space as df shows it, in bytes: `used + avail == size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Space {
    /// df's Size: `max_size`, or what BACKING's filesystem can hold for the
    /// mount (`usage + BACKING's free space`) when that is less.
    pub size: u64,
    /// df's Used: `size − avail`: what no write can get (open files, files
    /// matching no `pattern`, directories, writes in flight: `usage +
    /// reserved − evictable`) plus the headroom above the high watermark.
    pub used: u64,
    /// df's Avail: what a write can get now before background eviction
    /// begins, `min(size − held, high_watermark × max_size − committed +
    /// evictable)` where held is `committed − evictable`, at least 0, rounded
    /// down to whole blocks.
    pub avail: u64,
}

impl Space {
    /// The figures from the ledger's `max_size`, `high` (`high_watermark ×
    /// max_size`), `committed` (usage plus reservations) and `evictable`
    /// bytes and BACKING's free space (`backing_free`, `f_bavail × f_frsize`
    /// of BACKING's filesystem), all bytes, Size and Avail rounded down to
    /// whole `bsize` blocks (`bsize` > 0) as STATFS reports them.
    pub fn of(max_size: u64, high: u64, committed: u64, evictable: u64, backing_free: u64, bsize: u64) -> Space {
        let held = committed.saturating_sub(evictable);
        let size = max_size.min(committed.saturating_add(backing_free)) / bsize * bsize;
        let below_high = high.saturating_add(evictable).saturating_sub(committed);
        let avail = size.saturating_sub(held).min(below_high) / bsize * bsize;
        Space { size, used: size - avail, avail }
    }
}

impl Core {
    /// STATFS: see [`StatFs`] and [`Space`]. The evictable bytes come from
    /// the ledger's running LRU byte sum (O(1)). Errors: the backing errno of
    /// fstatvfs.
    pub fn statfs(&self) -> OpResult<StatFs> {
        let v = crate::sys::fstatvfs(self.root().fd())?;
        let bsize = (v.f_bsize as u64).max(512);
        let space = self.space_of(&v, bsize);
        Ok(StatFs {
            blocks: space.size / bsize,
            bfree: space.avail / bsize,
            bavail: space.avail / bsize,
            files: v.f_files as u64,
            ffree: v.f_ffree as u64,
            bsize: bsize as u32,
            namelen: v.f_namemax as u32,
        })
    }

    /// The figures `df MOUNTPOINT` shows now (the same STATFS answers), for
    /// `boundfs status`. Errors: the backing errno of fstatvfs.
    pub fn space(&self) -> OpResult<Space> {
        let v = crate::sys::fstatvfs(self.root().fd())?;
        Ok(self.space_of(&v, (v.f_bsize as u64).max(512)))
    }

    /// [`Space::of`] with the ledger's figures and BACKING's statvfs `v`.
    fn space_of(&self, v: &libc::statvfs, bsize: u64) -> Space {
        let (max, high, committed, evictable) = {
            let l = self.accounts.lock();
            (l.max_size(), l.policy().high_bytes(), l.committed(), l.evictable_bytes())
        };
        let backing_free = crate::sys::avail_bytes(v);
        Space::of(max, high, committed, evictable, backing_free, bsize)
    }
}

#[cfg(test)]
mod tests {
    use super::Space;

    const M: u64 = 1 << 20;
    const B: u64 = 4096;

    /// The high watermark of `max` at the default 0.95, as `Policy::high_bytes`.
    fn high(max: u64) -> u64 {
        (max as f64 * 0.95) as u64
    }

    /// [`Space::of`] with the default high watermark, 4 KiB blocks, checked.
    fn of(max: u64, committed: u64, evictable: u64, backing_free: u64) -> Space {
        let s = Space::of(max, high(max), committed, evictable, backing_free, B);
        assert_eq!(s.used + s.avail, s.size, "{s:?}");
        assert_eq!(s.size % B, 0, "{s:?}");
        assert_eq!(s.avail % B, 0, "{s:?}");
        s
    }

    #[test]
    fn empty_mount_shows_the_room_below_the_high_watermark() {
        // 64 MiB budget on a big disk: only BACKING's own directory is used;
        // Avail stops at 95 % of max_size, the rest of Size is Used
        let s = of(64 * M, B, 0, 10 << 30);
        assert_eq!((s.size, s.avail), (64 * M, (high(64 * M) - B) / B * B));
        assert!(s.avail > 60 * M, "{s:?}");
        assert_eq!(crate::status::df_use_percent(s.used, s.size), Some(6));
    }

    #[test]
    fn an_app_filling_what_df_shows_stays_below_the_high_watermark() {
        // what an application that sizes its own cache from df (all of
        // Avail) stores never wakes the background evictor
        for (max, committed) in [(64 * M, B), (256 * M, 3 * B), (1 << 30, 7 * M + 5)] {
            let s = of(max, committed, 0, 10 << 30);
            assert!(committed + s.avail <= high(max), "{s:?}");
            assert!(committed + s.avail + B > high(max) - B, "{s:?}");
        }
    }

    #[test]
    fn full_of_evictable_blocks_is_mostly_available() {
        // 58 MiB used, 56 MiB of it cold blocks: a write gets what eviction
        // frees plus the room below the high watermark, 2 MiB short of it
        let s = of(64 * M, 58 * M, 56 * M, 10 << 30);
        assert_eq!((s.size, s.avail), (64 * M, (high(64 * M) - 2 * M) / B * B));
        assert!(s.avail > 58 * M, "{s:?}");
        assert_eq!(crate::status::df_use_percent(s.used, s.size), Some(9));
    }

    #[test]
    fn full_of_open_files_is_used() {
        let s = of(64 * M, 64 * M, 0, 10 << 30);
        assert_eq!((s.used, s.avail, crate::status::df_use_percent(s.used, s.size)), (64 * M, 0, Some(100)));
        // held bytes between the watermarks and max_size: nothing available
        let s = of(64 * M, high(64 * M) + M, 0, 10 << 30);
        assert_eq!((s.used, s.avail), (64 * M, 0));
    }

    #[test]
    fn budget_above_the_disk_shows_what_the_disk_holds() {
        // max_size 64 MiB, 32 MiB tmpfs with 31 MiB free, empty mount: Size
        // is the 31 MiB the disk can hold for the mount plus the 4 KiB used
        let s = of(64 * M, B, 0, 31 * M);
        assert_eq!((s.size, s.used, s.avail), (31 * M + B, B, 31 * M));
        assert_eq!(crate::status::df_use_percent(s.used, s.size), Some(1));
        // the same disk full of cold blocks (30 MiB), 1 MiB left free
        let s = of(64 * M, 30 * M, 29 * M, M);
        assert_eq!((s.size, s.used, s.avail), (31 * M, M, 30 * M));
    }

    #[test]
    fn over_budget_and_in_flight() {
        // usage above a lowered max_size: a write gets what is not held,
        // below the new high watermark
        let s = of(32 * M, 40 * M, 38 * M, 10 << 30);
        assert_eq!((s.size, s.avail), (32 * M, (high(32 * M) - 2 * M) / B * B));
        // held bytes above the budget: all used, nothing available
        let s = of(32 * M, 40 * M, 0, 10 << 30);
        assert_eq!((s.used, s.avail), (32 * M, 0));
        // a partial block held counts as a whole block used
        let s = of(64 * M, 100, 0, 10 << 30);
        assert_eq!(s.avail, (high(64 * M) - 100) / B * B);
        // zero sizes
        let s = of(0, 0, 0, 0);
        assert_eq!(crate::status::df_use_percent(s.used, s.size), None);
    }
}
