//! This process: job control for the explorer (stopping the process, Ctrl-Z,
//! SIGTSTP, the way a terminal would, after the terminal has been restored),
//! and its resident memory as the kernel counts it (a [`Watch`] over a
//! column's load: the memory check's measured peaks, `crate::memory::measured`).

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

/// Give the C heap's free pages back to the kernel (glibc's `malloc_trim`), so
/// that what the allocator kept of an earlier load is not counted as held.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a plain integer and only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A value of `/proc/self/status` ("VmHWM:   123456 kB") in bytes.
pub fn status_bytes(status: &str, key: &str) -> Option<u64> {
    let rest = status.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?;
    let mut words = rest.split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        _ => None,
    }
}

fn status() -> Option<String> {
    std::fs::read_to_string("/proc/self/status").ok()
}

/// Watches this process's peak resident memory from [`Watch::start`] on.
#[derive(Debug)]
pub struct Watch {
    before: u64,
}

impl Watch {
    /// Give the allocator's free memory back (so that what it kept of an earlier
    /// column is not taken for runlens itself), reset the high-water mark, read
    /// `VmRSS`. `None` where that cannot be done (no `/proc`, `clear_refs` refused).
    pub fn start() -> Option<Watch> {
        trim_heap();
        std::fs::write("/proc/self/clear_refs", "5").ok()?;
        let text = status()?;
        let (rss, hwm) = (status_bytes(&text, "VmRSS")?, status_bytes(&text, "VmHWM")?);
        // The reset took when the mark is back at what is resident (the kernel's counters lag by a few pages).
        (hwm <= rss + (8 << 20)).then_some(Watch { before: rss })
    }

    /// The most the process has held above what it held at the start.
    pub fn peak(&self) -> Option<u64> {
        Some(status_bytes(&status()?, "VmHWM")?.saturating_sub(self.before))
    }
}

