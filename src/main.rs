//! `boundfs`: argv → options → mount → serve until a signal or umount → exit.
//! Exit codes: 0 clean unmount, 1 runtime failure (mount refused …), 2 bad input.

use clap::Parser;

fn main() {
    let args = match boundfs::cli::Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            use clap::error::ErrorKind::*;
            if matches!(e.kind(), DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand) {
                let _ = e.print();
                std::process::exit(0);
            }
            let text = e.to_string();
            // clap lists missing arguments on the lines after the first: keep
            // them, on one line, and stop at the usage text.
            let parts: Vec<&str> =
                text.lines().map(str::trim).take_while(|l| !l.is_empty() && !l.starts_with("Usage:")).collect();
            let line = parts.join(" ");
            let line = line.trim_start_matches("error: ");
            eprintln!("boundfs: error: {line} (see boundfs --help)");
            std::process::exit(2);
        }
    };
    let opts = match boundfs::cli::options(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("boundfs: error: {e}");
            std::process::exit(2);
        }
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info,fuser=error")).init();
    match boundfs::daemon::run(&opts) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("boundfs: error: {e}");
            std::process::exit(1);
        }
    }
}
