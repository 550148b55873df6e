#![cfg(feature = "eager")]
//! Eager (tch) BERT and DistilBERT with their task heads against Python
//! transformers (`reference.json`), and its errors for checkpoints it cannot use.
//!
//! Needs the tiny random-weight checkpoints `models/tiny-{bert-mlm,distilbert-mlm,
//! bert-cls,distilbert-cls}/` (`make test-models`: tests/python/tiny_checkpoint.py, hidden 48,
//! 3 layers, 4 heads, FFN 96, so that a size taken from MiniLM's config shows; the
//! reference is transformers' eager forward on the same files).
//!
//! Tolerances (float32, same operations in the same order as transformers, so the
//! differences are rounding only): logits within 1e-4 absolute + 1e-5 relative of the
//! largest reference logit of that output (the random logits here reach about 10),
//! probabilities within 1e-6; the top-1 token at every mask, the ten best tokens in
//! Python's order and the label order by probability exactly equal.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use runlens::backend::eager::{load_model, EncoderModel, Unsupported, SUPPORTED};
use serde::Deserialize;
use tch::{Kind, Tensor};

#[derive(Debug, Deserialize)]
struct Reference {
    task: String,
    sentences: Vec<Sentence>,
}

#[derive(Debug, Deserialize)]
struct Sentence {
    text: String,
    ids: Vec<i64>,
    #[serde(default)]
    masks: Vec<Mask>,
    #[serde(default)]
    logits: Vec<f32>,
    #[serde(default)]
    probs: Vec<f32>,
}

#[derive(Debug, Deserialize)]
struct Mask {
    position: usize,
    logits: Vec<f32>,
    top: Vec<Top>,
}

#[derive(Debug, Deserialize)]
struct Top {
    id: i64,
    prob: f32,
}

/// `models/tiny-NAME/` of this checkout, or a failure that says how to make it.
fn tiny(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(format!("tiny-{name}"));
    for file in ["config.json", "model.safetensors", "reference.json"] {
        assert!(
            dir.join(file).is_file(),
            "missing {}: run `make test-models` in the runlens checkout",
            dir.join(file).display()
        );
    }
    dir
}

fn reference(dir: &Path) -> Reference {
    let text = std::fs::read_to_string(dir.join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// `load_model`, checked not to panic.
fn load(config: &Path, weights: &Path, task: &str) -> anyhow::Result<Box<dyn EncoderModel>> {
    let output = runlens::task::Task::parse(task)?.output();
    catch_unwind(AssertUnwindSafe(|| load_model(config, weights, output)))
        .expect("load_model panicked instead of returning an error")
}

fn load_dir(dir: &Path, task: &str) -> Box<dyn EncoderModel> {
    load(&dir.join("config.json"), &dir.join("model.safetensors"), task)
        .unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()))
}

/// One unpadded sentence through the model: its output as f32.
fn forward(model: &dyn EncoderModel, ids: &[i64]) -> Tensor {
    let mask = vec![1i64; ids.len()];
    forward_masked(model, ids, &mask).unwrap()
}

fn forward_masked(model: &dyn EncoderModel, ids: &[i64], mask: &[i64]) -> anyhow::Result<Tensor> {
    catch_unwind(AssertUnwindSafe(|| {
        model.forward(&Tensor::from_slice(ids), &Tensor::from_slice(mask))
    }))
    .expect("forward panicked instead of returning an error")
}

fn to_vec(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(&t.to_kind(Kind::Float).view([-1])).unwrap()
}

/// The larger of two, NaN when either is NaN (`f32::max` drops a NaN, so a
/// fold with it would let a NaN logit through).
fn max_or_nan(m: f32, x: f32) -> f32 {
    if m.is_nan() || x.is_nan() {
        f32::NAN
    } else {
        m.max(x)
    }
}

/// Largest element-wise difference; NaN when either side has a NaN.
fn max_abs_diff(ours: &[f32], python: &[f32]) -> f32 {
    ours.iter().zip(python).map(|(a, b)| (a - b).abs()).fold(0f32, max_or_nan)
}

/// Logits agree: max abs difference within 1e-4 + 1e-5 * the largest reference
/// logit (a NaN on either side never does).
fn logits_close(ours: &[f32], python: &[f32]) -> Result<f32, String> {
    if ours.len() != python.len() {
        return Err(format!("{} logits, Python has {}", ours.len(), python.len()));
    }
    let scale = python.iter().map(|x| x.abs()).fold(0f32, max_or_nan);
    let diff = max_abs_diff(ours, python);
    if diff <= 1e-4 + 1e-5 * scale {
        Ok(diff)
    } else {
        Err(format!("max abs diff {diff:.3e} (largest logit {scale:.2})"))
    }
}

fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let exp: Vec<f64> = logits.iter().map(|x| f64::from(x - max).exp()).collect();
    let sum: f64 = exp.iter().sum();
    exp.iter().map(|e| (e / sum) as f32).collect()
}

/// Indices by descending value (ties keep index order).
fn order(values: &[f32]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    idx
}

fn check_fill_mask(name: &str) {
    let dir = tiny(name);
    let reference = reference(&dir);
    assert_eq!(reference.task, "fill-mask");
    let model = load_dir(&dir, "fill-mask");
    let mut failures = Vec::new();
    let mut masks = 0;
    let mut worst = 0f32;
    for sentence in &reference.sentences {
        let logits = forward(model.as_ref(), &sentence.ids);
        let (batch, seq, vocab) = logits.size3().unwrap();
        assert_eq!((batch, seq), (1, sentence.ids.len() as i64), "{:?}", sentence.text);
        for mask in &sentence.masks {
            masks += 1;
            let ours = to_vec(&logits.get(0).get(mask.position as i64));
            assert_eq!(vocab as usize, mask.logits.len());
            match logits_close(&ours, &mask.logits) {
                Ok(diff) => worst = worst.max(diff),
                Err(e) => failures.push(format!("{:?} mask at {}: {e}", sentence.text, mask.position)),
            }
            let probs = softmax(&ours);
            let best: Vec<i64> = order(&probs).iter().take(mask.top.len()).map(|&i| i as i64).collect();
            let python: Vec<i64> = mask.top.iter().map(|t| t.id).collect();
            if best != python {
                failures.push(format!(
                    "{:?} mask at {}: top tokens {best:?}, Python {python:?}",
                    sentence.text, mask.position
                ));
            }
            for top in &mask.top {
                let p = probs[top.id as usize];
                if (p - top.prob).is_nan() || (p - top.prob).abs() > 1e-6 {
                    failures.push(format!(
                        "{:?} mask at {}: token {} prob {p}, Python {}",
                        sentence.text, mask.position, top.id, top.prob
                    ));
                }
            }
        }
    }
    assert!(masks >= 3, "{name}: the reference has only {masks} masks");
    assert!(failures.is_empty(), "{name}: eager differs from transformers:\n{}", failures.join("\n"));
    eprintln!("{name}: {masks} masks, logits max abs diff {worst:.2e}");
}

fn check_classification(name: &str, labels: usize) {
    let dir = tiny(name);
    let reference = reference(&dir);
    assert_eq!(reference.task, "text-classification");
    let model = load_dir(&dir, "text-classification");
    let mut failures = Vec::new();
    let mut worst = 0f32;
    for sentence in &reference.sentences {
        let logits = forward(model.as_ref(), &sentence.ids);
        assert_eq!(logits.size(), [1, labels as i64], "{:?}", sentence.text);
        let ours = to_vec(&logits);
        match logits_close(&ours, &sentence.logits) {
            Ok(diff) => worst = worst.max(diff),
            Err(e) => failures.push(format!("{:?}: {e}", sentence.text)),
        }
        let probs = softmax(&ours);
        if order(&probs) != order(&sentence.probs) {
            failures.push(format!("{:?}: label order {probs:?}, Python {:?}", sentence.text, sentence.probs));
        }
        let diff = max_abs_diff(&probs, &sentence.probs);
        if diff.is_nan() || diff > 1e-6 {
            failures.push(format!("{:?}: probabilities differ by {diff:.2e}", sentence.text));
        }
    }
    assert!(reference.sentences.len() >= 3);
    assert!(failures.is_empty(), "{name}: eager differs from transformers:\n{}", failures.join("\n"));
    eprintln!("{name}: {} sentences, logits max abs diff {worst:.2e}", reference.sentences.len());
}

#[test]
fn a_nan_logit_or_probability_never_passes() {
    let python = [1.0f32, -2.0, 3.0];
    assert!(logits_close(&[1.0, -2.0, 3.0], &python).is_ok());
    for ours in [[f32::NAN, -2.0, 3.0], [1.0, f32::NAN, 3.0], [1.0, -2.0, f32::NAN], [1.0, f32::INFINITY, 3.0]] {
        assert!(logits_close(&ours, &python).is_err(), "{ours:?} passed");
        let diff = max_abs_diff(&softmax(&ours), &softmax(&python));
        assert!(diff.is_nan() || diff > 1e-6, "{ours:?}: probabilities passed");
    }
    assert!(logits_close(&python, &[1.0, f32::NAN, 3.0]).is_err(), "a NaN in the reference");
}

#[test]
fn bert_masked_lm_matches_transformers() {
    check_fill_mask("bert-mlm");
}

#[test]
fn distilbert_masked_lm_matches_transformers() {
    check_fill_mask("distilbert-mlm");
}

#[test]
fn bert_sequence_classification_matches_transformers() {
    check_classification("bert-cls", 3);
}

#[test]
fn distilbert_sequence_classification_matches_transformers() {
    check_classification("distilbert-cls", 3);
}

#[test]
fn padding_behind_the_mask_changes_nothing() {
    for (name, task) in [("distilbert-mlm", "fill-mask"), ("bert-cls", "text-classification")] {
        let dir = tiny(name);
        let ids = reference(&dir).sentences[0].ids.clone();
        let model = load_dir(&dir, task);
        let plain = forward(model.as_ref(), &ids);
        let mut padded_ids = ids.clone();
        padded_ids.extend([0; 7]);
        let mut mask = vec![1; ids.len()];
        mask.extend([0; 7]);
        let padded = forward_masked(model.as_ref(), &padded_ids, &mask).unwrap();
        // fill-mask: the real positions of [1, S + 7, V]; classification: [1, C] as is.
        let padded = if task == "fill-mask" { padded.narrow(1, 0, ids.len() as i64) } else { padded };
        let diff = f64::try_from((&padded - &plain).abs().max()).unwrap();
        assert!(diff <= 1e-4, "{name}: padding changed the output by {diff:e}");
    }
}

#[test]
fn feature_extraction_runs_on_a_task_checkpoints_encoder() {
    // The encoder under `distilbert.` with mean pooling and L2 normalisation: [1, H].
    let model = load_dir(&tiny("distilbert-mlm"), "feature-extraction");
    let embedding = forward(model.as_ref(), &[101, 7592, 2088, 1012, 102]);
    assert_eq!(embedding.size(), [1, 48]);
    let norm = f64::try_from(embedding.norm()).unwrap();
    assert!((norm - 1.0).abs() < 1e-5, "not L2-normalised: {norm}");
}

#[test]
fn describes_architecture_sizes_and_head() {
    let cases = [
        ("bert-mlm", "fill-mask", "BERT 3 layers, hidden 48, 4 heads + masked-LM head"),
        ("distilbert-mlm", "fill-mask", "DistilBERT 3 layers, dim 48, 4 heads + masked-LM head"),
        ("bert-cls", "text-classification", "BERT 3 layers, hidden 48, 4 heads + sequence-classification head (3 labels)"),
        ("distilbert-cls", "feature-extraction", "DistilBERT 3 layers, dim 48, 4 heads + mean pooling, L2-normalised"),
    ];
    for (name, task, expected) in cases {
        assert_eq!(load_dir(&tiny(name), task).describe(), expected);
    }
}

#[test]
fn rejects_inputs_libtorch_cannot_take() {
    let model = load_dir(&tiny("bert-mlm"), "fill-mask");
    let m = model.as_ref();
    let err = forward_masked(m, &[101, 30522, 102], &[1, 1, 1]).unwrap_err();
    assert!(err.to_string().contains("30522") && err.to_string().contains("vocab"), "{err:#}");
    let err = forward_masked(m, &[101, -1, 102], &[1, 1, 1]).unwrap_err();
    assert!(err.to_string().contains("-1"), "{err:#}");
    let err = forward_masked(m, &[101, 102], &[1]).unwrap_err();
    assert!(err.to_string().contains("attention mask"), "{err:#}");
    let err = forward_masked(m, &[101, 102], &[1, 2]).unwrap_err();
    assert!(err.to_string().contains("holds 2"), "{err:#}");
    assert!(forward_masked(m, &[], &[]).is_err());
    let too_long = vec![101; 513];
    let err = forward_masked(m, &too_long, &vec![1; 513]).unwrap_err();
    assert!(err.to_string().contains("513 tokens") && err.to_string().contains("512"), "{err:#}");
    let ids32 = Tensor::from_slice(&[101i32, 102]);
    let mask = Tensor::from_slice(&[1i64, 1]);
    let err = model.forward(&ids32, &mask).unwrap_err();
    assert!(err.to_string().contains("Int") && err.to_string().contains("int64"), "{err:#}");
    let batched = Tensor::from_slice(&[101i64, 102]).view([1, 2]);
    let err = model.forward(&batched, &mask).unwrap_err();
    assert!(err.to_string().contains("[1, 2]"), "{err:#}");
}

/// A checkpoint in a temp dir: `config_json` and the tensors as given.
fn checkpoint_with(config_json: &str, tensors: &[(String, Tensor)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("config.json"), config_json).unwrap();
    Tensor::write_safetensors(tensors, tmp.path().join("model.safetensors")).unwrap();
    tmp
}

fn with_tensor(tensors: &[(String, Tensor)], name: &str, tensor: Tensor) -> Vec<(String, Tensor)> {
    let mut all: Vec<_> = tensors.iter().map(|(k, t)| (k.clone(), t.shallow_clone())).collect();
    all.push((name.to_string(), tensor));
    all
}

fn tensors_of(name: &str) -> (String, Vec<(String, Tensor)>) {
    let dir = tiny(name);
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
    (config, Tensor::read_safetensors(dir.join("model.safetensors")).unwrap())
}

fn load_err(dir: &Path, task: &str) -> String {
    let err = load(&dir.join("config.json"), &dir.join("model.safetensors"), task)
        .err()
        .expect("loading must fail");
    format!("{err:#}")
}

#[test]
fn an_unsupported_architecture_names_itself_and_the_supported_ones() {
    let mistral = r#"{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 48,
        "num_attention_heads": 4, "num_hidden_layers": 3, "vocab_size": 32000}"#;
    let tmp = checkpoint_with(mistral, &[("wte.weight".to_string(), Tensor::zeros([4, 4], (Kind::Float, tch::Device::Cpu)))]);
    let err = load(&tmp.path().join("config.json"), &tmp.path().join("model.safetensors"), "text-generation")
        .err()
        .expect("Mistral is not an architecture eager implements");
    let unsupported = err.downcast_ref::<Unsupported>().expect("a typed Unsupported error");
    assert!(matches!(unsupported, Unsupported::Architecture { .. }), "{unsupported:?}");
    let message = err.to_string();
    assert!(message.contains("MistralForCausalLM") && message.contains("mistral"), "{message}");
    assert!(SUPPORTED.iter().all(|name| message.contains(name)), "{message}");
    assert!(message.contains("config.json"), "the error names the file: {message}");

    // GPT-2 is eager's decoder (load_eager, tests/generation.rs), not an encoder with a head.
    let gpt2 = r#"{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 48,
        "n_head": 4, "n_layer": 3, "n_positions": 1024, "vocab_size": 50257}"#;
    let tmp = checkpoint_with(gpt2, &[("wte.weight".to_string(), Tensor::zeros([4, 4], (Kind::Float, tch::Device::Cpu)))]);
    let err = load(&tmp.path().join("config.json"), &tmp.path().join("model.safetensors"), "fill-mask").err().expect("not an encoder");
    assert!(err.to_string().contains("GPT-2 is a decoder"), "{err}");
}

#[test]
fn an_unsupported_task_is_a_typed_error() {
    let dir = tiny("bert-mlm");
    let err = load(&dir.join("config.json"), &dir.join("model.safetensors"), "text-generation")
        .err()
        .expect("an encoder does not generate");
    let unsupported = err.downcast_ref::<Unsupported>().expect("a typed Unsupported error");
    assert!(matches!(unsupported, Unsupported::NotADecoder { .. }), "{unsupported:?}");
    let message = err.to_string();
    assert!(message.contains("text-generation") && message.contains("BertForMaskedLM") && message.contains("GPT2LMHeadModel"), "{message}");
    let err = load(&dir.join("config.json"), &dir.join("model.safetensors"), "translation").err().expect("no such task");
    assert!(err.downcast_ref::<runlens::task::UnknownTask>().is_some(), "a typed UnknownTask error: {err}");
    assert!(err.to_string().contains("translation") && err.to_string().contains("fill-mask"), "{err}");
}

#[test]
fn a_task_whose_head_the_checkpoint_lacks_names_the_tensor() {
    // A classification checkpoint has no masked-LM head.
    let message = load_err(&tiny("bert-cls"), "fill-mask");
    assert!(
        message.contains("cls.predictions.transform.dense.weight") && message.contains("fill-mask"),
        "{message}"
    );
}

#[test]
fn a_missing_head_tensor_is_an_error_naming_it() {
    for (name, missing) in [
        ("bert-mlm", "cls.predictions.transform.dense.weight"),
        ("bert-mlm", "cls.predictions.bias"),
        ("distilbert-mlm", "vocab_projector.bias"),
        ("bert-cls", "bert.pooler.dense.weight"),
        ("distilbert-cls", "pre_classifier.bias"),
    ] {
        let (config, mut tensors) = tensors_of(name);
        let before = tensors.len();
        tensors.retain(|(key, _)| key != missing);
        assert_eq!(tensors.len(), before - 1, "tiny-{name} has {missing}");
        let tmp = checkpoint_with(&config, &tensors);
        let task = if name.ends_with("mlm") { "fill-mask" } else { "text-classification" };
        let message = load_err(tmp.path(), task);
        assert!(message.contains(missing) && message.contains("missing"), "{message}");
        assert!(message.contains("model.safetensors"), "the error names the file: {message}");
    }
}

#[test]
fn a_mis_shaped_head_tensor_is_an_error_naming_it() {
    // 2 classes in the weights, 3 labels in config.json's id2label.
    let (config, mut tensors) = tensors_of("distilbert-cls");
    let (_, classifier) = tensors.iter_mut().find(|(key, _)| key == "classifier.weight").unwrap();
    *classifier = classifier.narrow(0, 0, 2).contiguous();
    let tmp = checkpoint_with(&config, &tensors);
    let message = load_err(tmp.path(), "text-classification");
    assert!(
        message.contains("classifier.weight") && message.contains("[2, 48]") && message.contains("[3, 48]"),
        "{message}"
    );
}

#[test]
fn an_untied_decoder_in_the_file_is_used_and_checked() {
    // DistilBertForMaskedLM with tie_word_embeddings=False stores `vocab_projector.weight`.
    let (config, tensors) = tensors_of("distilbert-mlm");
    let embeddings = &tensors.iter().find(|(k, _)| k == "distilbert.embeddings.word_embeddings.weight").unwrap().1;
    let ids = [101i64, 1996, 103, 2003, 102];
    let tied = forward(load_dir(&tiny("distilbert-mlm"), "fill-mask").as_ref(), &ids);

    // The same values as the embeddings, stored apart: the same logits.
    let untied = with_tensor(&tensors, "vocab_projector.weight", embeddings.copy());
    let tmp = checkpoint_with(&config, &untied);
    let logits = forward(load_dir(tmp.path(), "fill-mask").as_ref(), &ids);
    assert!(logits.allclose(&tied, 0.0, 0.0, false));

    // Scaled: the decoder really is the file's tensor, not the embeddings.
    let scaled = with_tensor(&tensors, "vocab_projector.weight", embeddings * 2.0);
    let tmp = checkpoint_with(&config, &scaled);
    let logits = forward(load_dir(tmp.path(), "fill-mask").as_ref(), &ids);
    assert!(!logits.allclose(&tied, 1e-3, 1e-3, false));

    // Mis-shaped: named with both shapes.
    let wrong = with_tensor(&tensors, "vocab_projector.weight", embeddings.narrow(1, 0, 40).contiguous());
    let tmp = checkpoint_with(&config, &wrong);
    let message = load_err(tmp.path(), "fill-mask");
    assert!(
        message.contains("vocab_projector.weight") && message.contains("[30522, 40]") && message.contains("[30522, 48]"),
        "{message}"
    );
}

#[test]
fn tensorflow_era_layer_norm_names_are_read() {
    // Checkpoints converted from Google's originals name LayerNorm's tensors gamma / beta.
    let (config, tensors) = tensors_of("bert-mlm");
    let renamed: Vec<(String, Tensor)> = tensors
        .iter()
        .map(|(key, t)| {
            let key = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta");
            (key, t.shallow_clone())
        })
        .collect();
    assert!(renamed.iter().filter(|(k, _)| k.ends_with(".gamma")).count() >= 7);
    let tmp = checkpoint_with(&config, &renamed);
    let ids = [101i64, 1996, 103, 2003, 102];
    let expected = forward(load_dir(&tiny("bert-mlm"), "fill-mask").as_ref(), &ids);
    let logits = forward(load_dir(tmp.path(), "fill-mask").as_ref(), &ids);
    assert!(logits.allclose(&expected, 0.0, 0.0, false));
}
