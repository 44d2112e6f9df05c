//! The mount(8) helper: `mount -t fuse.boundfs BACKING MOUNTPOINT -o OPTS`
//! (or an fstab line of type `fuse.boundfs`) makes mount(8) run
//!
//! ```text
//! /sbin/mount.fuse.boundfs BACKING MOUNTPOINT [-sfnvrw] [-o OPTS] [-t TYPE] [-N NS]
//! ```
//!
//! (mount(8), "EXTERNAL HELPERS"). `/sbin/mount.fuse.boundfs` is a symlink
//! to the boundfs binary, which recognises the name and turns that calling
//! convention into its own argv here. fuse3's `mount.fuse` is not needed.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use super::cli;

/// What mount(8) asked for, turned into boundfs's own argv.
#[derive(Debug, PartialEq)]
pub struct HelperCall {
    /// argv for [`cli::Args`] (program name first).
    pub argv: Vec<OsString>,
    /// `-f` (fake): check everything, mount nothing.
    pub fake: bool,
    /// `-v`: log at debug level.
    pub verbose: bool,
}

/// Whether this process was started as the mount helper (by its file name).
pub fn invoked_as_helper(argv0: &OsStr) -> bool {
    Path::new(argv0).file_name().is_some_and(|n| n == "mount.fuse.boundfs" || n == "mount.boundfs")
}

/// Translates the helper's arguments (after the program name). `-s`
/// (sloppy) drops `-o` items neither boundfs nor mount(8) knows; `-r`/`-w`
/// become `ro` (refused by the option parser)/`rw`; `-n` and `-t` are ignored. A `boundfs#` prefix on the
/// source (old fuse fstab style) is removed. Errors: a one-line reason
/// (missing operands, `-N`, an unknown flag).
pub fn translate(args: &[OsString]) -> Result<HelperCall, String> {
    let mut positional = Vec::new();
    let mut opts: Vec<String> = Vec::new();
    let (mut sloppy, mut fake, mut verbose) = (false, false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(s) = a.to_str() else {
            positional.push(a.clone());
            continue;
        };
        match s {
            "-o" => {
                let v = it.next().ok_or("option -o needs a value")?;
                opts.push(v.to_str().ok_or("mount options are not valid UTF-8")?.to_string());
            }
            "-t" => {
                it.next().ok_or("option -t needs a value")?;
            }
            "-N" => return Err("mounting in another namespace (-N) is not supported".into()),
            _ if s.starts_with("-o") && s.len() > 2 => opts.push(s[2..].to_string()),
            _ if s.starts_with('-') && s.len() > 1 => {
                for c in s[1..].chars() {
                    match c {
                        's' => sloppy = true,
                        'f' => fake = true,
                        'v' => verbose = true,
                        'n' => {}
                        'r' => opts.push("ro".into()),
                        'w' => opts.push("rw".into()),
                        _ => return Err(format!("unknown mount helper flag -{c}")),
                    }
                }
            }
            _ => positional.push(a.clone()),
        }
    }
    let [source, target] = <[OsString; 2]>::try_from(positional)
        .map_err(|p| format!("expected BACKING and MOUNTPOINT, got {} operands", p.len()))?;
    let source = match source.as_encoded_bytes().strip_prefix(b"boundfs#") {
        // SAFETY: a suffix after an ASCII prefix of valid encoded bytes.
        Some(rest) => unsafe { OsString::from_encoded_bytes_unchecked(rest.to_vec()) },
        None => source,
    };
    let mut items: Vec<String> = opts.iter().flat_map(|o| cli::split_items(o)).map(str::to_string).collect();
    if sloppy {
        items.retain(|i| cli::known_option(i));
    }
    let mut argv = vec![OsString::from("boundfs"), source, target];
    items.retain(|i| !i.is_empty());
    if !items.is_empty() {
        argv.push("-o".into());
        argv.push(items.join(",").into());
    }
    Ok(HelperCall { argv, fake, verbose })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(args: &[&str]) -> Result<HelperCall, String> {
        translate(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    fn argv(c: &HelperCall) -> Vec<&str> {
        c.argv.iter().map(|a| a.to_str().unwrap()).collect()
    }

    #[test]
    fn mount_8_calling_convention() {
        let c = t(&["/data/kv", "/mnt/kv", "-o", "rw,max_size=24G,allow_other"]).unwrap();
        assert_eq!(argv(&c), ["boundfs", "/data/kv", "/mnt/kv", "-o", "rw,max_size=24G,allow_other"]);
        assert!(!c.fake && !c.verbose);
        let c = t(&["boundfs#/d", "/m", "-n", "-sv", "-o", "max_size=1G,bogus", "-t", "fuse.boundfs"]).unwrap();
        assert_eq!(argv(&c), ["boundfs", "/d", "/m", "-o", "max_size=1G"]);
        assert!(c.verbose);
        let c = t(&["/d", "/m", "-f", "-r", "-o", "max_size=1G"]).unwrap();
        assert!(c.fake);
        assert_eq!(argv(&c), ["boundfs", "/d", "/m", "-o", "ro,max_size=1G"]);
        // without -s an unknown option reaches the option parser, which refuses it
        let c = t(&["/d", "/m", "-o", "max_size=1G,bogus"]).unwrap();
        assert_eq!(argv(&c)[4], "max_size=1G,bogus");
    }

    #[test]
    fn bad_calls_are_one_line_errors() {
        assert!(t(&["/d"]).is_err());
        assert!(t(&["/d", "/m", "/x"]).is_err());
        assert!(t(&["/d", "/m", "-N", "/proc/1/ns/mnt"]).is_err());
        assert!(t(&["/d", "/m", "-q"]).is_err());
        assert!(t(&["/d", "/m", "-o"]).is_err());
    }

    #[test]
    fn recognised_by_name() {
        assert!(invoked_as_helper(OsStr::new("/sbin/mount.fuse.boundfs")));
        assert!(invoked_as_helper(OsStr::new("mount.boundfs")));
        assert!(!invoked_as_helper(OsStr::new("/usr/local/bin/boundfs")));
    }
}
