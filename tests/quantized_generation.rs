//! The quantized text-generation programs of the tiny random-weight decoders
//! (`make test-models`: `models/tiny-gpt2`, `tiny-llama`, `tiny-qwen2` and `tiny-qwen3`,
//! each with `xnnpack-int8`, 8-bit per-channel weights and
//! 8-bit per-row embeddings, and `xnnpack-8da4w`, 4-bit weights and embeddings
//! in groups of 32, both with 8-bit dynamic activations,
//! python/runlens_export/quantize.py).
//!
//! Two references, two bounds:
//! - tight: the same quantized model run by PyTorch (torchao's linear layers,
//!   ExecuTorch's `quantized_decomposed` embedding operators) at export,
//!   `<program>.reference.json`: the program's greedy ids equal its ids (or part
//!   only at a near-tie of the model's own logits, and agree teacher-forced), and its
//!   first-step logits have cosine >= 0.9999 to its logits and max|diff| within
//!   1e-1 on logits spread over about +-10 (XNNPACK's per-token activation
//!   quantization may round an activation lying within float rounding of a .5
//!   the other way than torchao's, which moves these logits by up to about 6e-2,
//!   as a 1e-6 change of the input does in PyTorch alone; most prompts agree to
//!   1e-5; the 4-bit group scales are rounded to bfloat16 at export as XNNPACK
//!   holds them);
//! - loose, what random weights allow: float32 (the eager column, libtorch).
//!   Random weights quantize worse than trained ones; the bounds in
//!   `VS_FLOAT` sit under what the export measured (in the comments) with room.
//!
//! And the weights really are quantized: the files are smaller than float32's by
//! what quantizing the linear layers and the embeddings must save, computed
//! here from config.json (GPT-2's `Conv1D` projections are converted to linear
//! layers first, else torchao skips them), and the embeddings are gathered by the
//! `quantized_decomposed` operators of the quantized kernels library runlens
//! links: a runtime without them is refused naming the operator.
#![cfg(feature = "eager")]

mod common;
use common::{argmax, cosine, model_dir, runlens};

use std::path::PathBuf;
use std::process::Command;

use runlens::backend::executorch::{MissingKernels, OpenError};
use runlens::backend::{self, BackendSpec};
use runlens::model::{ModelDir, ProgramEntry, Reference};
use serde_json::Value;

/// GPT-2 (Conv1D, LayerNorm, tied head, a position embedding) and the Llama
/// family: Llama (GQA, llama3 rope, untied head), Qwen2 (RMSNorm, tied head,
/// biases, one KV head), Qwen3 (q/k norms, its own head_dim).
const MODELS: [&str; 4] = ["tiny-qwen2", "tiny-gpt2", "tiny-llama", "tiny-qwen3"];
const QUANTIZED: [&str; 2] = ["xnnpack-int8", "xnnpack-8da4w"];
/// Linear layers' and 4-bit embeddings' group (make test-models' `--group-size 32`; the recipe's `4,32`).
const GROUP: u64 = 32;

/// Lower bounds against float32 eager, per model and program: (first-step logits cosine, top-1
/// agreement teacher-forced on float32's greedy ids). The export's measurements (`vs_float`,
/// min cosine over the prompts and top-1) are in the comments.
const VS_FLOAT: [(&str, &str, f64, f64); 8] = [
    ("tiny-gpt2", "xnnpack-int8", 0.995, 0.75),  // 0.9993, 92/96
    ("tiny-gpt2", "xnnpack-8da4w", 0.85, 0.35),  // 0.934, 54/96
    ("tiny-qwen2", "xnnpack-int8", 0.99, 0.8),   // 0.9967, 182/192
    ("tiny-qwen2", "xnnpack-8da4w", 0.5, 0.2),   // 0.654, 63/192
    ("tiny-llama", "xnnpack-int8", 0.99, 0.8),   // 0.9939, 141/149
    ("tiny-llama", "xnnpack-8da4w", 0.4, 0.15),  // 0.526, 41/149
    ("tiny-qwen3", "xnnpack-int8", 0.995, 0.8),  // 0.9989, 181/192
    ("tiny-qwen3", "xnnpack-8da4w", 0.8, 0.4),   // 0.889, 103/192
];

fn entry<'a>(dir: &'a ModelDir, name: &str) -> &'a ProgramEntry {
    dir.manifest().programs.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{} has no {name} program", dir.root().display()))
}

/// The manifest's entry as written, for the fields runlens does not read (the embeddings').
fn raw_entry(dir: &ModelDir, name: &str) -> Value {
    let manifest: Value = serde_json::from_slice(&std::fs::read(dir.root().join("manifest.json")).unwrap()).unwrap();
    manifest["programs"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap().clone()
}

fn spec(dir: &ModelDir, name: &str) -> BackendSpec {
    backend::catalog(dir, &[]).unwrap().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no backend {name}"))
}

fn reference(dir: &ModelDir, name: &str) -> Reference {
    let file = entry(dir, name).reference.clone().expect("a quantized program names its reference file");
    Reference::load(&dir.root().join(file)).unwrap()
}

/// The quantized model's top-1 minus top-2 logit at each greedy token of each
/// sentence (teacher-forced, `top2_margins` in the reference file), and the
/// margin under which the export lets ids part: a near-tie.
fn margins(dir: &ModelDir, name: &str) -> (Vec<Vec<f32>>, f32) {
    let file = dir.root().join(entry(dir, name).reference.as_ref().unwrap());
    let j: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let floats = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect::<Vec<_>>();
    let per_sentence = j["sentences"].as_array().unwrap().iter().map(|s| floats(&s["top2_margins"])).collect();
    (per_sentence, j["tie_margin"].as_f64().expect("the reference states its tie margin") as f32)
}

/// Where `got` leaves `want`, if it does.
fn first_divergence(got: &[i64], want: &[i64]) -> Option<usize> {
    got.iter().zip(want).position(|(a, b)| a != b).or((got.len() != want.len()).then(|| got.len().min(want.len())))
}

fn program_path(dir: &ModelDir, name: &str) -> PathBuf {
    dir.root().join(&entry(dir, name).file)
}

#[test]
fn the_manifest_records_scheme_bits_group_and_what_stayed_float() {
    for model in MODELS {
        let dir = model_dir(model);
        let int8 = entry(&dir, "xnnpack-int8");
        assert_eq!(int8.quantization.as_deref(), Some("int8-dynamic"), "{model}");
        assert_eq!((int8.bits, int8.activation_bits, int8.group_size), (Some(8), Some(8), None), "{model}");
        let int4 = entry(&dir, "xnnpack-8da4w");
        assert_eq!(int4.quantization.as_deref(), Some("8da4w"), "{model}");
        assert_eq!((int4.bits, int4.activation_bits, int4.group_size), (Some(4), Some(8), Some(GROUP as usize)), "{model}");
        for p in [int8, int4] {
            let name = &p.name;
            assert_eq!(p.column.as_deref(), Some("xnnpack"), "F5 cycles the quantized programs in the xnnpack column");
            assert_eq!(p.delegate.as_deref(), Some("XnnpackBackend"));
            assert_eq!(p.cache.as_deref(), Some("static"));
            // The embeddings are quantized now: what stays float is the rest.
            assert_eq!(p.float, ["norms", "attention", "kv-cache"], "{model}/{name}");
            let raw = raw_entry(&dir, name);
            let (bits, group, op) = if p.bits == Some(8) {
                (8, Value::Null, "quantized_decomposed::embedding_byte")
            } else {
                (4, GROUP.into(), "quantized_decomposed::embedding_4bit")
            };
            assert_eq!((&raw["embedding_bits"], &raw["embedding_group_size"], &raw["embedding_operator"]), (&bits.into(), &group, &op.into()), "{model}/{name}");
            let v = p.vs_float.as_ref().expect("the export measures the program against float32");
            assert!(v.tokens > 0 && (0.0..=1.0).contains(&v.top1_agreement) && v.first_logits_cosine_min <= 1.0, "{v:?}");
            assert!(p.about.contains("bit weights") && p.about.contains(&format!("embeddings {bits}-bit")), "the column's about says the scheme: {}", p.about);
            let summary = p.quantization_summary().unwrap();
            assert!(summary.contains(&format!("{bits}-bit")) && summary.contains("float: norms"), "{summary}");
        }
        assert!(entry(&dir, "xnnpack").quantization.is_none() && entry(&dir, "xnnpack").quantization_summary().is_none());
    }
}

/// Tight: each quantized program computes what the quantized model computes in PyTorch.
/// Greedy ids may part only at a near-tie of the model's own logits (its top two
/// within the reference's `tie_margin`, 5e-2, half the logits bound); teacher-forced
/// on the model's ids, the program then picks the model's token at every position
/// that is not such a tie.
#[test]
fn quantized_programs_generate_the_quantized_pytorch_models_greedy_ids() {
    let mut ties = 0;
    for model in MODELS {
        let dir = model_dir(model);
        for (name, max_diff) in [("xnnpack-int8", 1e-1f32), ("xnnpack-8da4w", 1e-1)] {
            let reference = reference(&dir, name);
            let (margins, tie) = margins(&dir, name);
            assert!(reference.sentences.len() >= 2 && margins.len() == reference.sentences.len());
            assert!(tie <= max_diff / 2.0, "{model}/{name}: a tie margin of {tie} would excuse more than a rounding step");
            let mut b = runlens::task::load_backend(&spec(&dir, name), &dir).unwrap_or_else(|e| panic!("{model}/{name}: {e:#}"));
            let decoder = b.as_decoder().expect("a decoder");
            for (s, margins) in reference.sentences.iter().zip(&margins) {
                assert_eq!(margins.len(), s.generated_ids.len());
                let first = decoder.prefill(&s.ids).unwrap();
                assert_eq!(first.len(), s.logits.len());
                let diff = first.iter().zip(&s.logits).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
                let c = cosine(&first, &s.logits);
                assert!(diff <= max_diff && c >= 0.9999,
                    "{model}/{name} on {:?}: first logits max|diff| {diff}, cosine {c} to the quantized PyTorch model", s.text);
                // Greedy, token by token, as generation does it.
                let mut ids = vec![argmax(&first)];
                while ids.len() < s.generated_ids.len() {
                    ids.push(argmax(&decoder.step(*ids.last().unwrap()).unwrap()));
                }
                let Some(k) = first_divergence(&ids, &s.generated_ids) else { continue };
                assert!(margins[k] <= tie,
                    "{model}/{name} on {:?}: greedy ids leave the quantized PyTorch model's at new token {k} ({ids:?} vs {:?}), \
                     where its top two are {} apart, not a tie (<= {tie})", s.text, s.generated_ids, margins[k]);
                ties += 1;
                // Teacher-forced on the model's ids: every position that is not a tie agrees.
                let mut logits = decoder.prefill(&s.ids).unwrap();
                for (j, token) in s.generated_ids.iter().enumerate() {
                    let pick = argmax(&logits);
                    assert!(pick == *token || margins[j] <= tie,
                        "{model}/{name} on {:?}: teacher-forced, new token {j} is {pick}, the model's {token} (top two {} apart)", s.text, margins[j]);
                    if j + 1 < s.generated_ids.len() {
                        logits = decoder.step(*token).unwrap();
                    }
                }
            }
        }
    }
    eprintln!("greedy ids parted at a near-tie in {ties} sentence(s), the same teacher-forced");
}

/// Loose: against float32 eager (libtorch), bounded by what random weights allow.
#[test]
fn quantized_programs_stay_near_float32_as_random_weights_allow() {
    for model in MODELS {
        let dir = model_dir(model);
        let fp32 = Reference::load(&dir.reference().unwrap()).unwrap();
        let mut eager = runlens::task::load_backend(&BackendSpec::eager(), &dir).unwrap();
        for (_, name, min_cosine, min_top1) in VS_FLOAT.iter().filter(|v| v.0 == model) {
            let mut b = runlens::task::load_backend(&spec(&dir, name), &dir).unwrap();
            let (mut agree, mut total) = (0, 0);
            for s in &fp32.sentences {
                let want = eager.as_decoder().unwrap().prefill(&s.ids).unwrap();
                let q = b.as_decoder().unwrap();
                let mut got = q.prefill(&s.ids).unwrap();
                let c = cosine(&got, &want);
                assert!(c >= *min_cosine, "{model}/{name} on {:?}: first logits cosine {c} to float32 (bound {min_cosine})", s.text);
                // Top-1 agreement teacher-forced on float32's greedy ids.
                for (k, token) in s.generated_ids.iter().enumerate() {
                    agree += (argmax(&got) == *token) as usize;
                    total += 1;
                    if k + 1 < s.generated_ids.len() {
                        got = q.step(*token).unwrap();
                    }
                }
            }
            let top1 = agree as f64 / total as f64;
            assert!(top1 >= *min_top1, "{model}/{name}: top-1 agreement with float32 {agree}/{total} (bound {min_top1})");
        }
    }
}

/// `runlens run --json` as a user runs the two quantized programs.
#[test]
fn run_json_runs_the_quantized_programs() {
    for model in MODELS {
        let dir = model_dir(model);
        let int8 = reference(&dir, "xnnpack-int8");
        let s = &int8.sentences[0];
        let path = dir.root().display().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
            .args(["--model", &path, "--threads", "1", "--backends", "xnnpack-int8,xnnpack-8da4w", "run", "--prompt-format", "raw", "--json", "--max-new-tokens", "12", &s.text])
            .output()
            .unwrap();
        assert!(out.status.success(), "{model}: {}", String::from_utf8_lossy(&out.stderr));
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["ids"], serde_json::json!(s.ids), "{model}");
        let backends = j["backends"].as_array().unwrap();
        let names: Vec<&str> = backends.iter().map(|b| b["name"].as_str().unwrap()).collect();
        assert_eq!(names, QUANTIZED);
        for b in backends {
            let name = b["name"].as_str().unwrap();
            let sentences = reference(&dir, name).sentences;
            let i = sentences.iter().position(|r| r.text == s.text).unwrap();
            let want = &sentences[i].generated_ids;
            let n = want.len().min(12);
            assert_eq!(b["ok"], true, "{b}");
            let got: Vec<i64> = serde_json::from_value(b["generated_ids"].clone()).unwrap();
            assert_eq!(got.len(), n, "{model}/{name}");
            // The same ids, or the same up to a near-tie of the model's (the test above checks what follows).
            if let Some(k) = first_divergence(&got, &want[..n]) {
                let (margins, tie) = margins(&dir, name);
                assert!(margins[i][k] <= tie, "{model}/{name}: ids {got:?}, the model's {:?}: they part at {k}, not a tie", &want[..n]);
            }
            assert!(b["decode_tokens_per_s"].as_f64().unwrap() > 0.0);
        }
    }
}

/// What the float32 program stores that the quantized ones quantize, from config.json:
/// the linear layers' weights (count and output channels; the head's included) and the
/// embedding tables (rows, width).
struct Quantizable {
    linear_weights: u64,
    linear_outputs: u64,
    tables: Vec<(u64, u64)>,
}

impl Quantizable {
    fn of(dir: &ModelDir) -> Quantizable {
        let c: Value = serde_json::from_slice(&std::fs::read(dir.root().join("config.json")).unwrap()).unwrap();
        let u = |k: &str| c[k].as_u64();
        let vocab = u("vocab_size").unwrap();
        // Each layer's projections as (input width, output width).
        let (d, layers, projections, tables) = if c["model_type"] == "gpt2" {
            let d = u("n_embd").unwrap();
            let inner = u("n_inner").unwrap_or(4 * d);
            // c_attn d->3d, attn c_proj d->d, c_fc d->inner, mlp c_proj inner->d; wte and wpe.
            (d, u("n_layer").unwrap(), vec![(d, 3 * d), (d, d), (d, inner), (inner, d)], vec![(vocab, d), (u("n_positions").unwrap(), d)])
        } else {
            let d = u("hidden_size").unwrap();
            let heads = u("num_attention_heads").unwrap();
            let kv = u("num_key_value_heads").unwrap_or(heads);
            let hd = u("head_dim").unwrap_or(d / heads);
            let inter = u("intermediate_size").unwrap();
            // q, k, v, o; gate, up, down; embed_tokens.
            let p = vec![(d, heads * hd), (d, kv * hd), (d, kv * hd), (heads * hd, d), (d, inter), (d, inter), (inter, d)];
            (d, u("num_hidden_layers").unwrap(), p, vec![(vocab, d)])
        };
        // The head d->vocab: its own linear layer in every program, tied or not.
        let linear_weights = layers * projections.iter().map(|(i, o)| i * o).sum::<u64>() + d * vocab;
        let linear_outputs = layers * projections.iter().map(|(_, o)| o).sum::<u64>() + vocab;
        Quantizable { linear_weights, linear_outputs, tables }
    }

    /// Bytes quantizing the linear layers saves: 4 bytes a weight down to 1 (plus a float32
    /// scale per output channel), or to half a byte (plus a bfloat16 scale per group).
    fn linear_saves(&self, bits: u32) -> f64 {
        let w = self.linear_weights;
        (if bits == 8 { 3 * w - 4 * self.linear_outputs } else { 4 * w - w / 2 - 2 * w / GROUP }) as f64
    }

    /// Bytes quantizing the embeddings saves: 4 bytes a value down to 1 (plus a float32
    /// scale and zero point per row), or to half a byte (plus both per group of 32).
    fn embedding_saves(&self, bits: u32) -> f64 {
        let per = |&(rows, width): &(u64, u64)| if bits == 8 { 3 * rows * width - 8 * rows } else { 4 * rows * width - rows * width / 2 - 8 * rows * width / GROUP };
        self.tables.iter().map(per).sum::<u64>() as f64
    }
}

/// The files shrink by what quantizing the linear layers (GPT-2's Conv1D ones
/// included) and the embeddings must save; tied heads are stored twice in every
/// program (the delegate holds its own copy of the head's weight), quantized in
/// both places.
#[test]
fn the_files_shrink_by_the_linear_layers_and_the_embeddings_expected_bytes() {
    for model in MODELS {
        let dir = model_dir(model);
        let size = |name: &str| std::fs::metadata(program_path(&dir, name)).unwrap().len() as f64;
        let fp32 = size("xnnpack");
        let q = Quantizable::of(&dir);
        for (name, bits) in [("xnnpack-int8", 8), ("xnnpack-8da4w", 4)] {
            let saved = fp32 - size(name);
            let (linear, embedding) = (q.linear_saves(bits), q.embedding_saves(bits));
            let ratio = saved / (linear + embedding);
            eprintln!("{model}/{name}: {saved} bytes smaller than xnnpack.pte; linear layers {linear}, embeddings {embedding} (ratio {ratio:.4})");
            assert!((0.97..=1.03).contains(&ratio),
                "{model}/{name}: {saved} bytes smaller than xnnpack.pte, expected about {} (ratio {ratio:.3}); were the Conv1D weights quantized?", linear + embedding);
            // What is left after the linear layers is the embeddings' saving: without it the file would be this much larger.
            let by_embeddings = (saved - linear) / embedding;
            assert!((0.85..=1.15).contains(&by_embeddings),
                "{model}/{name}: the embeddings saved {} bytes, expected about {embedding} ({by_embeddings:.2}); are they quantized?", saved - linear);
        }
        assert!(size("xnnpack-8da4w") < size("xnnpack-int8"));
    }
}

/// The operator list of each quantized program (`runlens inspect --json`): the
/// embeddings are gathered by the quantized kernels library's operator, not
/// ATen's float embedding, and the runtime in runlens has it.
#[test]
fn the_embeddings_run_on_the_quantized_kernels_operators() {
    for model in MODELS {
        let dir = model_dir(model);
        for name in QUANTIZED {
            let path = program_path(&dir, name);
            let out = runlens(&["inspect", "--json", path.to_str().unwrap()]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let j: Value = serde_json::from_slice(&out.stdout).unwrap();
            let operators = j["plans"][0]["operators"].as_object().unwrap();
            let op = format!("{}.out", raw_entry(&dir, name)["embedding_operator"].as_str().unwrap());
            // GPT-2 gathers two tables (tokens and positions), the Llama family one.
            let tables = if model == "tiny-gpt2" { 2 } else { 1 };
            assert_eq!(operators.get(&op), Some(&Value::from(tables)), "{model}/{name}: {operators:?}");
            assert!(!operators.keys().any(|o| o.starts_with("aten::embedding")), "{model}/{name}: a float embedding is left: {operators:?}");
            assert!(operators.keys().all(|o| !o.starts_with("quantized_decomposed::") || *o == op), "{model}/{name}: {operators:?}");
            assert_eq!(j["missing_kernels"], serde_json::json!([]), "{model}/{name}");
            assert!(runlens::ffi::has_kernel(&op), "{op}: the quantized kernels library is linked");
        }
    }
}

/// A runtime without the quantized kernels library would refuse the program
/// before loading it, naming the operator: the real program's operator table
/// checked against a fake registry, the real one less `quantized_decomposed::`.
#[test]
fn a_runtime_without_the_quantized_kernels_refuses_the_program_naming_the_operator() {
    let dir = model_dir("tiny-qwen2");
    for name in QUANTIZED {
        let path = program_path(&dir, name);
        let report = runlens::pte::inspect_file(&path).unwrap();
        let plan = report.plans.iter().find(|p| p.name == "forward").unwrap();
        let without_quantized_kernels = |op: &str| !op.starts_with("quantized_decomposed::") && runlens::ffi::has_kernel(op);
        let missing = MissingKernels::with(plan, without_quantized_kernels, runlens::ffi::has_backend);
        let op = format!("{}.out", raw_entry(&dir, name)["embedding_operator"].as_str().unwrap());
        assert_eq!(missing.operators, std::slice::from_ref(&op), "{name}");
        assert!(missing.backends.is_empty());
        let error = OpenError::MissingKernels { file: path.display().to_string(), missing }.to_string();
        assert!(error.contains(&path.display().to_string()) && error.contains(&format!("no kernel in this runlens for {op}")), "{error}");
        assert!(error.contains("libexecutorch_kernels_quantized"), "says which library has it: {error}");
        // The runtime runlens links has every kernel: nothing missing for real.
        assert!(MissingKernels::of(plan).is_empty());
    }
}
