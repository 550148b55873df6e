//! Damaged and mutated ONNX files through the real `runlens run`, as a user
//! runs them (`--program x=FILE.onnx`): copies of the tiny BERT classifier's
//! `model.onnx` and `model.int8.onnx` with bit flips and truncations, and, read
//! and written again with prost (`onnx_proto` below: every field these files
//! hold, so an unchanged file round-trips to its own length), with a graph
//! input or output renamed, retyped or reshaped, an initializer's dims or type
//! changed, an operator swapped, a node's input renamed or dropped, the opset
//! or IR version changed. Each from a fixed seed. A case passes when it ends
//! with status 0 (a clean run) or 1 with an error naming the file; a signal,
//! a panic, an abort or a timeout fails the test. The probe (ONNX Runtime run
//! once in a child) is on, with its cache in a temporary folder.
//!
//! Also: an input runlens cannot give is refused naming the graph's inputs,
//! before ONNX Runtime sees the file; a file that is not a `ModelProto` is
//! refused naming it.
//!
//! `RUNLENS_FUZZ_CASES` (default 100, at least 20) sets the cases.

mod common;

use std::path::{Path, PathBuf};

use common::fuzz::{assert_clean, run_case, run_cases, Rng};
use prost::Message;

const DEFAULT_CASES: u64 = 100;
const MIN_CASES: u64 = 20;
const MODEL: &str = "tiny-bert-cls";
const TEXT: &str = "A kitten is sleeping on the sofa";

/// onnx.proto (onnx/onnx `onnx/onnx.proto`), every field the exported files
/// use; what the test does not change is kept as bytes.
mod onnx_proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Model {
        #[prost(int64, optional, tag = "1")]
        pub ir_version: Option<i64>,
        #[prost(string, optional, tag = "2")]
        pub producer_name: Option<String>,
        #[prost(string, optional, tag = "3")]
        pub producer_version: Option<String>,
        #[prost(string, optional, tag = "4")]
        pub domain: Option<String>,
        #[prost(int64, optional, tag = "5")]
        pub model_version: Option<i64>,
        #[prost(string, optional, tag = "6")]
        pub doc_string: Option<String>,
        #[prost(message, optional, tag = "7")]
        pub graph: Option<Graph>,
        #[prost(message, repeated, tag = "8")]
        pub opset_import: Vec<OpsetId>,
        #[prost(bytes = "vec", repeated, tag = "14")]
        pub metadata_props: Vec<Vec<u8>>,
        #[prost(bytes = "vec", repeated, tag = "25")]
        pub functions: Vec<Vec<u8>>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OpsetId {
        #[prost(string, optional, tag = "1")]
        pub domain: Option<String>,
        #[prost(int64, optional, tag = "2")]
        pub version: Option<i64>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Graph {
        #[prost(message, repeated, tag = "1")]
        pub node: Vec<Node>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
        #[prost(message, repeated, tag = "5")]
        pub initializer: Vec<Tensor>,
        #[prost(string, optional, tag = "10")]
        pub doc_string: Option<String>,
        #[prost(message, repeated, tag = "11")]
        pub input: Vec<ValueInfo>,
        #[prost(message, repeated, tag = "12")]
        pub output: Vec<ValueInfo>,
        #[prost(bytes = "vec", repeated, tag = "13")]
        pub value_info: Vec<Vec<u8>>,
        #[prost(bytes = "vec", repeated, tag = "14")]
        pub quantization_annotation: Vec<Vec<u8>>,
        #[prost(bytes = "vec", repeated, tag = "15")]
        pub sparse_initializer: Vec<Vec<u8>>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Node {
        #[prost(string, repeated, tag = "1")]
        pub input: Vec<String>,
        #[prost(string, repeated, tag = "2")]
        pub output: Vec<String>,
        #[prost(string, optional, tag = "3")]
        pub name: Option<String>,
        #[prost(string, optional, tag = "4")]
        pub op_type: Option<String>,
        #[prost(bytes = "vec", repeated, tag = "5")]
        pub attribute: Vec<Vec<u8>>,
        #[prost(string, optional, tag = "6")]
        pub doc_string: Option<String>,
        #[prost(string, optional, tag = "7")]
        pub domain: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tensor {
        #[prost(int64, repeated, packed = "false", tag = "1")]
        pub dims: Vec<i64>,
        #[prost(int32, optional, tag = "2")]
        pub data_type: Option<i32>,
        #[prost(float, repeated, tag = "4")]
        pub float_data: Vec<f32>,
        #[prost(int32, repeated, tag = "5")]
        pub int32_data: Vec<i32>,
        #[prost(int64, repeated, tag = "7")]
        pub int64_data: Vec<i64>,
        #[prost(string, optional, tag = "8")]
        pub name: Option<String>,
        #[prost(bytes = "vec", optional, tag = "9")]
        pub raw_data: Option<Vec<u8>>,
        #[prost(string, optional, tag = "12")]
        pub doc_string: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueInfo {
        #[prost(string, optional, tag = "1")]
        pub name: Option<String>,
        #[prost(message, optional, tag = "2")]
        pub r#type: Option<Type>,
        #[prost(string, optional, tag = "3")]
        pub doc_string: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Type {
        #[prost(message, optional, tag = "1")]
        pub tensor_type: Option<TensorType>,
        #[prost(string, optional, tag = "6")]
        pub denotation: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorType {
        #[prost(int32, optional, tag = "1")]
        pub elem_type: Option<i32>,
        #[prost(message, optional, tag = "2")]
        pub shape: Option<Shape>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Shape {
        #[prost(message, repeated, tag = "1")]
        pub dim: Vec<Dim>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dim {
        #[prost(int64, optional, tag = "1")]
        pub dim_value: Option<i64>,
        #[prost(string, optional, tag = "2")]
        pub dim_param: Option<String>,
        #[prost(string, optional, tag = "3")]
        pub denotation: Option<String>,
    }
}

use onnx_proto::{Dim, Model, ValueInfo};

fn model_root() -> PathBuf {
    common::model_dir(MODEL).root().to_path_buf()
}

/// The two source files, read and decoded once; each re-encodes to its own length.
fn sources() -> Vec<(Vec<u8>, Model)> {
    ["model.onnx", "model.int8.onnx"]
        .iter()
        .map(|f| {
            let path = model_root().join(f);
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (`make test-models`)", path.display()));
            let model = Model::decode(bytes.as_slice()).unwrap();
            assert_eq!(model.encode_to_vec().len(), bytes.len(), "{}: the test's schema drops a field of this file", path.display());
            (bytes, model)
        })
        .collect()
}

/// A value an integer field may be mutated to.
fn odd_int(rng: &mut Rng, was: i64) -> i64 {
    let random = (rng.next() >> 40) as i64;
    *rng.pick(&[0, 1, -1, 2, was.saturating_add(1), was.saturating_sub(1), was.saturating_mul(2), was / 2, i64::MAX, i64::MIN, 1 << 31, 1 << 40, random])
}

fn rename(rng: &mut Rng, name: &str) -> String {
    let mut chars: Vec<char> = name.chars().collect();
    match rng.below(4) {
        0 if !chars.is_empty() => {
            let at = rng.below(chars.len() as u64) as usize;
            chars[at] = (b'a' + rng.below(26) as u8) as char;
            chars.into_iter().collect()
        }
        1 => String::new(),
        2 => format!("{name}_2"),
        _ => rng.pick(&["input_ids", "attention_mask", "token_type_ids", "logits", "last_hidden_state", "position_ids"]).to_string(),
    }
}

fn mutate_value(rng: &mut Rng, v: &mut ValueInfo) -> String {
    let name = v.name.clone().unwrap_or_default();
    let tensor = v.r#type.get_or_insert_with(Default::default).tensor_type.get_or_insert_with(Default::default);
    match rng.below(6) {
        0 => {
            let new = rename(rng, &name);
            v.name = Some(new.clone());
            format!("{name} renamed {new:?}")
        }
        1 => {
            let t = rng.below(25) as i32;
            tensor.elem_type = Some(t);
            format!("{name} elem_type {t}")
        }
        2 => {
            let shape = tensor.shape.get_or_insert_with(Default::default);
            if shape.dim.is_empty() {
                shape.dim.push(Dim::default());
            }
            let at = rng.below(shape.dim.len() as u64) as usize;
            let n = odd_int(rng, 1);
            shape.dim[at] = Dim { dim_value: Some(n), ..Default::default() };
            format!("{name} dim {at} = {n}")
        }
        3 => {
            let shape = tensor.shape.get_or_insert_with(Default::default);
            if rng.below(2) == 0 || shape.dim.is_empty() {
                shape.dim.push(Dim { dim_param: Some("extra".into()), ..Default::default() });
                format!("{name} one dim more")
            } else {
                shape.dim.pop();
                format!("{name} one dim less")
            }
        }
        4 => {
            tensor.shape = None;
            format!("{name} no shape")
        }
        _ => {
            v.r#type = None;
            format!("{name} no type")
        }
    }
}

/// One structural mutation of `m`; what it did.
fn mutate(rng: &mut Rng, m: &mut Model) -> String {
    let g = m.graph.as_mut().unwrap();
    match rng.below(10) {
        0 | 1 => {
            let at = rng.below(g.input.len() as u64) as usize;
            format!("input {}", mutate_value(rng, &mut g.input[at]))
        }
        2 => {
            let at = rng.below(g.output.len() as u64) as usize;
            format!("output {}", mutate_value(rng, &mut g.output[at]))
        }
        3 => {
            let at = rng.below(g.initializer.len() as u64) as usize;
            let t = &mut g.initializer[at];
            let name = t.name.clone().unwrap_or_default();
            match rng.below(3) {
                0 if !t.dims.is_empty() => {
                    let d = rng.below(t.dims.len() as u64) as usize;
                    t.dims[d] = odd_int(rng, t.dims[d]);
                    format!("initializer {name} dims {:?}", t.dims)
                }
                1 => {
                    t.dims.push(*rng.pick(&[1, 2, 0]));
                    format!("initializer {name} dims {:?}", t.dims)
                }
                _ => {
                    let ty = rng.below(25) as i32;
                    t.data_type = Some(ty);
                    format!("initializer {name} data_type {ty}")
                }
            }
        }
        4 => {
            let at = rng.below(g.initializer.len() as u64) as usize;
            let t = &mut g.initializer[at];
            let cut = t.raw_data.as_ref().map_or(0, |r| r.len() / 2);
            if let Some(raw) = t.raw_data.as_mut() {
                raw.truncate(cut);
            }
            format!("initializer {} raw_data cut to {cut}", t.name.clone().unwrap_or_default())
        }
        5 => {
            let at = rng.below(g.node.len() as u64) as usize;
            let ops = ["Gather", "MatMul", "Add", "Softmax", "Reshape", "Transpose", "Where", "Expand", "Slice", "Concat", "LayerNormalization", "NoSuchOp", ""];
            let op = rng.pick(&ops).to_string();
            let was = g.node[at].op_type.replace(op.clone());
            format!("node {at} {was:?} -> {op:?}")
        }
        6 => {
            let at = rng.below(g.node.len() as u64) as usize;
            let node = &mut g.node[at];
            if node.input.is_empty() || rng.below(3) == 0 {
                node.input.push("input_ids".into());
                format!("node {at} one input more")
            } else {
                let i = rng.below(node.input.len() as u64) as usize;
                let new = if rng.below(2) == 0 { rename(rng, &node.input[i]) } else { String::new() };
                let was = std::mem::replace(&mut node.input[i], new.clone());
                format!("node {at} input {was} -> {new:?}")
            }
        }
        7 => {
            let at = rng.below(g.node.len() as u64) as usize;
            g.node.remove(at);
            format!("node {at} removed")
        }
        8 => {
            let v = *rng.pick(&[0, 1, 7, 11, 13, 16, 18, 21, 99, 1 << 30]);
            if let Some(o) = m.opset_import.first_mut() {
                o.version = Some(v);
            }
            format!("opset {v}")
        }
        _ => {
            let v = *rng.pick(&[0, 1, 3, 4, 7, 10, 11, 13, 99, -1]);
            m.ir_version = Some(v);
            format!("ir_version {v}")
        }
    }
}

/// Case `i`: a bit flip, a truncation or one to three structural mutations of one of the two files.
fn make_case(sources: &[(Vec<u8>, Model)], i: u64, work: &Path) -> (PathBuf, String) {
    let mut rng = Rng::new(5000 + i);
    let which = rng.below(sources.len() as u64) as usize;
    let (bytes, model) = &sources[which];
    let (data, what) = match rng.below(10) {
        0 | 1 => {
            let mut out = bytes.clone();
            let n = 1 + rng.below(8);
            // Half the flips in the last 64 kB: the graph's inputs and outputs come after the weights.
            for _ in 0..n {
                let at = if rng.below(2) == 0 { out.len() - 1 - rng.below(65536.min(out.len() as u64)) as usize } else { rng.below(out.len() as u64) as usize };
                out[at] ^= 1 << rng.below(8);
            }
            (out, format!("{n} bits flipped"))
        }
        2 => {
            let cut = rng.below(bytes.len() as u64) as usize;
            (bytes[..cut].to_vec(), format!("cut to {cut} bytes"))
        }
        _ => {
            let mut m = model.clone();
            let n = 1 + rng.below(3);
            let what: Vec<String> = (0..n).map(|_| mutate(&mut rng, &mut m)).collect();
            (m.encode_to_vec(), what.join("; "))
        }
    };
    let file = work.join(format!("case-{i}.onnx"));
    std::fs::write(&file, data).unwrap();
    (file, format!("{} {what}", if which == 0 { "f32" } else { "int8" }))
}

#[test]
fn mutated_onnx_files_end_in_a_clean_error_or_a_clean_run() {
    let cases: u64 = std::env::var("RUNLENS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES);
    assert!(cases >= MIN_CASES, "RUNLENS_FUZZ_CASES={cases}: at least {MIN_CASES}");
    let sources = sources();
    let work = tempfile::tempdir().unwrap();
    let root = model_root();
    let results = run_cases(cases, work.path(), &|i, work| {
        let (file, what) = make_case(&sources, i, work);
        (file, what, root.clone(), vec!["run".into(), "--json".into(), TEXT.into()])
    });
    assert_clean(&results, "onnx");
}

/// `run --json` of `file` as the one column: its status, JSON and all it said.
fn run_json(file: &Path, cache: &Path) -> (Option<i32>, serde_json::Value, String) {
    let (code, said, _) = run_case(&model_root(), file, cache, &["run", "--json", TEXT]);
    let json = said.lines().find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).unwrap_or_default();
    (code, json, said)
}

/// An input runlens cannot give is refused by runlens' reading of the file,
/// naming the inputs the graph has, before the probe or ONNX Runtime sees it;
/// a file that is not a ModelProto is refused naming the file.
#[test]
fn an_unknown_input_or_a_file_that_is_not_a_model_is_refused_naming_what_was_found() {
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let (_, model) = sources().swap_remove(0);
    let mut renamed = model.clone();
    renamed.graph.as_mut().unwrap().input.iter_mut().find(|v| v.name.as_deref() == Some("attention_mask")).unwrap().name = Some("attention_masq".into());
    let file = work.path().join("renamed.onnx");
    std::fs::write(&file, renamed.encode_to_vec()).unwrap();
    let (code, json, said) = run_json(&file, &cache);
    assert_eq!(code, Some(1), "{said}");
    let why = json["backends"][0]["error"].as_str().unwrap_or_default().to_string();
    let expected = format!(
        "{}: the graph takes an input \"attention_masq\" runlens cannot give (its inputs: input_ids, attention_masq, token_type_ids); an encoder's are input_ids, attention_mask, token_type_ids",
        file.display()
    );
    assert_eq!(why, expected, "{said}");
    assert!(!cache.join("probe").exists() || std::fs::read_dir(cache.join("probe")).unwrap().all(|e| e.unwrap().file_name() == "digests"), "refused before the probe");

    // An int32 input: named with its type and the inputs' declared shapes.
    let mut retyped = model.clone();
    let ids = &mut retyped.graph.as_mut().unwrap().input[0];
    ids.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap().elem_type = Some(6);
    let file = work.path().join("retyped.onnx");
    std::fs::write(&file, retyped.encode_to_vec()).unwrap();
    let (code, json, said) = run_json(&file, &cache);
    assert_eq!(code, Some(1), "{said}");
    let why = json["backends"][0]["error"].as_str().unwrap_or_default();
    assert!(why.starts_with(&format!("{}: its input input_ids int32 [", file.display())) && why.contains("is not int64"), "{why}");

    // A GGUF given as an .onnx: not a ModelProto.
    let gguf = common::model_dir("tiny-llama").root().join("llamacpp-q4_0.gguf");
    let file = work.path().join("not-a-model.onnx");
    std::fs::copy(&gguf, &file).unwrap();
    let (code, json, said) = run_json(&file, &cache);
    assert_eq!(code, Some(1), "{said}");
    let why = json["backends"][0]["error"].as_str().unwrap_or_default();
    assert!(why.starts_with(&format!("{}: not an ONNX model: ", file.display())), "{why}");
}

/// `inspect` reads an ONNX file's header and graph: opset, producer, inputs, operators.
#[test]
fn inspect_shows_the_opset_the_inputs_and_the_operators() {
    let file = model_root().join("model.int8.onnx");
    let out = common::runlens(&["inspect", file.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for part in ["opsets ai.onnx 17", "inputs:  input_ids int64 [", "outputs: logits float32 [", "MatMulInteger", "DynamicQuantizeLinear"] {
        assert!(text.contains(part), "{part:?} missing:\n{text}");
    }
    let out = common::runlens(&["inspect", "--json", file.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["inputs"][0]["elem_type"], "int64");
    assert!(json["operators"].as_array().unwrap().iter().any(|o| o[0] == "MatMulInteger"), "{json}");
}
