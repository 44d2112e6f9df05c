//! Background workers above the fs core: eviction sweeps, the start-up index,
//! the periodic reconcile pass, the watch on BACKING, the recency stamp
//! writer, the one tree walk the index and reconcile share, and what a
//! shared tier's reconcile remembers of each directory, and the check on
//! passthrough writers.

pub mod dircache;
pub mod evictor;
pub mod reconcile;
pub mod scan;
pub mod stamp;
pub mod walk;
pub mod warm;
pub mod watch;
pub mod writers;
