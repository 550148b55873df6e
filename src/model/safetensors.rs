//! A `model.safetensors` file's header: each tensor's dtype, shape and byte
//! range, read without reading the data (8 bytes of length, then JSON). The
//! eager path reads each tensor's bytes on its own from it (one tensor in
//! memory twice at a time, never the whole file), and `bench::weights` counts
//! bytes from it.
//!
//! A checkpoint as the hub ships a larger model is sharded: `model.safetensors.index.json`
//! (`"weight_map"`: tensor name -> shard file beside it) and the shards
//! `model-0000k-of-0000n.safetensors`. [`Checkpoint::read`] takes either the one
//! file or the index and gives every tensor with the shard that holds it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use anyhow::Context;

/// One tensor's entry in the header.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct TensorInfo {
    /// `F32`, `F16`, `BF16`, `I64`, ...
    pub dtype: String,
    pub shape: Vec<i64>,
    /// Its bytes, from the start of the data (after the header).
    pub data_offsets: [u64; 2],
}

impl TensorInfo {
    pub fn len(&self) -> u64 {
        self.data_offsets[1].saturating_sub(self.data_offsets[0])
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The header: tensors by name, and where the data starts in the file.
#[derive(Debug)]
pub struct Header {
    pub data_start: u64,
    pub tensors: BTreeMap<String, TensorInfo>,
}

/// A header larger than this is not a checkpoint's (transformers' are kilobytes to a few MB).
const MAX_HEADER: u64 = 100 << 20;

pub fn read_header(path: &Path) -> anyhow::Result<Header> {
    let mut file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    let mut len = [0u8; 8];
    file.read_exact(&mut len).with_context(|| format!("{}: not a safetensors file", path.display()))?;
    let len = u64::from_le_bytes(len);
    anyhow::ensure!(len <= MAX_HEADER, "{}: a safetensors header of {len} bytes is not plausible", path.display());
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header).with_context(|| format!("{}: truncated safetensors header", path.display()))?;
    let mut raw: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&header).with_context(|| format!("{}: unreadable safetensors header", path.display()))?;
    raw.remove("__metadata__");
    let data_start = 8 + len;
    let mut tensors = BTreeMap::new();
    for (name, info) in raw {
        let info: TensorInfo = serde_json::from_value(info).with_context(|| format!("{}: tensor {name}", path.display()))?;
        let [start, end] = info.data_offsets;
        anyhow::ensure!(
            start <= end && data_start.saturating_add(end) <= size,
            "{}: tensor {name}'s bytes {start}..{end} lie outside the file ({size} bytes; truncated?)",
            path.display()
        );
        tensors.insert(name, info);
    }
    Ok(Header { data_start, tensors })
}

/// Whether `path` names a sharded checkpoint's index (`model.safetensors.index.json`)
/// rather than a safetensors file.
pub fn is_index(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// A sharded checkpoint's index: tensor name -> shard file name.
#[derive(serde::Deserialize)]
struct Index {
    weight_map: BTreeMap<String, String>,
}

fn read_index(index: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let bytes = std::fs::read(index).with_context(|| format!("opening {}", index.display()))?;
    let parsed: Index = serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: not a sharded checkpoint's index (a JSON object with \"weight_map\": tensor -> shard file)", index.display()))?;
    anyhow::ensure!(!parsed.weight_map.is_empty(), "{}: the index's weight_map names no tensor", index.display());
    Ok(parsed.weight_map)
}

/// A shard named in an index as a path beside it; a name that could leave the
/// directory (`..`, an absolute path) is refused.
fn shard_path(index: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let plain = !name.is_empty() && Path::new(name).components().all(|c| matches!(c, Component::Normal(_)));
    anyhow::ensure!(
        plain,
        "{}: the shard {name:?} is not a file name inside the checkpoint's directory (an index may not name '..' or an absolute path)",
        index.display()
    );
    Ok(index.parent().unwrap_or(Path::new("")).join(name))
}

/// The shard files an index names, each once, in name order (checked to lie
/// beside it; not checked to exist).
pub fn shard_files(index: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let names: std::collections::BTreeSet<String> = read_index(index)?.into_values().collect();
    names.iter().map(|name| shard_path(index, name)).collect()
}

/// One safetensors file of a checkpoint and the tensors it gives.
#[derive(Debug)]
pub struct Shard {
    pub file: PathBuf,
    /// Its header, holding only the tensors the checkpoint takes from it.
    pub header: Header,
}

/// A checkpoint's tensors: one safetensors file, or every shard its index names.
#[derive(Debug)]
pub struct Checkpoint {
    /// What was named: `model.safetensors` or `model.safetensors.index.json`.
    pub path: PathBuf,
    pub shards: Vec<Shard>,
}

impl Checkpoint {
    /// Reads the header of `path`, or of every shard when `path` is an index
    /// ([`is_index`]). A shard that is missing, a tensor the index names that its
    /// shard lacks, and a shard path leaving the directory are errors naming them.
    pub fn read(path: &Path) -> anyhow::Result<Checkpoint> {
        if !is_index(path) {
            let header = read_header(path)?;
            return Ok(Checkpoint { path: path.to_path_buf(), shards: vec![Shard { file: path.to_path_buf(), header }] });
        }
        let map = read_index(path)?;
        let mut by_shard: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (tensor, shard) in &map {
            by_shard.entry(shard).or_default().push(tensor);
        }
        let mut shards = Vec::with_capacity(by_shard.len());
        for (name, tensors) in by_shard {
            let file = shard_path(path, name)?;
            anyhow::ensure!(
                file.is_file(),
                "{}: the index names the shard {name}, which is not there ({} missing): copy every shard the index names beside it",
                path.display(),
                file.display()
            );
            let mut header = read_header(&file)?;
            let mut kept = BTreeMap::new();
            for tensor in tensors {
                let info = header.tensors.remove(tensor).with_context(|| {
                    format!("{}: the index puts tensor {tensor} in {name}, which lacks it (a shard from another download?)", path.display())
                })?;
                kept.insert(tensor.to_string(), info);
            }
            header.tensors = kept;
            shards.push(Shard { file, header });
        }
        Ok(Checkpoint { path: path.to_path_buf(), shards })
    }

    /// Every tensor: its name, its entry and the shard holding it.
    pub fn tensors(&self) -> impl Iterator<Item = (&str, &TensorInfo, &Shard)> {
        self.shards.iter().flat_map(|shard| shard.header.tensors.iter().map(move |(name, info)| (name.as_str(), info, shard)))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.shards.iter().any(|s| s.header.tensors.contains_key(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(header: &str, data: usize) -> tempfile::NamedTempFile {
        use std::io::Write;
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
        f.write_all(header.as_bytes()).unwrap();
        f.write_all(&vec![0u8; data]).unwrap();
        f
    }

    #[test]
    fn reads_entries_and_where_the_data_starts() {
        let h = r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}}"#;
        let f = file_with(h, 32);
        let header = read_header(f.path()).unwrap();
        assert_eq!(header.data_start, 8 + h.len() as u64);
        assert_eq!(header.tensors.len(), 2);
        assert_eq!((header.tensors["a"].shape.as_slice(), header.tensors["a"].len()), (&[2i64, 3][..], 24));
        assert_eq!(header.tensors["b"].dtype, "BF16");
    }

    #[test]
    fn a_truncated_file_is_an_error_naming_the_tensor() {
        let h = r#"{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}"#;
        let e = read_header(file_with(h, 10).path()).unwrap_err().to_string();
        assert!(e.contains("tensor a") && e.contains("truncated"), "{e}");
        let e = read_header(file_with("{not json", 0).path()).unwrap_err().to_string();
        assert!(e.contains("unreadable safetensors header"), "{e}");
    }

    /// A sharded checkpoint in a temp dir: shards by name with their header JSON, and the index.
    fn sharded(shards: &[(&str, &str, usize)], weight_map: &str) -> tempfile::TempDir {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        for (name, header, data) in shards {
            let mut f = std::fs::File::create(dir.path().join(name)).unwrap();
            f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
            f.write_all(header.as_bytes()).unwrap();
            f.write_all(&vec![0u8; *data]).unwrap();
        }
        let index = format!(r#"{{"metadata": {{"total_size": 40}}, "weight_map": {weight_map}}}"#);
        std::fs::write(dir.path().join("model.safetensors.index.json"), index).unwrap();
        dir
    }

    const A: &str = r#"{"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"stray":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}"#;
    const B: &str = r#"{"b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"c":{"dtype":"F16","shape":[2],"data_offsets":[16,20]}}"#;

    #[test]
    fn an_index_gives_every_tensor_it_maps_from_its_shard() {
        let dir = sharded(&[("m-1.safetensors", A, 16), ("m-2.safetensors", B, 20)],
            r#"{"a": "m-1.safetensors", "b": "m-2.safetensors", "c": "m-2.safetensors"}"#);
        let index = dir.path().join("model.safetensors.index.json");
        assert!(is_index(&index) && !is_index(&dir.path().join("m-1.safetensors")));
        let ckpt = Checkpoint::read(&index).unwrap();
        let found: Vec<(&str, &str, String)> = ckpt
            .tensors()
            .map(|(name, info, shard)| (name, info.dtype.as_str(), shard.file.file_name().unwrap().to_string_lossy().into_owned()))
            .collect();
        // What the index does not map (`stray`) is not the checkpoint's.
        assert_eq!(found, [("a", "BF16", "m-1.safetensors".into()), ("b", "F32", "m-2.safetensors".into()), ("c", "F16", "m-2.safetensors".into())]);
        assert!(ckpt.contains("c") && !ckpt.contains("stray"));
        assert_eq!(shard_files(&index).unwrap(), [dir.path().join("m-1.safetensors"), dir.path().join("m-2.safetensors")]);
        // One file is a checkpoint of one shard.
        let one = Checkpoint::read(&dir.path().join("m-2.safetensors")).unwrap();
        assert_eq!((one.shards.len(), one.tensors().count()), (1, 2));
    }

    #[test]
    fn a_missing_shard_a_missing_tensor_and_an_escaping_path_are_named() {
        let read = |map: &str| {
            let dir = sharded(&[("m-1.safetensors", A, 16)], map);
            Checkpoint::read(&dir.path().join("model.safetensors.index.json")).unwrap_err().to_string()
        };
        let e = read(r#"{"a": "m-1.safetensors", "b": "m-2.safetensors"}"#);
        assert!(e.contains("names the shard m-2.safetensors, which is not there") && e.contains("copy every shard"), "{e}");
        let e = read(r#"{"a": "m-1.safetensors", "z": "m-1.safetensors"}"#);
        assert!(e.contains("puts tensor z in m-1.safetensors, which lacks it"), "{e}");
        for bad in ["../m-1.safetensors", "/etc/passwd", "x/../../m-1.safetensors", ""] {
            let e = read(&format!(r#"{{"a": {bad:?}}}"#));
            assert!(e.contains("not a file name inside the checkpoint's directory"), "{bad}: {e}");
            let dir = sharded(&[], &format!(r#"{{"a": {bad:?}}}"#));
            assert!(shard_files(&dir.path().join("model.safetensors.index.json")).is_err(), "{bad}");
        }
        let e = read(r#"{}"#);
        assert!(e.contains("names no tensor"), "{e}");
        let e = read(r#"["a"]"#);
        assert!(e.contains("not a sharded checkpoint's index"), "{e}");
    }
}
