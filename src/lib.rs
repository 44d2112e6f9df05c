//! boundfs: a FUSE passthrough of a backing directory with a hard byte budget.
//! Least recently used block files are evicted; files with open handles never are.
//! See README.md for usage and `fs` for the lock order.
//!
//! Floors, bottom to top (a module imports only from its own floor or below):
//! 1. [`sys`] (syscalls), [`key`] (backing identity), and the leaves every floor
//!    shares: [`config`], [`exit`], [`claim`], [`stats`], [`latency`], [`status`], [`notify`],
//!    [`wake`], [`ratelimit`], [`logging`];
//! 2. [`ledger`]: pure bookkeeping of usage, LRU, pins and the budget policy;
//! 3. [`fs`]: the filesystem core (inode table, namespace, data, meta,
//!    inline eviction), testable without a mount;
//! 4. [`workers`]: background threads over the core (eviction sweeps,
//!    start-up index, reconcile, stamp writer);
//! 5. [`fuse`] (the kernel adapter) and [`daemon`] (CLI, mount, threads).
//!
//! Raw system calls live in [`sys`] as safe wrappers; every other `unsafe`
//! carries a `// SAFETY:` comment right above it saying why it is sound
//! (clippy's `undocumented_unsafe_blocks`, and `layout_tests` for a CI
//! without clippy).

pub mod claim;
pub mod config;
pub mod exit;
pub mod key;
pub mod latency;
pub mod logging;
pub mod notify;
pub mod ratelimit;
pub mod stats;
pub mod status;
pub mod sys;
pub mod wake;

pub mod ledger;

pub mod fs;

pub mod workers;

pub mod daemon;
pub mod fuse;

#[cfg(test)]
#[path = "layout_tests.rs"]
mod layout_tests;
#[cfg(test)]
mod testing;
