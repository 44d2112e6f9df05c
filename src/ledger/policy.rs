//! Watermarks in bytes: when the background evictor wakes and where it stops.
//! The three thresholds are cachefilesd's brun/bcull/bstop idea in bytes:
//! `low` (stop evicting), `high` (start evicting in the background),
//! `max_size` (hard: writes evict inline or fail with ENOSPC).

/// The budget and its watermarks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policy {
    /// Hard cap, bytes.
    pub max_size: u64,
    /// Fraction of `max_size` above which the background evictor runs, in (0, 1].
    pub high_watermark: f64,
    /// Fraction of `max_size` the background evictor brings usage down to, in (0, high).
    pub low_watermark: f64,
}

impl Policy {
    /// `high_watermark × max_size`, bytes.
    pub fn high_bytes(&self) -> u64 {
        (self.max_size as f64 * self.high_watermark) as u64
    }

    /// `low_watermark × max_size`, bytes.
    pub fn low_bytes(&self) -> u64 {
        (self.max_size as f64 * self.low_watermark) as u64
    }

    /// Whether usage (bytes) is above the high watermark, so the background
    /// evictor should run.
    pub fn should_wake(&self, usage: u64) -> bool {
        usage > self.high_bytes()
    }

    /// Bytes the background evictor should free from `usage` to reach the low
    /// watermark (0 when already there).
    pub fn excess(&self, usage: u64) -> u64 {
        usage.saturating_sub(self.low_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy { max_size: 1000, high_watermark: 0.95, low_watermark: 0.90 }
    }

    #[test]
    fn wakes_only_above_high() {
        let p = policy();
        assert!(!p.should_wake(950));
        assert!(p.should_wake(951));
    }

    #[test]
    fn excess_is_distance_to_low() {
        let p = policy();
        assert_eq!(p.excess(960), 60);
        assert_eq!(p.excess(900), 0);
        assert_eq!(p.excess(10), 0);
    }
}
