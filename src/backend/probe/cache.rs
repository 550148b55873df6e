//! Probe verdicts on disk, keyed by the program's SHA-256 and runlens' version.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::Verdict;

/// Bump when a verdict's meaning changes, so old cache entries are not read.
const CACHE_FORMAT: u32 = 2;

/// The cache key: the file's SHA-256 and runlens' version (another runlens may
/// link another ExecuTorch, whose verdict may differ).
pub(super) fn file_key(path: &Path) -> anyhow::Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let digest: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{digest}-{}-{CACHE_FORMAT}", env!("CARGO_PKG_VERSION")))
}

/// Where verdicts are kept.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("RUNLENS_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("runlens")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/runlens")))
}

pub(super) fn cache_path(key: &str) -> Option<PathBuf> {
    Some(cache_dir()?.join("probe").join(format!("{key}.json")))
}

pub(super) fn read_cached(path: &Path) -> Option<Verdict> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Best effort: a cache that cannot be written only costs the next probe.
pub(super) fn write_cached(path: &Path, verdict: &Verdict) {
    let (Some(dir), Ok(json)) = (path.parent(), serde_json::to_vec(verdict)) else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // Write then rename, so a reader never sees half a file.
    let tmp = dir.join(format!(".{}.{}", std::process::id(), path.file_name().and_then(|n| n.to_str()).unwrap_or("v")));
    if std::fs::write(&tmp, json).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
