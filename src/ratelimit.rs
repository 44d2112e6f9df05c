//! Rate-limited warnings: a warning that can repeat once per request (a file
//! that cannot be evicted, a full fd table) is logged at most once per
//! [`INTERVAL`] per call site, with the count of the ones held back.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Shortest time between two warnings from one call site.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// One call site's state: when it last logged, how many it held back since.
pub struct RateLimit {
    last: Mutex<Option<Instant>>,
    held: AtomicU64,
}

impl RateLimit {
    /// A limiter that lets the first warning through.
    pub const fn new() -> Self {
        RateLimit { last: Mutex::new(None), held: AtomicU64::new(0) }
    }

    /// `Some(n)` when a warning may be logged now, `n` being how many were
    /// held back since the last one; `None` (and one more held back) otherwise.
    pub fn allow(&self, now: Instant) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match *last {
            Some(t) if now.saturating_duration_since(t) < INTERVAL => {
                self.held.fetch_add(1, Ordering::Relaxed);
                None
            }
            _ => {
                *last = Some(now);
                Some(self.held.swap(0, Ordering::Relaxed))
            }
        }
    }
}

impl Default for RateLimit {
    fn default() -> Self {
        Self::new()
    }
}

/// `log::warn!`, at most once per [`INTERVAL`] from this call site; the next
/// line that gets through says how many were held back.
#[macro_export]
macro_rules! warn_limited {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::ratelimit::RateLimit = $crate::ratelimit::RateLimit::new();
        if let Some(held) = LIMIT.allow(std::time::Instant::now()) {
            if held > 0 {
                log::warn!("{} ({held} more like this in the last minute)", format_args!($($arg)+));
            } else {
                log::warn!($($arg)+);
            }
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_per_interval_with_the_held_back_count() {
        let r = RateLimit::new();
        let t0 = Instant::now();
        assert_eq!(r.allow(t0), Some(0));
        assert_eq!(r.allow(t0 + Duration::from_secs(1)), None);
        assert_eq!(r.allow(t0 + Duration::from_secs(59)), None);
        assert_eq!(r.allow(t0 + INTERVAL), Some(2));
        assert_eq!(r.allow(t0 + INTERVAL), None);
    }
}
