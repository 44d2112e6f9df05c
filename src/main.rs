//! `boundfs`: argv → options → (detach) → mount → serve until a signal or
//! umount → exit. Also `boundfs status|set MOUNTPOINT …`, and the mount(8)
//! helper when started as `mount.fuse.boundfs`, and the watchdog of a mount
//! when started as `boundfs-watchdog` (see `daemon::watchdog`).
//!
//! Exit codes: 0 success (in daemon mode: the mount is live), then one per
//! kind of failure (`boundfs::exit::Exit`): 1 runtime failure (mount
//! refused …), 2 bad input, 3 already served, 4 a dead mount in the way. As
//! the mount(8) helper, mount(8)'s own codes: 1 bad input, 32 mount failure.

use std::ffi::OsString;
use std::process::exit;

use boundfs::daemon::{self, cli, ctl, daemonize, mount_helper, sdnotify::Notify, supervisor, watchdog};
use boundfs::exit::Exit;
use boundfs::{claim, config, logging};
use clap::Parser;

/// Exit codes for bad input and for a failed mount.
struct Codes {
    usage: i32,
    failure: i32,
    /// Started as the mount(8) helper: mount(8)'s codes ([`Exit::helper_code`]).
    helper: bool,
}

impl Codes {
    fn of(&self, e: Exit) -> i32 {
        if self.helper { e.helper_code() } else { e.code() }
    }
}

fn main() {
    let argv: Vec<OsString> = std::env::args_os().collect();
    if argv.first().is_some_and(|a| watchdog::invoked_as_watchdog(a)) {
        watchdog::main(&argv);
    }
    if argv.get(1).is_some_and(|a| a == "--take-over") {
        match argv.get(2).and_then(|n| n.to_str()) {
            Some(name) => daemon::takeover::main(name),
            None => {
                eprintln!("boundfs: error: --take-over needs a socket name (started by boundfs upgrade)");
                exit(Exit::BadInput.code());
            }
        }
    }
    if let Some(cmd) = ctl::subcommand(&argv) {
        exit(run_ctl(cmd, &argv[1..]));
    }
    let helper = argv.first().is_some_and(|a| mount_helper::invoked_as_helper(a));
    if !helper {
        if let Some(msg) = ctl::unknown_subcommand(&argv) {
            eprintln!("boundfs: error: {msg}");
            exit(Exit::BadInput.code());
        }
    }
    let (argv, codes, fake) = if helper {
        let codes = Codes { usage: 1, failure: 32, helper: true };
        match mount_helper::translate(&argv[1..]) {
            Ok(call) => {
                if call.verbose && std::env::var_os("RUST_LOG").is_none() {
                    // SAFETY: no thread exists yet.
                    unsafe { std::env::set_var("RUST_LOG", "debug,fuser=error") };
                }
                (call.argv, codes, call.fake)
            }
            Err(e) => {
                eprintln!("mount.fuse.boundfs: error: {e}");
                exit(codes.usage);
            }
        }
    } else {
        (argv, Codes { usage: Exit::BadInput.code(), failure: Exit::Runtime.code(), helper: false }, false)
    };
    let opts = match cli::parse(&argv) {
        Ok(o) => o,
        Err(cli::CliError::Display(e)) => {
            let _ = e.print();
            exit(0);
        }
        Err(cli::CliError::Bad(e)) => {
            eprintln!("boundfs: error: {e}");
            exit(codes.usage);
        }
        Err(cli::CliError::Refused(f)) => {
            eprintln!("boundfs: error: {}", f.msg);
            exit(codes.of(f.exit));
        }
    };
    if fake {
        exit(0);
    }
    daemonize::ensure_std_fds();
    if opts.supervise {
        if let Some(sock) = supervisor::daemon_socket() {
            // The daemon a supervisor started: it holds the claim and detached.
            logging::init(supervisor::daemon_log_sink(&opts));
            let notify = Notify::from_env();
            if let Err(e) = supervisor::daemon_main(&opts, &notify, sock) {
                log::error!("{e}");
                exit(codes.failure);
            }
            exit(0);
        }
    }
    // Held for the daemon's whole life (inherited across the fork below).
    // `-o shared` is N mounts over one BACKING by design (one per node, and
    // a flock on a distributed BACKING is cluster-wide): it claims nothing.
    let _claim = if opts.shared {
        None
    } else {
        match claim::claim(&opts.backing) {
            Ok(c) => Some(c),
            Err(f) => {
                eprintln!("boundfs: error: {}", f.msg);
                exit(codes.of(f.exit));
            }
        }
    };
    for w in config::warnings(&opts).into_iter().chain(claim::on_boundfs(&opts.backing)) {
        eprintln!("boundfs: warning: {w}");
    }
    // The metrics_listen port, bound now: in use is one line and no mount
    // (a plain socket: no thread, which may not exist before the fork).
    let listener = match opts.metrics_listen.map(daemon::metrics_http::Listener::bind).transpose() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("boundfs: error: {e}");
            exit(codes.failure);
        }
    };
    // No thread may exist before the fork below.
    let notify = Notify::from_env();
    let mut ready = None;
    // Daemon mode: the log file (now fd 2) or syslog; -f and systemd: the
    // log file if given, else stderr.
    if opts.supervise {
        supervisor::note_cwd();
    }
    let sink = if !opts.foreground && !notify.requested() {
        // No syslog socket (a container) and no log_file: a file, said once
        // on the caller's stderr when the mount is live, rather than lines
        // sent nowhere.
        let mut log = opts.log_file.clone();
        let mut note = None;
        if log.is_none() && !logging::syslog_available() {
            let f = logging::fallback_log(&opts.mountpoint);
            note = Some(format!(
                "boundfs: warning: no syslog socket at /dev/log (a container?): the daemon logs to {}; \
                 give -o log_file=PATH to choose the file",
                f.display()
            ));
            log = Some(f);
        }
        match daemonize::detach(codes.failure, log.as_deref(), note) {
            Ok(pipe) => ready = Some(pipe),
            Err(e) => {
                eprintln!("boundfs: error: {e}");
                exit(codes.failure);
            }
        }
        if log.is_some() { logging::Sink::Stderr } else { logging::Sink::Syslog }
    } else {
        match opts.log_file.as_deref().map(daemonize::open_log) {
            Some(Ok(f)) => logging::Sink::File(f),
            Some(Err(e)) => {
                eprintln!("boundfs: error: {e}");
                exit(codes.failure);
            }
            None => logging::Sink::Stderr,
        }
    };
    let log_env = match &sink {
        logging::Sink::Syslog => "syslog",
        logging::Sink::File(_) => "file",
        _ => "stderr",
    };
    if opts.supervise {
        // SAFETY: no thread exists yet.
        unsafe { std::env::set_var(supervisor::LOG_ENV, log_env) };
    }
    logging::init(sink);
    notify.report();
    let on_ready = || {
        if let Some(p) = ready.take() {
            p.ready();
        }
    };
    let r = if opts.supervise {
        supervisor::run(&opts, &notify, &argv, listener, on_ready)
    } else {
        daemon::upgrade::set_argv(argv);
        daemon::run(&opts, &notify, listener, on_ready)
    };
    if let Err(e) = r {
        match ready.take() {
            // The waiting parent prints it (printing here too would show it twice).
            Some(p) => p.failed(&e),
            None => {
                log::error!("{e}");
                eprintln!("boundfs: error: {e}");
            }
        }
        exit(codes.failure);
    }
}

/// `boundfs status …` / `boundfs set …`; returns the exit code.
fn run_ctl(cmd: &str, argv: &[OsString]) -> i32 {
    let parsed = match cmd {
        "status" => ctl::StatusArgs::try_parse_from(argv).map(|a| ctl::status(&a)),
        "upgrade" => daemon::upgrade_cmd::UpgradeArgs::try_parse_from(argv).map(|a| daemon::upgrade_cmd::upgrade(&a)),
        _ => ctl::SetArgs::try_parse_from(argv).map(|a| ctl::set(&a)),
    };
    match parsed {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            eprintln!("boundfs {cmd}: error: {}", e.msg);
            e.code
        }
        Err(e) => {
            use clap::error::ErrorKind::*;
            if matches!(e.kind(), DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand) {
                let _ = e.print();
                return 0;
            }
            eprintln!("boundfs {cmd}: error: {} (see boundfs {cmd} --help)", cli::first_line(&e.to_string()));
            2
        }
    }
}
