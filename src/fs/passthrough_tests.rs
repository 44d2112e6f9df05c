use super::*;

/// Stand-in for a kernel backing id.
#[derive(Debug, PartialEq)]
struct Id(u32);

fn backed(m: &IoModes<Id>, ino: u64, id: u32) -> Arc<Id> {
    assert!(matches!(m.plan(ino, true), Plan::NeedBacking { direct: false }));
    let (b, spare) = m.install(ino, Id(id));
    assert!(spare.is_none());
    b
}

#[test]
fn readers_share_one_backing_id_released_by_the_last_close() {
    let m: IoModes<Id> = IoModes::new(true);
    let b = backed(&m, 7, 1);
    match m.plan(7, true) {
        Plan::Passthrough { id, direct: false } => assert!(Arc::ptr_eq(&b, &id)),
        p => panic!("second reader got {p:?}"),
    }
    assert!(m.release(7, Mode::Passthrough).is_none(), "still open by 101");
    assert_eq!(m.release(7, Mode::Passthrough).as_deref(), Some(&Id(1)));
    // The next reader needs a fresh id.
    assert!(matches!(m.plan(7, true), Plan::NeedBacking { direct: false }));
}

#[test]
fn a_second_id_created_concurrently_is_handed_back() {
    let m: IoModes<Id> = IoModes::new(true);
    assert!(matches!(m.plan(7, true), Plan::NeedBacking { direct: false }));
    assert!(matches!(m.plan(7, true), Plan::NeedBacking { direct: false }));
    let (first, none) = m.install(7, Id(1));
    let (same, spare) = m.install(7, Id(2));
    assert!(none.is_none());
    assert!(Arc::ptr_eq(&first, &same));
    assert_eq!(spare, Some(Id(2)));
}

#[test]
fn a_writer_joins_passthrough_readers_with_direct_io() {
    let m: IoModes<Id> = IoModes::new(true);
    let b = backed(&m, 7, 1);
    match m.plan(7, false) {
        Plan::Passthrough { id, direct: true } => assert!(Arc::ptr_eq(&b, &id)),
        p => panic!("writer got {p:?}"),
    }
    assert!(m.release(7, Mode::Passthrough).is_none(), "the writer still holds the backing id");
    assert_eq!(m.release(7, Mode::Passthrough).as_deref(), Some(&Id(1)));
    assert!(matches!(m.plan(7, false), Plan::Cached), "no readers left: the writer is cached");
}

#[test]
fn passthrough_mode_is_kept_even_after_passthrough_is_turned_off() {
    let m: IoModes<Id> = IoModes::new(true);
    let _b = backed(&m, 7, 1);
    m.disable();
    assert!(matches!(m.plan(7, true), Plan::Passthrough { direct: false, .. }), "the kernel rejects a cached open");
    assert!(matches!(m.plan(8, true), Plan::Cached));
}

#[test]
fn a_reader_while_a_writer_is_open_is_cached() {
    let m: IoModes<Id> = IoModes::new(true);
    assert!(matches!(m.plan(7, false), Plan::Cached));
    assert!(matches!(m.plan(7, true), Plan::Cached));
    m.release(7, Mode::Cached);
    m.release(7, Mode::Cached);
    assert!(matches!(m.plan(7, true), Plan::NeedBacking { direct: false }), "all closed: passthrough again");
}

#[test]
fn disabled_means_cached_for_everyone_and_failure_falls_back() {
    let m: IoModes<Id> = IoModes::new(false);
    assert!(matches!(m.plan(7, true), Plan::Cached));
    let m: IoModes<Id> = IoModes::new(true);
    assert!(matches!(m.plan(8, true), Plan::NeedBacking { direct: false }));
    assert!(m.disable());
    assert!(!m.disable(), "logged once");
    assert!(matches!(m.abandon(8, false), Plan::Cached));
    assert!(matches!(m.plan(8, false), Plan::Cached), "writer beside the fallen-back reader");
}

#[test]
fn write_only_opens_take_no_mode_unless_readers_are_in_passthrough() {
    let m: IoModes<Id> = IoModes::new(true);
    assert!(matches!(m.plan_open(7, libc::O_WRONLY), Plan::Cached), "direct writers not allowed yet");
    assert!(m.release(7, Mode::Cached).is_none());
    m.allow_direct_writers();
    assert!(matches!(m.plan_open(7, libc::O_WRONLY), Plan::Direct));
    assert!(matches!(m.plan_open(7, libc::O_RDWR), Plan::Cached), "a reader-writer keeps the page cache");
    assert!(m.release(7, Mode::Cached).is_none());
    // A direct-I/O writer takes no kernel I/O mode: a reader still gets passthrough.
    let id = backed(&m, 7, 3);
    match m.plan_open(7, libc::O_WRONLY) {
        Plan::Passthrough { id: got, direct: true } => assert_eq!(got, id),
        p => panic!("a writer beside passthrough readers must join them with direct I/O: {p:?}"),
    }
    assert!(m.release(7, Mode::Direct).is_none());
    assert!(m.release(7, Mode::Passthrough).is_none());
    assert_eq!(m.release(7, Mode::Passthrough), Some(id), "the last passthrough open hands the backing id back");
}

#[test]
fn a_writer_reserves_the_largest_of_the_recent_block_sizes() {
    let m: IoModes<Id> = IoModes::new(true);
    m.allow_pass_writers(true);
    assert_eq!(m.writer_reservation(), None, "nothing learned yet: the daemon writes");
    m.learn(2 << 20);
    m.learn(1 << 20);
    assert_eq!(m.writer_reservation(), Some(2 << 20));
    // One odd large file counts only for the next LEARNED writers.
    m.learn(64 << 20);
    assert_eq!(m.writer_reservation(), Some(64 << 20));
    for _ in 0..LEARNED {
        m.learn(2 << 20);
    }
    assert_eq!(m.writer_reservation(), Some(2 << 20));
    m.enable(false);
    assert_eq!(m.writer_reservation(), None, "passthrough off");
}

#[test]
fn a_passthrough_writer_never_joins_cached_opens() {
    let m: IoModes<Id> = IoModes::new(true);
    assert!(matches!(m.plan(7, false), Plan::Cached));
    assert!(m.plan_pass_writer(7).is_none(), "the kernel would refuse it (ETXTBSY)");
    assert!(m.release(7, Mode::Cached).is_none());
    assert!(matches!(m.plan_pass_writer(7), Some(Plan::NeedBacking { direct: false })));
    // A reader joins the writer in passthrough mode.
    assert!(matches!(m.plan(7, true), Plan::NeedBacking { direct: false }));
}
