use super::*;
use crate::fs::handed::{HandedHandle, HandedInode};

/// More fds than one message carries and more JSON than one chunk: the
/// state arrives whole, every fd the same open file as sent.
#[test]
fn state_and_fds_cross_a_socket_in_chunks() {
    let name = format!("boundfs-test-upgrade-{}", std::process::id());
    let l = listen(&name).unwrap();
    let c = connect(&name).unwrap();
    let (s, _uid) = accept(l.as_fd(), Duration::from_secs(5)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<std::fs::File> = (0..600)
        .map(|i| {
            let p = dir.path().join(format!("f{i}"));
            std::fs::write(&p, format!("{i}")).unwrap();
            std::fs::File::open(&p).unwrap()
        })
        .collect();
    let mut state = HandedState { next_fh: 700, ..Default::default() };
    for (i, _) in files.iter().enumerate() {
        let k = (1, i as u64 + 10);
        state.inodes.push(HandedInode { ino: k.1, key: k, fmt: libc::S_IFREG, nlookup: 2, fd: None, handle: None });
        state.handles.push(HandedHandle {
            fh: i as u64 + 1,
            fd: i,
            direct: None,
            key: k,
            ino: k.1,
            mode: Some("cached".into()),
            held: 0,
            learns: false,
            own: None,
        });
    }
    let json = state_json(&state);
    assert!(json.len() > 2 * CHUNK, "the test needs several chunks ({} bytes)", json.len());
    let header = Header {
        negotiated: Negotiated { flags: 3, minor: 41 },
        old_fuse: 0,
        json_len: json.len(),
        fds: files.len(),
        drained_ns: 1,
        left: 0,
        metrics: false,
        stderr: false,
    };
    let fds: Vec<BorrowedFd<'_>> = files.iter().map(|f| f.as_fd()).collect();
    let sender = std::thread::scope(|sc| {
        let t = sc.spawn(|| send_state(c.as_fd(), &header, &json, &fds));
        let got = recv_state(s.as_fd()).unwrap();
        t.join().unwrap().unwrap();
        got
    });
    let (h, j, got) = sender;
    assert_eq!((h.negotiated, h.fds), (header.negotiated, files.len()));
    assert_eq!(serde_json::from_slice::<HandedState>(&j).unwrap(), state);
    assert_eq!(got.len(), files.len());
    for (i, fd) in got.into_iter().enumerate() {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).unwrap();
        assert_eq!(text, i.to_string(), "fd {i} is the file sent");
    }
}

/// A hello from a daemon before state versions (no `state_version`) says
/// version 1; this binary's says its own.
#[test]
fn a_hello_without_a_state_version_says_1() {
    let old: Hello = serde_json::from_slice(br#"{"argv":["boundfs"],"notify_socket":null,"pid":7}"#).unwrap();
    assert_eq!(old.state_version, 1);
    let now = Hello { argv: vec![], notify_socket: None, pid: 1, state_version: crate::fs::handed::STATE_VERSION };
    let back: Hello = serde_json::from_slice(&serde_json::to_vec(&now).unwrap()).unwrap();
    assert_eq!(back.state_version, crate::fs::handed::STATE_VERSION);
}
