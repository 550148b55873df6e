//! The checkpoint's tensors, read once from `model.safetensors`, and a
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
    /// Reads every tensor of `file`, one at a time: its bytes into a buffer, then
    /// into its own tensor, so loading holds the model once plus its largest
    /// tensor (tch's `read_safetensors` reads the whole file first: twice the
    /// model at the peak, 4 GB for Qwen2.5-0.5B in float32).
    pub fn read(file: &Path) -> Result<Weights, WeightError> {
        use std::io::{Read, Seek, SeekFrom};
        let read_error = |e: anyhow::Error| WeightError::Read { file: file.to_path_buf(), why: format!("{e:#}") };
        let header = crate::model::safetensors::read_header(file).map_err(read_error)?;
        let mut f = std::fs::File::open(file).map_err(|e| read_error(e.into()))?;
        let mut tensors = HashMap::with_capacity(header.tensors.len());
        let mut bytes = Vec::new();
        for (name, info) in header.tensors {
            let kind = kind_of(&info.dtype).ok_or_else(|| WeightError::Dtype { name: name.clone(), file: file.to_path_buf(), dtype: info.dtype.clone() })?;
            let elements = info.shape.iter().try_fold(1u64, |n, d| u64::try_from(*d).ok().and_then(|d| n.checked_mul(d)));
            if elements.and_then(|n| n.checked_mul(kind.elt_size_in_bytes() as u64)) != Some(info.len()) {
                return Err(read_error(anyhow::anyhow!(
                    "tensor {name}: {} bytes do not hold a {} of shape {:?}", info.len(), info.dtype, info.shape
                )));
            }
            bytes.resize(info.len() as usize, 0);
            f.seek(SeekFrom::Start(header.data_start + info.data_offsets[0]))
                .and_then(|_| f.read_exact(&mut bytes))
                .map_err(|e| read_error(anyhow::Error::new(e).context(format!("reading tensor {name}"))))?;
            let tensor = Tensor::f_from_data_size(&bytes, &info.shape, kind)
                .map_err(|source| WeightError::Prepare { name: name.clone(), file: file.to_path_buf(), source })?;
            tensors.insert(name, tensor);
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
