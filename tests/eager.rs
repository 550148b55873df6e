//! The eager backend (BERT on tch) against Python transformers eager
//! (`reference.json`), and its errors for model files it cannot use.
//!
//! Needs the model files: `make models`. Compiled only with the eager path
//! (the `eager` feature; the lite build has no libtorch).
#![cfg(feature = "eager")]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use runlens::backend::eager::EagerBackend;
use runlens::backend::Backend;
use runlens::model::{Encoded, ModelDir, ModelsMissing, Reference};
use runlens::task::Embedding;

/// `$RUNLENS_MODEL`, else `models/minilm` of this checkout.
fn models() -> ModelDir {
    let root = match std::env::var_os("RUNLENS_MODEL") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("models/minilm"),
    };
    ModelDir::open(&root).unwrap_or_else(|e| panic!("{e}"))
}

/// A model directory of its own: the manifest of a feature-extraction checkout.
fn open_tmp(dir: &Path) -> ModelDir {
    let manifest = r#"{"runlens_manifest": 2, "model": "test", "task": "feature-extraction", "max_seq_len": 128,
        "eager": {"config": "config.json", "weights": "model.safetensors"}, "programs": []}"#;
    std::fs::write(dir.join("manifest.json"), manifest).unwrap();
    ModelDir::open(dir).unwrap()
}

/// The eager output as an embedding.
fn embed(eager: &mut EagerBackend, input: &Encoded) -> Embedding {
    let out = eager.run(input).unwrap();
    assert_eq!(out.shape, [1, out.data.len()], "feature-extraction returns [1, H]");
    Embedding(out.data)
}

/// A model file, or a failure that says how to make it.
fn require(file: Result<PathBuf, ModelsMissing>) -> PathBuf {
    file.unwrap_or_else(|missing| panic!("{missing}"))
}

fn load(dir: &ModelDir) -> anyhow::Result<EagerBackend> {
    catch_unwind(AssertUnwindSafe(|| EagerBackend::load(dir, dir.task().output())))
        .expect("EagerBackend::load panicked instead of returning an error")
}

fn encoded(ids: &[i64], attention_mask: &[i64]) -> Encoded {
    Encoded {
        text: String::new(),
        tokens: Vec::new(),
        ids: ids.to_vec(),
        attention_mask: attention_mask.to_vec(),
        truncated: false,
    }
}

/// A models directory in a temp dir: `config.json` and `model.safetensors` as given.
fn model_dir_with(config_json: &str, tensors: &[(String, tch::Tensor)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("config.json"), config_json).unwrap();
    tch::Tensor::write_safetensors(tensors, tmp.path().join("model.safetensors")).unwrap();
    tmp
}

fn real_checkpoint() -> (String, Vec<(String, tch::Tensor)>) {
    let dir = models();
    let config = std::fs::read_to_string(require(dir.config())).unwrap();
    let tensors = tch::Tensor::read_safetensors(require(dir.weights())).unwrap();
    (config, tensors)
}

#[test]
fn matches_python_transformers_on_every_reference_sentence() {
    let dir = models();
    let reference = Reference::load(&require(dir.reference())).unwrap();
    let mut eager = load(&dir).unwrap();
    assert!(!reference.sentences.is_empty());
    let mut failures = Vec::new();
    for sentence in &reference.sentences {
        let input = encoded(&sentence.ids, &vec![1; sentence.ids.len()]);
        let embedding = embed(&mut eager, &input);
        let parity = embedding
            .parity(&sentence.embedding())
            .expect("same dimension as the reference");
        if !(parity.cosine >= 0.999_999 && parity.max_abs_diff <= 1e-5) {
            failures.push(format!(
                "{:?}: cosine {:.9}, max abs diff {:.3e}",
                sentence.text, parity.cosine, parity.max_abs_diff
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "eager differs from reference.json:\n{}",
        failures.join("\n")
    );
}

#[test]
fn padding_behind_the_mask_changes_nothing() {
    let dir = models();
    let reference = Reference::load(&require(dir.reference())).unwrap();
    let mut eager = load(&dir).unwrap();
    let ids = &reference.sentences[0].ids;
    let plain = embed(&mut eager, &encoded(ids, &vec![1; ids.len()]));
    let mut padded_ids = ids.clone();
    padded_ids.extend([0; 5]);
    let mut mask = vec![1; ids.len()];
    mask.extend([0; 5]);
    let padded = embed(&mut eager, &encoded(&padded_ids, &mask));
    let parity = padded.parity(&plain).unwrap();
    assert!(parity.max_abs_diff <= 1e-6, "{parity:?}");
    assert!((plain.norm() - 1.0).abs() < 1e-5, "not L2-normalised: {}", plain.norm());
}

#[test]
fn rejects_inputs_libtorch_cannot_take() {
    let mut eager = load(&models()).unwrap();
    let err = eager.run(&encoded(&[101, 999_999, 102], &[1, 1, 1])).unwrap_err();
    assert!(err.to_string().contains("999999"), "{err:#}");
    let err = eager.run(&encoded(&[101, 102], &[1])).unwrap_err();
    assert!(err.to_string().contains("attention mask"), "{err:#}");
    assert!(eager.run(&encoded(&[], &[])).is_err());
    let too_long = vec![101; eager.max_positions() as usize + 1];
    assert!(eager.run(&encoded(&too_long, &vec![1; too_long.len()])).is_err());
}

#[test]
fn a_missing_tensor_is_an_error_naming_it() {
    let (config, mut tensors) = real_checkpoint();
    let name = "encoder.layer.2.attention.self.key.weight";
    let before = tensors.len();
    tensors.retain(|(key, _)| key != name);
    assert_eq!(tensors.len(), before - 1, "the real checkpoint has {name}");
    let tmp = model_dir_with(&config, &tensors);
    let err = load(&open_tmp(tmp.path()))
        .err()
        .expect("loading without a tensor must fail");
    let message = format!("{err:#}");
    assert!(message.contains(name) && message.contains("missing"), "{message}");
    assert!(
        message.contains("model.safetensors"),
        "the error names the file: {message}"
    );
}

#[test]
fn a_wrong_shaped_tensor_is_an_error_naming_it() {
    let (config, mut tensors) = real_checkpoint();
    let name = "encoder.layer.4.intermediate.dense.weight";
    let (_, tensor) = tensors
        .iter_mut()
        .find(|(key, _)| key == name)
        .expect("the real checkpoint has it");
    *tensor = tensor.narrow(0, 0, 1000).contiguous(); // [1536, 384] -> [1000, 384]
    let tmp = model_dir_with(&config, &tensors);
    let err = load(&open_tmp(tmp.path()))
        .err()
        .expect("loading a mis-shaped tensor must fail");
    let message = format!("{err:#}");
    assert!(
        message.contains(name) && message.contains("[1000, 384]") && message.contains("[1536, 384]"),
        "{message}"
    );
}

/// The checkpoint is read a tensor at a time (weights.rs): a file cut short is an
/// error naming the file and a tensor, and a checkpoint saved in half precision
/// (as many are published) gives the float32 model's output within half's rounding.
#[test]
fn a_truncated_checkpoint_is_an_error_and_a_half_precision_one_loads() {
    let (config, tensors) = real_checkpoint();
    let tmp = model_dir_with(&config, &tensors);
    let file = tmp.path().join("model.safetensors");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let message = format!("{:#}", load(&open_tmp(tmp.path())).err().expect("a truncated checkpoint must fail"));
    assert!(message.contains("model.safetensors") && message.contains("truncated") && message.contains("tensor "), "{message}");

    let half: Vec<(String, tch::Tensor)> = tensors.iter().map(|(k, t)| (k.clone(), t.to_kind(tch::Kind::BFloat16))).collect();
    let tmp_half = model_dir_with(&config, &half);
    let tmp_float = model_dir_with(&config, &tensors);
    let input = encoded(&[101, 7592, 2088, 102], &[1, 1, 1, 1]);
    let got = embed(&mut load(&open_tmp(tmp_half.path())).unwrap(), &input);
    let want = embed(&mut load(&open_tmp(tmp_float.path())).unwrap(), &input);
    let cos = got.parity(&want).expect("same dimension").cosine;
    assert!(cos > 0.999 && cos < 1.0 - 1e-9, "bfloat16 weights, read and widened: cosine {cos} to float32's");
}

#[test]
fn an_unsupported_activation_is_an_error_naming_it() {
    let dir = models();
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(require(dir.config())).unwrap()).unwrap();
    config["hidden_act"] = "swish".into();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("config.json"), config.to_string()).unwrap();
    std::os::unix::fs::symlink(require(dir.weights()), tmp.path().join("model.safetensors")).unwrap();
    let err = load(&open_tmp(tmp.path()))
        .err()
        .expect("an unsupported activation must fail");
    let message = format!("{err:#}");
    assert!(message.contains("hidden_act") && message.contains("swish"), "{message}");
    assert!(message.contains("config.json"), "the error names the file: {message}");
}
