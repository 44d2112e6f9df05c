//! One exit status per kind of failure, the same for every command
//! (`boundfs BACKING MOUNTPOINT`, `boundfs status`, `boundfs set`); README
//! "Exit status" lists them. Started as the mount(8) helper, boundfs uses
//! mount(8)'s own codes instead ([`Exit::helper_code`]).

/// Why a command failed. The discriminant is the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The system refused at run time: /dev/fuse missing, the kernel or
    /// fusermount3 refused the mount, a path is not a boundfs mount, the
    /// mount refused a change. Exit status 1.
    Runtime = 1,
    /// Bad input: an argument, option value or path the user can correct
    /// (one line on stderr, nothing mounted, nothing changed). Exit status 2.
    BadInput = 2,
    /// Already served: MOUNTPOINT is a live boundfs mount, or BACKING (or a
    /// directory above or inside it) is served by a live boundfs. Exit status 3.
    InUse = 3,
    /// A dead boundfs mount (its daemon died; the path answers ENOTCONN) is
    /// in the way: detach it (`umount -l`) and run the command again. Exit status 4.
    DeadMount = 4,
}

impl Exit {
    /// The exit status of boundfs started by its own name.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The exit status as the mount(8) helper: mount(8)'s 1 for bad input
    /// ("incorrect invocation"), 32 ("mount failure") for everything else.
    pub fn helper_code(self) -> i32 {
        if self == Exit::BadInput { 1 } else { 32 }
    }
}

/// A failure worded for the user (one line: the cause and what to do) with its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Its kind, which gives the exit status.
    pub exit: Exit,
    /// The one line printed on stderr.
    pub msg: String,
}

impl Failure {
    /// A failure of kind `exit` saying `msg`.
    pub fn new(exit: Exit, msg: impl Into<String>) -> Failure {
        Failure { exit, msg: msg.into() }
    }
}
