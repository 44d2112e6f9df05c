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
        self.shared
    }

    /// Sets shared mode (`-o shared`) and whether data must reach BACKING's
    /// server at close (`flush_backing`); before the core is shared.
    pub fn set_modes(&mut self, shared: bool, flush_backing: bool) {
        self.shared = shared;
        self.flush_backing = flush_backing;
    }
}
