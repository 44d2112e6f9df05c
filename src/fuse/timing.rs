//! The timing hook of the FUSE adapter: every request the adapter answers
//! is counted (`Stats::requests`) and, unless `latency_histograms=off`,
//! timed from its dispatch until its handler returns, the reply sent
//! (`crate::latency`). INIT, DESTROY and FORGET are counted only (no reply
//! to wait for).

use super::BoundFs;
use crate::latency::RequestTimer;
use crate::stats::Op;

impl BoundFs {
    /// Counts a request of `op` and times it until the returned guard drops.
    pub(super) fn begin(&self, op: Op) -> RequestTimer<'_> {
        let stats = self.core.stats();
        stats.requests.count(op);
        stats.latency.request(op.class())
    }
}
