//! The bounds a GGUF header is read within: ggml's own (gguf.cpp, ggml.h)
//! and the smallest bytes each entry takes, which cap every count read out
//! of the file by the bytes that follow it.

/// The fixed header: magic, version, tensor count, key-value count.
pub(super) const HEADER_BYTES: u64 = 4 + 4 + 8 + 8;

/// ggml's `GGUF_MAX_STRING_LENGTH`.
pub(super) const MAX_STRING_BYTES: u64 = 1 << 30;

/// ggml's `GGUF_MAX_ARRAY_ELEMENTS`.
pub(super) const MAX_ARRAY_LEN: u64 = 1 << 30;

/// ggml's `GGML_MAX_NAME` less the terminating zero.
pub(super) const MAX_TENSOR_NAME: u64 = 63;

/// ggml's `GGML_MAX_DIMS`.
pub(super) const MAX_DIMS: u32 = 4;

/// ggml's `GGUF_DEFAULT_ALIGNMENT`.
pub(super) const DEFAULT_ALIGNMENT: u64 = 32;

/// The smallest key-value pair: a one-byte key (8 + 1), its type (4), a u8 (1).
pub(super) const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;

/// The smallest tensor info: a one-byte name (8 + 1), n_dims (4), one
/// dimension (8), the type (4), the offset (8).
pub(super) const MIN_TENSOR_BYTES: u64 = 8 + 1 + 4 + 8 + 4 + 8;

/// At most this many key-value pairs and as many tensors are read (real
/// files have tens of pairs and at most some thousands of tensors): what
/// the reader keeps per entry is several times the bytes the entry takes, so
/// the bytes alone would let a crafted header of a gigabyte cost several.
pub(super) const MAX_ENTRIES: u64 = 1 << 20;
