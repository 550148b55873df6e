//! A `model.safetensors` file's header: each tensor's dtype, shape and byte
//! range, read without reading the data (8 bytes of length, then JSON). The
//! eager path reads each tensor's bytes on its own from it (one tensor in
//! memory twice at a time, never the whole file), and `bench::weights` counts
//! bytes from it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

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
}
