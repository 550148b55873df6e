//! How much memory the process may still take: the kernel's `MemAvailable`
//! (`/proc/meminfo`) and, when the process's cgroup sets a limit, that limit
//! less what the cgroup already uses, at its own level and every ancestor's
//! (cgroup v2: `memory.max` / `memory.current`; v1: the memory controller's
//! `memory.limit_in_bytes` / `memory.usage_in_bytes`). The smallest headroom
//! wins. The cgroup's page cache that the kernel reclaims first
//! (`inactive_file` in `memory.stat`) counts as free, as `docker stats` and
//! the kubelet count it.
//!
//! Every file is parsed from a string by a function of its own (unit-tested
//! below); a file that is missing or odd is left out with a note, never a panic.
//! [`Measured::read`] takes a root directory so that tests can hand it a fake
//! `/proc` and `/sys`.

use std::path::{Path, PathBuf};

/// A limit at or above this is "no limit" (cgroup v1 writes 2^63 rounded down to a page).
const UNLIMITED: u64 = 1 << 60;

/// One bound on what the process may take, and its headroom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    /// `MemAvailable` of `/proc/meminfo`: what the kernel could give without swapping.
    MemAvailable { bytes: u64 },
    /// A cgroup level with a memory limit; `used` is its usage less reclaimable page cache.
    Cgroup { version: u8, dir: PathBuf, limit: u64, used: u64 },
}

impl Bound {
    /// What the process may take on top of what it holds now under this bound.
    pub fn headroom(&self) -> u64 {
        match self {
            Bound::MemAvailable { bytes } => *bytes,
            Bound::Cgroup { limit, used, .. } => limit.saturating_sub(*used),
        }
    }

    /// For messages: "MemAvailable 3.41 GiB", "cgroup v1 limit 150 MiB (121 MiB in use) at /sys/fs/cgroup/memory/x".
    pub fn describe(&self) -> String {
        use super::size::show;
        match self {
            Bound::MemAvailable { bytes } => format!("MemAvailable {}", show(*bytes)),
            Bound::Cgroup { version, dir, limit, used } => {
                format!("cgroup v{version} limit {} ({} in use) at {}", show(*limit), show(*used), dir.display())
            }
        }
    }
}

/// What was read of the machine: the bounds found, and what could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    pub bounds: Vec<Bound>,
    /// Files that were missing or unreadable, for the message when no bound was found.
    pub notes: Vec<String>,
}

impl Measured {
    /// Read the machine's bounds: `root` is `/` (tests: a directory with `proc/` and `sys/`).
    pub fn read(root: &Path) -> Measured {
        let mut m = Measured::default();
        let file = |rel: &str| root.join(rel.trim_start_matches('/'));
        match std::fs::read_to_string(file("/proc/meminfo")).ok().as_deref().and_then(mem_available) {
            Some(bytes) => m.bounds.push(Bound::MemAvailable { bytes }),
            None => m.notes.push("no MemAvailable in /proc/meminfo".to_string()),
        }
        let Ok(cgroups) = std::fs::read_to_string(file("/proc/self/cgroup")) else {
            m.notes.push("/proc/self/cgroup unreadable: no cgroup limit looked for".to_string());
            return m;
        };
        let mounts = std::fs::read_to_string(file("/proc/self/mountinfo")).map(|t| cgroup_mounts(&t)).unwrap_or_default();
        for (version, mount) in [(2u8, mounts.v2.clone()), (1, mounts.v1_memory.clone())] {
            let Some(rel) = own_cgroup(&cgroups, version) else { continue };
            // Without mountinfo: where Debian, Raspberry Pi OS and Docker mount them.
            let defaults: &[&str] = if version == 2 { &["/sys/fs/cgroup/unified", "/sys/fs/cgroup"] } else { &["/sys/fs/cgroup/memory"] };
            let candidates: Vec<(PathBuf, String)> = match mount {
                Some((point, mount_root)) => vec![(point, mount_root)],
                None => defaults.iter().map(|d| (PathBuf::from(d), "/".to_string())).collect(),
            };
            for (point, mount_root) in candidates {
                let levels = cgroup_levels(&point, &mount_root, &rel);
                let found: Vec<Bound> = levels.iter().filter_map(|dir| read_level(&file(&dir.to_string_lossy()), dir, version)).collect();
                if !levels.is_empty() && file(&levels[0].to_string_lossy()).is_dir() {
                    m.bounds.extend(found);
                    break;
                }
            }
        }
        m
    }

    /// The tightest bound: the least the process may take, and which bound says so.
    pub fn tightest(&self) -> Option<&Bound> {
        self.bounds.iter().min_by_key(|b| b.headroom())
    }
}

/// The limit and usage of one cgroup level; `None` when it sets no limit (or its files are odd).
fn read_level(path: &Path, shown: &Path, version: u8) -> Option<Bound> {
    let read = |name: &str| std::fs::read_to_string(path.join(name)).ok();
    let (limit, usage, inactive) = match version {
        2 => (read("memory.max")?, read("memory.current")?, "inactive_file"),
        _ => (read("memory.limit_in_bytes")?, read("memory.usage_in_bytes")?, "total_inactive_file"),
    };
    let limit = limit_value(&limit)??;
    let usage = number(&usage)?;
    let reclaimable = read("memory.stat").and_then(|s| stat_value(&s, inactive).or_else(|| stat_value(&s, "inactive_file"))).unwrap_or(0);
    Some(Bound::Cgroup { version, dir: shown.to_path_buf(), limit, used: usage.saturating_sub(reclaimable) })
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub fn mem_available(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        let mut words = rest.split_whitespace();
        let n: u64 = words.next()?.parse().ok()?;
        match words.next() {
            Some("kB") | None => n.checked_mul(1024),
            Some(_) => None,
        }
    })
}

/// A cgroup file holding one number (`memory.current`, `memory.usage_in_bytes`).
fn number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A limit file: `Some(None)` for no limit (`max`, or v1's 2^63 rounded), `None` when unreadable.
pub fn limit_value(text: &str) -> Option<Option<u64>> {
    let text = text.trim();
    if text == "max" {
        return Some(None);
    }
    let n = number(text)?;
    Some((n < UNLIMITED).then_some(n))
}

/// One value of a `memory.stat` text (`inactive_file 1234`).
pub fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| number(v)).flatten()
    })
}

/// The process's cgroup path in `/proc/self/cgroup` for a version: v2's
/// `0::/path`, v1's line whose controllers include `memory`.
pub fn own_cgroup(proc_cgroup: &str, version: u8) -> Option<String> {
    proc_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match version {
            2 => id == "0" && controllers.is_empty(),
            _ => controllers.split(',').any(|c| c == "memory"),
        };
        (hit && path.starts_with('/')).then(|| path.to_string())
    })
}

/// Where the cgroup hierarchies are mounted: (mount point, the hierarchy's path mounted there).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupMounts {
    pub v2: Option<(PathBuf, String)>,
    pub v1_memory: Option<(PathBuf, String)>,
}

/// The cgroup mounts of a `/proc/self/mountinfo` text
/// (`id parent dev root mountpoint options [optional...] - fstype source superoptions`).
pub fn cgroup_mounts(mountinfo: &str) -> CgroupMounts {
    let mut found = CgroupMounts::default();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let left: Vec<&str> = left.split_whitespace().collect();
        let right: Vec<&str> = right.split_whitespace().collect();
        let (Some(root), Some(point), Some(fstype)) = (left.get(3), left.get(4), right.first()) else { continue };
        let entry = (PathBuf::from(unescape(point)), unescape(root));
        match *fstype {
            "cgroup2" if found.v2.is_none() => found.v2 = Some(entry),
            "cgroup" if found.v1_memory.is_none() && right.get(2).is_some_and(|o| o.split(',').any(|o| o == "memory")) => {
                found.v1_memory = Some(entry);
            }
            _ => {}
        }
    }
    found
}

/// mountinfo writes a space, tab, newline and backslash as `\040`-style octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8).wrapping_add(c - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directories of a cgroup and its ancestors up to the mount point,
/// innermost first: `rel` (from `/proc/self/cgroup`) is below `mount_root`
/// (the hierarchy path mounted at `point`; `/` unless in a container).
pub fn cgroup_levels(point: &Path, mount_root: &str, rel: &str) -> Vec<PathBuf> {
    let root = mount_root.trim_end_matches('/');
    let below = rel.strip_prefix(root).filter(|r| r.is_empty() || r.starts_with('/')).unwrap_or(rel);
    let parts: Vec<&str> = below.split('/').filter(|p| !p.is_empty() && *p != "." && *p != "..").collect();
    (0..=parts.len()).rev().map(|n| parts[..n].iter().fold(point.to_path_buf(), |dir, p| dir.join(p))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mem_available_in_bytes_and_refuses_odd_lines() {
        let text = "MemTotal:       24683792 kB\nMemFree:        1 kB\nMemAvailable:   22150364 kB\n";
        assert_eq!(mem_available(text), Some(22150364 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots kB\n"), None);
        assert_eq!(mem_available("MemAvailable: 5 MB\n"), None);
        assert_eq!(mem_available("MemAvailable: 99999999999999999999 kB\n"), None);
        assert_eq!(mem_available(""), None);
    }

    #[test]
    fn reads_limits_and_knows_unlimited() {
        assert_eq!(limit_value("max\n"), Some(None));
        assert_eq!(limit_value("9223372036854771712\n"), Some(None));
        assert_eq!(limit_value("157286400\n"), Some(Some(157286400)));
        assert_eq!(limit_value("-1"), None);
        assert_eq!(limit_value(""), None);
        assert_eq!(stat_value("cache 5\ninactive_file 4096\ntotal_inactive_file 8192\n", "total_inactive_file"), Some(8192));
        assert_eq!(stat_value("inactive_file x\n", "inactive_file"), None);
    }

    #[test]
    fn finds_the_memory_cgroup_of_either_version() {
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/18d5\n3:cpuset:/\n0::/user.slice\n";
        assert_eq!(own_cgroup(hybrid, 1).as_deref(), Some("/process_api/18d5"));
        assert_eq!(own_cgroup(hybrid, 2).as_deref(), Some("/user.slice"));
        assert_eq!(own_cgroup("5:cpu,memory:/a\n", 1).as_deref(), Some("/a"));
        assert_eq!(own_cgroup("0::/\n", 1), None);
        assert_eq!(own_cgroup("garbage\n\n::\n", 2), None);
    }

    #[test]
    fn finds_cgroup_mounts_in_mountinfo() {
        let text = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                    35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n\
                    36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n\
                    41 31 0:38 /docker/abc /sys/fs/cgroup/unified\\040x rw,relatime - cgroup2 cgroup2 rw\n\
                    broken line\n";
        let m = cgroup_mounts(text);
        assert_eq!(m.v1_memory, Some((PathBuf::from("/sys/fs/cgroup/memory"), "/".to_string())));
        assert_eq!(m.v2, Some((PathBuf::from("/sys/fs/cgroup/unified x"), "/docker/abc".to_string())));
        assert_eq!(cgroup_mounts(""), CgroupMounts::default());
    }

    #[test]
    fn lists_a_cgroup_and_its_ancestors_innermost_first() {
        let point = Path::new("/sys/fs/cgroup/memory");
        let levels = cgroup_levels(point, "/", "/a/b");
        assert_eq!(levels, [point.join("a/b"), point.join("a"), point.to_path_buf()]);
        // A container's mount shows its own cgroup as the root.
        assert_eq!(cgroup_levels(point, "/docker/abc", "/docker/abc"), [point.to_path_buf()]);
        assert_eq!(cgroup_levels(point, "/docker/abc", "/docker/abc/x"), [point.join("x"), point.to_path_buf()]);
        assert_eq!(cgroup_levels(point, "/", "/../.."), [point.to_path_buf()]);
    }

    /// A fake machine: `files` written under a temporary root.
    fn machine(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = root.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    #[test]
    fn takes_the_tightest_of_mem_available_and_every_cgroup_level() {
        let v1 = machine(&[
            ("proc/meminfo", "MemAvailable: 4000000 kB\n"),
            ("proc/self/cgroup", "4:memory:/a/b\n0::/\n"),
            ("proc/self/mountinfo", "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"),
            ("sys/fs/cgroup/memory/a/b/memory.limit_in_bytes", "157286400\n"),
            ("sys/fs/cgroup/memory/a/b/memory.usage_in_bytes", "60000000\n"),
            ("sys/fs/cgroup/memory/a/b/memory.stat", "cache 1\ntotal_inactive_file 10000000\n"),
            ("sys/fs/cgroup/memory/a/memory.limit_in_bytes", "9223372036854771712\n"),
            ("sys/fs/cgroup/memory/a/memory.usage_in_bytes", "60000000\n"),
        ]);
        let m = Measured::read(v1.path());
        assert_eq!(m.bounds.len(), 2, "{m:?}");
        let tight = m.tightest().unwrap();
        assert_eq!(tight.headroom(), 157286400 - 50000000);
        assert!(tight.describe().starts_with("cgroup v1 limit 150 MiB"), "{}", tight.describe());

        let v2 = machine(&[
            ("proc/meminfo", "MemAvailable: 100000 kB\n"),
            ("proc/self/cgroup", "0::/user.slice/x\n"),
            ("proc/self/mountinfo", "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
            ("sys/fs/cgroup/user.slice/x/memory.max", "max\n"),
            ("sys/fs/cgroup/user.slice/x/memory.current", "1000\n"),
            ("sys/fs/cgroup/user.slice/memory.max", "2000000000\n"),
            ("sys/fs/cgroup/user.slice/memory.current", "1999000000\n"),
        ]);
        let m = Measured::read(v2.path());
        assert_eq!(m.tightest().unwrap().headroom(), 1_000_000);
        assert!(matches!(m.tightest().unwrap(), Bound::Cgroup { version: 2, .. }));
    }

    #[test]
    fn odd_or_missing_files_leave_a_note_and_no_panic() {
        let odd = machine(&[
            ("proc/meminfo", "nonsense"),
            ("proc/self/cgroup", "4:memory:/a\n"),
            ("sys/fs/cgroup/memory/a/memory.limit_in_bytes", "lots\n"),
            ("sys/fs/cgroup/memory/a/memory.usage_in_bytes", "\u{0}\u{1}"),
        ]);
        let m = Measured::read(odd.path());
        assert!(m.bounds.is_empty(), "{m:?}");
        assert!(m.notes.iter().any(|n| n.contains("MemAvailable")), "{m:?}");
        let empty = tempfile::tempdir().unwrap();
        let m = Measured::read(empty.path());
        assert!(m.tightest().is_none() && m.notes.len() == 2, "{m:?}");
    }
}
