//! The nearest-sentence corpus's embeddings, cached on disk so a second start
//! does no corpus work. Keyed by the sha256 the model directory's
//! `manifest.json` records for the program (or weights) that embedded it and by
//! the corpus's token ids: another export or another corpus is another file.
//!
//! Where: `$RUNLENS_CACHE_DIR`, else `$XDG_CACHE_HOME/runlens`, else
//! `~/.cache/runlens`. A file that is missing, short or unreadable is a miss,
//! never an error; writing is best effort.

use std::path::{Path, PathBuf};

use crate::backend::BackendSpec;
use crate::model::{Encoded, ModelDir};
use crate::task::Embedding;

/// A directory for the cache (tests).
pub const CACHE_DIR_ENV: &str = "RUNLENS_CACHE_DIR";
const MAGIC: &[u8; 8] = b"RLCORP01";

pub struct CorpusCache {
    dir: Option<PathBuf>,
    models: ModelDir,
}

impl CorpusCache {
    pub fn from_env(models: &ModelDir) -> CorpusCache {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dir = var(CACHE_DIR_ENV)
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("runlens")))
            .or_else(|| var("HOME").map(|h| h.join(".cache/runlens")));
        CorpusCache { dir, models: models.clone() }
    }

    /// The file for `kind`'s embeddings of `corpus`; `None` when the manifest
    /// gives no sha256 for the file that computes them.
    pub fn path(&self, kind: &BackendSpec, corpus: &[Encoded]) -> Option<PathBuf> {
        let manifest = self.models.manifest();
        let sha = match kind.model_file() {
            // A program given with --program has no sha256 in the manifest: no cache.
            Some(path) => manifest.sha256.get(path.strip_prefix(self.models.root()).ok()?.to_str()?)?.clone(),
            // Eager: the checkpoint's weights.
            None => self.models.weights_sha256()?,
        };
        let mut h = Fnv::default();
        for e in corpus {
            e.ids.iter().for_each(|id| h.write(&id.to_le_bytes()));
            h.write(b";");
        }
        Some(self.dir.as_ref()?.join(format!("corpus-{}-{}-{:016x}.bin", kind.name(), &sha[..sha.len().min(16)], h.0)))
    }

    pub fn load(&self, kind: &BackendSpec, corpus: &[Encoded]) -> Option<Vec<Embedding>> {
        read(&self.path(kind, corpus)?, corpus.len())
    }

    pub fn store(&self, kind: &BackendSpec, corpus: &[Encoded], embeddings: &[Embedding]) {
        if let Some(path) = self.path(kind, corpus) {
            let _ = write(&path, embeddings);
        }
    }
}

fn read(path: &Path, n: usize) -> Option<Vec<Embedding>> {
    let bytes = std::fs::read(path).ok()?;
    let body = bytes.strip_prefix(MAGIC)?;
    let count = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
    let dim = u32::from_le_bytes(body.get(4..8)?.try_into().ok()?) as usize;
    let floats = body.get(8..)?;
    if count != n || dim == 0 || floats.len() != count * dim * 4 {
        return None;
    }
    let values: Vec<f32> = floats.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Some(values.chunks(dim).map(|c| Embedding(c.to_vec())).collect())
}

fn write(path: &Path, embeddings: &[Embedding]) -> std::io::Result<()> {
    let dim = embeddings.first().map_or(0, |e| e.0.len());
    let mut out = Vec::with_capacity(16 + embeddings.len() * dim * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(embeddings.len() as u32).to_le_bytes());
    out.extend_from_slice(&(dim as u32).to_le_bytes());
    for e in embeddings {
        if e.0.len() != dim {
            return Ok(());
        }
        e.0.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Write then rename, so a reader never sees half a file.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, out)?;
    std::fs::rename(tmp, path)
}

/// FNV-1a, 64 bits: enough to tell corpora apart in a file name.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_misses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.bin");
        let e = vec![Embedding(vec![0.5, -1.0, 2.0]), Embedding(vec![1.0, 0.0, -0.25])];
        write(&path, &e).unwrap();
        assert_eq!(read(&path, 2), Some(e));
        assert_eq!(read(&path, 3), None, "another corpus size is a miss");
        std::fs::write(&path, b"RLCORP01\x02\x00\x00\x00\x03\x00\x00\x00short").unwrap();
        assert_eq!(read(&path, 2), None, "a short file is a miss");
        assert_eq!(read(&dir.path().join("none.bin"), 2), None);
    }
}
