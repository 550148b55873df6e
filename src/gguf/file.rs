//! What a read header says: metadata look-ups, the model's sizes, the weight
//! types, and whether runlens hands the file to llama.cpp.

use std::collections::BTreeMap;

use super::error::{FileName, GgufError};
use super::types::GgmlType;
use super::value::{Value, ValueType};
use super::{GgufFile, ARCHITECTURES};

impl GgufFile {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The string value of `key`.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    /// The integer value of `key` (any width, signed ones when not negative).
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    /// `general.architecture` (`"llama"`, `"qwen2"`).
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    /// `{arch}.{name}` as an integer.
    fn arch_u64(&self, name: &str) -> Option<u64> {
        self.get_u64(&format!("{}.{name}", self.architecture()?))
    }

    /// The vocabulary's size: the length of `tokenizer.ggml.tokens`, else
    /// `{arch}.vocab_size`.
    pub fn vocab_size(&self) -> Option<u64> {
        match self.get("tokenizer.ggml.tokens") {
            Some(Value::Array { elem: ValueType::Str, len, .. }) => Some(*len),
            _ => self.arch_u64("vocab_size"),
        }
    }

    /// `{arch}.block_count`: the transformer layers.
    pub fn block_count(&self) -> Option<u64> {
        self.arch_u64("block_count")
    }

    /// `{arch}.embedding_length`: the hidden size.
    pub fn embedding_length(&self) -> Option<u64> {
        self.arch_u64("embedding_length")
    }

    /// `{arch}.context_length`: the context the model was trained for.
    pub fn context_length(&self) -> Option<u64> {
        self.arch_u64("context_length")
    }

    /// The bytes of all tensor data (without padding).
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.iter().fold(0u64, |sum, t| sum.saturating_add(t.nbytes))
    }

    /// Per type: how many tensors and how many bytes, most bytes first
    /// (ties by type id).
    pub fn type_summary(&self) -> Vec<(GgmlType, usize, u64)> {
        let mut by_type: BTreeMap<GgmlType, (usize, u64)> = BTreeMap::new();
        for t in &self.tensors {
            let entry = by_type.entry(t.ggml_type).or_default();
            entry.0 += 1;
            entry.1 = entry.1.saturating_add(t.nbytes);
        }
        let mut out: Vec<_> = by_type.into_iter().map(|(ty, (n, bytes))| (ty, n, bytes)).collect();
        out.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        out
    }

    /// The type holding the most bytes among the matrices (tensors of two
    /// or more dimensions; all tensors when there is none): q4_0 for a
    /// Q4_0 file, whose norms stay f32 and whose output matrix may be q6_k.
    pub fn main_type(&self) -> Option<GgmlType> {
        let matrices = self.tensors.iter().any(|t| t.dims.len() >= 2);
        let mut by_type: BTreeMap<GgmlType, u64> = BTreeMap::new();
        for t in self.tensors.iter().filter(|t| !matrices || t.dims.len() >= 2) {
            let bytes = by_type.entry(t.ggml_type).or_default();
            *bytes = bytes.saturating_add(t.nbytes);
        }
        // The first of equal ones: the lowest type id.
        by_type.into_iter().rev().max_by_key(|&(_, bytes)| bytes).map(|(ty, _)| ty)
    }

    /// What runlens can hand to llama.cpp: `Ok`, or the first reason not: an
    /// architecture outside [`ARCHITECTURES`], a tensor type outside
    /// [`RUNNABLE_TYPES`](super::RUNNABLE_TYPES), or (given the model
    /// directory's vocabulary size) a vocabulary of another size or none.
    pub fn check_runnable(&self, expected_vocab: Option<u64>) -> Result<(), GgufError> {
        let file = FileName(self.path.clone());
        let Some(arch) = self.architecture() else {
            return Err(GgufError::NoArchitecture { file });
        };
        if !ARCHITECTURES.contains(&arch) {
            return Err(GgufError::UnsupportedArchitecture { file, arch: arch.to_string() });
        }
        if let Some(t) = self.tensors.iter().find(|t| !t.ggml_type.is_runnable()) {
            return Err(GgufError::UnsupportedType { file, tensor: t.name.clone(), ty: t.ggml_type });
        }
        if let Some(expected) = expected_vocab {
            match self.vocab_size() {
                None => return Err(GgufError::NoVocabulary { file, expected }),
                Some(gguf) if gguf != expected => return Err(GgufError::VocabMismatch { file, gguf, expected }),
                Some(_) => {}
            }
        }
        Ok(())
    }
}
