//! A reader for the header of GGUF files (llama.cpp's format): the metadata
//! and the tensor infos, read in pure Rust without llama.cpp.
//!
//! Layout (docs/llama-cpp-design.md section 4; ggml's `docs/gguf.md`), little
//! endian: the magic `GGUF`, a u32 version (2 or 3), u64 tensor and key-value
//! counts, the key-value pairs (a string key, a u32 value type, the value; an
//! array is an element type, a u64 length and the elements), the tensor infos
//! (name, dimensions, ggml type, offset in the data section), then the data
//! section, aligned to `general.alignment` (32 by default).
//!
//! [`read_path`] reads only the header, through a bounded buffer, and takes
//! the file's length from the file system; [`read_bytes`] reads a file held
//! in memory. Both refuse everything ggml's own reader (ggml/src/gguf.cpp)
//! refuses, so llama.cpp is never handed a file it would fail on, plus
//! llama.cpp's check that each tensor's data lies inside the file (a cut-short
//! download) and its assertion that no token of the vocabulary appears twice
//! (it aborts). Every count and length out of the file is checked against the
//! bytes left before anything is allocated; bytes of any kind give a
//! [`GgufFile`] or a [`GgufError`], never a panic.
//!
//! [`GgufFile::check_runnable`] then says whether runlens hands the file to
//! llama.cpp: a supported architecture, tensor types the CPU backend runs,
//! and the model directory's vocabulary.

mod error;
mod file;
mod limits;
mod reader;
mod source;
mod types;
mod value;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use error::{FileName, GgufError};
pub use reader::{read_bytes, read_path};
pub use types::{GgmlType, RUNNABLE_TYPES};
pub use value::{Value, ValueType, KEPT_ELEMENTS};

/// The architectures (`general.architecture`) runlens runs through llama.cpp.
pub const ARCHITECTURES: &[&str] = &["llama", "qwen2", "qwen3", "gpt2", "bert"];

/// A GGUF file's header.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufFile {
    /// The file read, set by [`read_path`].
    pub path: Option<PathBuf>,
    /// 2 or 3.
    pub version: u32,
    /// `general.alignment`, or 32.
    pub alignment: u64,
    /// Where the data section starts, from the start of the file.
    pub data_start: u64,
    /// The file's length in bytes.
    pub file_len: u64,
    /// The key-value pairs, in file order.
    pub metadata: Vec<(String, Value)>,
    /// The tensor infos, in file order.
    pub tensors: Vec<TensorInfo>,
}

/// One tensor of the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// At most 63 bytes (ggml's limit); not valid UTF-8 is replaced (U+FFFD).
    pub name: String,
    /// ggml's order: `dims[0]` is the row length (contiguous elements).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// From the start of the data section ([`GgufFile::data_start`]).
    pub offset: u64,
    /// The data's bytes (without the padding after it).
    pub nbytes: u64,
}
