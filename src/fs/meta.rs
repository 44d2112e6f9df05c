//! Read-only metadata operations: getattr, readlink, access, and
//! extended attributes (passed through; on the root, the `user.boundfs.*`
//! names are the live status and control, see `control`).

use std::ffi::OsStr;
use std::os::fd::AsRawFd;

use fuser::{Errno, FileAttr, INodeNo};

use super::control::XATTR_PREFIX;
use super::{Caller, Core, OpResult, attr_of, emptied, inode::ROOT_INO, privs};
use crate::sys;

impl Core {
    /// GETATTR, through the open handle when the kernel gives one (fstat of
    /// a file unlinked while open must keep working).
    pub fn getattr(&self, ino: INodeNo, fh: Option<u64>) -> OpResult<FileAttr> {
        let i = self.inode(ino)?;
        let st = match fh.map(|f| self.handle(f)) {
            Some(Ok(h)) => sys::fstat(std::os::fd::AsFd::as_fd(&h.fd))?,
            _ => sys::fstat(i.fd())?,
        };
        Ok(attr_of(&i, &st))
    }

    /// The permission bits to create an object with under `parent`, from
    /// the client's `mode` and `umask` (sent unapplied: FUSE_DONT_MASK). As
    /// POSIX.1e and acl(5) ("Object creation and default ACLs") say: under a
    /// directory with a default ACL the umask is ignored (the backing kernel
    /// then masks `mode` with that ACL itself), otherwise it is applied. The
    /// daemon's own umask is 0, so the backing kernel adds nothing. A parent
    /// the daemon no longer holds gets the umask (its create fails anyway).
    pub fn creation_mode(&self, parent: INodeNo, mode: u32, umask: u32) -> u32 {
        let Ok(p) = self.inode(parent) else { return mode & !umask };
        let name = OsStr::new("system.posix_acl_default");
        match sys::xattr::get_dir(p.fd().as_raw_fd(), name, &mut []) {
            Ok(n) if n > 0 => mode,
            _ => mode & !umask,
        }
    }

    /// READLINK: the stored target, never resolved.
    pub fn readlink(&self, ino: INodeNo) -> OpResult<Vec<u8>> {
        sys::readlink_fd(self.inode(ino)?.fd())
    }

    /// ACCESS (only sent without default_permissions): checks `mask` against
    /// the mode bits for `uid`/`gid`. Errors: EACCES, the backing errno.
    pub fn access(&self, ino: INodeNo, mask: i32, uid: u32, gid: u32) -> OpResult<()> {
        let st = sys::fstat(self.inode(ino)?.fd())?;
        if mask == libc::F_OK {
            return Ok(());
        }
        let mode = st.st_mode;
        let bits = if uid == 0 {
            // root passes r/w always, x if anyone has x (or it's a directory)
            let x = mode & 0o111 != 0 || mode & libc::S_IFMT == libc::S_IFDIR;
            0o6 | if x { 0o1 } else { 0 }
        } else if uid == st.st_uid {
            (mode >> 6) & 7
        } else if gid == st.st_gid {
            (mode >> 3) & 7
        } else {
            mode & 7
        };
        if (mask as u32) & !bits & 7 != 0 { Err(Errno::EACCES) } else { Ok(()) }
    }

    /// GETXATTR: with `size` 0 the value's length, else the value (ERANGE if
    /// longer than `size`). Errors: ENODATA (also for boundfs' own crash mark
    /// on directories, [`emptied::NAME`]), the backing errno.
    pub fn getxattr(&self, ino: INodeNo, name: &OsStr, size: u32) -> OpResult<Xattr> {
        if ino.0 == ROOT_INO {
            if let Some(v) = self.control_get(name) {
                // The status changes between a size probe and the read after
                // it (counters and latency figures gain digits; the probe's
                // own timing adds an entry): the probe answers room for
                // that, or the read (getfattr's) fails with ERANGE.
                return match sized(v, size)? {
                    Xattr::Size(n) => Ok(Xattr::Size(n + CONTROL_ROOM)),
                    data => Ok(data),
                };
            }
        }
        self.acl_refused(name)?;
        if emptied::is_mark(name) {
            return Err(Errno::ENODATA);
        }
        let fd = self.inode(ino)?.fd().as_raw_fd();
        let mut buf = vec![0u8; size as usize];
        let n = sys::xattr::get(fd, name, &mut buf)?;
        Ok(if size == 0 { Xattr::Size(n as u32) } else { Xattr::Data(buf[..n].to_vec()) })
    }

    /// LISTXATTR, same size protocol as [`Core::getxattr`]. A caller other
    /// than root (`privileged` false, standing for "lacks CAP_SYS_ADMIN") is
    /// not shown `trusted.*` names, as a plain directory hides them from it
    /// (the trusted handler's `list` in fs/xattr.c; a root daemon would list
    /// them, and `cp --preserve=xattr` then fails reading them). The crash
    /// mark [`emptied::NAME`] is never listed. Errors:
    /// ERANGE when the list is longer than `size`, the backing errno.
    pub fn listxattr(&self, ino: INodeNo, size: u32, privileged: bool) -> OpResult<Xattr> {
        let fd = self.inode(ino)?.fd().as_raw_fd();
        if privileged || self.euid != 0 {
            let mut buf = vec![0u8; size as usize];
            let n = sys::xattr::list(fd, &mut buf)?;
            // The size may count the hidden mark: an upper bound, as after a removal.
            buf.truncate(n);
            return Ok(if size == 0 { Xattr::Size(n as u32) } else { Xattr::Data(emptied::without_mark(buf)) });
        }
        // The whole list, then without trusted.*; retried if it grew meanwhile.
        let mut all = None;
        for _ in 0..4 {
            let mut buf = vec![0u8; sys::xattr::list(fd, &mut [])?];
            match sys::xattr::list(fd, &mut buf) {
                Ok(n) => {
                    buf.truncate(n);
                    all = Some(buf);
                    break;
                }
                Err(e) if e == Errno::ERANGE => continue,
                Err(e) => return Err(e),
            }
        }
        let all = all.ok_or(Errno::ERANGE)?;
        let shown: Vec<u8> =
            all.split_inclusive(|&b| b == 0).filter(|n| !n.starts_with(b"trusted.")).flatten().copied().collect();
        sized(shown, size)
    }

    /// SETXATTR by `uid`. On the root, the reserved `user.boundfs.*` names are
    /// control (see `Core::control_set`: EPERM, EINVAL); the crash mark
    /// [`emptied::NAME`] answers EPERM. Errors otherwise: the
    /// backing errno, ENOSPC when the bytes the value can take on BACKING
    /// (its name and value rounded up to 4 KiB) cannot be made room for.
    /// Writing `system.posix_acl_access` can change the mode
    /// (see `Core::acl_set_mode`), and takes S_ISGID away from a caller
    /// outside the file's group ([`privs::after_acl_set`]).
    pub fn setxattr(&self, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32, who: Caller) -> OpResult<()> {
        if ino.0 == ROOT_INO && name.as_encoded_bytes().starts_with(XATTR_PREFIX.as_bytes()) {
            return self.control_set(name, value, who.uid);
        }
        self.acl_refused(name)?;
        if emptied::is_mark(name) {
            return Err(Errno::EPERM);
        }
        let i = self.inode(ino)?;
        // A value too big for the inode takes blocks of its own (ext4: an
        // external block, or with ea_inode an inode of the value's size),
        // which `du` counts: reserved first, counted after.
        let need = (name.len() + value.len()).div_ceil(4096) as u64 * 4096;
        let _room = self.reserve(need, false)?;
        sys::xattr::set(i.fd().as_raw_fd(), name, value, flags)?;
        self.refresh_size(i.key, i.fd());
        if name.as_encoded_bytes() == ACL_ACCESS && !who.has_fsetid() {
            // The backing filesystem kept S_ISGID: it checked the daemon's
            // credentials, not the caller's.
            let st = sys::fstat(i.fd())?;
            if let Some(m) = privs::after_acl_set(st.st_mode, st.st_gid, false, |g| who.in_group(g)) {
                let p = sys::proc_path(i.fd().as_raw_fd());
                // SAFETY: a NUL-terminated /proc path alive for the call.
                sys::check(unsafe { libc::chmod(p.as_ptr(), m) })?;
            }
        }
        self.acl_set_mode(ino, name);
        Ok(())
    }

    /// REMOVEXATTR. Errors: EPERM for the reserved `user.boundfs.*` names on
    /// the root and for the crash mark [`emptied::NAME`], the backing errno.
    pub fn removexattr(&self, ino: INodeNo, name: &OsStr) -> OpResult<()> {
        if ino.0 == ROOT_INO && name.as_encoded_bytes().starts_with(XATTR_PREFIX.as_bytes()) {
            return Err(Errno::EPERM);
        }
        self.acl_refused(name)?;
        if emptied::is_mark(name) {
            return Err(Errno::EPERM);
        }
        let i = self.inode(ino)?;
        sys::xattr::remove(i.fd().as_raw_fd(), name)?;
        self.refresh_size(i.key, i.fd());
        self.acl_set_mode(ino, name);
        Ok(())
    }

    /// After `name` was written or removed on `ino`: if it is the access ACL,
    /// the backing file system has set the mode from it (acl(5): the owner,
    /// mask or group, and other entries are the permission bits; `setfacl -m`,
    /// and GNU tools copying a mode through `fsetxattr`, rely on it). The
    /// kernel drops its cached attributes and ACLs itself once FUSE_POSIX_ACL
    /// is negotiated (`fuse_set_acl` in fs/fuse/acl.c), not otherwise, so
    /// they are dropped here too, before the reply: a stat right after shows
    /// the new mode whatever was negotiated.
    fn acl_set_mode(&self, ino: INodeNo, name: &OsStr) {
        if name.as_encoded_bytes() == ACL_ACCESS {
            self.inval.attrs_now(ino.0);
        }
    }
}

impl Core {
    /// Under `noacl`, the POSIX ACL names (`system.posix_acl_access` and
    /// `_default`, acl(5)) are refused with EOPNOTSUPP, as ext4 mounted
    /// noacl refuses them: getfacl then shows the mode bits, setfacl fails
    /// rather than store an ACL the kernel would not enforce.
    fn acl_refused(&self, name: &OsStr) -> OpResult<()> {
        match self.noacl && name.as_encoded_bytes().starts_with(b"system.posix_acl_") {
            true => Err(Errno::EOPNOTSUPP),
            false => Ok(()),
        }
    }
}

/// The access ACL's xattr name (acl(5)); the default ACL does not touch the mode.
const ACL_ACCESS: &[u8] = b"system.posix_acl_access";

/// An xattr answer: the size asked for, or the bytes.
pub enum Xattr {
    /// Length of the value or list (the caller asked with size 0).
    Size(u32),
    /// The value or list.
    Data(Vec<u8>),
}

/// Bytes a size probe of a control xattr (`user.boundfs.stats`) answers
/// beyond the value's length now, for its growth before the read.
const CONTROL_ROOM: u32 = 1024;

fn sized(v: Vec<u8>, size: u32) -> OpResult<Xattr> {
    if size == 0 {
        Ok(Xattr::Size(v.len() as u32))
    } else if v.len() > size as usize {
        Err(Errno::ERANGE)
    } else {
        Ok(Xattr::Data(v))
    }
}
