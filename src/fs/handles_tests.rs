//! The core plans each open's I/O mode and one RELEASE undoes all of it.

use std::ffi::OsStr;

use fuser::Errno;

use super::super::passthrough::Plan;
use crate::testing::{ROOT, core, store};

#[test]
fn the_core_plans_the_mode_and_one_release_undoes_it() {
    let d = tempfile::tempdir().unwrap();
    let c = core(d.path(), 1 << 30);
    store(&c, "a.bin", b"block");
    let ino = c.lookup(ROOT, OsStr::new("a.bin")).unwrap().ino;

    // A core without an adapter serves every open itself.
    let o = c.open(ino, libc::O_RDONLY).unwrap();
    assert!(matches!(o.plan, Plan::Cached));
    assert!(c.release(o.fh).is_none());

    // With passthrough on, a reader needs a backing id from the kernel.
    c.enable_passthrough(true);
    let o = c.open(ino, libc::O_RDONLY).unwrap();
    let reader = o.fh;
    assert!(matches!(o.plan, Plan::NeedBacking { direct: false }));
    // The kernel refuses: the reader falls back to cached, passthrough is off.
    let o = c.backing_made(o, Err(std::io::Error::from_raw_os_error(libc::EPERM))).unwrap();
    assert!(matches!(o.plan, Plan::Cached));
    assert!(!c.passthrough_enabled());
    drop(o);
    // A writer beside it is cached too.
    let w = c.open(ino, libc::O_WRONLY).unwrap().fh;

    // RELEASE is one call: the handle is gone from the one table.
    assert!(c.release(reader).is_none());
    assert_eq!(c.handle(reader).err(), Some(Errno::EBADF));
    assert!(c.release(w).is_none());
    assert_eq!(c.accounts().lock().counts().open_handles, 0);
}
