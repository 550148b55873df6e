//! The task layer: what a model's output tensor means to a person, and how two
//! outputs are compared. Between the backends (tensor in, tensor out) and the
//! explorer / `run` (what people read), one file per task:
//!
//! - [`embedding`]: feature-extraction, a sentence embedding `[1, H]`;
//! - [`fill_mask`]: fill-mask, the likeliest tokens at every `[MASK]`;
//! - [`classification`]: text-classification, a probability per label;
//! - [`generation`]: text-generation, a prompt continued greedily token by token
//!   (the [`generation::greedy`] loop; one forward is not its output).
//!
//! - [`parity`](TaskParity): how two outputs compare, per task, and the words
//!   and JSON of it.
//!
//! [`TaskContext`] holds what interpreting an output needs from the model
//! directory (the mask token, the label names, the vocabulary) and turns a
//! backend's [`OutputTensor`] into a [`TaskOutput`].

pub mod classification;
pub mod embedding;
pub mod fill_mask;
pub mod generation;
mod parity;

use serde::Serialize;

pub use classification::{Classification, ClassificationParity, LabelProb};
pub use embedding::{Embedding, Parity};
pub use fill_mask::{FillMask, FillMaskParity, MaskPrediction, TokenProb};
pub use generation::{Generation, GenerationContext, GenerationParity, NotADecoder, TokenStep};
pub use parity::{TaskParity, VsReference};

mod reference;

use std::ops::ControlFlow;

use crate::backend::{Backend, BackendSpec, OutputKind};
use crate::model::ModelDir;
pub use crate::model::Task;
pub use crate::tensor::{Encoded, OutputTensor};

impl Task {
    /// What a backend is loaded to return for this task.
    pub fn output(self) -> OutputKind {
        match self {
            Task::FeatureExtraction => OutputKind::Pooled,
            Task::FillMask => OutputKind::TokenLogits,
            Task::TextClassification => OutputKind::ClassLogits,
            Task::TextGeneration => OutputKind::NextToken,
        }
    }

    /// The output shapes a program of this task may have, for error messages.
    pub fn expected_outputs(self) -> &'static str {
        self.output().expected()
    }

    /// The task continues a prompt token by token (text-generation): its output
    /// comes as a stream of tokens ([`run`]'s `on_token`), not from one forward.
    pub fn generates(self) -> bool {
        matches!(self, Task::TextGeneration)
    }

    /// What one run of the task is called in a timeline: `generate` or `forward`.
    pub fn run_verb(self) -> &'static str {
        if self.generates() {
            "generate"
        } else {
            "forward"
        }
    }
}

/// Every task runlens runs, by its manifest name.
pub const TASKS: [Task; 4] = [Task::FeatureExtraction, Task::FillMask, Task::TextClassification, Task::TextGeneration];

/// A task name runlens does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("runlens has no task \"{task}\"; it runs {}", TASKS.map(Task::name).join(", "))]
pub struct UnknownTask {
    pub task: String,
}

impl Task {
    /// A manifest's task name (`fill-mask`) as a [`Task`].
    pub fn parse(name: &str) -> Result<Task, UnknownTask> {
        TASKS.into_iter().find(|t| t.name() == name).ok_or_else(|| UnknownTask { task: name.to_string() })
    }
}

/// Load `spec` of `dir` for the directory's task (slow: hundreds of ms).
pub fn load_backend(spec: &BackendSpec, dir: &ModelDir) -> anyhow::Result<Box<dyn Backend>> {
    crate::backend::load(spec, dir, dir.task().output())
}

/// One backend's output, as the task reads it.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskOutput {
    Embedding(Embedding),
    FillMask(FillMask),
    Classification(Classification),
    Generation(Generation),
}


impl TaskOutput {
    pub fn embedding(&self) -> Option<&Embedding> {
        match self {
            TaskOutput::Embedding(e) => Some(e),
            _ => None,
        }
    }

    /// Compare with the reference column's output for the same input; `None`
    /// when the two are not comparable (other task, other shape).
    pub fn parity(&self, reference: &TaskOutput) -> Option<TaskParity> {
        match (self, reference) {
            (TaskOutput::Embedding(a), TaskOutput::Embedding(b)) => a.parity(b).map(TaskParity::Embedding),
            (TaskOutput::FillMask(a), TaskOutput::FillMask(b)) => a.parity(b).map(TaskParity::FillMask),
            (TaskOutput::Classification(a), TaskOutput::Classification(b)) => a.parity(b).map(TaskParity::Classification),
            (TaskOutput::Generation(a), TaskOutput::Generation(b)) => Some(TaskParity::Generation(GenerationParity::between(a, b))),
            _ => None,
        }
    }
}

/// In `run --json`, the output's fields, flattened into its backend's object:
/// `embedding` (feature-extraction), `masks` (fill-mask: each mask's
/// `position` and `top` tokens), `labels` (text-classification, in label-id
/// order), or a generation's ([`Generation`]'s `generated_ids`,
/// `generated_text`, `ttft_ms`, `decode_tokens_per_s`, `token_ms`, `stop`).
impl Serialize for TaskOutput {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            TaskOutput::Embedding(e) => m.serialize_entry("embedding", e.values())?,
            TaskOutput::FillMask(f) => m.serialize_entry("masks", &f.masks)?,
            TaskOutput::Classification(c) => m.serialize_entry("labels", &c.labels)?,
            TaskOutput::Generation(g) => g.json_fields(&mut m)?,
        }
        m.end()
    }
}


/// What interpreting an output needs from the model directory.
#[derive(Clone, Debug)]
pub struct TaskContext {
    pub task: Task,
    /// The tokenizer's mask token and its id (fill-mask).
    pub mask: Option<(String, i64)>,
    /// Label names in label-id order (text-classification), from config.json's `id2label`.
    pub labels: Vec<String>,
    /// Token strings by id, to name predicted tokens (fill-mask).
    pub vocab: std::sync::Arc<Vec<String>>,
    /// How many tokens to show per mask.
    pub top_k: usize,
    /// The detokenizer and the stopping rules (text-generation).
    pub generation: Option<GenerationContext>,
}

impl TaskContext {
    /// A context for tasks that need nothing from the directory (feature-extraction).
    pub fn plain(task: Task) -> TaskContext {
        TaskContext { task, mask: None, labels: Vec::new(), vocab: Default::default(), top_k: 5, generation: None }
    }

    /// The context of a model directory: the tokenizer's mask token and
    /// vocabulary (fill-mask), config.json's label names (text-classification).
    pub fn for_model(dir: &crate::model::ModelDir, tokenizer: &crate::model::TextTokenizer, top_k: usize) -> anyhow::Result<TaskContext> {
        let task = dir.task();
        let mut ctx = TaskContext { top_k: top_k.max(1), ..TaskContext::plain(task) };
        match task {
            Task::FeatureExtraction => {}
            Task::FillMask => {
                ctx.mask = tokenizer.mask_token();
                ctx.vocab = std::sync::Arc::new(tokenizer.vocab());
            }
            Task::TextClassification => ctx.labels = label_names(&*dir.model_config()?)?,
            Task::TextGeneration => {
                let detokenizer = generation::Detokenizer::from_file(&dir.tokenizer()?)?;
                let options = generation::GenerateOptions { eos_token_ids: dir.manifest().eos_token_ids(), ..Default::default() };
                ctx.generation = Some(GenerationContext { detokenizer: std::sync::Arc::new(detokenizer), options });
            }
        }
        Ok(ctx)
    }

    /// Check an input before it is run: fill-mask needs a mask in the text.
    pub fn check_input(&self, input: &Encoded) -> anyhow::Result<()> {
        if self.task == Task::FillMask {
            fill_mask::check_input(self, input)?;
        }
        Ok(())
    }

    /// The generation context (text-generation), or an error naming the task.
    pub fn generation(&self) -> anyhow::Result<&GenerationContext> {
        self.generation.as_ref().ok_or_else(|| anyhow::anyhow!("a {} model does not generate text", self.task))
    }

    /// Set `--max-new-tokens` (text-generation; no effect for other tasks).
    pub fn with_max_new_tokens(mut self, max_new_tokens: usize) -> TaskContext {
        if let Some(g) = &mut self.generation {
            g.options.max_new_tokens = max_new_tokens;
        }
        self
    }

    /// Interpret `out`, the output of a backend for `input`. Text-generation's
    /// output is not one forward's: [`run`] runs the greedy loop.
    pub fn interpret(&self, input: &Encoded, out: OutputTensor) -> anyhow::Result<TaskOutput> {
        let shape = out.describe_shape();
        let wrong = || anyhow::anyhow!("the program returned {shape}; a {} program returns {}", self.task, self.task.expected_outputs());
        match self.task {
            Task::FeatureExtraction => {
                let dims: Vec<usize> = out.shape.iter().copied().filter(|&d| d != 1).collect();
                anyhow::ensure!(dims.len() <= 1 && !out.data.is_empty(), wrong());
                Ok(TaskOutput::Embedding(Embedding(out.data)))
            }
            Task::FillMask => fill_mask::interpret(self, input, out).map(TaskOutput::FillMask).map_err(|e| match e {
                fill_mask::FillMaskError::Shape => wrong(),
                other => other.into(),
            }),
            Task::TextClassification => {
                anyhow::ensure!(out.shape.len() == 2 && out.shape[0] == 1 && out.shape[1] >= 1, wrong());
                Ok(TaskOutput::Classification(Classification::from_logits(out.data, &self.labels)))
            }
            Task::TextGeneration => {
                anyhow::bail!("a text-generation output is a generation, not one forward's {shape}: run the greedy loop (generate::greedy)")
            }
        }
    }
}

/// Run `backend` on `input` as the task does: the one driver `run`, `bench` and
/// the explorer's workers all call. One forward read as the task's output; for
/// text-generation the whole greedy generation, `on_token` seeing every new
/// token as it comes (return `Break` to stop after it).
pub fn run(
    backend: &mut dyn Backend,
    ctx: &TaskContext,
    input: &Encoded,
    on_token: &mut dyn FnMut(&TokenStep) -> ControlFlow<()>,
) -> anyhow::Result<TaskOutput> {
    ctx.check_input(input)?;
    match ctx.task {
        Task::TextGeneration => generation::generate(backend, ctx.generation()?, input, on_token).map(TaskOutput::Generation),
        _ => {
            let out = backend.run(input)?;
            ctx.interpret(input, out)
        }
    }
}

/// [`run`] without watching the tokens of a generation.
pub fn run_quietly(backend: &mut dyn Backend, ctx: &TaskContext, input: &Encoded) -> anyhow::Result<TaskOutput> {
    run(backend, ctx, input, &mut |_| ControlFlow::Continue(()))
}

/// `id2label` of a config.json, in label-id order (`LABEL_i` for gaps).
fn label_names(config: &crate::model::ModelConfig) -> anyhow::Result<Vec<String>> {
    use anyhow::Context;
    let Some(map) = &config.id2label else { return Ok(Vec::new()) };
    let path = config.path.display();
    let mut labels: Vec<(usize, String)> = Vec::new();
    for (id, name) in map {
        let id: usize = id.parse().with_context(|| format!("{path}: id2label key {id:?} is not a number"))?;
        labels.push((id, name.clone()));
    }
    let size = labels.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
    anyhow::ensure!(size <= 100_000, "{path}: id2label has an id of {}", size - 1);
    let mut names: Vec<String> = (0..size).map(|i| format!("LABEL_{i}")).collect();
    for (i, name) in labels {
        names[i] = name;
    }
    Ok(names)
}

/// Numerically stable softmax in f64. A NaN logit makes every probability
/// NaN (the distribution is undefined: no token or label may look likely, or
/// certain not to be), as does a sum that is not a positive number (an
/// infinite logit, every logit -inf).
pub(crate) fn softmax(logits: &[f32]) -> Vec<f64> {
    if logits.iter().any(|v| v.is_nan()) {
        return vec![f64::NAN; logits.len()];
    }
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let exp: Vec<f64> = logits.iter().map(|&v| (v as f64 - max).exp()).collect();
    let sum: f64 = exp.iter().sum();
    exp.into_iter().map(|e| if sum > 0.0 { e / sum } else { f64::NAN }).collect()
}

/// Largest element-wise difference of two equal-length slices; `None` when
/// their lengths differ. A NaN on either side makes it NaN, an infinity on one
/// side infinite: never a bound that passes.
pub(crate) fn max_abs_diff(a: &[f32], b: &[f32]) -> Option<f64> {
    (a.len() == b.len()).then(|| a.iter().zip(b).map(|(&x, &y)| (f64::from(x) - f64::from(y)).abs()).fold(0.0, max_or_nan))
}

/// Cosine of two equal-length slices, summed in f64; `None` when they are
/// empty or their lengths differ. NaN when either holds a NaN or an infinity:
/// never a figure that passes a bound. Two zero vectors are the same (1), one
/// zero vector is unlike anything (0).
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        if !x.is_finite() || !y.is_finite() {
            return Some(f64::NAN);
        }
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    Some(if na == 0.0 || nb == 0.0 { if na == nb { 1.0 } else { 0.0 } } else { dot / (na.sqrt() * nb.sqrt()) })
}

/// The larger of two differences, NaN when either is NaN (`f64::max` returns
/// the other one, so a fold with it would drop a NaN).
pub(crate) fn max_or_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_logits_and_what_is_not_comparable() {
        assert!((cosine(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).unwrap().abs() < 1e-12);
        assert!((cosine(&[1.0, 0.0], &[-1.0, 0.0]).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), None, "another vocabulary");
        assert_eq!(cosine(&[], &[]), None);
        assert_eq!(cosine(&[0.0, 0.0], &[0.0, 0.0]), Some(1.0));
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), Some(0.0));
        // A NaN or an infinity anywhere, on either side, is NaN: never >= a bound.
        for (a, b) in [([1.0, f32::NAN], [1.0, 2.0]), ([1.0, 2.0], [f32::INFINITY, 2.0]), ([f32::NEG_INFINITY, 2.0], [1.0, 2.0])] {
            let c = cosine(&a, &b).unwrap();
            assert!(c.is_nan() && c.partial_cmp(&0.9).is_none(), "{a:?} {b:?}: {c}");
        }
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_order() {
        let p = softmax(&[1.0, 3.0, 2.0]);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(p[1] > p[2] && p[2] > p[0]);
        assert_eq!(max_abs_diff(&[1.0, 2.0], &[1.5, 2.0]), Some(0.5));
        assert_eq!(max_abs_diff(&[1.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn parses_every_task_name_and_names_the_known_ones_otherwise() {
        for task in TASKS {
            assert_eq!(Task::parse(task.name()), Ok(task));
        }
        let err = Task::parse("translation").unwrap_err();
        assert_eq!(err, UnknownTask { task: "translation".into() });
        assert!(err.to_string().contains("feature-extraction, fill-mask, text-classification, text-generation"), "{err}");
    }

    #[test]
    fn a_nan_or_an_infinity_anywhere_is_never_parity() {
        // The fold keeps a NaN wherever it is (f64::max would return the other side).
        for (a, b) in [([f32::NAN, 2.0, 3.0], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [1.0, 2.0, f32::NAN]), ([1.0, f32::NAN, 9.0], [1.0, 2.0, 3.0])] {
            assert!(max_abs_diff(&a, &b).unwrap().is_nan(), "{a:?} vs {b:?}");
        }
        assert_eq!(max_abs_diff(&[f32::INFINITY, 1.0], &[0.0, 1.0]), Some(f64::INFINITY));
        assert!(max_abs_diff(&[f32::INFINITY], &[f32::INFINITY]).unwrap().is_nan());
        let fails = |ours: &TaskOutput, reference: &TaskOutput| {
            for p in [ours.parity(reference).unwrap(), reference.parity(ours).unwrap()] {
                assert!(!p.agrees(), "{p:?}");
                assert!(!p.max_abs_diff().is_finite(), "a bound on the difference must not pass: {p:?}");
            }
        };

        // Embedding: one NaN component.
        let clean = TaskOutput::Embedding(Embedding(vec![0.6, 0.8, 0.0]));
        fails(&TaskOutput::Embedding(Embedding(vec![0.6, 0.8, f32::NAN])), &clean);
        fails(&TaskOutput::Embedding(Embedding(vec![0.6, f32::INFINITY, 0.0])), &clean);

        // Classification: a NaN logit makes every probability NaN, so the argmax is
        // the first label (a tie), the reference's too: the same label, and still no parity.
        let reference = TaskOutput::Classification(Classification::from_logits(vec![2.0, 0.1, -1.0], &[]));
        let nan = TaskOutput::Classification(Classification::from_logits(vec![2.0, 0.1, f32::NAN], &[]));
        assert!(matches!(nan.parity(&reference), Some(TaskParity::Classification(ClassificationParity { same_argmax: true, .. }))));
        fails(&nan, &reference);

        // Fill-mask, through interpret: a NaN logit at a token outside the top-k;
        // the top tokens come out the same (ids 0 and 1), the logits do not.
        let vocab: Vec<String> = ["[PAD]", "a", "b", "c", "[MASK]"].iter().map(|s| s.to_string()).collect();
        let ctx = TaskContext { mask: Some(("[MASK]".into(), 4)), vocab: std::sync::Arc::new(vocab), top_k: 2, ..TaskContext::plain(Task::FillMask) };
        let mut input = Encoded::from_ids(&[1, 4, 2]);
        input.text = "a [MASK] b".into();
        let reference = ctx.interpret(&input, OutputTensor::new(vec![1, 5], vec![5.0, 4.0, 3.0, 2.0, 1.0])).unwrap();
        let nan = ctx.interpret(&input, OutputTensor::new(vec![1, 5], vec![5.0, 4.0, 3.0, 2.0, f32::NAN])).unwrap();
        let Some(TaskParity::FillMask(p)) = nan.parity(&reference) else { panic!("comparable") };
        assert!(p.same_top1 && p.topk_overlap == 1.0, "{p:?}");
        fails(&nan, &reference);
    }

    #[test]
    fn softmax_of_a_nan_logit_is_nan_not_zero() {
        // It was 0 everywhere: a NaN logit read as "certainly not this token".
        for logits in [[f32::NAN, 1.0, 2.0], [1.0, 2.0, f32::NAN], [1.0, f32::INFINITY, 2.0]] {
            let p = softmax(&logits);
            assert_eq!(p.len(), 3);
            assert!(p.iter().all(|v| v.is_nan()), "{logits:?}: {p:?}");
        }
        // Shown as NaN, never as a probability.
        let c = Classification::from_logits(vec![2.0, f32::NAN], &[]);
        assert!(c.labels.iter().all(|l| l.prob.is_nan()), "{c:?}");
        assert!(softmax(&[]).is_empty());
    }

    #[test]
    fn a_verdict_is_never_same_with_a_nan_or_an_infinity() {
        let fill = |same_top1, max_abs_diff| TaskParity::FillMask(FillMaskParity { same_top1, topk_overlap: 1.0, max_abs_diff });
        let label = |same_argmax, max_abs_diff| TaskParity::Classification(ClassificationParity { same_argmax, max_abs_diff });
        assert_eq!((fill(true, 1e-6).verdict(), fill(true, 1e-6).same_word()), ("same top-1".to_string(), "same"));
        assert_eq!((fill(false, 1e-6).verdict(), fill(false, 1e-6).same_word()), ("TOP-1 DIFFERS".to_string(), "DIFFERS"));
        assert_eq!((label(true, 0.0).verdict(), label(false, 0.0).verdict()), ("same label".to_string(), "LABEL DIFFERS".to_string()));
        for p in [fill(true, f64::NAN), fill(false, f64::NAN), label(true, f64::NAN)] {
            assert_eq!((p.verdict(), p.same_word(), p.agrees()), ("NaN LOGITS".to_string(), "NaN", false), "{p:?}");
        }
        assert_eq!((fill(true, f64::INFINITY).verdict(), label(true, f64::INFINITY).same_word()), ("INF LOGITS".to_string(), "INF"));
        let embedding = TaskParity::Embedding(Parity { cosine: f64::NAN, max_abs_diff: f64::NAN });
        assert_eq!((embedding.verdict(), embedding.same_word()), ("cos NaN".to_string(), "NaN"));
    }

    #[test]
    fn a_generation_whose_first_logits_cosine_is_nan_does_not_agree() {
        let ids = GenerationParity::of(&[1, 2], &[1, 2]);
        assert!(TaskParity::Generation(ids).agrees());
        let nan = TaskParity::Generation(GenerationParity { first_logits_cosine: Some(f64::NAN), ..ids });
        assert!(!nan.agrees(), "{nan:?}");
        assert_eq!((nan.verdict(), nan.same_word()), ("NaN LOGITS".to_string(), "NaN"));
        // Through the outputs: an infinite first-step logit (argmax still works) makes the cosine NaN.
        let generation = |first_logits: Vec<f32>| TaskOutput::Generation(Generation {
            prompt_len: 1,
            ids: vec![1, 2],
            text: String::new(),
            ttft: std::time::Duration::ZERO,
            token_latencies: Vec::new(),
            stop: generation::Stop::MaxNewTokens,
            first_logits,
        });
        let p = generation(vec![0.0, f32::INFINITY]).parity(&generation(vec![0.0, 1.0])).unwrap();
        assert!(!p.agrees(), "{p:?}");
        assert!(generation(vec![0.0, 1.0]).parity(&generation(vec![0.0, 1.0])).unwrap().agrees());
    }

    #[test]
    fn an_output_of_the_wrong_shape_names_what_was_expected() {
        let ctx = TaskContext::plain(Task::TextClassification);
        let input = Encoded::from_ids(&[101, 102]);
        let err = ctx.interpret(&input, OutputTensor::new(vec![1, 2, 3], vec![0.0; 6])).unwrap_err();
        assert!(err.to_string().contains("[1, 2, 3]") && err.to_string().contains("[1, C]"), "{err}");
        let ctx = TaskContext::plain(Task::FeatureExtraction);
        let err = ctx.interpret(&input, OutputTensor::new(vec![1, 2, 3], vec![0.0; 6])).unwrap_err();
        assert!(err.to_string().contains("[1, H]"), "{err}");
    }
}
