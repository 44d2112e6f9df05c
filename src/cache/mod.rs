//! The cache side of boundfs: the ledger (usage, LRU, pins), the watermark
//! policy, eviction, the start-up scan, the periodic reconcile and recency stamps.

pub mod evictor;
pub mod ledger;
pub mod policy;
pub mod reconcile;
pub mod scan;
pub mod stamp;
pub mod table;
#[cfg(test)]
pub mod testing;
pub mod unevictable;
pub mod watch;
