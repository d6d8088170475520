//! The process limits a load run (and the lab, and a server) needs raised before it opens
//! thousands of connections. It owns nothing else.

/// Raises the soft open-files limit to the hard one: every connection is a descriptor, and the
/// usual soft default (1024) would cap a server, a load run or the lab at about a thousand
/// connections.
pub fn raise_nofile_limit() -> std::io::Result<()> {
    crate::sys::raise_soft_limit_to_hard(libc::RLIMIT_NOFILE)
}
