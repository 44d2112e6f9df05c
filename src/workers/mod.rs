//! Background workers above the fs core: eviction sweeps, the start-up index,
//! the periodic reconcile pass, the watch on BACKING and the recency stamp
//! writer.

pub mod evictor;
pub mod reconcile;
pub mod scan;
pub mod stamp;
pub mod warm;
pub mod watch;
