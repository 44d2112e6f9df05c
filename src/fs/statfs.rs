//! STATFS: what `df MOUNTPOINT` shows, and the same figures in `boundfs
//! status` (its `df` row and the `df_*` fields), from one computation
//! ([`Space::of`]).
//!
//! df prints Size = `f_blocks`, Used = `f_blocks − f_bfree`, Avail =
//! `f_bavail`, and Use% = Used / (Used + Avail), rounded up. For those to add
//! up in every state, `f_bfree` = `f_bavail` = what a write can get now
//! (free room plus the evictable block files, which eviction frees at once),
//! and Size is the budget, or what BACKING's filesystem can hold for the
//! mount when that is less. Used is then what no write can get: files held
//! open, files matching no `pattern`, directories, writes in flight.

use super::{Core, OpResult};

/// What STATFS answers, in blocks of `bsize` bytes (see the module docs):
/// `bfree == bavail`, so df's Used + Avail is its Size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    /// Total blocks (`f_blocks`, df's Size): [`Space::size`] / bsize.
    pub blocks: u64,
    /// Free blocks (`f_bfree`): the same as `bavail`, so df's Used
    /// (`blocks − bfree`) is what no write can get.
    pub bfree: u64,
    /// Available blocks (`f_bavail`, df's Avail, and the free space engines
    /// that gate writes on it read, e.g. SGLang HiCacheFile's
    /// `min_free_space`): [`Space::avail`] / bsize, what a write can get now.
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
    /// df's Used: what no write can get: `usage + reserved − evictable`
    /// (open files, files matching no `pattern`, directories, writes in
    /// flight), at most `size`.
    pub used: u64,
    /// df's Avail: what a write can get now, `size − used`. Normally
    /// `min(max_size − usage, BACKING's free space) + evictable`.
    pub avail: u64,
}

impl Space {
    /// The figures from the ledger's `max_size`, `committed` (usage plus
    /// reservations) and `evictable` bytes and BACKING's free space
    /// (`backing_free`, `f_bavail × f_frsize` of BACKING's filesystem), all
    /// bytes, each rounded down to whole `bsize` blocks (`bsize` > 0) as
    /// STATFS reports them.
    pub fn of(max_size: u64, committed: u64, evictable: u64, backing_free: u64, bsize: u64) -> Space {
        let usage_held = committed.saturating_sub(evictable);
        let size = max_size.min(committed.saturating_add(backing_free)) / bsize * bsize;
        let used = usage_held.min(size).div_ceil(bsize) * bsize;
        let used = used.min(size);
        Space { size, used, avail: size - used }
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
        let (max, committed, evictable) = {
            let l = self.accounts.lock();
            (l.max_size(), l.committed(), l.evictable_bytes())
        };
        let backing_free = crate::sys::avail_bytes(v);
        Space::of(max, committed, evictable, backing_free, bsize)
    }
}

#[cfg(test)]
mod tests {
    use super::Space;

    const M: u64 = 1 << 20;
    const B: u64 = 4096;

    fn check(s: Space) -> Space {
        assert_eq!(s.used + s.avail, s.size, "{s:?}");
        assert_eq!(s.size % B, 0, "{s:?}");
        assert_eq!(s.avail % B, 0, "{s:?}");
        s
    }

    #[test]
    fn empty_mount() {
        // 64 MiB budget on a big disk: only BACKING's own directory is used
        let s = check(Space::of(64 * M, B, 0, 10 << 30, B));
        assert_eq!((s.size, s.used, s.avail), (64 * M, B, 64 * M - B));
        assert_eq!(crate::status::df_use_percent(s.used, s.size), Some(1));
    }

    #[test]
    fn full_of_evictable_blocks_is_available() {
        // 58 MiB used, 56 MiB of it cold blocks: a write can get 62 MiB
        let s = check(Space::of(64 * M, 58 * M, 56 * M, 10 << 30, B));
        assert_eq!((s.size, s.used, s.avail), (64 * M, 2 * M, 62 * M));
        assert_eq!(crate::status::df_use_percent(s.used, s.size), Some(4));
    }

    #[test]
    fn full_of_open_files_is_used() {
        let s = check(Space::of(64 * M, 64 * M, 0, 10 << 30, B));
        assert_eq!((s.used, s.avail, crate::status::df_use_percent(s.used, s.size)), (64 * M, 0, Some(100)));
    }

    #[test]
    fn budget_above_the_disk_shows_what_the_disk_holds() {
        // max_size 64 MiB, 32 MiB tmpfs with 31 MiB free, empty mount: Size
        // is the 31 MiB the disk can hold for the mount plus the 4 KiB used
        let s = check(Space::of(64 * M, B, 0, 31 * M, B));
        assert_eq!((s.size, s.used, s.avail), (31 * M + B, B, 31 * M));
        assert_eq!(crate::status::df_use_percent(s.used, s.size), Some(1));
        // the same disk full of cold blocks (30 MiB), 1 MiB left free
        let s = check(Space::of(64 * M, 30 * M, 29 * M, M, B));
        assert_eq!((s.size, s.used, s.avail), (31 * M, M, 30 * M));
    }

    #[test]
    fn over_budget_and_in_flight() {
        // usage above a lowered max_size: a write can get what is not held
        let s = check(Space::of(32 * M, 40 * M, 38 * M, 10 << 30, B));
        assert_eq!((s.size, s.used, s.avail), (32 * M, 2 * M, 30 * M));
        // held bytes above the budget: all used, nothing available
        let s = check(Space::of(32 * M, 40 * M, 0, 10 << 30, B));
        assert_eq!((s.used, s.avail), (32 * M, 0));
        // a partial block held counts as a whole block used
        let s = check(Space::of(64 * M, 100, 0, 10 << 30, B));
        assert_eq!((s.used, s.avail), (B, 64 * M - B));
        // zero sizes
        let s = check(Space::of(0, 0, 0, 0, B));
        assert_eq!(crate::status::df_use_percent(s.used, s.size), None);
    }
}
