//! boundfs: a FUSE passthrough of a backing directory with a hard byte budget.
//! Least recently used block files are evicted; files with open handles never are.
//! See README.md for usage and `fs` for the lock order.

pub mod cache;
pub mod claim;
pub mod cli;
pub mod config;
pub mod ctl;
pub mod daemon;
pub mod daemonize;
pub mod fs;
pub mod fuse;
pub mod logging;
pub mod metrics;
pub mod mount_helper;
pub mod notify;
pub mod passthrough;
pub mod ratelimit;
pub mod sdnotify;
pub mod stats;
pub mod status;
