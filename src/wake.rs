//! Wake-ups shared by the fs core and the workers above it.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// Wakes the reconcile thread: to stop it, or for an early pass (the
/// evictor found a name gone from BACKING behind the daemon, or the watch on
/// BACKING saw counted blocks removed: see `crate::workers::watch`).
#[derive(Default)]
pub struct Waker {
    state: Mutex<WakeState>,
    cv: Condvar,
}

#[derive(Default)]
struct WakeState {
    stopped: bool,
    /// A pass was asked for ([`Waker::request`]).
    requested: bool,
    /// A pass was asked for at once ([`Waker::request_now`]).
    urgent: bool,
}

impl Waker {
    /// Asks the thread to stop (it finishes the pass in progress first).
    pub fn stop(&self) {
        self.state.lock().stopped = true;
        self.cv.notify_all();
    }

    /// Asks for a pass soon: at once if the last one ended `REQUEST_MIN_GAP` (`crate::workers::reconcile`)
    /// ago (or none ran yet), else then. No effect when reconcile is off.
    pub fn request(&self) {
        self.state.lock().requested = true;
        self.cv.notify_all();
    }

    /// Asks for a pass at once, whenever the last one ran: for changes known
    /// to leave usage wrong (blocks the ledger counts were removed behind the
    /// daemon), so status and `du` agree again within a second.
    pub fn request_now(&self) {
        let mut s = self.state.lock();
        s.requested = true;
        s.urgent = true;
        self.cv.notify_all();
    }

    /// Sleeps until `interval` has passed, or a request once `min_gap` has
    /// (an urgent one at once); true once stopped.
    pub fn sleep(&self, interval: Duration, min_gap: Duration) -> bool {
        let start = Instant::now();
        let mut s = self.state.lock();
        loop {
            if s.stopped {
                return true;
            }
            let elapsed = start.elapsed();
            if elapsed >= interval || s.urgent || (s.requested && elapsed >= min_gap) {
                break;
            }
            let until = if s.requested { min_gap.min(interval) } else { interval };
            self.cv.wait_for(&mut s, until.saturating_sub(elapsed));
        }
        s.requested = false;
        s.urgent = false;
        false
    }
}

/// A wake-up flag with its condvar: [`Signal::raise`] sets it, a waiter
/// takes it. Raising twice before a wait wakes the waiter once.
#[derive(Default)]
pub struct Signal {
    flag: Mutex<bool>,
    cv: Condvar,
}

impl Signal {
    /// Sets the flag and wakes one waiter.
    pub fn raise(&self) {
        *self.flag.lock() = true;
        self.cv.notify_one();
    }

    /// Waits at most `timeout` unless the flag is already set, then clears
    /// it; returns whether it was set.
    pub fn wait_for(&self, timeout: Duration) -> bool {
        let mut raised = self.flag.lock();
        if !*raised {
            self.cv.wait_for(&mut raised, timeout);
        }
        std::mem::take(&mut *raised)
    }
}
