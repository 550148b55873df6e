//! Parses a GGUF header (metadata and tensor infos) with every check of
//! ggml's reader (`gguf_init_from_reader` in ggml/src/gguf.cpp) and
//! llama.cpp's file-bounds check, in the same order where it matters.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Seek};
use std::path::Path;

use super::error::{FileName, GgufError};
use super::limits::*;
use super::source::Source;
use super::types::GgmlType;
use super::value::{Value, ValueType, KEPT_ELEMENTS};
use super::{GgufFile, TensorInfo};

/// The buffer between the file and the parser.
const BUFFER_BYTES: usize = 64 * 1024;

/// Reads the header of the GGUF at `path`: the metadata and tensor infos,
/// checked against the file's length (from the file system), without reading
/// the data section (its buffer reads at most 64 KiB past the header).
pub fn read_path(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
    let path = path.as_ref();
    let name = FileName(Some(path.to_path_buf()));
    let io = |source| GgufError::Io { file: name.clone(), source };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut source = Source::new(BufReader::with_capacity(BUFFER_BYTES, file), len, name);
    let mut gguf = parse(&mut source)?;
    gguf.path = Some(path.to_path_buf());
    Ok(gguf)
}

/// Reads the GGUF held in `bytes` (a whole file, data section included).
pub fn read_bytes(bytes: &[u8]) -> Result<GgufFile, GgufError> {
    parse(&mut Source::new(Cursor::new(bytes), bytes.len() as u64, FileName(None)))
}

fn parse<R: BufRead + Seek>(src: &mut Source<R>) -> Result<GgufFile, GgufError> {
    let version = fixed_header(src)?;
    let (tensor_count, kv_count) = counts(src)?;
    let metadata = key_values(src, kv_count)?;
    let alignment = alignment(src, &metadata)?;
    let tensors = tensor_infos(src, tensor_count)?;
    // ggml aligns the data section only when there are tensors.
    let header_end = src.pos();
    let data_start = if tensors.is_empty() { header_end } else { pad(header_end, alignment).unwrap_or(u64::MAX) };
    check_offsets(src, &tensors, alignment)?;
    check_bounds(src, &tensors, data_start)?;
    Ok(GgufFile { path: None, version, alignment, data_start, file_len: src.len(), metadata, tensors })
}

/// `n` rounded up to a multiple of `align` (a power of two).
fn pad(n: u64, align: u64) -> Option<u64> {
    Some(n.checked_add(align - 1)? & !(align - 1))
}

/// Magic and version.
fn fixed_header<R: BufRead + Seek>(src: &mut Source<R>) -> Result<u32, GgufError> {
    if src.len() >= 4 {
        let magic: [u8; 4] = src.array("the magic")?;
        if &magic != b"GGUF" {
            let found = format!("{:?}", String::from_utf8_lossy(&magic));
            return Err(GgufError::NotGguf { file: src.file.clone(), found });
        }
    }
    if src.len() < HEADER_BYTES {
        return Err(GgufError::TooShort { file: src.file.clone(), len: src.len() });
    }
    let version = src.u32("the version")?;
    if version != 0 && version & 0xffff == 0 {
        return Err(GgufError::ByteSwapped { file: src.file.clone(), version });
    }
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion { file: src.file.clone(), version });
    }
    Ok(version)
}

/// The tensor and key-value counts, each capped by the bytes after the header.
fn counts<R: BufRead + Seek>(src: &mut Source<R>) -> Result<(u64, u64), GgufError> {
    let tensors = src.u64("the tensor count")?;
    let kvs = src.u64("the key-value count")?;
    let left = src.left();
    let too_large = |what, count, max| GgufError::CountTooLarge { file: src.file.clone(), what, count, max, left };
    let max_kvs = (left / MIN_KV_BYTES).min(MAX_ENTRIES);
    if kvs > max_kvs {
        return Err(too_large("key-value pairs", kvs, max_kvs));
    }
    // The tensor infos follow the pairs.
    let max_tensors = ((left - kvs * MIN_KV_BYTES) / MIN_TENSOR_BYTES).min(MAX_ENTRIES);
    if tensors > max_tensors {
        return Err(too_large("tensors", tensors, max_tensors));
    }
    Ok((tensors, kvs))
}

fn key_values<R: BufRead + Seek>(src: &mut Source<R>, count: u64) -> Result<Vec<(String, Value)>, GgufError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for index in 0..count {
        src.context.clear();
        let at = src.pos();
        let key = src.string(&format!("key {index}"))?;
        if key.is_empty() {
            return Err(GgufError::EmptyKey { file: src.file.clone(), index, at });
        }
        let key = String::from_utf8(key).map_err(|_| GgufError::KeyNotUtf8 { file: src.file.clone(), index, at })?;
        if !seen.insert(key.clone()) {
            return Err(GgufError::DuplicateKey { file: src.file.clone(), key, index, at });
        }
        src.context = format!("key '{key}'");
        let value = value(src, &key)?;
        out.push((key, value));
    }
    src.context.clear();
    Ok(out)
}

fn value_type<R: BufRead + Seek>(src: &mut Source<R>, key: &str) -> Result<ValueType, GgufError> {
    let at = src.pos();
    let type_id = src.u32("the value type")?;
    ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType { file: src.file.clone(), key: key.to_string(), type_id, at })
}

/// The key of the vocabulary, whose tokens must be distinct.
const VOCABULARY: &str = "tokenizer.ggml.tokens";

fn value<R: BufRead + Seek>(src: &mut Source<R>, key: &str) -> Result<Value, GgufError> {
    let ty = value_type(src, key)?;
    if ty != ValueType::Array {
        return scalar(src, ty);
    }
    let at = src.pos();
    let elem = value_type(src, key)?;
    if elem == ValueType::Array {
        return Err(GgufError::NestedArray { file: src.file.clone(), key: key.to_string(), at });
    }
    let len = src.u64("the array length")?;
    if len > MAX_ARRAY_LEN {
        return Err(GgufError::ArrayTooLong { file: src.file.clone(), key: key.to_string(), at, len });
    }
    // Each element takes its size, a string at least its 8-byte length.
    let each = elem.fixed_size().unwrap_or(8);
    src.need(len * each, "the array's elements")?;
    let keep = len <= KEPT_ELEMENTS;
    let (mut strings, mut numbers) = (None, None);
    if elem == ValueType::Str {
        let vocabulary = key == VOCABULARY;
        let mut kept = Vec::new();
        let mut seen = HashSet::new();
        for index in 0..len {
            if !keep && !vocabulary {
                src.skip_string("an element")?;
                continue;
            }
            let token = src.string("an element")?;
            if vocabulary {
                // llama.cpp reads a token as a C string (up to its first NUL byte),
                // names an empty one "[EMPTY_i]", then asserts (aborts) when two
                // tokens are the same string.
                let text = token.split(|&b| b == 0).next().unwrap_or_default();
                let word = if text.is_empty() { format!("[EMPTY_{index}]").into_bytes() } else { text.to_vec() };
                if !seen.insert(word) {
                    return Err(GgufError::DuplicateToken { file: src.file.clone(), index, at });
                }
            }
            if keep {
                kept.push(String::from_utf8_lossy(&token).into_owned());
            }
        }
        strings = keep.then_some(kept);
    } else if keep {
        let mut kept = Vec::with_capacity(len as usize);
        for _ in 0..len {
            kept.push(number(&scalar(src, elem)?));
        }
        numbers = Some(kept);
    } else {
        src.skip(len * each, "the array's elements")?;
    }
    Ok(Value::Array { elem, len, strings, numbers })
}

fn number(value: &Value) -> f64 {
    match *value {
        Value::U8(v) => v.into(),
        Value::I8(v) => v.into(),
        Value::U16(v) => v.into(),
        Value::I16(v) => v.into(),
        Value::U32(v) => v.into(),
        Value::I32(v) => v.into(),
        Value::F32(v) => v.into(),
        Value::Bool(v) => u8::from(v).into(),
        Value::U64(v) => v as f64,
        Value::I64(v) => v as f64,
        Value::F64(v) => v,
        Value::Str(_) | Value::Array { .. } => f64::NAN,
    }
}

fn scalar<R: BufRead + Seek>(src: &mut Source<R>, ty: ValueType) -> Result<Value, GgufError> {
    const WHAT: &str = "the value";
    Ok(match ty {
        ValueType::U8 => Value::U8(src.u8(WHAT)?),
        ValueType::I8 => Value::I8(src.u8(WHAT)? as i8),
        ValueType::U16 => Value::U16(src.u16(WHAT)?),
        ValueType::I16 => Value::I16(src.u16(WHAT)? as i16),
        ValueType::U32 => Value::U32(src.u32(WHAT)?),
        ValueType::I32 => Value::I32(src.u32(WHAT)? as i32),
        ValueType::F32 => Value::F32(f32::from_bits(src.u32(WHAT)?)),
        // ggml reads a byte and takes any non-zero one as true.
        ValueType::Bool => Value::Bool(src.u8(WHAT)? != 0),
        ValueType::Str => Value::Str(String::from_utf8_lossy(&src.string(WHAT)?).into_owned()),
        ValueType::U64 => Value::U64(src.u64(WHAT)?),
        ValueType::I64 => Value::I64(src.u64(WHAT)? as i64),
        ValueType::F64 => Value::F64(f64::from_bits(src.u64(WHAT)?)),
        // value() reads arrays and refuses them as elements.
        ValueType::Array => {
            return Err(GgufError::NestedArray { file: src.file.clone(), key: src.context.clone(), at: src.pos() })
        }
    })
}

/// `general.alignment`: a u32 power of two when present (ggml), else 32.
fn alignment<R: BufRead + Seek>(src: &Source<R>, metadata: &[(String, Value)]) -> Result<u64, GgufError> {
    let Some((_, value)) = metadata.iter().find(|(k, _)| k == "general.alignment") else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    match value {
        Value::U32(a) if a.is_power_of_two() => Ok(u64::from(*a)),
        Value::U32(a) => Err(GgufError::BadAlignment { file: src.file.clone(), found: a.to_string() }),
        other => Err(GgufError::BadAlignment { file: src.file.clone(), found: format!("a {} ({other})", other.value_type()) }),
    }
}

fn tensor_infos<R: BufRead + Seek>(src: &mut Source<R>, count: u64) -> Result<Vec<TensorInfo>, GgufError> {
    let mut out = Vec::new();
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    for index in 0..count {
        src.context.clear();
        let at = src.pos();
        let what = format!("the name of tensor {index}");
        let len = src.string_len(&what)?;
        let file = src.file.clone();
        if len > MAX_TENSOR_NAME {
            return Err(GgufError::TensorNameTooLong { file, index, at, len });
        }
        let raw = src.bytes(len, &what)?;
        if raw.is_empty() {
            return Err(GgufError::EmptyTensorName { file, index, at });
        }
        let name = String::from_utf8_lossy(&raw).into_owned();
        if !seen.insert(raw) {
            return Err(GgufError::DuplicateTensor { file, name, index, at });
        }
        src.context = format!("tensor '{name}'");
        let at = src.pos();
        let n_dims = src.u32("the dimension count")?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(GgufError::BadDimCount { file, name, n_dims, at });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for dim in 0..n_dims {
            let at = src.pos();
            let value = src.u64("a dimension")?;
            if value > i64::MAX as u64 {
                return Err(GgufError::DimTooLarge { file, name, dim, value, at });
            }
            dims.push(value);
        }
        // ggml's product check: the element count fits in an int64.
        let elements = dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d).filter(|&p| p <= i64::MAX as u64));
        let Some(elements) = elements else {
            return Err(GgufError::TooManyElements { file, name, dims });
        };
        let at = src.pos();
        let ggml_type = GgmlType(src.u32("the ggml type")?);
        if !ggml_type.is_known() {
            return Err(GgufError::UnknownGgmlType { file, name, type_id: ggml_type.0, at });
        }
        let block = ggml_type.block_size();
        if dims[0] % block != 0 {
            return Err(GgufError::BlockSize { file, name, ty: ggml_type, ne0: dims[0], block });
        }
        let Some(nbytes) = ggml_type.bytes_for(elements) else {
            return Err(GgufError::TooManyElements { file, name, dims });
        };
        let offset = src.u64("the data offset")?;
        out.push(TensorInfo { name, dims, ggml_type, offset, nbytes });
    }
    src.context.clear();
    Ok(out)
}

/// ggml's packing: each offset is aligned and is where the tensors before it
/// end, each padded to the alignment.
fn check_offsets<R: BufRead + Seek>(src: &Source<R>, tensors: &[TensorInfo], alignment: u64) -> Result<(), GgufError> {
    let mut expected = 0u64;
    for t in tensors.iter() {
        let file = src.file.clone();
        if t.offset % alignment != 0 {
            return Err(GgufError::MisalignedOffset { file, name: t.name.clone(), offset: t.offset, alignment });
        }
        if t.offset != expected {
            return Err(GgufError::OffsetMismatch { file, name: t.name.clone(), offset: t.offset, expected });
        }
        let next = pad(t.nbytes, alignment).and_then(|padded| expected.checked_add(padded));
        let Some(next) = next else {
            return Err(GgufError::TooManyElements { file, name: t.name.clone(), dims: t.dims.clone() });
        };
        expected = next;
    }
    Ok(())
}

/// The data section's padding and every tensor's data lie inside the file
/// (llama.cpp's "not within the file bounds" check, made before loading).
fn check_bounds<R: BufRead + Seek>(src: &Source<R>, tensors: &[TensorInfo], data_start: u64) -> Result<(), GgufError> {
    let file_len = src.len();
    let end_of = |t: &TensorInfo| data_start.saturating_add(t.offset).saturating_add(t.nbytes);
    let last_end = tensors.iter().map(end_of).max().unwrap_or(0).max(if tensors.is_empty() { 0 } else { data_start });
    if last_end <= file_len {
        return Ok(());
    }
    let (what, end) = match tensors.iter().find(|t| end_of(t) > file_len) {
        Some(t) if data_start <= file_len => (format!("the data of tensor '{}'", t.name), end_of(t)),
        _ => ("the padding before the data section".to_string(), data_start),
    };
    Err(GgufError::Truncated { file: src.file.clone(), what, end, file_len, missing: last_end - file_len })
}
