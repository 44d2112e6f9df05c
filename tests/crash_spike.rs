//! Spike for crash recovery without unmounting (docs/design/upgrade.md): a supervisor that
//! holds the FUSE connection restarts the daemon after a SIGKILL on the same
//! connection, and FUSE_NOTIFY_RESEND re-queues what the dead daemon had read.
//!
//! This test process is the supervisor and the client; the daemon is this
//! test binary run again as `daemon_side` (the toy of tests/spike_toy/, 2
//! reader threads, each READ taking 2 ms so that requests are in flight when
//! it dies). The supervisor mounts, keeps the /dev/fuse fd and gives the
//! daemon a copy over a unix socket (SCM_RIGHTS: the same open file). After
//! 300 ms of stat, open+read and reads through a handle held open, the
//! daemon is SIGKILLed, reaped, and a new session is started in the
//! supervisor on its fd (synthetic INIT, `fuse::handover`), RESEND, serve.
//!
//! Asserted: no client call hangs and no read returns wrong bytes; with one
//! reader file (`clone_fd = false`) no call fails at all (everything the dead
//! daemon had read is resent); with a cloned file per thread
//! (`clone_fd = true`, as boundfs runs) the calls that fail fail with
//! ECONNABORTED only: the requests on the dead daemon's clone are ended by
//! the kernel when its last fd closes (`fuse_dev_release`), before any
//! resend; unless the daemon gives the supervisor its clones as `run` makes
//! them (third run): then nothing fails. The handle held open across the crash works because the toy
//! reopens an fh it never saw (a daemon can only do that with the handle
//! table or its keys kept outside the process). Needs root; skipped
//! otherwise.

mod spike_toy;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use boundfs::fuse::handover::{Negotiated, fuse_fds_except, notify_resend, recv_fds, send_fds, session_on_live_fd};
use fuser::Session;
use spike_toy::{LEN, check, content, cstr, dup, mount, spike_config, toy};

static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn crash_with_one_reader_file_loses_nothing() {
    crash(false, false);
}

#[test]
fn crash_with_a_cloned_reader_file_per_thread() {
    crash(true, false);
}

#[test]
fn crash_with_clones_the_supervisor_holds_loses_nothing() {
    crash(true, true);
}

/// The daemon (run by `crash` with BOUNDFS_CRASH_SOCK set; a no-op
/// otherwise): gets the connection, takes its INIT, tells the supervisor
/// what was negotiated, serves until killed.
#[test]
fn daemon_side() {
    let Some(sock) = std::env::var("BOUNDFS_CRASH_SOCK").ok().and_then(|s| s.parse::<i32>().ok()) else { return };
    // SAFETY: the parent passed this fd, open and ours alone.
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    let backing = PathBuf::from(std::env::var("BOUNDFS_CRASH_BACKING").unwrap());
    let mut cfg = spike_config();
    cfg.clone_fd = std::env::var("BOUNDFS_CRASH_CLONE").is_ok_and(|v| v == "1");
    let cfg2 = cfg.clone();
    let mut buf = [0u8; 16];
    let (_, mut fds) = recv_fds(sock.as_fd(), &mut buf).unwrap();
    let a = toy(&backing, Default::default(), Arc::new(AtomicU64::new(1)));
    a.read_delay_us.store(2000, SeqCst);
    let negotiated = a.negotiated.clone();
    let acl = cfg.acl;
    let a = Session::from_fd(a, fds.remove(0), acl, cfg2).unwrap();
    let n = *negotiated.lock().unwrap();
    let mut t = n.minor.to_ne_bytes().to_vec();
    t.extend_from_slice(&n.flags.to_ne_bytes());
    send_fds(sock.as_fd(), &t, &[]).unwrap();
    let a = a.spawn().unwrap();
    // Every /dev/fuse file the session reads (the clones `run` makes) goes
    // to the supervisor too, so that none closes with the daemon.
    let want = if cfg.clone_fd { 2 } else { 1 };
    let mut fds = fuse_fds_except(sock.as_raw_fd());
    while fds.len() < want {
        std::thread::sleep(Duration::from_millis(1));
        fds = fuse_fds_except(sock.as_raw_fd());
    }
    // SAFETY: the session's fds stay open while it runs.
    let fds: Vec<_> = fds.iter().map(|&fd| unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).collect();
    send_fds(sock.as_fd(), b"fds", &fds).unwrap();
    let _ = a.join();
}

fn crash(clone_fd: bool, hold_clones: bool) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !spike_toy::can_run() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mnt, backing) = (dir.path().join("mnt"), dir.path().join("backing"));
    std::fs::create_dir(&mnt).unwrap();
    std::fs::write(&backing, content()).unwrap();
    let dev = mount(&mnt);
    let mut sv = [0; 2];
    // SAFETY: `sv` is a writable array of two ints; the child's end is left
    // inheritable on purpose.
    check(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, sv.as_mut_ptr()) }, "socketpair");
    // SAFETY: both fds were just made and are owned by nothing else.
    let (sock, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    // SAFETY: F_SETFD on our own open fd.
    check(unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) }, "fcntl");
    let mut daemon = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "daemon_side", "--nocapture", "--test-threads=1"])
        .env("BOUNDFS_CRASH_SOCK", theirs.as_raw_fd().to_string())
        .env("BOUNDFS_CRASH_BACKING", &backing)
        .env("BOUNDFS_CRASH_CLONE", if clone_fd { "1" } else { "0" })
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    drop(theirs);
    send_fds(sock.as_fd(), b"dev", &[dev.as_fd()]).unwrap();
    let mut t = [0u8; 12];
    assert_eq!(recv_fds(sock.as_fd(), &mut t).unwrap().0, 12, "the daemon's INIT");
    let n = Negotiated {
        minor: u32::from_ne_bytes(t[0..4].try_into().unwrap()),
        flags: u64::from_ne_bytes(t[4..12].try_into().unwrap()),
    };
    let (_, daemon_fds) = recv_fds(sock.as_fd(), &mut t).unwrap();
    let held_fds = if hold_clones {
        daemon_fds
    } else {
        drop(daemon_fds);
        vec![]
    };

    let f = mnt.join("f");
    let want = content();
    let held = File::open(&f).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
    let ops = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..4)
        .map(|t| {
            let (f, want, stop, errors, ops) = (f.clone(), want.clone(), stop.clone(), errors.clone(), ops.clone());
            let held = held.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut i = 0usize;
                while !stop.load(SeqCst) {
                    let r: std::io::Result<()> = (|| {
                        match t {
                            0 => assert_eq!(std::fs::metadata(&f)?.len(), LEN as u64),
                            1 | 2 => {
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
                        *errors.lock().unwrap().entry(e.to_string()).or_default() += 1;
                    }
                    ops.fetch_add(1, SeqCst);
                    i += 1;
                }
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(300));
    let before = ops.load(SeqCst);
    // SAFETY: a signal to our own child.
    check(unsafe { libc::kill(daemon.id() as i32, libc::SIGKILL) }, "kill");
    let t0 = Instant::now();
    let _ = daemon.wait();
    let reaped = t0.elapsed();
    let b = toy(&backing, Default::default(), Arc::new(AtomicU64::new(1 << 32)));
    b.reopen_unknown.store(true, SeqCst);
    let served = b.served.clone();
    let b = session_on_live_fd(b, dup(&dev), spike_config(), &n).unwrap();
    if std::env::var_os("BOUNDFS_SPIKE_NO_RESEND").is_none() {
        notify_resend(dev.as_fd()).expect("FUSE_NOTIFY_RESEND (Linux 6.9)");
    }
    drop(held_fds);
    let b = b.spawn().unwrap();
    let recovery = t0.elapsed();

    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, SeqCst);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !clients.iter().all(|c| c.is_finished()) {
        if Instant::now() > deadline {
            let target = cstr(&mnt);
            // SAFETY: a NUL-terminated path alive for the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_FORCE | libc::MNT_DETACH) };
            panic!("client calls still waiting 5 s after the restart: requests were lost");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for c in clients {
        c.join().unwrap();
    }
    let after = ops.load(SeqCst);
    drop(held);
    let errors = errors.lock().unwrap().clone();
    eprintln!(
        "crash (clone_fd {clone_fd}, clones held {hold_clones}): reaped {reaped:?}, serving again {recovery:?} after the kill, \
         client calls {before} before / {after} in all, new daemon served {}, errors {errors:?}",
        served.load(SeqCst)
    );
    let target = cstr(&mnt);
    // SAFETY: a NUL-terminated path alive for the call.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    drop(dev);
    let _ = b.join();
    assert!(after > before && served.load(SeqCst) > 0, "nothing served after the restart");
    if clone_fd && !hold_clones {
        assert!(errors.keys().all(|e| e.contains("os error 103")), "only ECONNABORTED may fail: {errors:?}");
    } else {
        assert!(errors.is_empty(), "client errors across the crash: {errors:?}");
    }
}
