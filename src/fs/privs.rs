//! Privileges a change takes away: the one place that decides which
//! set-user-ID and set-group-ID bits go when a caller changes a file through
//! the mount, for every path that reaches the daemon (WRITE, truncate,
//! fallocate and chown(f, -1, -1), an access ACL set).
//!
//! The rules are the kernel's for a plain directory:
//! - a change of content or size (write, truncate, fallocate) by a caller
//!   without CAP_FSETID clears S_ISUID, and S_ISGID when the file is
//!   group-executable or the caller is outside the file's group; regular
//!   files only (`setattr_should_drop_suidgid` and `setattr_should_drop_sgid`
//!   in fs/attr.c, Linux ≥ 6.2; xfstests generic/683-685);
//! - setting an access ACL clears S_ISGID when the caller is outside the
//!   file's group and lacks CAP_FSETID (`posix_acl_update_mode` in
//!   fs/posix_acl.c; xfstests generic/375). The kernel asks the daemon to do
//!   it (FUSE_SETXATTR_ACL_KILL_SGID, which fuser does not pass on), and the
//!   backing filesystem, called by a root daemon, would keep the bit.
//!
//! The FUSE header carries the caller's uid, gid (its fsuid and fsgid) and
//! thread id, not its capabilities nor its supplementary groups. Whether it
//! lacks CAP_FSETID comes from the kernel where it says so
//! (FUSE_WRITE_KILL_SUIDGID on a WRITE); elsewhere (a truncate, an
//! fallocate, chown(f, -1, -1), an ACL set: fuser does not pass on
//! FATTR_KILL_SUIDGID) from the caller's effective capabilities, the
//! `CapEff:` line of `/proc/<tid>/status` ([`Caller::has_fsetid`]), so root
//! without CAP_FSETID loses the bits and a user with it keeps them, as
//! natively. Its supplementary groups are read from the same file, and only
//! when the answer depends on them (a set-group-ID file, not
//! group-executable, of a group other than the caller's fsgid), which a
//! store never meets.

use std::io::{BufRead, BufReader};

use super::Caller;

impl Caller {
    /// Whether the caller is in group `gid`: its fsgid, or one of its
    /// supplementary groups (the `Groups:` line of `/proc/<pid>/status`,
    /// `pid` being the thread id the FUSE header gives). A caller whose
    /// status cannot be read (pid 0, the thread has exited) is in no other
    /// group, so the bit a decision depends on goes: the safe side.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || (self.pid != 0 && supplementary_groups(self.pid).contains(&gid))
    }
}

/// CAP_FSETID's bit number in a capability set (include/uapi/linux/capability.h).
const CAP_FSETID: u32 = 4;

impl Caller {
    /// Whether the caller has CAP_FSETID in its effective set (the `CapEff:`
    /// line of `/proc/<pid>/status`, `pid` being the thread id the FUSE
    /// header gives): the kernel's `capable(CAP_FSETID)`, which decides
    /// whether a change of content or size keeps the set-ID bits. A caller
    /// whose status cannot be read (pid 0, the thread has exited) counts as
    /// capable only if it is uid 0.
    pub fn has_fsetid(&self) -> bool {
        let eff = (self.pid != 0).then(|| status_line(self.pid, "CapEff:")).flatten();
        match eff.and_then(|v| u64::from_str_radix(v.trim(), 16).ok()) {
            Some(caps) => caps & (1 << CAP_FSETID) != 0,
            None => self.uid == 0,
        }
    }
}

/// The rest of the line of `/proc/<tid>/status` that starts with `key`
/// (None when unreadable or absent).
fn status_line(tid: u32, key: &str) -> Option<String> {
    crate::sys::tick();
    let f = std::fs::File::open(format!("/proc/{tid}/status")).ok()?;
    BufReader::new(f).lines().map_while(Result::ok).find_map(|l| l.strip_prefix(key).map(str::to_string))
}

/// The supplementary groups of thread `tid` (empty when unreadable).
pub(super) fn supplementary_groups(tid: u32) -> Vec<u32> {
    status_line(tid, "Groups:")
        .map(|g| g.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

/// The permission bits (`& 0o7777`) a file of mode `mode` and group `gid`
/// keeps after a change of its content or size by a caller who lacks
/// CAP_FSETID unless `capable`; `in_group(gid)` says whether the caller is in
/// the file's group (asked only when it matters). None when nothing goes.
pub fn after_change(mode: u32, gid: u32, capable: bool, in_group: impl FnOnce(u32) -> bool) -> Option<u32> {
    if capable || mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let mut m = mode & 0o7777;
    m &= !libc::S_ISUID;
    if m & libc::S_ISGID != 0 && (m & libc::S_IXGRP != 0 || !in_group(gid)) {
        m &= !libc::S_ISGID;
    }
    (m != mode & 0o7777).then_some(m)
}

/// The permission bits an object of mode `mode` and group `gid` keeps after
/// its access ACL was set by a caller who lacks CAP_FSETID unless `capable`
/// (any file type). None when nothing goes.
pub fn after_acl_set(mode: u32, gid: u32, capable: bool, in_group: impl FnOnce(u32) -> bool) -> Option<u32> {
    if capable || mode & libc::S_ISGID == 0 || in_group(gid) {
        return None;
    }
    Some(mode & 0o7777 & !libc::S_ISGID)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REG: u32 = libc::S_IFREG;
    fn never(_: u32) -> bool {
        panic!("group membership asked where it does not matter")
    }

    #[test]
    fn a_change_drops_what_setattr_should_drop_suidgid_drops() {
        assert_eq!(after_change(REG | 0o4755, 0, false, never), Some(0o755));
        assert_eq!(after_change(REG | 0o6775, 0, false, never), Some(0o775), "group-executable: S_ISGID goes");
        assert_eq!(after_change(REG | 0o2745, 7, false, |_| true), None, "in the group, not group-executable");
        assert_eq!(after_change(REG | 0o2666, 7, false, |g| g == 8), Some(0o666), "outside the group");
        assert_eq!(after_change(REG | 0o6745, 7, false, |_| true), Some(0o2745));
        assert_eq!(after_change(REG | 0o644, 7, false, never), None);
        assert_eq!(after_change(REG | 0o6777, 7, true, never), None, "CAP_FSETID keeps both");
        assert_eq!(after_change(libc::S_IFDIR | 0o2775, 7, false, never), None, "directories are not touched");
    }

    #[test]
    fn an_acl_set_drops_set_group_id_outside_the_group() {
        assert_eq!(after_acl_set(libc::S_IFDIR | 0o2777, 7, false, |_| false), Some(0o777));
        assert_eq!(after_acl_set(REG | 0o6755, 7, false, |_| false), Some(0o4755), "S_ISUID stays");
        assert_eq!(after_acl_set(REG | 0o2777, 7, false, |g| g == 7), None);
        assert_eq!(after_acl_set(REG | 0o2777, 7, true, never), None);
        assert_eq!(after_acl_set(REG | 0o755, 7, false, never), None);
    }

    #[test]
    fn a_caller_is_in_its_own_supplementary_groups() {
        let me = Caller { uid: 0, gid: u32::MAX - 1, pid: crate::sys::tid() as u32 };
        let mut groups = vec![0 as libc::gid_t; 256];
        // SAFETY: the buffer holds `groups.len()` gids.
        let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
        for g in &groups[..n.max(0) as usize] {
            assert!(me.in_group(*g), "supplementary group {g}");
        }
        assert!(me.in_group(u32::MAX - 1), "its fsgid");
        assert!(!Caller { pid: 0, ..me }.in_group(u32::MAX - 2));
    }

    /// CAP_FSETID is read from the caller's effective set: this test
    /// process's own (root here, with or without it), and uid 0 decides
    /// only when the status cannot be read.
    #[test]
    fn cap_fsetid_comes_from_the_callers_effective_set() {
        let me = Caller { uid: 12345, gid: 1, pid: crate::sys::tid() as u32 };
        let eff = status_line(me.pid, "CapEff:").expect("own status");
        let has = u64::from_str_radix(eff.trim(), 16).unwrap() & (1 << CAP_FSETID) != 0;
        assert_eq!(me.has_fsetid(), has, "by capability, not by uid (CapEff {eff})");
        assert!(Caller { pid: 0, uid: 0, gid: 0 }.has_fsetid(), "unknown: root");
        assert!(!Caller { pid: 0, uid: 5, gid: 0 }.has_fsetid(), "unknown: others");
    }
}
