//! What one column will hold, read from its files before anything loads: an
//! ExecuTorch program from its own headers ([`crate::pte::read_sizes`]), eager
//! from the checkpoint's safetensors header(s) and `config.json`. Each figure
//! is a sum of named parts, so that a message and `runlens memory` can say
//! what the bytes are; the constants were measured (docs/memory.md).

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::backend::{BackendSpec, Source, WeightFormat};
use crate::model::{ModelConfig, ModelDir};

const MIB: u64 = 1 << 20;

/// What an ExecuTorch program costs the process besides its data: its method's
/// allocations, XNNPACK's runtime and the kernels' code pages (measured on the
/// tiny models, where the data is a few MB: tiny-llama's programs peak 5-6 MiB
/// above the process in all, docs/memory.md); and a tenth of its
/// planned memory for the scratch that grows with the input (XNNPACK's
/// workspace: xnnpack-8da4w at SmolLM2-135M's sizes went 18 MiB past its
/// planned 181 MiB with a 2031-token prompt).
pub const PROGRAM_RUNTIME: u64 = 8 * MIB;
/// What eager costs besides its weights: the libtorch code a forward touches,
/// its thread pool and allocator (measured as for [`PROGRAM_RUNTIME`]:
/// tiny-llama's eager, 0.6 MiB of weights, peaks 15 MiB above the process).
pub const EAGER_RUNTIME: u64 = 16 * MIB;
/// What a llama.cpp context costs besides its weights and KV cache: its
/// thread pool, graph and output buffers at one physical batch (measured:
/// tiny-llama's files peak 7-8 MiB above the process in all; SmolLM2-135M's F32
/// file 14 MiB besides its weights, KV cache and compute buffer: docs/memory.md).
pub const LLAMA_CPP_RUNTIME: u64 = 32 * MIB;
/// What an ONNX Runtime session costs besides its weights: its arena, thread
/// pool and the optimized graph (measured: tiny-llama's files, under 1 MiB of
/// weights, peak 30 MiB above the process; docs/memory.md).
pub const ONNX_RUNTIME_RUNTIME: u64 = 32 * MIB;

/// One named part of a column's figure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Part {
    pub what: &'static str,
    pub bytes: u64,
}

/// What one column needs: what it holds once loaded (`steady`) and the most
/// at any moment of its load and first run (`peak`, at least `steady`): the
/// estimate's, or a measured peak with its margin when that is larger
/// ([`super::measured::figure`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ColumnNeed {
    pub name: String,
    /// The explorer's column it shares (F5 cycles its variants).
    pub column: String,
    pub quantized: bool,
    pub steady: u64,
    /// What the check uses: the larger of `estimated_peak` and `measured_peak` plus its margin.
    pub peak: u64,
    /// The estimate's peak, from the files' headers.
    pub estimated_peak: u64,
    /// The peak measured at an earlier load of the same file(s), when one was (without the margin).
    pub measured_peak: Option<u64>,
    /// The parts of `steady`.
    pub parts: Vec<Part>,
    /// What takes it above `steady` while it loads, when anything does.
    pub transient: Option<Part>,
}

impl ColumnNeed {
    fn new(spec: &BackendSpec, parts: Vec<Part>, transient: Option<Part>) -> ColumnNeed {
        let steady = parts.iter().map(|p| p.bytes).sum();
        let transient = transient.filter(|t| t.bytes > steady);
        let peak = transient.as_ref().map_or(steady, |t| t.bytes);
        ColumnNeed {
            name: spec.name.clone(),
            column: spec.column.clone(),
            quantized: spec.is_quantized(),
            steady,
            peak,
            estimated_peak: peak,
            measured_peak: None,
            parts,
            transient,
        }
    }

    /// With a measured peak: `peak` becomes the larger of the estimate and the
    /// measurement plus its margin.
    pub fn with_measured(mut self, measured: Option<u64>) -> ColumnNeed {
        self.measured_peak = measured;
        self.peak = super::measured::figure(self.estimated_peak, measured);
        self
    }

    /// Whether `peak` is the measurement's (with its margin) rather than the estimate's.
    pub fn peak_is_measured(&self) -> bool {
        self.peak > self.estimated_peak
    }

    /// "2.61 GiB: float32 weights 1.84 GiB, KV cache 96 MiB, ..." for messages.
    pub fn describe(&self) -> String {
        use super::size::show;
        let parts: Vec<String> = self.parts.iter().filter(|p| p.bytes > 0).map(|p| format!("{} {}", p.what, show(p.bytes))).collect();
        let mut peak = match &self.transient {
            Some(t) => format!("; {} while loading ({})", show(t.bytes), t.what),
            None => String::new(),
        };
        if let (true, Some(m)) = (self.peak_is_measured(), self.measured_peak) {
            peak += &format!("; measured {} at an earlier load, + {}%", show(m), super::measured::MARGIN_PERCENT);
        }
        format!("{} ({}{peak})", show(self.peak), parts.join(", "))
    }
}

/// The need of `spec` in `dir`: an error names the file that could not be read.
pub fn of_spec(spec: &BackendSpec, dir: &ModelDir) -> anyhow::Result<ColumnNeed> {
    match &spec.source {
        Source::Program(path) => of_program(spec, path),
        Source::Gguf(path) => of_gguf(spec, dir, path),
        Source::Onnx(path) => of_onnx(spec, dir, path),
        Source::Eager(format) => of_eager(spec, dir, *format),
    }
}

fn of_program(spec: &BackendSpec, path: &Path) -> anyhow::Result<ColumnNeed> {
    let s = crate::pte::read_sizes(path).with_context(|| format!("{}: cannot read the program's sizes", path.display()))?;
    let parts = vec![
        Part { what: "constants read in place", bytes: s.constants_in_place },
        Part { what: "weights XNNPACK packs", bytes: s.delegate_weights },
        Part { what: "planned memory", bytes: s.planned },
        Part { what: "KV cache runlens holds (the program's inputs)", bytes: s.caller_inputs },
        Part { what: "ExecuTorch runtime and scratch", bytes: PROGRAM_RUNTIME + s.planned / 10 },
    ];
    // runlens' reader takes the whole file in before the runtime maps it (backend::executorch::Program::open).
    let transient = Part { what: "the file read whole by runlens' checks", bytes: s.file_bytes + PROGRAM_RUNTIME };
    Ok(ColumnNeed::new(spec, parts, Some(transient)))
}

/// A GGUF as llama.cpp holds it: its tensors memory-mapped (resident once
/// touched), a KV cache of the directory's length (float32 for an f32 file, else
/// float16: `llamacpp::kv_cache_element_bytes`), the compute buffer
/// of one physical batch (512 tokens at most). Q4_0's weights are repacked
/// into a buffer of their own at load, beside the mapped file.
fn of_gguf(spec: &BackendSpec, dir: &ModelDir, path: &Path) -> anyhow::Result<ColumnNeed> {
    let header = crate::gguf::read_path(path).with_context(|| format!("{}: cannot read the GGUF's header", path.display()))?;
    let weights = header.tensor_bytes();
    let len = dir.max_seq_len() as u64;
    let geometry = dir.model_config().ok().and_then(|c| Geometry::of(&c));
    let kv_element = crate::backend::llamacpp::kv_cache_element_bytes(&header);
    let (kv, scores) = match (dir.task().takes_a_prompt(), geometry) {
        // Geometry::kv_cache counts float32 elements.
        (true, Some(g)) => (g.kv_cache(len) / 4 * kv_element, g.attention_scores(len.min(512))),
        (false, Some(g)) => (0, g.attention_scores(len.min(512))),
        _ => (0, 0),
    };
    let parts = vec![
        Part { what: "weights (the GGUF, memory-mapped)", bytes: weights },
        Part { what: if kv_element == 4 { "KV cache (float32)" } else { "KV cache (float16)" }, bytes: kv },
        Part { what: "compute buffer", bytes: scores },
        Part { what: "llama.cpp's context", bytes: LLAMA_CPP_RUNTIME },
    ];
    let repacked = header.main_type().is_some_and(|t| t.name() == "q4_0");
    let transient = repacked.then(|| Part { what: "Q4_0 weights repacked beside the mapped file", bytes: 2 * weights + kv + LLAMA_CPP_RUNTIME });
    Ok(ColumnNeed::new(spec, parts, transient))
}

/// An ONNX file as ONNX Runtime holds it: its initializers (the file is almost
/// all weights; MLAS prepacks the matrices in place of the originals), the
/// session; while loading, the protobuf parsed whole beside the tensors made
/// from it. A decoder's file also holds its KV cache twice at the longest
/// sequence: the pasts handed in and the presents made from them (float32).
fn of_onnx(spec: &BackendSpec, dir: &ModelDir, path: &Path) -> anyhow::Result<ColumnNeed> {
    let bytes = std::fs::metadata(path).with_context(|| format!("{}: cannot read the ONNX file's size", path.display()))?.len();
    let mut parts = vec![
        Part { what: "weights (the ONNX file's initializers, prepacked)", bytes },
        Part { what: "ONNX Runtime's session", bytes: ONNX_RUNTIME_RUNTIME },
    ];
    let kv = match dir.task().takes_a_prompt() {
        true => Geometry::of(&*dir.model_config()?).map_or(0, |g| 2 * g.kv_cache(dir.max_seq_len() as u64)),
        false => 0,
    };
    if kv > 0 {
        parts.push(Part { what: "KV cache, past and present (float32)", bytes: kv });
    }
    let transient = Part { what: "the file parsed whole beside its initializers", bytes: 2 * bytes + ONNX_RUNTIME_RUNTIME + kv };
    Ok(ColumnNeed::new(spec, parts, Some(transient)))
}

/// The tensors of a checkpoint as eager holds them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tensors {
    /// Every tensor in float32.
    float32: u64,
    /// The part of the stored bytes not already float32 (held beside the widened copies while loading).
    stored_narrow: u64,
    /// The largest tensor as stored (the read buffer).
    largest: u64,
    /// The linear layers' weights in float32, and in the format asked for.
    linear_float32: u64,
    linear_packed: u64,
    /// The largest linear layer's weight in float32 (a tied head's: the embedding's),
    /// the one a quantized column's scratch copies are the size of.
    largest_linear: u64,
}

fn of_eager(spec: &BackendSpec, dir: &ModelDir, format: WeightFormat) -> anyhow::Result<ColumnNeed> {
    let weights = dir.weights()?;
    let checkpoint = crate::model::safetensors::Checkpoint::read(&weights)?;
    let t = tensors(checkpoint.tensors().map(|(name, info, _)| (name, info.dtype.as_str(), info.shape.as_slice())), format);
    let geometry = Geometry::of(&*dir.model_config()?);
    let decoder = dir.task().takes_a_prompt();
    let len = dir.max_seq_len() as u64;
    let (kv, scores) = match (decoder, geometry) {
        (true, Some(g)) => (g.kv_cache(len), g.attention_scores(len)),
        _ => (0, 0),
    };
    let weights_part = match format {
        WeightFormat::Float => Part { what: "float32 weights", bytes: t.float32 },
        _ => Part { what: "weights (linear layers quantized)", bytes: t.float32 - t.linear_float32 + t.linear_packed },
    };
    let parts = vec![
        weights_part,
        Part { what: "KV cache", bytes: kv },
        Part { what: "a full-length prompt's attention scores", bytes: scores },
        Part { what: "libtorch's working set", bytes: EAGER_RUNTIME },
    ];
    // The model is built in float32 (a narrower checkpoint widened beside its stored
    // bytes), then a quantized column packs its linear layers one at a time, each
    // beside scratch copies of itself ([`quantizer_scratch`]).
    let building = t.stored_narrow + t.largest;
    let packing = quantizer_scratch(t.largest_linear, format);
    let built = t.float32 + building.max(packing) + kv + EAGER_RUNTIME;
    let what = if packing > building { "the float32 model, its largest layer being quantized" } else { "the float32 model as it is built" };
    let transient = Part { what, bytes: built };
    Ok(ColumnNeed::new(spec, parts, Some(transient)))
}

/// What quantizing a linear weight of `float32` bytes holds beside the float
/// model (eager/quant.rs, measured: SmolLM2-135M's tied 108 MiB head took
/// `eager-int4` 130 MiB past float eager's peak, a 40M-parameter GPT-2's 98 MiB
/// one 99 MiB): int8, its quotient in float32 and the int8 result (1.25x);
/// int4, its quotient in float32, that as int32 (or its copy padded to 16 rows)
/// and the packed result (2.125x).
fn quantizer_scratch(float32: u64, format: WeightFormat) -> u64 {
    match format {
        WeightFormat::Float => 0,
        WeightFormat::Int8 => float32 + float32 / 4,
        WeightFormat::Int4 { .. } => 2 * float32 + float32 / 8,
    }
}

/// Bytes per element of a safetensors dtype; `None` for one eager cannot read.
fn dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F64" | "I64" => 8,
        "F32" | "I32" => 4,
        "F16" | "BF16" => 2,
        "I8" | "U8" | "BOOL" => 1,
        _ => return None,
    })
}

/// What eager holds of these tensors (name, dtype, shape) in `format`. The
/// linear layers it quantizes are the 2-D `*.weight` tensors other than
/// embeddings; a head tied to the token embedding is packed as a copy of it.
fn tensors<'a>(list: impl Iterator<Item = (&'a str, &'a str, &'a [i64])>, format: WeightFormat) -> Tensors {
    let mut t = Tensors::default();
    let mut embedding: Option<(u64, u64)> = None;
    let mut has_head = false;
    for (name, dtype, shape) in list {
        let elements = shape.iter().map(|&d| u64::try_from(d).unwrap_or(0)).fold(1u64, u64::saturating_mul);
        let stored = dtype_bytes(dtype).unwrap_or(4).saturating_mul(elements);
        t.float32 += elements * 4;
        if dtype != "F32" {
            t.stored_narrow += stored;
        }
        t.largest = t.largest.max(stored);
        let [rows, cols] = *shape else { continue };
        let (rows, cols) = (rows.max(0) as u64, cols.max(0) as u64);
        let is_embedding = ["embed", "wte", "wpe", "position", "token_type"].iter().any(|e| name.contains(e));
        has_head |= name.contains("lm_head");
        if is_embedding {
            embedding = embedding.max(Some((rows, cols)));
        } else if name.ends_with("weight") {
            t.linear_float32 += elements * 4;
            t.linear_packed += packed(rows, cols, format);
            t.largest_linear = t.largest_linear.max(elements * 4);
        }
    }
    if let (false, Some((rows, cols))) = (has_head || format == WeightFormat::Float, embedding) {
        t.linear_packed += packed(rows, cols, format);
        t.largest_linear = t.largest_linear.max(rows * cols * 4);
    }
    t
}

/// A [rows, cols] linear weight in `format` (eager/quant.rs): int8 with a bfloat16
/// scale per row; int4 in rows padded to 16, with a bfloat16 scale and zero per group.
fn packed(rows: u64, cols: u64, format: WeightFormat) -> u64 {
    match format {
        WeightFormat::Float => rows * cols * 4,
        WeightFormat::Int8 => rows * cols + rows * 2,
        WeightFormat::Int4 { group_size } => {
            let rows = rows.div_ceil(16) * 16;
            let groups = cols.div_ceil(group_size.max(1) as u64);
            rows * cols / 2 + groups * rows * 4
        }
    }
}

/// What the KV cache and attention of a decoder take, from `config.json`
/// ([`ModelConfig`]: transformers' names for GPT-2 and the Llama family).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
}

impl Geometry {
    /// `None` when the config names no layers or heads (then the parts are left out).
    pub fn of(config: &ModelConfig) -> Option<Geometry> {
        let positive = |n: Option<u64>| n.filter(|&n| n > 0);
        let layers = positive(config.layers)?;
        let heads = positive(config.heads)?;
        let kv_heads = positive(config.kv_heads).unwrap_or(heads);
        let head_dim = positive(config.head_dim).or_else(|| Some(positive(config.hidden)? / heads))?;
        Some(Geometry { layers, heads, kv_heads, head_dim })
    }

    /// layers x 2 (keys, values) x KV heads x head_dim x `len` positions, float32.
    pub fn kv_cache(&self, len: u64) -> u64 {
        self.kv_values_per_position() * len * 4
    }

    /// The values one position of the KV cache holds: layers x 2 (keys, values) x KV
    /// heads x head_dim (`bench` sizes it in each runtime's element type).
    pub fn kv_values_per_position(&self) -> u64 {
        self.layers * 2 * self.kv_heads * self.head_dim
    }

    /// One layer's attention over a full-length prompt: heads x len² float32 scores,
    /// three and a half copies (the scores, masked, their softmax, and what the
    /// allocator keeps of the freed ones; beside the KV cache, measured: 3.4 on a
    /// tiny Qwen2 with a 1005-token prompt, 2.4 at SmolLM2-135M's sizes with 2031).
    pub fn attention_scores(&self, len: u64) -> u64 {
        7 * self.heads * len * len * 4 / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(json: serde_json::Value) -> ModelConfig {
        ModelConfig::of(Path::new("config.json"), json).unwrap()
    }

    #[test]
    fn reads_the_cache_geometry_of_each_family() {
        let qwen = serde_json::json!({"num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "hidden_size": 896});
        let g = Geometry::of(&typed(qwen)).unwrap();
        assert_eq!((g.layers, g.heads, g.kv_heads, g.head_dim), (24, 14, 2, 64));
        // Qwen2.5-0.5B at 2048 positions: 24 x 2 x 2 x 64 x 2048 x 4 bytes = 48 MiB.
        assert_eq!(g.kv_cache(2048), 48 * MIB);
        let gpt2 = serde_json::json!({"n_layer": 12, "n_head": 12, "n_embd": 768});
        assert_eq!(Geometry::of(&typed(gpt2)).unwrap().kv_cache(1024), 12 * 2 * 12 * 64 * 1024 * 4);
        let qwen3 = serde_json::json!({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": null, "head_dim": 12, "hidden_size": 32});
        assert_eq!(Geometry::of(&typed(qwen3.clone())).unwrap().head_dim, 12);
        assert_eq!(Geometry::of(&typed(qwen3.clone())).unwrap().kv_heads, 4);
        assert_eq!(Geometry::of(&typed(serde_json::json!({"hidden_size": 8}))), None);
        assert_eq!(Geometry::of(&typed(serde_json::json!({"num_hidden_layers": 2, "num_attention_heads": 0, "hidden_size": 8}))), None);
    }

    #[test]
    fn counts_a_checkpoint_as_eager_holds_it() {
        let list = [
            ("model.embed_tokens.weight", "BF16", &[100i64, 64][..]),
            ("model.layers.0.self_attn.q_proj.weight", "BF16", &[64, 64][..]),
            ("model.layers.0.self_attn.q_proj.bias", "BF16", &[64][..]),
            ("model.norm.weight", "F32", &[64][..]),
        ];
        let float = tensors(list.iter().copied(), WeightFormat::Float);
        assert_eq!(float.float32, (6400 + 4096 + 64 + 64) * 4);
        assert_eq!(float.stored_narrow, (6400 + 4096 + 64) * 2);
        assert_eq!(float.largest, 6400 * 2);
        // The tied head: packed as a copy of the embedding in a quantized format.
        let int8 = tensors(list.iter().copied(), WeightFormat::Int8);
        assert_eq!(int8.linear_float32, 4096 * 4);
        assert_eq!(int8.linear_packed, (4096 + 64 * 2) + (6400 + 100 * 2));
        let int4 = tensors(list.iter().copied(), WeightFormat::Int4 { group_size: 32 });
        assert_eq!(int4.linear_packed, (64 * 32 + 2 * 64 * 4) + (112 * 32 + 2 * 112 * 4));
        assert_eq!(float.linear_packed, float.linear_float32);
        // The largest layer a quantized column packs is the tied head (the embedding's copy).
        assert_eq!(int4.largest_linear, 6400 * 4);
        assert_eq!(float.largest_linear, 4096 * 4);
        assert_eq!(quantizer_scratch(1000, WeightFormat::Int4 { group_size: 32 }), 2125);
        assert_eq!(quantizer_scratch(1000, WeightFormat::Int8), 1250);
        assert_eq!(quantizer_scratch(1000, WeightFormat::Float), 0);
    }
}
