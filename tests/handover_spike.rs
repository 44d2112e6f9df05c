//! Spike for a hand-over without unmounting (docs/design/upgrade.md): a live FUSE connection
//! handed from one fuser 0.18 session to another with no client error,
//! without patching fuser.
//!
//! A toy filesystem (one file, `f`, served from a backing file through file
//! handles, every entry, attribute and read uncached so each client call
//! reaches the daemon) is mounted and served by session A. A client keeps
//! `f` open (its handle was made by A) and a loop stats, opens and reads `f`
//! and reads the held handle. Then A is stopped and B takes over the same
//! connection:
//!
//! The mechanism is `boundfs::fuse::handover`; this test is its end-to-end
//! check.
//!
//! 1. A's gate closes: a request not yet started is neither done nor
//!    answered (its reply is forgotten, so it stays on the kernel's
//!    processing list); the requests in flight finish and are answered.
//! 2. A's readers stop: `/dev/null` is `dup2`ed over each of A's /dev/fuse
//!    fds and its `fuser-N` threads get a signal without `SA_RESTART`, so a
//!    blocked `read` returns EINTR, fuser retries it on `/dev/null`, reads 0
//!    bytes, cannot parse them and ends the loop.
//! 3. B is built with `Session::from_fd` on a socketpair carrying a
//!    synthetic `FUSE_INIT` (the flags A negotiated), then the live
//!    connection is `dup2`ed under the session's fd before it runs.
//! 4. Before B reads anything, `FUSE_NOTIFY_RESEND` puts the requests A
//!    read and did not answer back on the pending queue; B serves them.
//!
//! Asserted: no client call fails and every read returns the file's bytes
//! (the held handle too, now served by B from the handle table it got), B
//! served requests, A's session ended. The hand-over is in one process
//! (a `dup` stands for SCM_RIGHTS: both share the open file description,
//! so the kernel sees the same `fuse_dev`). Needs root and /dev/fuse
//! (mount(2)); skipped otherwise.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod spike_toy;
use spike_toy::{LEN, check, content, cstr, dup, mount, spike_config, toy};

use boundfs::fuse::gated::Gated;
use boundfs::fuse::handover::{Gate, Negotiated, notify_resend, recv_fds, send_fds, session_on_live_fd, stop_readers};
use fuser::{Session, SessionACL};

/// The two runs scan this process's /dev/fuse fds and fuser threads: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn live_connection_moves_to_a_new_session_in_this_process() {
    hand_over(false);
}

#[test]
fn live_connection_moves_to_a_new_process() {
    hand_over(true);
}

/// The side that takes the connection over.
enum NewSide {
    Session(fuser::BackgroundSession, Arc<AtomicU64>),
    Process(std::process::Child, OwnedFd),
}

/// The old side's state: the negotiated INIT, the next fh, its /dev/fuse
/// fds after the live one, the handle table (fds in the same order as the
/// fhs); SCM_RIGHTS carries `dev`, the old fds and the handles' fds.
fn table(n: &Negotiated, next_fh: u64, old: usize, fhs: &[u64]) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&n.minor.to_ne_bytes());
    t.extend_from_slice(&n.flags.to_ne_bytes());
    t.extend_from_slice(&next_fh.to_ne_bytes());
    t.extend_from_slice(&(old as u32).to_ne_bytes());
    fhs.iter().for_each(|fh| t.extend_from_slice(&fh.to_ne_bytes()));
    t
}

/// The new process (run by `live_connection_moves_to_a_new_process` as this
/// test binary with BOUNDFS_SPIKE_SOCK set; a no-op otherwise): receives
/// the connection, the old fds and the handle table, serves, resends,
/// reports "S", and after the unmount the number of requests it served.
#[test]
fn new_process_side() {
    let Some(sock) = std::env::var("BOUNDFS_SPIKE_SOCK").ok().and_then(|s| s.parse::<i32>().ok()) else { return };
    // SAFETY: the parent passed this fd, open and ours alone.
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    let backing = PathBuf::from(std::env::var("BOUNDFS_SPIKE_BACKING").unwrap());
    let mut buf = vec![0u8; 64 * 1024];
    let (len, mut fds) = recv_fds(sock.as_fd(), &mut buf).unwrap();
    let u32_at = |i: usize| u32::from_ne_bytes(buf[i..i + 4].try_into().unwrap());
    let u64_at = |i: usize| u64::from_ne_bytes(buf[i..i + 8].try_into().unwrap());
    let n = Negotiated { minor: u32_at(0), flags: u64_at(4) };
    let (next_fh, old) = (u64_at(12), u32_at(20) as usize);
    let fhs: Vec<u64> = (24..len).step_by(8).map(u64_at).collect();
    let dev = fds.remove(0);
    let old_fds: Vec<OwnedFd> = fds.drain(..old).collect();
    let handles: HashMap<u64, File> = fhs.into_iter().zip(fds.into_iter().map(File::from)).collect();
    let b = toy(&backing, Arc::new(Mutex::new(handles)), Arc::new(AtomicU64::new(next_fh)));
    let served = b.served.clone();
    let b = Gated { inner: b, gate: Default::default() };
    let b = session_on_live_fd(b, dev.try_clone().unwrap(), spike_config(), &n).unwrap();
    if std::env::var_os("BOUNDFS_SPIKE_NO_RESEND").is_none() {
        notify_resend(dev.as_fd()).expect("FUSE_NOTIFY_RESEND (Linux 6.9)");
    }
    drop(old_fds);
    let b = b.spawn().unwrap();
    send_fds(sock.as_fd(), b"S", &[]).unwrap();
    drop(dev);
    let _ = b.join();
    send_fds(sock.as_fd(), &served.load(SeqCst).to_ne_bytes(), &[]).unwrap();
}

fn hand_over(cross: bool) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !spike_toy::can_run() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mnt, backing) = (dir.path().join("mnt"), dir.path().join("backing"));
    std::fs::create_dir(&mnt).unwrap();
    std::fs::write(&backing, content()).unwrap();
    let dev = mount(&mnt);
    let cfg = spike_config();
    let new_process = cross.then(|| {
        let mut sv = [0; 2];
        // SAFETY: `sv` is a writable array of two ints; the child's end is
        // left inheritable on purpose.
        check(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, sv.as_mut_ptr()) }, "socketpair");
        // SAFETY: both fds were just made and are owned by nothing else.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
        // SAFETY: F_SETFD on our own open fd.
        check(unsafe { libc::fcntl(ours.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) }, "fcntl");
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "new_process_side", "--nocapture", "--test-threads=1"])
            .env("BOUNDFS_SPIKE_SOCK", theirs.as_raw_fd().to_string())
            .env("BOUNDFS_SPIKE_BACKING", &backing)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        (child, ours)
    });

    // Session A, as boundfs runs today (from_fd after its own mount(2)).
    let a = toy(&backing, Default::default(), Arc::new(AtomicU64::new(1)));
    let a_gate = Arc::new(Gate::default());
    let (a_handles, a_next, negotiated, a_served) =
        (a.handles.clone(), a.next_fh.clone(), a.negotiated.clone(), a.served.clone());
    let a = Gated { inner: a, gate: a_gate.clone() };
    let a = Session::from_fd(a, dup(&dev), SessionACL::Owner, cfg.clone()).unwrap().spawn().unwrap();

    let f = mnt.join("f");
    let want = content();
    let held = File::open(&f).unwrap(); // its fh is A's
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let ops = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..3)
        .map(|t| {
            let (f, want, stop, errors, ops) = (f.clone(), want.clone(), stop.clone(), errors.clone(), ops.clone());
            let held = held.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut i = 0usize;
                while !stop.load(SeqCst) {
                    let r: std::io::Result<()> = (|| {
                        match t {
                            0 => assert_eq!(std::fs::metadata(&f)?.len(), LEN as u64),
                            1 => {
                                let mut got = Vec::new();
                                File::open(&f)?.read_to_end(&mut got)?;
                                assert!(got == want, "wrong bytes through a fresh open");
                            }
                            _ => {
                                let off = (i * 4096 * 13) % (LEN - 4096);
                                let mut b = vec![0; 4096];
                                held.read_exact_at(&mut b, off as u64)?;
                                assert!(b[..] == want[off..off + 4096], "wrong bytes through the held handle");
                            }
                        }
                        Ok(())
                    })();
                    if let Err(e) = r {
                        errors.lock().unwrap().push(format!("client {t}: {e}"));
                    }
                    ops.fetch_add(1, SeqCst);
                    i += 1;
                }
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(300));
    let before = ops.load(SeqCst);
    assert!(before > 0 && a_served.load(SeqCst) > 0, "session A served nothing");

    // The hand-over.
    let t0 = Instant::now();
    a_gate.close_and_drain();
    let old_fds = stop_readers(dev.as_raw_fd(), libc::SIGUSR2, || a.guard.is_finished()).unwrap();
    let a_result = a.join();
    let next_fh = a_next.load(SeqCst);
    let new = match new_process {
        None => {
            // In one process: dups stand for SCM_RIGHTS (same open files).
            let handles: HashMap<u64, File> =
                a_handles.lock().unwrap().iter().map(|(fh, f)| (*fh, f.try_clone().unwrap())).collect();
            let b = toy(&backing, Arc::new(Mutex::new(handles)), Arc::new(AtomicU64::new(next_fh)));
            let b_served = b.served.clone();
            let b = Gated { inner: b, gate: Default::default() };
            let b = session_on_live_fd(b, dup(&dev), cfg, &negotiated.lock().unwrap()).unwrap();
            // BOUNDFS_SPIKE_NO_RESEND=1 shows what the resend is for: the
            // requests A read and left unanswered then never return.
            if std::env::var_os("BOUNDFS_SPIKE_NO_RESEND").is_none() {
                notify_resend(dev.as_fd()).expect("FUSE_NOTIFY_RESEND (Linux 6.9)");
            }
            drop(old_fds);
            NewSide::Session(b.spawn().unwrap(), b_served)
        }
        Some((child, sock)) => {
            let handles = a_handles.lock().unwrap();
            let fhs: Vec<u64> = handles.keys().copied().collect();
            let mut fds = vec![dev.as_fd()];
            fds.extend(old_fds.iter().map(|f| f.as_fd()));
            fds.extend(fhs.iter().map(|fh| handles[fh].as_fd()));
            let t = table(&negotiated.lock().unwrap(), next_fh, old_fds.len(), &fhs);
            send_fds(sock.as_fd(), &t, &fds).unwrap();
            drop(old_fds);
            let mut ok = [0u8; 8];
            assert_eq!(recv_fds(sock.as_fd(), &mut ok).unwrap().0, 1, "the new process did not take over");
            NewSide::Process(child, sock)
        }
    };
    let pause = t0.elapsed();

    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, SeqCst);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !clients.iter().all(|c| c.is_finished()) {
        if Instant::now() > deadline {
            // Abort the connection so the stuck calls end, then fail.
            let target = cstr(&mnt);
            // SAFETY: a NUL-terminated path alive for the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_FORCE | libc::MNT_DETACH) };
            panic!("client calls still waiting 5 s after the hand-over: requests were lost");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for c in clients {
        c.join().unwrap();
    }
    let after = ops.load(SeqCst);
    let gated = a_gate.left();
    drop(held);
    let errors = errors.lock().unwrap().clone();
    let target = cstr(&mnt);
    // SAFETY: a NUL-terminated path alive for the call.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    drop(dev);
    let b_served = match new {
        NewSide::Session(b, served) => {
            let _ = b.join();
            served.load(SeqCst)
        }
        NewSide::Process(mut child, sock) => {
            let mut n = [0u8; 8];
            assert_eq!(recv_fds(sock.as_fd(), &mut n).unwrap().0, 8, "the new process's count");
            assert!(child.wait().unwrap().success(), "the new process failed");
            u64::from_ne_bytes(n)
        }
    };
    eprintln!(
        "hand-over ({}): pause {pause:?}, A ended with {a_result:?}, {gated} requests read by A and resent to B, \
         client calls {before} before / {after} in all, B served {b_served}",
        if cross { "to another process" } else { "in one process" },
    );
    assert!(errors.is_empty(), "client errors across the hand-over: {errors:?}");
    assert!(a_result.is_err(), "A's loop ends on the end-of-file it reads");
    assert!(b_served > 0 && after > before, "B served nothing after the hand-over");
}
