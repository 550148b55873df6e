//! The static KV cache of the decoders' XNNPACK programs costs the default
//! kernels only its new entries per call (issue 26, docs/kv-cache.md): no
//! instruction outside the delegate takes or makes a whole layer's cache (no
//! `expand_copy` for a matmul or a GQA repeat, no `index_put` into a fresh copy,
//! no `copy_` back into the buffer); the only kernels that touch a cache are
//! the in-place writes (`index_put_` on the buffer itself), two per layer, and
//! the reads of its filled part (`slice_copy` to a tensor whose length is the
//! program's `key_positions` input, dynamic), two per layer: attention reads
//! the filled length, not the whole cache (issue 33).
//!
//! Read two ways: from the program with runlens' own `.pte` reader (every
//! kernel call's tensors at their stored sizes), and from `runlens profile
//! --json` on a one-token prompt, a decode step's shape.
//!
//! Needs the tiny decoders of `make test-models`. No test asserts a speed.

mod common;

use std::path::Path;

use planus::ReadAsRoot;
use runlens::pte::generated::program::executorch_flatbuffer::{
    InstructionArgumentsRef, KernelTypesRef, ProgramRef, TensorShapeDynamism,
};
use serde_json::Value;

/// The decoders whose XNNPACK programs are checked: GPT-2 (one KV head per query
/// head) and the Llama family (grouped-query attention: Llama 4 query heads on 2
/// KV heads, Qwen2 on 1; Qwen3's own head_dim).
const DECODERS: [&str; 4] = ["tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-qwen3"];

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e} (make test-models)", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Layers and the elements of one layer's key (or value) cache, computed here
/// from config.json and the manifest's max_seq_len: heads of keys x head_dim x L.
fn cache_geometry(model: &str) -> (u64, u64) {
    let dir = Path::new(&common::model_path(model)).to_path_buf();
    let config = json(&dir.join("config.json"));
    let manifest = json(&dir.join("manifest.json"));
    let field = |names: &[&str]| names.iter().find_map(|n| config[*n].as_u64());
    let hidden = field(&["n_embd", "hidden_size"]).expect("hidden size");
    let heads = field(&["n_head", "num_attention_heads"]).expect("heads");
    let layers = field(&["n_layer", "num_hidden_layers"]).expect("layers");
    let kv_heads = field(&["num_key_value_heads"]).unwrap_or(heads);
    let head_dim = field(&["head_dim"]).unwrap_or(hidden / heads);
    let length = manifest["max_seq_len"].as_u64().expect("max_seq_len");
    (layers, kv_heads * head_dim * length)
}

/// A kernel call of `forward` with a tensor as large as a whole cache.
struct Touch {
    op: String,
    sizes: Vec<i32>,
    /// The tensor is the call's first argument and also what it returns: written in place.
    in_place: bool,
    /// The call returns a tensor of dynamic shape (its last argument): it makes
    /// no whole cache, whatever it reads (a slice of the filled part).
    dynamic_out: bool,
}

impl Touch {
    /// A read of the cache's filled part: a slice to a dynamic length.
    fn reads_filled(&self) -> bool {
        self.op.starts_with("aten::slice_copy") && self.dynamic_out && !self.in_place
    }
}

/// "aten::expand_copy.out [1, 4, 16, 64]" for each, in a failure message.
fn show(touches: &[&Touch]) -> String {
    let items: Vec<String> =
        touches.iter().map(|t| format!("{} {:?}{}", t.op, t.sizes, if t.in_place { " in place" } else if t.dynamic_out { " to a dynamic length" } else { "" })).collect();
    items.join(", ")
}

/// Every kernel call of the program's `forward` with a tensor argument that is
/// not a constant (weights are read where they are), has a fixed shape (the same
/// every call, whatever the number of new tokens) and has at least
/// `cache_elements` elements: a whole cache.
fn whole_cache_kernels(pte: &Path, cache_elements: u64) -> Vec<Touch> {
    let bytes = std::fs::read(pte).unwrap_or_else(|e| panic!("{}: {e} (make test-models)", pte.display()));
    let program = ProgramRef::read_as_root(&bytes[..]).expect("a program flatbuffer");
    let plan = program.execution_plan().unwrap().unwrap().iter().map(Result::unwrap).find(|p| p.name().unwrap() == Some("forward")).expect("forward");
    let operators: Vec<String> = plan
        .operators()
        .unwrap()
        .unwrap()
        .iter()
        .map(|op| {
            let op = op.unwrap();
            let overload = op.overload().unwrap().unwrap_or("");
            let name = op.name().unwrap().unwrap_or("").to_string();
            if overload.is_empty() { name } else { format!("{name}.{overload}") }
        })
        .collect();
    let values: Vec<_> = plan.values().unwrap().unwrap().iter().map(Result::unwrap).collect();
    let mut touches = Vec::new();
    for chain in plan.chains().unwrap().unwrap().iter() {
        for instruction in chain.unwrap().instructions().unwrap().unwrap().iter() {
            let Some(InstructionArgumentsRef::KernelCall(call)) = instruction.unwrap().instr_args().unwrap() else { continue };
            let op = &operators[call.op_index().unwrap() as usize];
            let args: Vec<i32> = call.args().unwrap().map(|a| a.iter().collect()).unwrap_or_default();
            let dynamic_out = args.last().is_some_and(|&v| match values[v as usize].val().unwrap() {
                Some(KernelTypesRef::Tensor(t)) => t.shape_dynamism().unwrap() != TensorShapeDynamism::Static,
                _ => false,
            });
            for (position, &v) in args.iter().enumerate() {
                let Some(KernelTypesRef::Tensor(t)) = values[v as usize].val().unwrap() else { continue };
                let sizes: Vec<i32> = t.sizes().unwrap().map(|s| s.iter().collect()).unwrap_or_default();
                let elements: u64 = sizes.iter().map(|&d| d as u64).product();
                // A weight has data and no place in the planned memory; a cache buffer has both
                // (its zeros are stored: InitializedMutableBufferPass).
                let constant = t.data_buffer_idx().unwrap() > 0 && t.allocation_info().unwrap().is_none();
                let fixed = t.shape_dynamism().unwrap() == TensorShapeDynamism::Static;
                if constant || !fixed || elements < cache_elements {
                    continue;
                }
                let in_place = args.first() == Some(&v) && args.last() == Some(&v) && args.len() > 1;
                if position == 0 || !in_place {
                    touches.push(Touch { op: op.clone(), sizes: sizes.clone(), in_place, dynamic_out });
                }
            }
        }
    }
    touches
}

#[test]
fn no_default_kernel_takes_or_makes_a_whole_cache() {
    for model in DECODERS {
        let (layers, cache_elements) = cache_geometry(model);
        let pte = Path::new(&common::model_path(model)).join("xnnpack.pte");
        let touches = whole_cache_kernels(&pte, cache_elements);
        let copies: Vec<&Touch> = touches.iter().filter(|t| !(t.op == "aten::index_put_" && t.in_place) && !t.reads_filled()).collect();
        assert!(
            copies.is_empty(),
            "{model}/xnnpack.pte: kernels outside the delegate take or make a whole cache ({cache_elements} elements) on every \
             call: {}; re-export with python/export.py (static_cache.py)",
            show(&copies)
        );
        let writes = touches.iter().filter(|t| t.op == "aten::index_put_").count() as u64;
        assert_eq!(writes, 2 * layers, "{model}/xnnpack.pte: one in-place write of the keys and one of the values per layer: {}", show(&touches.iter().collect::<Vec<_>>()));
        let reads = touches.iter().filter(|t| t.reads_filled()).count() as u64;
        assert_eq!(
            reads,
            2 * layers,
            "{model}/xnnpack.pte: attention reads the filled part of the keys and of the values once per layer (a slice to key_positions' length): {}",
            show(&touches.iter().collect::<Vec<_>>())
        );
    }
}

#[test]
fn the_quantized_programs_write_their_cache_in_place_too() {
    let (layers, cache_elements) = cache_geometry("tiny-gpt2");
    for program in ["xnnpack-int8.pte", "xnnpack-8da4w.pte"] {
        let pte = Path::new(&common::model_path("tiny-gpt2")).join(program);
        let touches = whole_cache_kernels(&pte, cache_elements);
        let all: Vec<&Touch> = touches.iter().collect();
        assert!(touches.iter().all(|t| (t.op == "aten::index_put_" && t.in_place) || t.reads_filled()), "tiny-gpt2/{program}: {}", show(&all));
        assert_eq!(touches.len() as u64, 4 * layers, "tiny-gpt2/{program}: a write and a read of the filled part per cache: {}", show(&all));
    }
}

/// A method's inputs as (value index, float, planned in memory), and its kernel calls as
/// (operator, argument value indices, float arguments' (sizes, dynamic)).
struct Method {
    inputs: Vec<(i32, bool, bool)>,
    calls: Vec<(String, Vec<i32>, Vec<(Vec<i32>, bool)>)>,
}

fn method(pte: &Path, name: &str) -> Method {
    use runlens::pte::generated::program::executorch_flatbuffer::ScalarType;
    let bytes = std::fs::read(pte).unwrap_or_else(|e| panic!("{}: {e} (make test-models)", pte.display()));
    let program = ProgramRef::read_as_root(&bytes[..]).expect("a program flatbuffer");
    let plan = program
        .execution_plan()
        .unwrap()
        .unwrap()
        .iter()
        .map(Result::unwrap)
        .find(|p| p.name().unwrap() == Some(name))
        .unwrap_or_else(|| panic!("{}: no method {name}", pte.display()));
    let operators: Vec<String> = plan.operators().unwrap().unwrap().iter().map(|op| op.unwrap().name().unwrap().unwrap_or("").to_string()).collect();
    let values: Vec<_> = plan.values().unwrap().unwrap().iter().map(Result::unwrap).collect();
    let tensor = |v: i32| match values[v as usize].val().unwrap() {
        Some(KernelTypesRef::Tensor(t)) => Some(t),
        _ => None,
    };
    let inputs = plan
        .inputs()
        .unwrap()
        .unwrap()
        .iter()
        .map(|v| {
            let t = tensor(v).expect("a tensor input");
            (v, t.scalar_type().unwrap() == ScalarType::Float, t.allocation_info().unwrap().is_some())
        })
        .collect();
    let mut calls = Vec::new();
    for chain in plan.chains().unwrap().unwrap().iter() {
        for instruction in chain.unwrap().instructions().unwrap().unwrap().iter() {
            let Some(InstructionArgumentsRef::KernelCall(call)) = instruction.unwrap().instr_args().unwrap() else { continue };
            let args: Vec<i32> = call.args().unwrap().map(|a| a.iter().collect()).unwrap_or_default();
            let floats = args
                .iter()
                .filter_map(|&v| tensor(v))
                .filter(|t| t.scalar_type().unwrap() == ScalarType::Float)
                .map(|t| (t.sizes().unwrap().map(|s| s.iter().collect()).unwrap_or_default(), t.shape_dynamism().unwrap() != TensorShapeDynamism::Static))
                .collect();
            calls.push((operators[call.op_index().unwrap() as usize].clone(), args, floats));
        }
    }
    Method { inputs, calls }
}

/// The programs that take their cache as inputs (`xnnpack-kvin`, cache_inputs.py): each
/// method's cache inputs, keys and values per layer and KV head, are not memory-planned (so
/// ExecuTorch reads runlens' memory in place, no copy per call), no kernel outside the
/// delegate takes one, and in a decode step (`forward`) no kernel outside it takes or
/// makes a float tensor whose size follows the filled length as a cache's does
/// (F x head_dim or more): attention reads the cache inside XNNPACK only.
#[test]
fn a_cache_given_as_inputs_is_read_in_place_by_the_delegate_only() {
    for model in DECODERS {
        let dir = Path::new(&common::model_path(model)).to_path_buf();
        let config = json(&dir.join("config.json"));
        let field = |names: &[&str]| names.iter().find_map(|n| config[*n].as_u64());
        let (hidden, heads) = (field(&["n_embd", "hidden_size"]).unwrap(), field(&["n_head", "num_attention_heads"]).unwrap());
        let layers = field(&["n_layer", "num_hidden_layers"]).unwrap();
        let kv_heads = field(&["num_key_value_heads"]).unwrap_or(heads);
        let head_dim = field(&["head_dim"]).unwrap_or(hidden / heads);
        let length = json(&dir.join("manifest.json"))["max_seq_len"].as_u64().unwrap();
        let pte = dir.join("xnnpack-kvin.pte");
        for name in ["forward", "prefill"] {
            let m = method(&pte, name);
            let cache: Vec<i32> = m.inputs.iter().filter(|(_, float, _)| *float).map(|(v, _, _)| *v).collect();
            assert_eq!(cache.len() as u64, 2 * layers * kv_heads, "{model}/xnnpack-kvin {name}: keys and values per layer and KV head");
            assert!(m.inputs.iter().all(|(_, float, planned)| !(*float && *planned)), "{model}/xnnpack-kvin {name}: a cache input is memory-planned (copied per call)");
            // `sym_size` reads a cache input's length (the filled length F), not its data.
            let data_calls: Vec<_> = m.calls.iter().filter(|(op, _, _)| op != "aten::sym_size").collect();
            let takers: Vec<&String> =
                data_calls.iter().filter(|(_, args, _)| args.iter().any(|a| cache.contains(a))).map(|(op, _, _)| op).collect();
            assert!(takers.is_empty(), "{model}/xnnpack-kvin {name}: kernels outside the delegate take the cache: {takers:?}");
            if name == "forward" {
                let sized: Vec<(&String, &Vec<i32>)> = data_calls
                    .iter()
                    .flat_map(|(op, _, floats)| floats.iter().map(move |f| (op, f)))
                    .filter(|(_, (sizes, dynamic))| *dynamic && sizes.iter().map(|&d| d as u64).product::<u64>() >= length * head_dim)
                    .map(|(op, (sizes, _))| (op, sizes))
                    .collect();
                assert!(sized.is_empty(), "{model}/xnnpack-kvin: a decode step's kernels outside the delegate on cache-sized tensors: {sized:?}");
            }
        }
    }
}

/// Calls per run of each kernel in `runlens profile --json` of `model`'s XNNPACK
/// program on `text` (raw, without a chat template), and the number of tokens it fed.
fn profiled_kernels(model: &str, text: &str) -> (u64, Vec<(String, u64)>) {
    let path = common::model_path(model);
    let args = ["--model", &path, "--prompt-format", "raw", "--threads", "1", "--backends", "xnnpack", "profile", "--json", "--runs", "2", text];
    let out = common::runlens(&args);
    assert!(out.status.success(), "runlens {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let kernels = v["backends"][0]["operators"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "kernel")
        .map(|o| (o["name"].as_str().unwrap().to_string(), o["count"].as_u64().unwrap()))
        .collect();
    (v["tokens"].as_u64().unwrap(), kernels)
}

#[test]
fn a_decode_step_runs_no_cache_copy_on_the_default_kernels() {
    for model in ["tiny-gpt2", "tiny-llama"] {
        let (layers, _) = cache_geometry(model);
        let (tokens, kernels) = profiled_kernels(model, "a");
        // Llama's tokenizer adds its BOS: two tokens, still a step's shape but for S.
        assert!(tokens <= 2, "{model}: \"a\" is {tokens} tokens; a decode step feeds one");
        let copies: Vec<&(String, u64)> = kernels
            .iter()
            .filter(|(name, _)| ["aten::expand_copy.out", "aten::copy_", "aten::index_put.out", "aten::repeat.out"].contains(&name.as_str()))
            .collect();
        assert!(copies.is_empty(), "{model}: the step runs cache copies on the default kernels: {copies:?}");
        let writes = kernels.iter().find(|(name, _)| name == "aten::index_put_").map_or(0, |(_, n)| *n);
        assert_eq!(writes, 2 * layers, "{model}: keys and values written in place once per layer: {kernels:?}");
    }
}

/// A cache-inputs program's decode step (`forward`: one token) takes each KV head's query,
/// key and value by `narrow` (XNNPACK's static slice), not `select`, which the partitioner
/// leaves on the default kernels, 9 calls per layer at SmolLM2's sizes, each ending a
/// delegate call; and the new token's probability is no Max Pooling, whose window
/// ExecuTorch sizes by the bound L (a cost in proportion to L at every step: 0.75 ms at
/// L = 2048, from perf).
#[test]
fn a_cache_inputs_step_selects_no_head_and_pools_nothing_sized_by_l() {
    for model in DECODERS {
        let pte = Path::new(&common::model_path(model)).join("xnnpack-kvin.pte");
        let report = runlens::pte::inspect_file(&pte).unwrap_or_else(|e| panic!("{}: {e} (make test-models)", pte.display()));
        let step = report.plan("forward").expect("forward");
        let selects: Vec<(&String, &u64)> = step.operators.iter().filter(|(op, _)| op.starts_with("aten::select_copy")).collect();
        // One `select` is the model's own: the last position's hidden state for the head.
        assert!(selects.iter().all(|(_, n)| **n <= 1), "{model}/xnnpack-kvin: the step selects on the default kernels: {selects:?}");
        assert!(
            !step.xnnpack_nodes.contains_key("XNNMaxPooling2d"),
            "{model}/xnnpack-kvin: the step pools with a window as wide as L: {:?}",
            step.xnnpack_nodes
        );
    }
}
