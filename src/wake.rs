//! Wake-ups shared by the fs core and the workers above it.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// Wakes the reconcile thread: to stop it, or for an early pass (the
/// evictor found a name gone from BACKING behind the daemon).
#[derive(Default)]
pub struct Waker {
    /// (stopped, pass requested)
    state: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl Waker {
    /// Asks the thread to stop (it finishes the pass in progress first).
    pub fn stop(&self) {
        self.state.lock().0 = true;
        self.cv.notify_all();
    }

    /// Asks for a pass soon: at once if the last one ended `REQUEST_MIN_GAP` (`crate::workers::reconcile`)
    /// ago, else then. No effect when reconcile is off.
    pub fn request(&self) {
        self.state.lock().1 = true;
        self.cv.notify_all();
    }

    /// Sleeps until `interval` has passed, or a request once `min_gap` has;
    /// true once stopped.
    pub fn sleep(&self, interval: Duration, min_gap: Duration) -> bool {
        let start = Instant::now();
        let mut s = self.state.lock();
        loop {
            if s.0 {
                return true;
            }
            let elapsed = start.elapsed();
            if elapsed >= interval || (s.1 && elapsed >= min_gap) {
                break;
            }
            let until = if s.1 { min_gap.min(interval) } else { interval };
            self.cv.wait_for(&mut s, until.saturating_sub(elapsed));
        }
        s.1 = false;
        false
    }
}
