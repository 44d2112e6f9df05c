use super::*;

#[test]
fn state_round_trips_through_json() {
    let s = HandedState {
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
        }],
        dirs: vec![HandedDir { fh: 40, fd: 3 }],
        backing: vec![(7, 5)],
    };
    let text = serde_json::to_vec(&s).unwrap();
    assert_eq!(serde_json::from_slice::<HandedState>(&text).unwrap(), s);
}
