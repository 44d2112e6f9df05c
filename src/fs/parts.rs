//! The core's parts the workers and the daemon reach (`Core`'s fields are
//! private to `fs`): read through these accessors, set once before the core
//! is shared.

use globset::GlobSet;

use super::stamps::Stamper;
use super::{Core, own_removals, unevictable};

impl Core {
    /// The block-file patterns (`pattern`), compiled.
    pub fn matcher(&self) -> &GlobSet {
        &self.matcher
    }

    /// The queue of pending mtime stamps (`workers::stamp`).
    pub fn stamper(&self) -> &Stamper {
        &self.stamper
    }

    /// What eviction can't remove, and the warnings about it.
    pub fn unevictable(&self) -> &unevictable::Unevictable {
        &self.unevictable
    }

    /// Wakes the reconcile thread (stop, or an early pass).
    pub fn reconcile_waker(&self) -> &crate::wake::Waker {
        &self.reconcile
    }

    /// The top-level removals the daemon made itself (for the watch).
    pub fn own_removals(&self) -> &own_removals::OwnRemovals {
        &self.own_removals
    }

    /// Thread id of the entry-warming thread while it runs, else 0; its
    /// LOOKUPs are not uses (`workers::warm`).
    pub fn warm_tid(&self) -> &std::sync::atomic::AtomicI32 {
        &self.warm_tid
    }

    /// Whether this mount shares its BACKING with other nodes (`-o shared`).
    pub fn shared(&self) -> bool {
        self.shared.is_some()
    }

    /// The shared tier, with `-o shared`.
    pub fn shared_tier(&self) -> Option<&super::shared::SharedTier> {
        self.shared.as_ref()
    }

    /// Sets shared mode (`-o shared`) and whether data must reach BACKING's
    /// server at close (`flush_backing`); before the core is shared.
    pub(super) fn set_modes(&mut self, shared: bool, flush_backing: bool) {
        self.shared = shared.then(Default::default);
        self.flush_backing = flush_backing;
    }

    /// Whether POSIX ACLs work through the mount (`acl`, the default): the
    /// adapter then asks the kernel for FUSE_POSIX_ACL and FUSE_DONT_MASK;
    /// with `noacl` the mode bits alone decide, as on ext4 mounted noacl.
    pub fn acl(&self) -> bool {
        !self.noacl
    }

    /// Sets the mount's atime options the daemon applies itself: with
    /// `noatime` no backing file or directory opened for a client has its
    /// atime updated, with `nodiratime` no directory (O_NOATIME; the kernel
    /// applies MS_NOATIME to the FUSE inodes only, whose atime comes from
    /// BACKING); before the core is shared.
    pub(super) fn set_noatime(&mut self, noatime: bool, nodiratime: bool) {
        let flag = |on: bool| if on { libc::O_NOATIME } else { 0 };
        self.open_extra = (flag(noatime), flag(noatime || nodiratime));
    }

    /// [`crate::sys::reopen`] of `fd` with `flags` plus the atime flags for a
    /// file (`dir` false) or a directory. O_NOATIME is refused (EPERM) on an
    /// object the daemon does not own without CAP_FOWNER: it is then opened
    /// without it.
    pub(super) fn reopen_backing(
        &self,
        fd: std::os::fd::BorrowedFd<'_>,
        flags: i32,
        dir: bool,
    ) -> crate::sys::SysResult<std::os::fd::OwnedFd> {
        let extra = if dir { self.open_extra.1 } else { self.open_extra.0 };
        match crate::sys::reopen(fd, flags | extra) {
            Err(e) if extra != 0 && e == fuser::Errno::EPERM => crate::sys::reopen(fd, flags),
            r => r,
        }
    }
}
