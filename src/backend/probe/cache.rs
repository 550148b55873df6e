//! Probe verdicts on disk, keyed by the file's SHA-256, how it is loaded and runlens' version;
//! the digests themselves remembered by file identity.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::Verdict;

/// Bump when a verdict's meaning changes, so old cache entries are not read.
/// 3: a verdict that runs carries the child's measured peak; 4: keyed by the
/// load too (GGUF and ONNX files are probed).
const CACHE_FORMAT: u32 = 4;

/// The cache key: the file's SHA-256, `load` (the probe's `Load::key`: the
/// runtime, a GGUF's context) and runlens' version (another runlens may link
/// another runtime, whose verdict may differ). The digest of a file
/// hashed before is taken from [`remembered_digest`], so a start reads no 90 MB
/// program just to find its verdict.
/// Gives the digest and the key.
pub(super) fn file_key(path: &Path, load: &str) -> anyhow::Result<(String, String)> {
    let digest = digest_of(path, cache_dir().as_deref())?;
    let key = key_of_digest(&digest, load);
    Ok((digest, key))
}

/// A verdict's key from its file's digest.
pub(super) fn key_of_digest(digest: &str, load: &str) -> String {
    format!("{digest}-{load}-{}-{CACHE_FORMAT}", env!("CARGO_PKG_VERSION"))
}

/// The file's SHA-256 in hex: remembered under `cache` by the file's identity,
/// else read and hashed (and then remembered). The memory check's measured
/// peaks are keyed by it too (`crate::memory::measured`).
pub(crate) fn digest_of(path: &Path, cache: Option<&Path>) -> anyhow::Result<String> {
    let memo = cache.zip(identity(path)).map(|(dir, id)| memo_path(dir, &id));
    if let Some(digest) = memo.as_deref().and_then(remembered_digest) {
        return Ok(digest);
    }
    let digest = sha256_hex(path)?;
    if let Some(memo) = &memo {
        write_atomically(memo, digest.as_bytes());
    }
    Ok(digest)
}

/// What tells this version of the file from any other without reading it: its
/// real path, device and inode, size, and modification and change times (to
/// the nanosecond). Writing the file changes its change time, which no one can set back.
fn identity(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let real = std::fs::canonicalize(path).ok()?;
    let m = std::fs::metadata(&real).ok()?;
    Some(format!(
        "{}\0{}:{}:{}:{}.{}:{}.{}",
        real.display(),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// The file's SHA-256 when it is remembered for the file as it is now, without
/// reading the file (`None` when it was never hashed, or has changed since).
pub(crate) fn remembered_digest_of(path: &Path, cache: &Path) -> Option<String> {
    remembered_digest(&memo_path(cache, &identity(path)?))
}

fn memo_path(cache: &Path, identity: &str) -> PathBuf {
    cache.join("probe").join("digests").join(hex(&Sha256::digest(identity.as_bytes())))
}

/// A digest remembered for a file identity; `None` unless it is 64 hex digits.
fn remembered_digest(memo: &Path) -> Option<String> {
    let text = std::fs::read_to_string(memo).ok()?;
    (text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())).then_some(text)
}

fn sha256_hex(path: &Path) -> anyhow::Result<String> {
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
    Ok(hex(&hasher.finalize()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
    if let Ok(json) = serde_json::to_vec(verdict) {
        write_atomically(path, &json);
    }
}

/// Write then rename, so a reader never sees half a file; best effort.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(".{}.{}", std::process::id(), path.file_name().and_then(|n| n.to_str()).unwrap_or("v")));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_remembered_by_the_files_identity_and_forgotten_when_it_is_written() {
        let work = tempfile::tempdir().unwrap();
        let cache = work.path().join("cache");
        let file = work.path().join("program.pte");
        std::fs::write(&file, b"first version").unwrap();
        let first = digest_of(&file, Some(&cache)).unwrap();
        assert_eq!(first, sha256_hex(&file).unwrap());
        let memo = memo_path(&cache, &identity(&file).unwrap());
        assert_eq!(std::fs::read_to_string(&memo).unwrap(), first, "the digest was not remembered");

        // A remembered digest is used without reading the file (a planted one shows it).
        let planted = "ab".repeat(32);
        std::fs::write(&memo, &planted).unwrap();
        assert_eq!(digest_of(&file, Some(&cache)).unwrap(), planted);
        // Anything but 64 hex digits is not a digest: the file is hashed again.
        std::fs::write(&memo, "not a digest").unwrap();
        assert_eq!(digest_of(&file, Some(&cache)).unwrap(), first);

        // Same size, new bytes: its change time moves, so it is hashed afresh.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&file, b"other version").unwrap();
        let second = digest_of(&file, Some(&cache)).unwrap();
        assert_ne!(second, first);
        assert_eq!(second, sha256_hex(&file).unwrap());
        // Without a cache directory the file is simply hashed.
        assert_eq!(digest_of(&file, None).unwrap(), second);
    }
}
