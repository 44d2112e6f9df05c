use super::*;

#[test]
fn state_round_trips_through_json() {
    let s = HandedState {
        version: STATE_VERSION,
        next_fh: 42,
        inodes: vec![HandedInode { ino: 7, key: (1, 7), fmt: libc::S_IFREG, nlookup: 3, fd: Some(0), handle: None }],
        handles: vec![HandedHandle {
            fh: 41,
            fd: 1,
            direct: Some(2),
            key: (1, 7),
            ino: 7,
            mode: Some("passthrough".into()),
            held: 1 << 20,
            learns: true,
            own: Some((b"a/x.bin".to_vec(), true)),
        }],
        dirs: vec![HandedDir { fh: 40, fd: 3 }],
        backing: vec![(7, 5)],
        emptied: vec![b"abc/d\xffe".to_vec()],
        max_size: Some(200 << 20),
    };
    let text = serde_json::to_vec(&s).unwrap();
    assert_eq!(serde_json::from_slice::<HandedState>(&text).unwrap(), s);
    // An older daemon's state has no `emptied`.
    let old = br#"{"next_fh":1,"inodes":[],"handles":[],"dirs":[],"backing":[]}"#;
    let old = serde_json::from_slice::<HandedState>(old).unwrap();
    assert!(old.emptied.is_empty());
    // nor `max_size`: the new daemon keeps its argv's.
    assert_eq!(old.max_size, None);
}

/// A handed passthrough id is reused by the next open that needs one, and
/// one that no open adopted is closed once the inode's last handed open goes.
#[test]
fn handed_backing_ids_are_adopted_or_closed() {
    use crate::fs::passthrough::{IoModes, Mode, Plan};
    let io: IoModes<u32> = IoModes::new(true);
    io.adopt(7, Mode::Passthrough, Some(5));
    io.adopt(8, Mode::Passthrough, Some(6));
    // A new open of inode 7 joins the handed passthrough open and needs an id.
    assert!(matches!(io.plan(7, true), Plan::NeedBacking { .. }));
    assert_eq!(io.take_handed(7), Some(5), "the handed id, not a new one");
    let (id, spare) = io.install(7, 5);
    assert_eq!((*id, spare), (5, None));
    assert_eq!(io.take_handed(7), None, "taken once");
    assert!(io.take_orphans().is_empty());
    // Inode 8's only open, handed over, is released: its id is to close.
    assert!(io.release(8, Mode::Passthrough).is_none());
    assert_eq!(io.take_orphans(), vec![6]);
    // Inode 7's id now lives in the wrapper: released with the last open.
    assert!(io.release(7, Mode::Passthrough).is_none());
    assert_eq!(io.release(7, Mode::Passthrough).map(|b| *b), Some(5));
    assert!(io.take_orphans().is_empty());
}

/// A core's inodes, open handle and directory stream, collected and adopted
/// by a second core over the same BACKING (as a new daemon would): the
/// kernel's node id, lookup count and file handles work there, the handle
/// reads the file's bytes, the stream lists the directory, new handles get
/// numbers above the handed ones, and FORGET of exactly the handed count forgets it.
#[test]
fn a_second_core_serves_what_the_first_handed_over() {
    use crate::testing::{ROOT, core, store};
    let dir = tempfile::tempdir().unwrap();
    let old = core(dir.path(), 64 << 20);
    store(&old, "a.bin", b"hello");
    let attr = old.lookup(ROOT, std::ffi::OsStr::new("a.bin")).unwrap();
    old.lookup(ROOT, std::ffi::OsStr::new("a.bin")).unwrap(); // nlookup 3 (CREATE, 2 LOOKUPs)
    let fh = old.open(attr.ino, libc::O_RDONLY).unwrap().fh;
    let dh = old.opendir(ROOT).unwrap();
    old.set_max_size(48 << 20);
    let c = old.collect_state(vec![]).unwrap();
    assert_eq!(c.state.handles.len(), 1);
    assert_eq!(c.state.max_size, Some(48 << 20), "the live budget, as `boundfs set` left it");
    let json = serde_json::to_vec(&c.state).unwrap();
    let state: HandedState = serde_json::from_slice(&json).unwrap();
    let new = core(dir.path(), 64 << 20);
    assert_eq!(new.adopt_state(state, c.fds), 0, "nothing lost");
    assert_eq!(new.read(fh, 0, 16, libc::O_RDONLY).unwrap(), b"hello", "the handed file handle reads");
    assert_eq!(new.getattr(attr.ino, None).unwrap().size, 5, "the handed node id resolves");
    let mut names = Vec::new();
    new.readdir(dh, 0, |_, _, _, n| {
        names.push(String::from_utf8_lossy(n).into_owned());
        false
    })
    .unwrap();
    assert!(names.iter().any(|n| n == "a.bin"), "the handed stream lists: {names:?}");
    let fh2 = new.open(attr.ino, libc::O_RDONLY).unwrap().fh;
    assert!(fh2 > fh.max(dh), "new handles above the handed ones ({fh2} vs {fh}, {dh})");
    new.release(fh);
    new.release(fh2);
    new.forget(attr.ino, 2);
    assert!(new.getattr(attr.ino, None).is_ok(), "one reference left of the 3 handed");
    new.forget(attr.ino, 1);
    assert!(new.getattr(attr.ino, None).is_err(), "forgotten after exactly the handed lookup count");
}

/// A passthrough writer handed over keeps its reservation in the new core
/// even when the new core has no room for it (the kernel goes on writing
/// its bytes whatever the daemon answers): it is counted, the check sees
/// it, and its RELEASE returns the reservation and records the file's size.
/// Before, a reservation that found no room was dropped: the writer was in
/// no count until the next reconcile.
#[test]
fn a_handed_writer_keeps_its_reservation_without_room() {
    use crate::testing::{ROOT, core};
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let old = core(dir.path(), 64 << 20);
    old.enable_passthrough(true);
    old.allow_pass_writers(true);
    old.io.learn(2 << 20);
    let (_, o) = old
        .create(ROOT, std::ffi::OsStr::new("w.bin_1.tmp"), 0o644, libc::O_WRONLY | libc::O_EXCL, crate::testing::ME)
        .unwrap();
    let fh = o.fh;
    assert_eq!(o.handle.parts().1, 2 << 20, "a passthrough writer of the old core");
    drop(o);
    let c = old.collect_state(vec![]).unwrap();
    // The new core's budget is smaller than the writer's reservation.
    let new = core(dir.path(), 1 << 20);
    assert_eq!(new.adopt_state(c.state, c.fds), 0, "nothing lost");
    let reserved = |c: &crate::fs::Core| {
        let l = c.accounts().lock();
        l.committed() - l.usage()
    };
    assert_eq!(reserved(&new), 2 << 20, "the handed reservation is held");
    let h = new.handle(fh).unwrap();
    let data = vec![5u8; 3 << 20];
    // SAFETY: the handle's fd is open and the pointer and length describe `data`.
    assert_eq!(unsafe { libc::pwrite(h.fd.as_raw_fd(), data.as_ptr().cast(), data.len(), 0) }, data.len() as isize);
    drop(h);
    assert!(new.check_writers().is_some_and(|over| over >= 1 << 20), "the check sees the handed writer");
    new.release(fh);
    assert_eq!(reserved(&new), 0, "RELEASE returns the reservation");
    assert!(new.accounts().lock().usage() >= 3 << 20, "and counts the file");
}

/// A state written by the previous release's code (main at 5d2f144, before
/// states carried a version: tests/fixtures/handover-state-v1.json, made by
/// serializing a `HandedState` of that code) reads as version 1, every
/// field as written.
#[test]
fn a_state_from_the_release_before_versions_reads_as_version_1() {
    let json = include_bytes!("../../tests/fixtures/handover-state-v1.json");
    let s = HandedState::from_json(json, STATE_VERSION).unwrap();
    assert_eq!(s.version, 1);
    assert_eq!(
        (s.next_fh, s.inodes.len(), s.dirs, s.backing),
        (42, 2, vec![HandedDir { fh: 40, fd: 3 }], vec![(7, 5)])
    );
    assert_eq!(s.inodes[0].handle.as_deref(), Some(&[8, 0, 0, 0, 1, 0, 0, 0, 131, 0, 0, 0][..]));
    assert_eq!((s.inodes[1].fmt, s.inodes[1].fd), (libc::S_IFDIR, None));
    let h = &s.handles[0];
    assert_eq!((h.fh, h.fd, h.direct, h.key, h.mode.as_deref()), (41, 1, Some(2), (2049, 131), Some("passthrough")));
    assert_eq!((h.held, h.learns, h.own.clone()), (1 << 20, true, Some((b"kv/0001.bin".to_vec(), true))));
    assert_eq!((s.emptied, s.max_size), (vec![b"kv/old".to_vec()], Some(64 << 20)));
}

/// This binary writes its version, reads its own state back, and refuses a
/// state newer than it knows with one line naming both versions.
#[test]
fn a_state_newer_than_this_binary_is_refused() {
    let json = serde_json::to_vec(&HandedState { next_fh: 3, ..Default::default() }).unwrap();
    assert!(
        json.starts_with(format!("{{\"version\":{STATE_VERSION},").as_bytes()),
        "{}",
        String::from_utf8_lossy(&json)
    );
    assert_eq!(HandedState::from_json(&json, STATE_VERSION).unwrap().next_fh, 3);
    let e = HandedState::from_json(&json, 1).unwrap_err();
    assert!(e.contains(&format!("version {STATE_VERSION}")) && e.contains("up to version 1"), "{e}");
    assert!(!e.contains('\n'));
    // A newer state's unknown fields are not what refuses it: its version is.
    let newer = format!(
        r#"{{"version":{},"next_fh":1,"inodes":[],"handles":[],"dirs":[],"backing":[],"x":1}}"#,
        STATE_VERSION + 1
    );
    let e = HandedState::from_json(newer.as_bytes(), STATE_VERSION).unwrap_err();
    assert!(e.contains(&format!("version {}", STATE_VERSION + 1)), "{e}");
}
