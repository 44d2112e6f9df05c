//! The check on passthrough writers: their writes never reach the daemon, so
//! a writer that stores more than it reserved at its open (the learned block
//! size) is found by looking. Every [`CHECK_INTERVAL`] while passthrough
//! writers are open (every [`IDLE_INTERVAL`] otherwise) the files behind them
//! are measured, and growth past a reservation is reserved in turn, evicting
//! inline (`crate::fs::Core::check_writers`).
//!
//! What this bounds: between two checks, usage may exceed `max_size` by at
//! most what the open passthrough writers stored beyond their reservations;
//! writers within their reservation (every block the size of the largest one
//! released before it) never take usage past `max_size`.

use std::sync::Arc;
use std::time::Duration;

use crate::fs::Core;

/// Time between two checks while passthrough writers are open.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(10);

/// Time between two checks while none are open.
pub const IDLE_INTERVAL: Duration = Duration::from_millis(100);

/// Runs the check until `stop` returns true.
pub fn run(core: Arc<Core>, stop: impl Fn() -> bool) {
    let mut busy = false;
    while !stop() {
        std::thread::sleep(if busy { CHECK_INTERVAL } else { IDLE_INTERVAL });
        busy = core.check_writers().is_some();
    }
}
