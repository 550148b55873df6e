//! What a running process costs, read from `/proc/PID`: resident memory
//! (`status`) and the files it has mapped (`maps`), their size on disk.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Resident memory of a process at one moment, in MB (MiB).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resident {
    /// `VmRSS`: resident now.
    pub rss_mb: f64,
    /// `VmHWM`: the most it has been resident so far.
    pub peak_mb: f64,
}

impl Resident {
    pub fn of(pid: u32) -> anyhow::Result<Resident> {
        let path = format!("/proc/{pid}/status");
        let status = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
        Ok(Resident { rss_mb: status_kb(&status, "VmRSS:")? / 1024.0, peak_mb: status_kb(&status, "VmHWM:")? / 1024.0 })
    }
}

fn status_kb(status: &str, key: &str) -> anyhow::Result<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .with_context(|| format!("no {key} in /proc/PID/status"))
}

/// The code a process has mapped: its program file and every shared library,
/// with their sizes on disk (model files and other data are not counted).
#[derive(Debug, Clone, PartialEq)]
pub struct MappedCode {
    /// Every distinct shared object mapped (`*.so*`), with its size in bytes.
    pub libraries: Vec<(PathBuf, u64)>,
    /// The program's own file, if it was mapped, with its size in bytes.
    pub program: Option<(PathBuf, u64)>,
}

impl MappedCode {
    /// Read `/proc/PID/maps`. `program` is the file the process was started
    /// from (under an emulator, the guest binary the emulator mapped).
    pub fn of(pid: u32, program: &Path) -> anyhow::Result<MappedCode> {
        let path = format!("/proc/{pid}/maps");
        let maps = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
        Ok(MappedCode::from_maps(&maps, program))
    }

    pub fn from_maps(maps: &str, program: &Path) -> MappedCode {
        let program = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
        let files: BTreeSet<PathBuf> = maps
            .lines()
            // address perms offset dev inode pathname
            .map(|l| l.split_whitespace().skip(5).collect::<Vec<_>>().join(" "))
            .filter(|p| p.starts_with('/') && !p.ends_with("(deleted)"))
            .map(PathBuf::from)
            .collect();
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut mapped = MappedCode { libraries: Vec::new(), program: None };
        for file in files {
            let canonical = std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
            if canonical == program {
                mapped.program = Some((file.clone(), size(&file)));
            } else if file.file_name().is_some_and(|n| is_shared_object(&n.to_string_lossy())) {
                mapped.libraries.push((file.clone(), size(&file)));
            }
        }
        mapped
    }

    /// Program + libraries, in MB (10^6 bytes, as `du` and the README's sizes).
    pub fn disk_mb(&self) -> f64 {
        let bytes: u64 = self.libraries.iter().map(|(_, n)| n).sum::<u64>() + self.program.as_ref().map_or(0, |(_, n)| *n);
        bytes as f64 / 1e6
    }

    /// Whether libtorch (or its c10) is among the libraries.
    pub fn has_libtorch(&self) -> bool {
        self.libraries.iter().any(|(p, _)| p.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            n.starts_with("libtorch") || n.starts_with("libc10")
        }))
    }
}

/// `libfoo.so`, `libfoo.so.6`, `_C.cpython-311-x86_64-linux-gnu.so`.
fn is_shared_object(name: &str) -> bool {
    name.ends_with(".so") || name.contains(".so.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resident_memory_of_this_process() {
        let r = Resident::of(std::process::id()).unwrap();
        assert!(r.rss_mb > 0.0 && r.peak_mb >= r.rss_mb, "{r:?}");
    }

    #[test]
    fn counts_the_program_and_shared_objects_once_each() {
        let exe = std::env::current_exe().unwrap();
        let maps = format!(
            "55d0-55d1 r--p 00000000 08:01 1 {exe}\n55d1-55d2 r-xp 00001000 08:01 1 {exe}\n\
             7f00-7f01 r-xp 00000000 08:01 2 /lib/x86_64-linux-gnu/libc.so.6\n\
             7f01-7f02 r--p 00000000 08:01 2 /lib/x86_64-linux-gnu/libc.so.6\n\
             7f02-7f03 r--s 00000000 08:01 3 /work/models/minilm/xnnpack.pte\n\
             7f03-7f04 rw-p 00000000 00:00 0 [heap]\n7f04-7f05 rw-p 00000000 00:00 0 \n\
             7f05-7f06 r-xp 00000000 08:01 4 /tmp/gone.so (deleted)\n",
            exe = exe.display()
        );
        let mapped = MappedCode::from_maps(&maps, &exe);
        assert_eq!(mapped.libraries.len(), 1, "{mapped:?}");
        assert!(mapped.program.as_ref().is_some_and(|(_, n)| *n > 0));
        assert!(!mapped.has_libtorch());
        assert!(mapped.disk_mb() > 0.0);
    }

    #[test]
    fn shared_object_names() {
        assert!(is_shared_object("libc.so.6") && is_shared_object("libtorch_cpu.so") && is_shared_object("_C.cpython-311-x86_64-linux-gnu.so"));
        assert!(!is_shared_object("xnnpack.pte") && !is_shared_object("model.safetensors"));
    }
}
