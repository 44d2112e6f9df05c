//! Warnings about options that are valid but probably not what the user wants.

use super::Options;

/// Warnings about options that are valid but probably not what the user
/// wants, one line each, printed before the mount: a mountpoint that is not
/// empty (its entries are hidden while mounted; mount(8) allows it, as
/// fuse's `nonempty` became the default in fuse3). Not checked when the
/// mountpoint lies on a FUSE filesystem: listing it would wait on that
/// filesystem's daemon, which may be stopped. And a `max_size` above the
/// size of BACKING's whole filesystem (statvfs `f_blocks × f_frsize`): it
/// works (the filesystem's ENOSPC evicts), but the budget is never what
/// stops a write, and `df` shows a size the disk does not have.
pub fn warnings(opts: &Options) -> Vec<String> {
    let mut w = Vec::new();
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(opts.backing.as_os_str()));
    if let Some(v) = c.ok().and_then(|c| crate::sys::statvfs(&c).ok()) {
        let total = u64::from(v.f_blocks).saturating_mul(u64::from(v.f_frsize));
        if total > 0 && opts.max_size > total {
            w.push(format!(
                "max_size {} is larger than the filesystem of {} ({} in all): that filesystem fills first \
                 (its ENOSPC then evicts); give max_size below {}",
                crate::status::bytes(opts.max_size),
                opts.backing.display(),
                crate::status::bytes(total),
                crate::status::bytes(total)
            ));
        }
    }
    let on_fuse = crate::claim::fstype_of(&opts.mountpoint).is_none_or(|t| t == "fuse" || t.starts_with("fuse."));
    if on_fuse {
        return w;
    }
    if let Ok(mut rd) = std::fs::read_dir(&opts.mountpoint) {
        if let Some(Ok(first)) = rd.next() {
            let more = rd.count();
            w.push(format!(
                "mountpoint {} is not empty ({}{}): hidden while boundfs is mounted over it",
                opts.mountpoint.display(),
                first.file_name().to_string_lossy(),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            ));
        }
    }
    w
}
