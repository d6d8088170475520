//! The process limits a load run (and the lab, and a server) needs raised before it opens
//! thousands of connections. It owns nothing else.

/// Raises the soft open-files limit to the hard one: every connection is a descriptor, and the
/// usual soft default (1024) would cap a server, a load run or the lab at about a thousand
/// connections.
pub fn raise_nofile_limit() -> std::io::Result<()> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a pointer to a live rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}
