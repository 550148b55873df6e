//! Job control for the explorer: stopping the process (Ctrl-Z, SIGTSTP) the
//! way a terminal would, after the terminal has been restored.

/// Send SIGTSTP to the whole foreground process group, as the terminal driver
/// does for Ctrl-Z in cooked mode (in raw mode Ctrl-Z is only a key). A parent
/// such as `make` stops with runlens, so the shell sees the job stop.
pub fn suspend_process_group() -> std::io::Result<()> {
    // SAFETY: kill takes plain integers; pid 0 means the caller's process group.
    if unsafe { libc::kill(0, libc::SIGTSTP) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Stop this process until a SIGCONT (`fg`). SIGSTOP cannot be caught, so this
/// stops even though runlens handles SIGTSTP itself (to restore the terminal first).
pub fn stop_self() -> std::io::Result<()> {
    // SAFETY: raise takes a plain integer and only signals the calling process.
    if unsafe { libc::raise(libc::SIGSTOP) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
