//! A decode step costs what the filled positions need, not the cache's length L
//! (issue 33, docs/kv-cache.md): the KV-cache programs take `key_positions`
//! (int64 `[F]`, F dynamic up to L) and their attention reads those F entries
//! only; a call takes at most 256 new tokens, so a longer prompt goes in chunks.
//!
//! Checked on the same tiny checkpoint exported with L = 256 and L = 2048
//! (`make test-models`: `models/context-256`, `models/context-2048`, from the
//! hub-layout Qwen2 checkpoint): the programs' input shapes as runlens' reader
//! sees them; the same logits at every step from both lengths (attention over
//! the filled part must not depend on L); and a prompt of more than one chunk
//! continued exactly as eager continues it. No test asserts a speed: the
//! figures are in docs/kv-cache.md.

mod common;
use common::model_dir;

use runlens::backend::{self, BackendSpec};
use runlens::model::ModelDir;
use runlens::pte::InputShape;

fn program_specs(dir: &ModelDir) -> Vec<BackendSpec> {
    let specs = backend::catalog(dir, &[]).unwrap();
    let programs: Vec<BackendSpec> =
        specs.into_iter().filter(|s| s.pte_file().is_some() && ["portable", "xnnpack", "xnnpack-kvin"].contains(&s.name.as_str())).collect();
    assert_eq!(programs.len(), 3, "{}: the portable, xnnpack and xnnpack-kvin programs (make test-models)", dir.root().display());
    programs
}

/// The inputs of the method that takes a prompt's chunks: `forward`, or `prefill` for a
/// program that takes its cache as inputs (whose `forward` takes one token).
fn inputs_of(dir: &ModelDir, spec: &BackendSpec) -> Vec<InputShape> {
    let path = dir.root().join(spec.pte_file().unwrap());
    let report = runlens::pte::inspect_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    report.plan("prefill").or_else(|| report.plan("forward")).expect("forward").input_shapes.clone()
}

#[test]
fn the_programs_take_the_filled_length_as_an_input_of_its_own() {
    for (name, len) in [("context-256", 256), ("context-2048", 2048)] {
        let dir = model_dir(name);
        assert_eq!(dir.max_seq_len(), len, "{name}: manifest max_seq_len");
        for spec in program_specs(&dir) {
            let inputs = inputs_of(&dir, &spec);
            let shown: Vec<String> = inputs.iter().map(|s| format!("{} {:?} dynamic {}", s.dtype, s.sizes, s.dynamic)).collect();
            // The cache as inputs adds keys [F, D] and values [1, F, D] per layer and KV head.
            let cache = &inputs[3.min(inputs.len())..];
            if spec.name == "xnnpack-kvin" {
                assert!(!cache.is_empty() && cache.iter().all(|s| s.dtype == "float" && s.dynamic && s.sizes[s.sizes.len() - 2] == len as i64), "{name}/{}: {shown:?}", spec.name);
            } else {
                assert!(cache.is_empty(), "{name}/{}: input_ids, cache_position, key_positions: {shown:?}", spec.name);
            }
            let inputs = &inputs[..3];
            // input_ids [1, S] and cache_position [S], S up to a chunk of 256 new tokens;
            // key_positions [F], F up to L: the filled length, dynamic.
            assert_eq!(inputs[0].sizes, vec![1, 256], "{name}/{}: {shown:?}", spec.name);
            assert_eq!(inputs[1].sizes, vec![256], "{name}/{}: {shown:?}", spec.name);
            assert_eq!(inputs[2].sizes, vec![len as i64], "{name}/{}: {shown:?}", spec.name);
            assert!(inputs.iter().all(|s| s.dynamic && s.dtype == "long"), "{name}/{}: {shown:?}", spec.name);
        }
    }
}

/// Every step's logits of one program: the prompt's, then each greedy token's.
fn logits_of(dir: &ModelDir, spec: &BackendSpec, prompt: &[i64], steps: usize) -> (Vec<i64>, Vec<Vec<f32>>) {
    let mut b = runlens::task::load_backend(spec, dir).unwrap_or_else(|e| panic!("{spec}: {e:#}"));
    let decoder = b.as_decoder().expect("a decoder");
    let mut all = vec![decoder.prefill(prompt).unwrap_or_else(|e| panic!("{spec}: {e:#}"))];
    let mut ids = Vec::new();
    for _ in 0..steps {
        let last = all.last().unwrap();
        let token = common::argmax(last);
        ids.push(token);
        all.push(decoder.step(token).unwrap_or_else(|e| panic!("{spec}: {e:#}")));
    }
    (ids, all)
}

fn prompt(dir: &ModelDir, len: usize) -> Vec<i64> {
    let tokenizer = dir.load_tokenizer().unwrap();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/corpus.txt")).unwrap();
    let ids = tokenizer.encode(&text).unwrap().ids;
    assert!(ids.len() >= len, "assets/corpus.txt makes {} tokens, {len} wanted", ids.len());
    ids[..len].to_vec()
}

#[test]
fn the_cache_length_does_not_change_a_step() {
    let (short, long) = (model_dir("context-256"), model_dir("context-2048"));
    let ids = prompt(&short, 40);
    for (a, b) in program_specs(&short).iter().zip(program_specs(&long).iter()) {
        let (ids_a, logits_a) = logits_of(&short, a, &ids, 48);
        let (ids_b, logits_b) = logits_of(&long, b, &ids, 48);
        assert_eq!(ids_a, ids_b, "{}: the greedy ids at L = 256 and L = 2048", a.name);
        for (k, (x, y)) in logits_a.iter().zip(&logits_b).enumerate() {
            let diff = x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
            assert!(diff.is_finite() && diff <= 1e-4, "{}: step {k}: max|Δ| {diff} between L = 256 and L = 2048", a.name);
        }
    }
}

#[cfg(feature = "eager")]
#[test]
fn a_prompt_longer_than_a_chunk_continues_as_eager_does() {
    let dir = model_dir("context-2048");
    let ids = prompt(&dir, 600);
    let eager = backend::catalog(&dir, &[]).unwrap().into_iter().find(|s| s.pte_file().is_none() && s.name == "eager").expect("eager");
    let (want, want_logits) = logits_of(&dir, &eager, &ids, 24);
    for spec in program_specs(&dir) {
        let (got, got_logits) = logits_of(&dir, &spec, &ids, 24);
        assert_eq!(got, want, "{}: greedy ids after a 600-token prompt (three chunks) against eager", spec.name);
        let diff = got_logits[0].iter().zip(&want_logits[0]).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
        assert!(diff <= 1e-3, "{}: the prompt's logits against eager: max|Δ| {diff}", spec.name);
    }
}
