//! Test fixtures shared by the core's and the workers' tests: a [`Core`] over a real
//! directory (no mount), and a store through it.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::Path;

use fuser::INodeNo;

use crate::config::build_matcher;
use crate::fs::{Caller, Core};
use crate::fs::{Config, Started};
use crate::key::key_of;
use crate::ledger::Ledger;
use crate::sys;

/// FUSE inode of BACKING.
pub const ROOT: INodeNo = INodeNo(1);
/// The caller of every request (root).
pub const ME: Caller = Caller { uid: 0, gid: 0, pid: 0 };

/// A core over `dir` with budget `max` bytes, block files `*.bin`, indexed.
pub fn core(dir: &Path, max: u64) -> Core {
    core_with(Config::new(dir.canonicalize().unwrap(), max))
}

/// A core running `config` (see [`Config::new`]), its BACKING indexed.
pub fn core_with(config: Config) -> Core {
    let c = std::ffi::CString::new(config.backing.as_os_str().as_encoded_bytes()).unwrap();
    let root = sys::open(&c, libc::O_PATH | libc::O_DIRECTORY).unwrap();
    let root_key = key_of(&sys::fstat(root.as_fd()).unwrap());
    let mut ledger = Ledger::with_policy(config.policy);
    crate::workers::scan::scan(&root, &build_matcher(&config.patterns).unwrap(), &mut ledger);
    Core::new(config, Started { root, root_key, ledger }).unwrap()
}

/// Creates `name` in BACKING's root through `c` and writes `bytes` into it.
pub fn store(c: &Core, name: &str, bytes: &[u8]) {
    let (_, fh) = c.create(ROOT, OsStr::new(name), 0o644, libc::O_WRONLY, ME).map(|(a, o)| (a, o.fh)).unwrap();
    assert_eq!(c.write(fh, 0, bytes, None, false).unwrap() as usize, bytes.len());
    c.release(fh);
}

thread_local! {
    static AT_CRASH_POINT: std::cell::RefCell<Option<Box<dyn FnMut()>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` at each crash point the core passes on this thread (the points
/// where a daemon killed there would leave BACKING as it is), until reset
/// with `None`.
pub fn at_crash_points(f: Option<Box<dyn FnMut()>>) {
    AT_CRASH_POINT.with(|c| *c.borrow_mut() = f);
}

/// Called by the core at a crash point (see [`at_crash_points`]).
pub fn crash_point() {
    AT_CRASH_POINT.with(|c| {
        if let Some(f) = c.borrow_mut().as_mut() {
            f()
        }
    });
}
