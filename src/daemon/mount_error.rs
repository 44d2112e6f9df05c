//! The one line a failed mount prints: the cause, named (the device, the
//! kernel, fusermount3, /etc/fuse.conf), and the fix, rather than the bare
//! errno of whichever step failed. All exit 1 (`crate::exit::Exit::Runtime`).

use std::io;
use std::path::{Path, PathBuf};

use crate::config::Options;

/// The FUSE device.
pub const DEV_FUSE: &str = "/dev/fuse";

/// Why opening [`DEV_FUSE`] (as root, before mount(2)) failed, and the fix.
pub fn dev_fuse(opts: &Options, e: &io::Error) -> String {
    let why = match e.raw_os_error() {
        Some(libc::ENOENT) => "/dev/fuse does not exist: load the FUSE module (modprobe fuse); in a container pass \
                               the device in (docker run --device /dev/fuse; Kubernetes: a hostPath volume of \
                               /dev/fuse, as in mount/boundfs-daemonset.yaml)"
            .to_string(),
        Some(libc::ENODEV) | Some(libc::ENXIO) => {
            "/dev/fuse has no driver behind it: the kernel's FUSE module is not loaded (modprobe fuse)".to_string()
        }
        Some(libc::EPERM) | Some(libc::EACCES) => "/dev/fuse may not be opened here: a container's device cgroup \
                                                   refuses it; run the container privileged or allow the device \
                                                   (docker run --device /dev/fuse)"
            .to_string(),
        _ => format!("cannot open /dev/fuse: {e}"),
    };
    format!("mount at {} failed: {why}", opts.mountpoint.display())
}

/// Why mount(2) of type `fuse.boundfs` (as root) failed, and the fix.
pub fn kernel(opts: &Options, e: &io::Error) -> String {
    let why = match e.raw_os_error() {
        Some(libc::EPERM) => format!(
            "mount(2) is not permitted ({e}): it needs CAP_SYS_ADMIN, which an unprivileged container lacks; run \
             the container privileged (with /dev/fuse), or mount as a user through fusermount3"
        ),
        Some(libc::ENODEV) => {
            format!("the kernel does not know filesystem type fuse ({e}): load the FUSE module (modprobe fuse)")
        }
        _ => e.to_string(),
    };
    format!("mount at {} failed: {why}", opts.mountpoint.display())
}

/// Why a mount through fusermount3 (not root) failed, and the fix. The
/// error may carry fusermount3's own message, which already names its
/// reason: only a fix is added, and the device's permissions are named only
/// when they are what refused.
pub fn user(opts: &Options, e: &io::Error) -> String {
    // fusermount3's message ends with a newline: keep the error one line.
    let text = e.to_string().trim_end().replace('\n', "; ");
    let fusermount = find_in_path(&["fusermount3", "fusermount"]);
    let hint = if text.contains("user_allow_other") {
        " (as root, add the line user_allow_other to /etc/fuse.conf, or mount without allow_other)".to_string()
    } else if !accessible(Path::new(DEV_FUSE)) {
        format!(
            " ({DEV_FUSE} is not readable and writable by uid {}: give it mode 0666, as most distributions ship it, \
             or mount as root)",
            crate::sys::uid()
        )
    } else if fusermount.is_none() {
        " (fusermount3 is not installed: install fuse3, e.g. apt-get install fuse3, or mount as root)".to_string()
    } else if let Some(p) = fusermount.filter(|p| !setuid_root(p)) {
        format!(" ({} is not setuid root: chmod u+s {0} as root, or mount as root)", p.display())
    } else {
        String::new()
    };
    format!("mount at {} failed: {text}{hint}", opts.mountpoint.display())
}

fn accessible(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else { return false };
    crate::sys::access(&c, libc::R_OK | libc::W_OK).is_ok()
}

fn find_in_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    names.iter().find_map(|n| std::env::split_paths(&path).map(|d| d.join(n)).find(|p| p.is_file()))
}

fn setuid_root(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & libc::S_ISUID != 0)
}
