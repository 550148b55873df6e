//! Why a file is not a GGUF runlens reads, or not one it hands to llama.cpp.
//! Each message names the file, the problem, the byte offset where it helps,
//! and what to do.

use std::fmt;
use std::path::{Path, PathBuf};

use super::types::GgmlType;
use super::ARCHITECTURES;

/// The file an error is about: its path, or "the GGUF data" for bytes read
/// with [`read_bytes`](super::read_bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileName(pub Option<PathBuf>);

impl fmt::Display for FileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(path) => write!(f, "{}", path.display()),
            None => f.write_str("the GGUF data"),
        }
    }
}

/// Why a GGUF cannot be read (every check ggml's own reader makes, and a few
/// more), or cannot be run ([`GgufFile::check_runnable`](super::GgufFile::check_runnable)).
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{file}: cannot read it: {source}")]
    Io {
        file: FileName,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: {len} bytes, too short for a GGUF file (its fixed header alone takes 24): download or export it again")]
    TooShort { file: FileName, len: u64 },
    #[error("{file}: not a GGUF file: it starts with {found}, not \"GGUF\" (a GGUF is written by llama.cpp's convert_hf_to_gguf.py or runlens' export)")]
    NotGguf { file: FileName, found: String },
    #[error("{file}: the version field reads {version:#010x}: a big-endian GGUF, which llama.cpp cannot load on this little-endian machine; convert the model again without --bigendian")]
    ByteSwapped { file: FileName, version: u32 },
    #[error("{file}: GGUF version {version}, but llama.cpp reads versions 2 and 3 only: convert the model again with a current convert_hf_to_gguf.py")]
    UnsupportedVersion { file: FileName, version: u32 },
    #[error("{file}: the header claims {count} {what}, but at most {max} can follow in the {left} bytes after it: a corrupt header")]
    CountTooLarge { file: FileName, what: &'static str, count: u64, max: u64, left: u64 },
    #[error("{file}: {what} at byte {at} needs {need} bytes, but only {left} are left: the header is cut short or a length in it is corrupt")]
    PastEnd { file: FileName, what: String, at: u64, need: u64, left: u64 },
    #[error("{file}: {what} at byte {at} claims {len} bytes, over ggml's limit of 2^30 per string: a corrupt header")]
    StringTooLong { file: FileName, what: String, at: u64, len: u64 },
    #[error("{file}: array '{key}' at byte {at} claims {len} elements, over ggml's limit of 2^30: a corrupt header")]
    ArrayTooLong { file: FileName, key: String, at: u64, len: u64 },
    #[error("{file}: key {index} at byte {at} is not UTF-8: a corrupt header")]
    KeyNotUtf8 { file: FileName, index: u64, at: u64 },
    #[error("{file}: key {index} at byte {at} is empty, which ggml refuses: a corrupt header")]
    EmptyKey { file: FileName, index: u64, at: u64 },
    #[error("{file}: key '{key}' (pair {index}, at byte {at}) appears twice, which ggml refuses: a corrupt header")]
    DuplicateKey { file: FileName, key: String, index: u64, at: u64 },
    #[error("{file}: key '{key}' has value type {type_id} at byte {at}, not one of GGUF's 13 (0 to 12): a corrupt header or a newer format")]
    UnknownValueType { file: FileName, key: String, type_id: u32, at: u64 },
    #[error("{file}: key '{key}' is an array of arrays (at byte {at}), which ggml refuses")]
    NestedArray { file: FileName, key: String, at: u64 },
    #[error("{file}: general.alignment is {found}, but ggml takes only a u32 power of two: a corrupt header")]
    BadAlignment { file: FileName, found: String },
    #[error("{file}: tensor {index} at byte {at} has an empty name: a corrupt header")]
    EmptyTensorName { file: FileName, index: u64, at: u64 },
    #[error("{file}: tensor {index}'s name at byte {at} is {len} bytes, but ggml takes at most 63")]
    TensorNameTooLong { file: FileName, index: u64, at: u64, len: u64 },
    #[error("{file}: tensor '{name}' (tensor {index}, at byte {at}) appears twice, which ggml refuses")]
    DuplicateTensor { file: FileName, name: String, index: u64, at: u64 },
    #[error("{file}: tensor '{name}' has {n_dims} dimensions (at byte {at}); runlens takes 1 to 4 (ggml's limit is 4)")]
    BadDimCount { file: FileName, name: String, n_dims: u32, at: u64 },
    #[error("{file}: tensor '{name}' dimension {dim} is {value} (at byte {at}), past ggml's int64 range: a corrupt header")]
    DimTooLarge { file: FileName, name: String, dim: u32, value: u64, at: u64 },
    #[error("{file}: tensor '{name}' of shape {dims:?} has more elements or bytes than a 64-bit count holds: a corrupt header")]
    TooManyElements { file: FileName, name: String, dims: Vec<u64> },
    #[error("{file}: tensor '{name}' has ggml type {type_id} (at byte {at}), which ggml does not have (removed, or newer than runlens' table): convert or quantize the model again")]
    UnknownGgmlType { file: FileName, name: String, type_id: u32, at: u64 },
    #[error("{file}: tensor '{name}' is {ty} with rows of {ne0} elements, not a multiple of {ty}'s block of {block}, which ggml refuses")]
    BlockSize { file: FileName, name: String, ty: GgmlType, ne0: u64, block: u64 },
    #[error("{file}: tensor '{name}' starts at data offset {offset}, not a multiple of the alignment {alignment}: a corrupt header")]
    MisalignedOffset { file: FileName, name: String, offset: u64, alignment: u64 },
    #[error("{file}: tensor '{name}' starts at data offset {offset}, but the tensors before it end at {expected} (padded): ggml reads only tensors packed in file order; a corrupt header")]
    OffsetMismatch { file: FileName, name: String, offset: u64, expected: u64 },
    #[error("{file}: {what} ends at byte {end}, but the file has {file_len} bytes: {missing} bytes are missing, a cut-short download or export; download or export it again")]
    Truncated { file: FileName, what: String, end: u64, file_len: u64, missing: u64 },
    #[error("{file}: no general.architecture, so llama.cpp cannot load it; runlens runs {}", ARCHITECTURES.join(", "))]
    NoArchitecture { file: FileName },
    #[error("{file}: architecture '{arch}' is not one runlens runs through llama.cpp; it runs {}", ARCHITECTURES.join(", "))]
    UnsupportedArchitecture { file: FileName, arch: String },
    #[error("{file}: tensor '{tensor}' is {ty}, which runlens does not hand to llama.cpp's CPU backend (it takes {}): quantize the F32 or F16 GGUF again with llama-quantize, to q8_0 or q4_0", super::types::RUNNABLE_TYPES.join(", "))]
    UnsupportedType { file: FileName, tensor: String, ty: GgmlType },
    #[error("{file}: the GGUF's vocabulary has {gguf} tokens, the model directory's tokenizer {expected}: a GGUF of another model?")]
    VocabMismatch { file: FileName, gguf: u64, expected: u64 },
    #[error("{file}: the GGUF has no tokenizer.ggml.tokens nor a vocab_size, so it cannot be checked against the model directory's tokenizer ({expected} tokens): convert the model again with its tokenizer")]
    NoVocabulary { file: FileName, expected: u64 },
    #[error("{file}: token {index} of the vocabulary (the array at byte {at}) repeats an earlier token, which llama.cpp cannot load (it aborts): a corrupt header")]
    DuplicateToken { file: FileName, index: u64, at: u64 },
}

impl GgufError {
    /// The file the error is about, when known.
    pub fn file(&self) -> Option<&Path> {
        use GgufError::*;
        match self {
            Io { file, .. }
            | TooShort { file, .. }
            | NotGguf { file, .. }
            | ByteSwapped { file, .. }
            | UnsupportedVersion { file, .. }
            | CountTooLarge { file, .. }
            | PastEnd { file, .. }
            | StringTooLong { file, .. }
            | ArrayTooLong { file, .. }
            | KeyNotUtf8 { file, .. }
            | EmptyKey { file, .. }
            | DuplicateKey { file, .. }
            | UnknownValueType { file, .. }
            | NestedArray { file, .. }
            | BadAlignment { file, .. }
            | EmptyTensorName { file, .. }
            | TensorNameTooLong { file, .. }
            | DuplicateTensor { file, .. }
            | BadDimCount { file, .. }
            | DimTooLarge { file, .. }
            | TooManyElements { file, .. }
            | UnknownGgmlType { file, .. }
            | BlockSize { file, .. }
            | MisalignedOffset { file, .. }
            | OffsetMismatch { file, .. }
            | Truncated { file, .. }
            | NoArchitecture { file }
            | UnsupportedArchitecture { file, .. }
            | UnsupportedType { file, .. }
            | VocabMismatch { file, .. }
            | NoVocabulary { file, .. }
            | DuplicateToken { file, .. } => file.0.as_deref(),
        }
    }
}
