//! The checkpoint's tensors, read once from `model.safetensors` (or the shards
//! of `model.safetensors.index.json`), and a
//! checked lookup: every tensor the encoder takes must be there, with the shape
//! the config implies, or loading fails with an error naming it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tch::{Kind, Tensor};

/// A tensor the encoder needs is absent or unusable.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    #[error("cannot read the checkpoint {file}: {why}")]
    Read { file: PathBuf, why: String },
    #[error("tensor `{name}` in {file} is stored as {dtype}, which runlens cannot read (F32, F16, BF16, F64, I64, I32, I8, U8, BOOL)")]
    Dtype { name: String, file: PathBuf, dtype: String },
    #[error("tensor `{name}` is missing from {file}")]
    Missing { name: String, file: PathBuf },
    #[error("tensor `{name}` in {file} has shape {found:?}, but the config implies {expected:?}")]
    Shape {
        name: String,
        file: PathBuf,
        expected: Vec<i64>,
        found: Vec<i64>,
    },
    #[error("tensor `{name}` in {file} holds {found:?}, not floating-point values")]
    Kind { name: String, file: PathBuf, found: Kind },
    #[error("cannot prepare tensor `{name}` of {file}")]
    Prepare {
        name: String,
        file: PathBuf,
        source: tch::TchError,
    },
}

/// A safetensors dtype as a tch kind.
fn kind_of(dtype: &str) -> Option<Kind> {
    Some(match dtype {
        "F32" => Kind::Float,
        "F16" => Kind::Half,
        "BF16" => Kind::BFloat16,
        "F64" => Kind::Double,
        "I64" => Kind::Int64,
        "I32" => Kind::Int,
        "I8" => Kind::Int8,
        "U8" => Kind::Uint8,
        "BOOL" => Kind::Bool,
        _ => return None,
    })
}

/// All tensors of one safetensors file, by checkpoint key.
pub struct Weights {
    file: PathBuf,
    tensors: HashMap<String, Tensor>,
}

impl Weights {
    /// Reads every tensor of `file` (`model.safetensors`, or a sharded checkpoint's
    /// `model.safetensors.index.json` and every shard it names), one at a time:
    /// its bytes into a buffer, then into its own tensor, so loading holds the
    /// model once plus its largest tensor (tch's `read_safetensors` reads the
    /// whole file first: twice the model at the peak, 4 GB for Qwen2.5-0.5B in
    /// float32). BF16 and F16 tensors stay so until [`WeightPath::get`] widens them.
    pub fn read(file: &Path) -> Result<Weights, WeightError> {
        use std::io::{Read, Seek, SeekFrom};
        let read_error = |e: anyhow::Error| WeightError::Read { file: file.to_path_buf(), why: format!("{e:#}") };
        let checkpoint = crate::model::safetensors::Checkpoint::read(file).map_err(read_error)?;
        let mut tensors = HashMap::with_capacity(checkpoint.tensors().count());
        let mut bytes = Vec::new();
        for shard in &checkpoint.shards {
            let shard_error = |e: anyhow::Error| WeightError::Read { file: shard.file.clone(), why: format!("{e:#}") };
            let mut f = std::fs::File::open(&shard.file).map_err(|e| shard_error(e.into()))?;
            for (name, info) in &shard.header.tensors {
                let kind = kind_of(&info.dtype).ok_or_else(|| WeightError::Dtype { name: name.clone(), file: shard.file.clone(), dtype: info.dtype.clone() })?;
                let elements = info.shape.iter().try_fold(1u64, |n, d| u64::try_from(*d).ok().and_then(|d| n.checked_mul(d)));
                if elements.and_then(|n| n.checked_mul(kind.elt_size_in_bytes() as u64)) != Some(info.len()) {
                    return Err(shard_error(anyhow::anyhow!(
                        "tensor {name}: {} bytes do not hold a {} of shape {:?}", info.len(), info.dtype, info.shape
                    )));
                }
                bytes.resize(info.len() as usize, 0);
                f.seek(SeekFrom::Start(shard.header.data_start + info.data_offsets[0]))
                    .and_then(|_| f.read_exact(&mut bytes))
                    .map_err(|e| shard_error(anyhow::Error::new(e).context(format!("reading tensor {name}"))))?;
                let tensor = Tensor::f_from_data_size(&bytes, &info.shape, kind)
                    .map_err(|source| WeightError::Prepare { name: name.clone(), file: shard.file.clone(), source })?;
                tensors.insert(name.clone(), tensor);
            }
        }
        Ok(Weights {
            file: file.to_path_buf(),
            tensors,
        })
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// Where the encoder's keys start: transformers saves a bare `BertModel` /
    /// `DistilBertModel` with root keys (`embeddings.word_embeddings.weight`) and a
    /// task model with its base model under `base_prefix` (`bert.embeddings...`,
    /// `distilbert.embeddings...`).
    pub fn encoder_root(&self, base_prefix: &str) -> WeightPath<'_> {
        let probe = "embeddings.word_embeddings.weight";
        let prefixed = !self.contains(probe) && self.contains(&format!("{base_prefix}.{probe}"));
        self.root(if prefixed { base_prefix } else { "" })
    }

    /// The keys under `prefix` (e.g. `"bert"` for `bert.embeddings...`); `""` for the root.
    pub fn root(&self, prefix: &str) -> WeightPath<'_> {
        WeightPath {
            weights: self,
            prefix: prefix.to_string(),
        }
    }

    /// The tensor `name` as f32, checked against `shape`.
    fn get(&self, name: &str, shape: &[i64]) -> Result<Tensor, WeightError> {
        let file = || self.file.clone();
        let tensor = self.tensors.get(name).ok_or_else(|| WeightError::Missing {
            name: name.to_string(),
            file: file(),
        })?;
        if tensor.size() != shape {
            return Err(WeightError::Shape {
                name: name.to_string(),
                file: file(),
                expected: shape.to_vec(),
                found: tensor.size(),
            });
        }
        match tensor.kind() {
            Kind::Float => Ok(tensor.shallow_clone()),
            Kind::Half | Kind::BFloat16 | Kind::Double => {
                tensor.f_to_kind(Kind::Float).map_err(|source| WeightError::Prepare {
                    name: name.to_string(),
                    file: file(),
                    source,
                })
            }
            found => Err(WeightError::Kind {
                name: name.to_string(),
                file: file(),
                found,
            }),
        }
    }
}

/// A position in the checkpoint's key tree, like candle's `VarBuilder::pp`:
/// `root.pp("encoder").pp("layer.0").get("output.dense.weight", ..)`.
#[derive(Clone)]
pub struct WeightPath<'a> {
    weights: &'a Weights,
    prefix: String,
}

impl<'a> WeightPath<'a> {
    /// The sub-module `name` (may contain dots: `"layer.3"`).
    pub fn pp(&self, name: &str) -> WeightPath<'a> {
        WeightPath {
            weights: self.weights,
            prefix: self.key(name),
        }
    }

    /// The tensor `name` under this path, as f32 with exactly `shape`.
    pub fn get(&self, name: &str, shape: &[i64]) -> Result<Tensor, WeightError> {
        self.weights.get(&self.key(name), shape)
    }

    /// Whether the checkpoint has the tensor `name` under this path.
    pub fn contains(&self, name: &str) -> bool {
        self.weights.contains(&self.key(name))
    }

    /// The first of `names` the checkpoint has (`["weight", "gamma"]`), checked against
    /// `shape`; when none is there, the error names the first.
    pub fn get_either(&self, names: &[&str], shape: &[i64]) -> Result<Tensor, WeightError> {
        let name = names.iter().find(|name| self.contains(name)).unwrap_or(&names[0]);
        self.get(name, shape)
    }

    /// The tensor `name`, then `f` of it (a slice, say); an error in `f` names the tensor.
    pub fn get_map<F>(&self, name: &str, shape: &[i64], f: F) -> Result<Tensor, WeightError>
    where
        F: FnOnce(&Tensor) -> Result<Tensor, tch::TchError>,
    {
        let tensor = self.get(name, shape)?;
        f(&tensor).map_err(|source| WeightError::Prepare {
            name: self.key(name),
            file: self.weights.file.clone(),
            source,
        })
    }

    fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file of `tensors` (name, dtype, shape, little-endian bytes).
    fn write_safetensors(path: &Path, tensors: &[(&str, &str, &[i64], Vec<u8>)]) {
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for (name, dtype, shape, bytes) in tensors {
            let offsets = [data.len(), data.len() + bytes.len()];
            header.insert(name.to_string(), serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": offsets}));
            data.extend_from_slice(bytes);
        }
        let header = serde_json::to_vec(&header).unwrap();
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend(header);
        file.extend(data);
        std::fs::write(path, file).unwrap();
    }

    fn halves(bits: &[u16]) -> Vec<u8> {
        bits.iter().flat_map(|b| b.to_le_bytes()).collect()
    }

    /// Two shards (bfloat16 and float16 beside float32) and their index, as
    /// `save_pretrained(max_shard_size=...)` lays a bfloat16 checkpoint out.
    fn sharded_checkpoint(dir: &Path, weight_map: &str) -> PathBuf {
        let f32s: Vec<u8> = [0.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        // bfloat16 1.5, -0.25, 3.0; float16 1.5, -0.25
        write_safetensors(&dir.join("model-00001-of-00002.safetensors"), &[("a", "BF16", &[3], halves(&[0x3FC0, 0xBE80, 0x4040])), ("b", "F32", &[2], f32s)]);
        write_safetensors(&dir.join("model-00002-of-00002.safetensors"), &[("c", "F16", &[1, 2], halves(&[0x3E00, 0xB400]))]);
        let index = dir.join("model.safetensors.index.json");
        std::fs::write(&index, format!(r#"{{"metadata": {{"total_size": 18}}, "weight_map": {weight_map}}}"#)).unwrap();
        index
    }

    const MAP: &str = r#"{"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}"#;

    #[test]
    fn every_shard_of_an_index_is_read_and_half_precision_widened_to_f32() {
        let tmp = tempfile::tempdir().unwrap();
        let weights = Weights::read(&sharded_checkpoint(tmp.path(), MAP)).unwrap();
        let values = |name: &str, shape: &[i64]| Vec::<f32>::try_from(weights.root("").get(name, shape).unwrap().flatten(0, -1)).unwrap();
        assert_eq!(values("a", &[3]), [1.5, -0.25, 3.0]);
        assert_eq!(values("b", &[2]), [0.5, -2.0]);
        assert_eq!(values("c", &[1, 2]), [1.5, -0.25]);
        assert_eq!(weights.root("").get("c", &[1, 2]).unwrap().kind(), Kind::Float);
        let e = weights.root("").get("d", &[1]).unwrap_err().to_string();
        assert!(e.contains("`d` is missing") && e.contains("model.safetensors.index.json"), "{e}");
    }

    #[test]
    fn a_missing_shard_or_tensor_and_an_escaping_shard_are_clear_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let index = sharded_checkpoint(tmp.path(), MAP);
        std::fs::remove_file(tmp.path().join("model-00002-of-00002.safetensors")).unwrap();
        let e = Weights::read(&index).err().unwrap().to_string();
        assert!(e.contains("names the shard model-00002-of-00002.safetensors, which is not there"), "{e}");
        let tmp = tempfile::tempdir().unwrap();
        let index = sharded_checkpoint(tmp.path(), r#"{"a": "model-00001-of-00002.safetensors", "z": "model-00002-of-00002.safetensors"}"#);
        let e = Weights::read(&index).err().unwrap().to_string();
        assert!(e.contains("puts tensor z in model-00002-of-00002.safetensors, which lacks it"), "{e}");
        let index = sharded_checkpoint(tmp.path(), r#"{"a": "../model-00001-of-00002.safetensors"}"#);
        let e = Weights::read(&index).err().unwrap().to_string();
        assert!(e.contains("not a file name inside the checkpoint's directory"), "{e}");
    }
}
