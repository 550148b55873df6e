//! Unit tests for the GGUF reader: files built by the small writer below
//! (valid ones, and ones with one field set wrong), and damaged copies.

use super::*;

mod bad_input;
mod bad_tensors;
mod mutations;
mod runnable;

/// A metadata value to write. `Raw` writes any type id and bytes.
#[derive(Clone)]
pub(super) enum Val {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(Vec<u8>),
    U64(u64),
    I64(i64),
    F64(f64),
    /// Element type id and elements (written without their type ids).
    Array(u32, Vec<Val>),
    Raw(u32, Vec<u8>),
}

impl Val {
    pub(super) fn str(s: &str) -> Val {
        Val::Str(s.as_bytes().to_vec())
    }

    fn type_id(&self) -> u32 {
        match self {
            Val::U8(_) => 0,
            Val::I8(_) => 1,
            Val::U16(_) => 2,
            Val::I16(_) => 3,
            Val::U32(_) => 4,
            Val::I32(_) => 5,
            Val::F32(_) => 6,
            Val::Bool(_) => 7,
            Val::Str(_) => 8,
            Val::Array(..) => 9,
            Val::U64(_) => 10,
            Val::I64(_) => 11,
            Val::F64(_) => 12,
            Val::Raw(id, _) => *id,
        }
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        match self {
            Val::U8(v) => out.push(*v),
            Val::I8(v) => out.extend(v.to_le_bytes()),
            Val::U16(v) => out.extend(v.to_le_bytes()),
            Val::I16(v) => out.extend(v.to_le_bytes()),
            Val::U32(v) => out.extend(v.to_le_bytes()),
            Val::I32(v) => out.extend(v.to_le_bytes()),
            Val::F32(v) => out.extend(v.to_le_bytes()),
            Val::Bool(v) => out.push(u8::from(*v)),
            Val::Str(s) => put_str(out, s),
            Val::U64(v) => out.extend(v.to_le_bytes()),
            Val::I64(v) => out.extend(v.to_le_bytes()),
            Val::F64(v) => out.extend(v.to_le_bytes()),
            Val::Array(elem, items) => {
                out.extend(elem.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for item in items {
                    item.write_payload(out);
                }
            }
            Val::Raw(_, bytes) => out.extend(bytes),
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s);
}

/// A tensor to write: its data is `bytes_of(ty, dims)` pattern bytes.
#[derive(Clone)]
pub(super) struct T {
    pub(super) name: Vec<u8>,
    pub(super) dims: Vec<u64>,
    pub(super) ty: u32,
    /// `None`: the packed offset ggml expects.
    pub(super) offset: Option<u64>,
}

pub(super) fn t(name: &str, ty: u32, dims: &[u64]) -> T {
    T { name: name.as_bytes().to_vec(), dims: dims.to_vec(), ty, offset: None }
}

/// The data bytes the writer puts down for a tensor (0 for a type the
/// table does not know; the reader refuses those before their data).
fn bytes_of(ty: u32, dims: &[u64]) -> u64 {
    let ty = GgmlType(ty);
    let elements = dims.iter().fold(1u64, |n, d| n.saturating_mul(*d));
    if ty.is_known() && elements < 1 << 24 {
        ty.bytes_for(elements).unwrap_or(0)
    } else {
        0
    }
}

/// A GGUF to write; the counts can be set wrong.
#[derive(Clone)]
pub(super) struct Spec {
    pub(super) version: u32,
    pub(super) tensor_count: Option<u64>,
    pub(super) kv_count: Option<u64>,
    pub(super) kvs: Vec<(Vec<u8>, Val)>,
    pub(super) tensors: Vec<T>,
    /// The alignment the writer pads with (not written: see `kvs`).
    pub(super) alignment: u64,
}

/// Where things went in a written file.
pub(super) struct Layout {
    pub(super) header_end: usize,
    pub(super) data_start: usize,
    /// Byte position of each tensor info's name length.
    pub(super) tensor_infos: Vec<usize>,
    /// Byte position of each key-value pair's key length.
    pub(super) kv_at: Vec<usize>,
}

impl Spec {
    pub(super) fn kv(mut self, key: &str, v: Val) -> Spec {
        self.kvs.push((key.as_bytes().to_vec(), v));
        self
    }

    pub(super) fn write(&self) -> (Vec<u8>, Layout) {
        let mut out = b"GGUF".to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend(self.tensor_count.unwrap_or(self.tensors.len() as u64).to_le_bytes());
        out.extend(self.kv_count.unwrap_or(self.kvs.len() as u64).to_le_bytes());
        let mut kv_at = Vec::new();
        for (key, v) in &self.kvs {
            kv_at.push(out.len());
            put_str(&mut out, key);
            out.extend(v.type_id().to_le_bytes());
            v.write_payload(&mut out);
        }
        let pad = |n: u64| n.div_ceil(self.alignment) * self.alignment;
        let mut tensor_infos = Vec::new();
        let mut next = 0u64;
        for t in &self.tensors {
            tensor_infos.push(out.len());
            put_str(&mut out, &t.name);
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.ty.to_le_bytes());
            out.extend(t.offset.unwrap_or(next).to_le_bytes());
            next += pad(bytes_of(t.ty, &t.dims));
        }
        let header_end = out.len();
        if !self.tensors.is_empty() {
            out.resize(pad(out.len() as u64) as usize, 0);
        }
        let data_start = out.len();
        for (k, t) in self.tensors.iter().enumerate() {
            let n = bytes_of(t.ty, &t.dims) as usize;
            out.extend((0..n).map(|i| (i * 7 + k) as u8));
            // No padding after the last tensor: every shorter file is cut.
            if k + 1 < self.tensors.len() {
                out.resize(data_start + pad((out.len() - data_start) as u64) as usize, 0);
            }
        }
        (out, Layout { header_end, data_start, tensor_infos, kv_at })
    }

    pub(super) fn bytes(&self) -> Vec<u8> {
        self.write().0
    }
}

pub(super) const VOCAB: usize = 100;

/// A small llama-like file: scalars of every type, a 100-token vocabulary
/// with its scores and kinds, short arrays that are kept, alignment 64, and
/// five tensors of q4_0, f32 and q8_0.
pub(super) fn spec() -> Spec {
    let tokens: Vec<Val> = (0..VOCAB).map(|i| Val::str(&format!("tok{i}"))).collect();
    let scores: Vec<Val> = (0..VOCAB).map(|i| Val::F32(-(i as f32))).collect();
    let kinds: Vec<Val> = (0..VOCAB).map(|i| Val::I32(1 + (i < 3) as i32)).collect();
    Spec {
        version: 3,
        tensor_count: None,
        kv_count: None,
        kvs: Vec::new(),
        tensors: vec![
            t("token_embd.weight", 2, &[64, 100]),
            t("blk.0.attn_norm.weight", 0, &[64]),
            t("blk.0.attn_q.weight", 8, &[64, 64]),
            t("blk.0.ffn_up.weight", 2, &[64, 128]),
            t("output_norm.weight", 0, &[64]),
        ],
        alignment: 64,
    }
    .kv("general.architecture", Val::str("llama"))
    .kv("general.name", Val::str("tiny llama"))
    .kv("general.alignment", Val::U32(64))
    .kv("llama.block_count", Val::U32(1))
    .kv("llama.context_length", Val::U64(128))
    .kv("llama.embedding_length", Val::I32(64))
    .kv("llama.rope.freq_base", Val::F32(10000.0))
    .kv("tokenizer.ggml.model", Val::str("llama"))
    .kv("tokenizer.ggml.tokens", Val::Array(8, tokens))
    .kv("tokenizer.ggml.scores", Val::Array(6, scores))
    .kv("tokenizer.ggml.token_type", Val::Array(5, kinds))
    .kv("tokenizer.ggml.add_bos_token", Val::Bool(true))
    .kv("test.u8", Val::U8(200))
    .kv("test.i8", Val::I8(-5))
    .kv("test.u16", Val::U16(65535))
    .kv("test.i16", Val::I16(-300))
    .kv("test.i64", Val::I64(-1))
    .kv("test.u64", Val::U64(1 << 40))
    .kv("test.f64", Val::F64(0.5))
    .kv("test.strings", Val::Array(8, vec![Val::str("a"), Val::str("b\u{e9}")]))
    .kv("test.numbers", Val::Array(3, vec![Val::I16(-1), Val::I16(2)]))
    .kv("test.empty", Val::Array(0, vec![]))
}

pub(super) fn valid() -> Vec<u8> {
    spec().bytes()
}

pub(super) fn read(bytes: &[u8]) -> Result<GgufFile, GgufError> {
    read_bytes(bytes)
}

#[test]
fn a_valid_file_round_trips() {
    let (bytes, layout) = spec().write();
    let g = read(&bytes).unwrap();
    assert_eq!(g.path, None);
    assert_eq!(g.version, 3);
    assert_eq!(g.alignment, 64);
    assert_eq!(g.file_len, bytes.len() as u64);
    assert_eq!(g.data_start, layout.data_start as u64);
    assert_eq!(g.data_start % 64, 0);
    assert_eq!(g.architecture(), Some("llama"));
    assert_eq!(g.get_str("general.name"), Some("tiny llama"));
    assert_eq!(g.vocab_size(), Some(VOCAB as u64));
    assert_eq!(g.block_count(), Some(1));
    assert_eq!(g.context_length(), Some(128));
    assert_eq!(g.embedding_length(), Some(64));
    assert_eq!(g.get_u64("test.i64"), None, "a negative integer is no u64");
    assert_eq!(g.get_u64("test.u64"), Some(1 << 40));
    assert_eq!(g.get_u64("general.name"), None);
    assert_eq!(g.get("llama.rope.freq_base"), Some(&Value::F32(10000.0)));
    assert_eq!(g.get("tokenizer.ggml.add_bos_token"), Some(&Value::Bool(true)));
    assert_eq!(g.get("test.i8"), Some(&Value::I8(-5)));
    assert_eq!(g.get("test.i16"), Some(&Value::I16(-300)));
    assert_eq!(g.get("test.f64"), Some(&Value::F64(0.5)));
    let keys: Vec<&str> = g.metadata.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys[..3], ["general.architecture", "general.name", "general.alignment"], "file order");
    assert_eq!(g.metadata.len(), spec().kvs.len());
    // Long arrays are counted, short ones kept.
    assert_eq!(
        g.get("tokenizer.ggml.tokens"),
        Some(&Value::Array { elem: ValueType::Str, len: VOCAB as u64, strings: None, numbers: None })
    );
    assert_eq!(
        g.get("tokenizer.ggml.scores"),
        Some(&Value::Array { elem: ValueType::F32, len: VOCAB as u64, strings: None, numbers: None })
    );
    assert_eq!(
        g.get("test.strings"),
        Some(&Value::Array { elem: ValueType::Str, len: 2, strings: Some(vec!["a".into(), "b\u{e9}".into()]), numbers: None })
    );
    assert_eq!(
        g.get("test.numbers"),
        Some(&Value::Array { elem: ValueType::I16, len: 2, strings: None, numbers: Some(vec![-1.0, 2.0]) })
    );
    assert_eq!(g.get("test.empty").map(|v| v.to_string()).as_deref(), Some("[]"));
    assert_eq!(g.get("tokenizer.ggml.tokens").unwrap().to_string(), "[str; 100]");

    let names: Vec<&str> = g.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.0.ffn_up.weight", "output_norm.weight"]);
    let shapes: Vec<(&[u64], &str, u64, u64)> =
        g.tensors.iter().map(|t| (t.dims.as_slice(), t.ggml_type.name(), t.offset, t.nbytes)).collect();
    assert_eq!(
        shapes,
        [
            (&[64, 100][..], "q4_0", 0, 3600),
            (&[64][..], "f32", 3648, 256),
            (&[64, 64][..], "q8_0", 3904, 4352),
            (&[64, 128][..], "q4_0", 8256, 4608),
            (&[64][..], "f32", 12864, 256),
        ]
    );
    assert_eq!(g.data_start + 12864 + 256, bytes.len() as u64);
    assert_eq!(g.tensor_bytes(), 3600 + 256 + 4352 + 4608 + 256);
    assert_eq!(g.main_type(), Some(GgmlType::Q4_0));
    assert_eq!(
        g.type_summary(),
        [(GgmlType::Q4_0, 2, 8208), (GgmlType::Q8_0, 1, 4352), (GgmlType::F32, 2, 512)]
    );
    g.check_runnable(Some(VOCAB as u64)).unwrap();
    g.check_runnable(None).unwrap();
}

#[test]
fn read_path_reads_the_same_header_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    std::fs::write(&path, valid()).unwrap();
    let g = read_path(&path).unwrap();
    assert_eq!(g.path.as_deref(), Some(path.as_path()));
    assert_eq!(GgufFile { path: None, ..g.clone() }, read(&valid()).unwrap());

    let cut = &valid()[..valid().len() - 100];
    std::fs::write(&path, cut).unwrap();
    let err = read_path(&path).unwrap_err();
    assert!(matches!(err, GgufError::Truncated { missing: 100, .. }), "{err}");
    assert_eq!(err.file(), Some(path.as_path()));
    assert!(err.to_string().starts_with(&path.display().to_string()), "{err}");
    assert!(read(cut).unwrap_err().to_string().starts_with("the GGUF data: "));

    let err = read_path(dir.path().join("missing.gguf")).unwrap_err();
    assert!(matches!(err, GgufError::Io { .. }), "{err}");
    assert!(err.to_string().contains("missing.gguf"), "{err}");
}

#[test]
fn defaults_version_2_and_no_tensors() {
    let mut s = spec();
    s.kvs.retain(|(k, _)| k != b"general.alignment");
    s.alignment = 32;
    s.version = 2;
    let g = read(&s.bytes()).unwrap();
    assert_eq!((g.version, g.alignment, g.data_start % 32), (2, 32, 0));
    assert_eq!(g.tensors[1].offset, 3616, "q4_0's 3600 bytes padded to 32");

    // Without tensors the data section is not aligned (ggml).
    s.tensors.clear();
    let (bytes, layout) = s.write();
    let g = read(&bytes).unwrap();
    assert_eq!(g.data_start, layout.header_end as u64);
    assert_eq!((g.tensor_bytes(), g.main_type(), g.type_summary().len()), (0, None, 0));
    assert!(matches!(read(&bytes[..24]), Err(GgufError::CountTooLarge { .. })), "24 bytes cannot hold the pairs");
    let mut empty = b"GGUF".to_vec();
    empty.extend(3u32.to_le_bytes());
    empty.extend([0; 16]);
    let g = read(&empty).unwrap();
    assert_eq!((g.data_start, g.metadata.len(), g.architecture()), (24, 0, None));
}

#[test]
fn the_ggml_type_table() {
    let cases = [
        (0, "f32", 1, 4),
        (1, "f16", 1, 2),
        (2, "q4_0", 32, 18),
        (3, "q4_1", 32, 20),
        (8, "q8_0", 32, 34),
        (12, "q4_k", 256, 144),
        (14, "q6_k", 256, 210),
        (16, "iq2_xxs", 256, 66),
        (30, "bf16", 1, 2),
        (39, "mxfp4", 32, 17),
    ];
    for (id, name, block, size) in cases {
        let ty = GgmlType(id);
        assert_eq!((ty.name(), ty.block_size(), ty.type_size(), ty.is_known()), (name, block, size, true));
        assert_eq!(GgmlType::from_name(&name.to_uppercase()), Some(ty));
        assert_eq!(ty.to_string(), name);
    }
    for id in [4, 5, 31, 32, 33, 36, 37, 38, 43, 99, u32::MAX] {
        let ty = GgmlType(id);
        assert!(!ty.is_known(), "{id}");
        assert_eq!((ty.name(), ty.block_size(), ty.type_size()), ("unknown", 0, 0));
        assert_eq!(ty.to_string(), format!("unknown type {id}"));
    }
    let runnable: Vec<&str> = (0..64).map(GgmlType).filter(|t| t.is_runnable()).map(|t| t.name()).collect();
    assert_eq!(runnable.len(), RUNNABLE_TYPES.len());
    assert!(!GgmlType(16).is_runnable() && !GgmlType(15).is_runnable());
}

#[test]
fn errors_travel_as_anyhow_errors() {
    fn error<T: std::error::Error + Send + Sync + 'static>() {}
    error::<GgufError>();
    let err = read(b"GGUF\x01\0\0\0").unwrap_err();
    assert_eq!(err.file(), None);
    assert!(std::error::Error::source(&err).is_none());
}
