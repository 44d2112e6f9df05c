//! Creating as the caller. A root daemon makes a new file, directory, node
//! or symlink with the caller's filesystem credentials, so the backing
//! filesystem itself gives it its owner and group (the parent's group under
//! a set-group-ID directory) and strips S_ISGID as for that caller
//! (`inode_init_owner`, `mode_strip_sgid` in fs/inode.c): the object is
//! never root-owned, not even for an instant, so a daemon killed right after
//! the create leaves nothing a user did not make. virtiofsd switches
//! credentials per create for the same reason.
//!
//! Linux keeps credentials per thread, and the raw setfsuid, setfsgid,
//! setgroups and capset system calls change only the calling thread's (the
//! C library's wrappers of setgroups would change every thread's). A
//! worker switches for the one syscall that creates, and back.
//!
//! Capabilities: a fsuid other than 0 clears the filesystem capabilities
//! from the effective set (capabilities(7), "Effect of user ID changes on
//! capabilities"); CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH are raised again,
//! since the kernel already checked the caller's permission on the mount
//! (`default_permissions` with ACLs) and the caller's supplementary groups
//! may be incomplete here; CAP_FSETID and CAP_FOWNER stay off, so the
//! set-group-ID rules apply to the caller. The switch back to fsuid 0 gives
//! them all back from the permitted set.

use super::Caller;
use super::privs;

/// The calling thread's filesystem credentials, switched to a caller's
/// while this guard lives (see the module doc).
pub struct AsCaller {
    /// The fsuid and fsgid were switched.
    fs: bool,
    /// The thread's own supplementary groups, when they were switched.
    groups: Option<Vec<libc::gid_t>>,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// Capability numbers (linux/capability.h).
const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_DAC_READ_SEARCH: u32 = 2;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

impl AsCaller {
    /// Switches the calling thread to `who`'s fsuid and fsgid when
    /// `daemon_is_root` and `who` is not root:root; a no-op guard otherwise.
    /// With CAP_DAC_OVERRIDE kept, the caller's supplementary groups decide
    /// only one thing in a create: whether a new non-directory asking for
    /// S_ISGID and S_IXGRP under a set-group-ID directory keeps S_ISGID
    /// (`mode_strip_sgid`). So they are read from `/proc/<pid>/status` and
    /// set (none when unreadable) only for a `mode` asking for both;
    /// otherwise the thread's own stay.
    pub fn enter(who: Caller, daemon_is_root: bool, mode: u32) -> AsCaller {
        let both = libc::S_ISGID | libc::S_IXGRP;
        let groups = mode & both == both && mode & libc::S_IFMT != libc::S_IFDIR;
        Self::switch(who, daemon_is_root, groups, true)
    }

    fn switch(who: Caller, daemon_is_root: bool, with_groups: bool, dac: bool) -> AsCaller {
        if !daemon_is_root || (who.uid == 0 && who.gid == 0) {
            return AsCaller { fs: false, groups: None };
        }
        let groups = with_groups.then(|| (thread_groups(), privs::supplementary_groups(who.pid)));
        crate::sys::tick();
        // SAFETY: plain system calls on this thread's credentials; the
        // pointer and length describe the caller's groups, alive for the call.
        unsafe {
            if let Some((_, theirs)) = &groups {
                libc::syscall(libc::SYS_setgroups, theirs.len(), theirs.as_ptr());
            }
            libc::syscall(libc::SYS_setfsgid, who.gid);
            libc::syscall(libc::SYS_setfsuid, who.uid);
        }
        if dac {
            raise_dac();
        }
        AsCaller { fs: true, groups: groups.map(|(ours, _)| ours) }
    }
}

/// Whether `who` may write the object open at `fd` (an `O_PATH` fd too) by
/// its own permissions: mode bits, ACL, supplementary groups, no
/// capability (the kernel's own check, `faccessat2(AT_EACCESS)`, made on
/// this thread switched to the caller). True when the daemon is not root
/// or the caller is root (nothing to switch to).
pub fn may_write(who: Caller, daemon_is_root: bool, fd: std::os::fd::RawFd) -> bool {
    if !daemon_is_root || who.uid == 0 {
        return true;
    }
    let _as = AsCaller::switch(who, daemon_is_root, true, false);
    crate::sys::tick();
    // SAFETY: an fd and a NUL-terminated empty path, valid for the call.
    let r = unsafe {
        libc::syscall(libc::SYS_faccessat2, fd, c"".as_ptr(), libc::W_OK, libc::AT_EACCESS | libc::AT_EMPTY_PATH)
    };
    r == 0
}

impl Drop for AsCaller {
    fn drop(&mut self) {
        if !self.fs {
            return;
        }
        crate::sys::tick();
        // SAFETY: as in `enter`.
        let back = unsafe {
            libc::syscall(libc::SYS_setfsuid, 0);
            libc::syscall(libc::SYS_setfsgid, 0);
            if let Some(groups) = self.groups.take() {
                libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr());
            }
            // setfsuid answers the previous fsuid, whatever it is given:
            // asking for an invalid one reads the current one.
            libc::syscall(libc::SYS_setfsuid, u32::MAX) == 0 && libc::syscall(libc::SYS_setfsgid, u32::MAX) == 0
        };
        if !back {
            // A worker left with a user's credentials would serve the next
            // requests as that user: no request may run so.
            log::error!("could not restore the daemon's credentials after a create; aborting");
            std::process::abort();
        }
    }
}

/// This thread's supplementary groups.
fn thread_groups() -> Vec<libc::gid_t> {
    let mut g = vec![0 as libc::gid_t; 64];
    // SAFETY: the buffer holds `g.len()` gids.
    let n = unsafe { libc::getgroups(g.len() as i32, g.as_mut_ptr()) };
    if n < 0 {
        // SAFETY: a null buffer of length 0 asks only for the count.
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) }.max(0) as usize;
        g = vec![0; n];
        // SAFETY: the buffer holds `n` gids.
        let n = unsafe { libc::getgroups(n as i32, g.as_mut_ptr()) }.max(0) as usize;
        g.truncate(n);
    } else {
        g.truncate(n as usize);
    }
    g
}

/// Raises CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH in this thread's
/// effective set again (they stay permitted). Failure leaves the caller's
/// own permissions to the backing filesystem, which the kernel checked too.
fn raise_dac() {
    let mut hdr = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: version 3 takes two CapData; both structs are repr(C) as the
    // kernel's __user_cap_header_struct and __user_cap_data_struct.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) != 0 {
            return;
        }
        data[0].effective |= (1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH);
        data[0].effective &= data[0].permitted;
        libc::syscall(libc::SYS_capset, &mut hdr, data.as_ptr());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// As root: a file made inside the guard belongs to the caller from the
    /// start, and the thread is root again after it.
    #[test]
    fn a_create_inside_the_guard_is_the_callers() {
        if crate::sys::euid() != 0 {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod");
        let f = dir.path().join("made");
        {
            let _as = AsCaller::enter(Caller { uid: 65534, gid: 65534, pid: 0 }, true, libc::S_IFREG | 0o644);
            // 0700 root directory: only CAP_DAC_OVERRIDE lets the caller in.
            std::fs::write(&f, b"x").expect("create as the caller");
        }
        let m = std::fs::metadata(&f).expect("stat");
        assert_eq!((m.uid(), m.gid()), (65534, 65534));
        std::fs::write(dir.path().join("after"), b"y").expect("create after");
        let m = std::fs::metadata(dir.path().join("after")).expect("stat");
        assert_eq!((m.uid(), m.gid()), (0, 0), "root again after the guard");
    }

    /// As root: a caller's own permissions decide, not the daemon's.
    #[test]
    fn may_write_checks_the_callers_permissions() {
        use std::os::fd::AsRawFd;
        if crate::sys::euid() != 0 {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").expect("create");
        let fd = std::fs::File::open(&f).expect("open");
        let nobody = Caller { uid: 65534, gid: 65534, pid: 0 };
        std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod");
        assert!(!may_write(nobody, true, fd.as_raw_fd()), "0644 root file");
        std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o646)).expect("chmod");
        assert!(may_write(nobody, true, fd.as_raw_fd()), "0646 root file");
        std::fs::write(dir.path().join("after"), b"y").expect("root again after the check");
    }
}
