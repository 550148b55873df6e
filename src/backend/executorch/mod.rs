//! The ExecuTorch paths: any `.pte` program (the directory's `portable.pte`,
//! `xnnpack.pte` and its variants, or one given with `--program`), run through
//! ExecuTorch's C++ `Module` via [`crate::ffi`].
//!
//! How to drive a program is read from the file with runlens' own reader,
//! never guessed (and never from its name): its inputs and its first output
//! (float, of a shape the task can read). The input conventions are peers:
//!
//! - tokens: `input_ids`, or `input_ids` and `attention_mask`, int64 `[1, S]`,
//!   S dynamic up to a bound or fixed (then the input is padded and the
//!   padding masked; right-padded for encoders, left-padded windows for
//!   text-generation, see [`decoder`]);
//! - KV cache: `input_ids` int64 `[1, S]` (S dynamic) and `cache_position`
//!   int64 `[S]`: a decoder holding its KV cache in the program
//!   (text-generation only); with a third input, `key_positions` int64 `[F]`
//!   (F dynamic), its attention reads only the F filled cache entries;
//! - KV cache as inputs: the same three, then per layer and KV head the keys
//!   float `[F, head_dim]` and after them the values float `[1, F, head_dim]`,
//!   and a second method, `prefill`: the caller holds the cache, the program
//!   reads its filled part in place and returns the new entries (see
//!   [`decoder`], `python/runlens_export/cache_inputs.py`).
//!
//! A program of another shape is an error that names the file, what it has
//! and what runlens expects.

pub mod decoder;
pub mod kernels;
pub mod program;

pub use kernels::MissingKernels;
pub use program::{OpenError, Program};

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Backend, BackendSpec, Decoder, OutputKind};
use crate::ffi::EtModule;
use crate::pte::{CoverageReport, InputShape, PlanCoverage};
use crate::tensor::{Encoded, OutputTensor};

/// What runlens expects of a program's inputs, for error messages.
const EXPECTED_INPUTS: &str = "input_ids, or input_ids and attention_mask: int64 [1, S]; or (a decoder) input_ids int64 [1, S] and \
     cache_position int64 [S], and optionally key_positions int64 [F], then perhaps its KV cache: keys float [F, D] and values float [1, F, D] per layer and KV head";

/// How a program takes its input, read from the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputConvention {
    /// It takes `attention_mask` after `input_ids`.
    pub with_mask: bool,
    /// It takes `cache_position` (int64 `[S]`) after `input_ids`: a decoder
    /// with its KV cache inside (never together with `with_mask`).
    pub cache_position: bool,
    /// It also takes `key_positions` (int64 `[F]`, `0..F` with F the filled
    /// length) after `cache_position`: its attention reads only the filled part
    /// of the cache, so a step costs what F needs, not `max_len`.
    pub key_positions: bool,
    /// `Some(n)`: exactly `n` tokens (the input is padded); `None`: any length up to `max_len`.
    pub fixed_len: Option<usize>,
    /// The most tokens one call takes: `max_len`, or for a KV-cache program with
    /// `key_positions` the bound of `input_ids` (a longer prompt is fed in chunks).
    pub chunk: usize,
    /// The longest input it takes (for a KV-cache program: the longest
    /// sequence, prompt and new tokens, its cache holds).
    pub max_len: usize,
    /// The cache is the caller's: it comes in as inputs after `key_positions`.
    pub caller_cache: Option<CacheInputs>,
}

/// The KV cache a program takes as inputs: one keys tensor `[F, head_dim]` per
/// layer and KV head, then as many values `[1, F, head_dim]`; F is the filled
/// length plus a row 0 the caller keeps at zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheInputs {
    /// Layers x KV heads: the keys tensors, and the values tensors.
    pub tensors: usize,
    pub head_dim: usize,
}

impl CacheInputs {
    /// The cache inputs of `inputs` (after the first three), when they are that.
    fn of(inputs: &[InputShape]) -> Option<CacheInputs> {
        let rest = inputs.get(3..).filter(|r| !r.is_empty() && r.len() % 2 == 0)?;
        let (keys, values) = rest.split_at(rest.len() / 2);
        let filled = inputs[2].sizes.first().copied()?;
        let head_dim = *keys[0].sizes.get(1)?;
        let float = |s: &InputShape, sizes: &[i64]| s.dtype == "float" && s.dynamic && s.sizes == sizes;
        let ok = keys.iter().all(|k| float(k, &[filled, head_dim])) && values.iter().all(|v| float(v, &[1, filled, head_dim]));
        (ok && head_dim >= 1).then(|| CacheInputs { tensors: keys.len(), head_dim: usize::try_from(head_dim).unwrap_or(0) })
    }
}

impl InputConvention {
    /// Read the convention of `forward` from runlens' report of the file; an
    /// error saying what was found when runlens cannot drive it.
    pub fn of(plan: &PlanCoverage, prefill: Option<&PlanCoverage>, output: OutputKind) -> Result<InputConvention, String> {
        let describe = |shapes: &[InputShape]| {
            shapes
                .iter()
                .map(|s| format!("{} [{}]", s.dtype, s.sizes.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let inputs = &plan.input_shapes;
        let ok_input = |s: &InputShape| s.dtype == "long" && s.sizes.len() == 2 && s.sizes[0] == 1 && s.sizes[1] >= 1;
        let wrong_inputs = || format!("its method forward takes {} input(s): {}; runlens drives programs that take {EXPECTED_INPUTS}", plan.inputs, describe(inputs));
        // input_ids [1, S] and cache_position [S], both dynamic up to the same bound;
        // then perhaps key_positions [F], dynamic up to that bound too.
        // key_positions' bound is the cache's length, at least input_ids' (a chunk).
        let rank1 = |s: &InputShape| s.dtype == "long" && s.sizes.len() == 1;
        if let Some(cache) = CacheInputs::of(inputs) {
            return Self::of_caller_cache(plan, prefill, cache, output).map_err(|why| format!("{why}; {}", wrong_inputs()));
        }
        let kv_cache = (2..=3).contains(&inputs.len())
            && ok_input(&inputs[0])
            && inputs[0].dynamic
            && rank1(&inputs[1])
            && inputs[1].sizes[0] == inputs[0].sizes[1]
            && inputs.get(2).is_none_or(|s| rank1(s) && s.dynamic && s.sizes[0] >= inputs[0].sizes[1]);
        if kv_cache && output != OutputKind::NextToken {
            return Err(format!(
                "it is a decoder with a KV cache (input_ids and cache_position); this model directory's programs return {}",
                output.expected()
            ));
        }
        if plan.inputs as usize != inputs.len() {
            return Err(wrong_inputs());
        }
        if !kv_cache && (!(1..=2).contains(&inputs.len()) || !inputs.iter().all(ok_input) || inputs.iter().any(|s| s.sizes != inputs[0].sizes)) {
            return Err(wrong_inputs());
        }
        let out = plan.output_shapes.first().ok_or_else(|| "its method forward returns no tensor".to_string())?;
        let rank_ok = output.ranks().contains(&out.sizes.len());
        if out.dtype != "float" || !rank_ok || out.sizes.first() != Some(&1) {
            return Err(format!(
                "its method forward returns {}; this model directory's programs return {} (float)",
                describe(std::slice::from_ref(out)),
                output.expected()
            ));
        }
        let len = usize::try_from(inputs[0].sizes[1]).unwrap_or(0);
        let key_positions = kv_cache && inputs.len() == 3;
        let max_len = if key_positions { usize::try_from(inputs[2].sizes[0]).unwrap_or(0) } else { len };
        Ok(InputConvention {
            with_mask: inputs.len() == 2 && !kv_cache,
            cache_position: kv_cache,
            key_positions,
            fixed_len: (!inputs[0].dynamic).then_some(len),
            chunk: len,
            max_len,
            caller_cache: None,
        })
    }

    /// A program taking its KV cache as inputs: `forward` one token (input_ids `[1, 1]`,
    /// cache_position `[1]`), `prefill` up to a chunk (both `[.., C]` dynamic), both
    /// key_positions `[F]` (F dynamic up to L) and the same cache inputs, both returning
    /// the logits `[1, V]` first.
    fn of_caller_cache(plan: &PlanCoverage, prefill: Option<&PlanCoverage>, cache: CacheInputs, output: OutputKind) -> Result<InputConvention, String> {
        if output != OutputKind::NextToken {
            return Err(format!("it is a decoder taking its KV cache as inputs; this model directory's programs return {}", output.expected()));
        }
        let prefill = prefill.ok_or("it takes its KV cache as inputs but has no method prefill for a prompt's chunks")?;
        let long = |s: &InputShape, sizes: &[i64], dynamic: bool| s.dtype == "long" && s.sizes == sizes && s.dynamic == dynamic;
        let (step, chunk) = (&plan.input_shapes, &prefill.input_shapes);
        let max_len = step[2].sizes.first().copied().unwrap_or(0);
        let c = chunk.first().and_then(|s| s.sizes.get(1)).copied().unwrap_or(0);
        let step_ok = long(&step[0], &[1, 1], false) && long(&step[1], &[1], false) && long(&step[2], &[max_len], true);
        let prefill_ok = chunk.len() == step.len()
            && long(&chunk[0], &[1, c], true)
            && long(&chunk[1], &[c], true)
            && chunk[2..] == step[2..]
            && (1..=max_len).contains(&c);
        if !step_ok || !prefill_ok {
            return Err("its forward (one token) and prefill (a chunk) do not take the cache-inputs convention's ids and positions".into());
        }
        let logits = |p: &PlanCoverage| p.output_shapes.first().is_some_and(|o| o.dtype == "float" && o.sizes.len() == 2 && o.sizes[0] == 1);
        if !logits(plan) || !logits(prefill) {
            return Err("its methods do not return next-token logits [1, V] first".into());
        }
        Ok(InputConvention {
            with_mask: false,
            cache_position: true,
            key_positions: true,
            fixed_len: None,
            chunk: usize::try_from(c).unwrap_or(1),
            max_len: usize::try_from(max_len).unwrap_or(0),
            caller_cache: Some(cache),
        })
    }

    /// For people: "KV cache of 64 positions", "fixed length 32 (input padded)", ...
    pub fn describe(&self, output: OutputKind) -> String {
        let decoder = output == OutputKind::NextToken;
        let inputs = if self.with_mask || self.cache_position { "" } else { ", input_ids only" };
        match (self.cache_position, self.fixed_len) {
            (true, _) if self.caller_cache.is_some() => format!(
                ", KV cache of {} positions held by runlens and read in place as the program's inputs, up to {} tokens a prefill call",
                self.max_len, self.chunk
            ),
            (true, _) if self.key_positions => format!(
                ", KV cache of {} positions (cache_position input), attention over the filled part (key_positions), up to {} tokens a call",
                self.max_len, self.chunk
            ),
            (true, _) => format!(", KV cache of {} positions (cache_position input), attention over all of them", self.max_len),
            (false, Some(n)) if decoder => format!(", a window of {n} tokens, left-padded and recomputed per token{inputs}"),
            (false, None) if decoder => format!(", no cache: the whole sequence (up to {}) recomputed per token{inputs}", self.max_len),
            (false, Some(n)) => format!(", fixed length {n} (input padded){inputs}"),
            (false, None) => inputs.to_string(),
        }
    }
}

pub struct ExecutorchBackend {
    spec: BackendSpec,
    program: Program,
    load_time: Duration,
}

impl ExecutorchBackend {
    /// Load a `.pte` from any path, to return `output`, through [`Program::open`].
    pub fn load_file(spec: &BackendSpec, path: &Path, output: OutputKind) -> anyhow::Result<ExecutorchBackend> {
        if !path.is_file() {
            return Err(crate::model::ModelsMissing { path: path.to_path_buf() }.into());
        }
        let start = Instant::now();
        let program = Program::open(path, output, false)?;
        Ok(ExecutorchBackend { spec: spec.clone(), program, load_time: start.elapsed() })
    }

    /// A decoder: pad a fixed window with `pad_id` (the manifest's `pad_token_id`; 0 unless set).
    pub fn with_pad_id(mut self, pad_id: i64) -> ExecutorchBackend {
        self.program.set_pad_id(pad_id);
        self
    }

    /// What it was loaded to return.
    pub fn output(&self) -> OutputKind {
        self.program.output
    }

    /// How the program takes its input.
    pub fn convention(&self) -> InputConvention {
        self.program.convention
    }

    /// The sequence length a fixed-shape program needs; `None` when it takes any length.
    pub fn fixed_len(&self) -> Option<usize> {
        self.program.convention.fixed_len
    }

    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// What runlens' own reader found in the file (read before ExecuTorch saw it).
    pub fn coverage(&self) -> &CoverageReport {
        &self.program.coverage
    }

    pub fn path(&self) -> &Path {
        self.program.path()
    }

    /// The input as this program takes it: padded to a fixed length, checked against its bound.
    pub fn prepare(&self, input: &Encoded) -> anyhow::Result<Encoded> {
        self.program.prepare(input)
    }

    /// Run a prepared input ([`prepare`](Self::prepare)) and keep only the real
    /// positions of a per-position output.
    pub fn run_prepared(&mut self, prepared: &Encoded, real_len: usize) -> anyhow::Result<OutputTensor> {
        self.program.run_prepared(prepared, real_len)
    }

    /// The ExecuTorch module, for the bench's in-shim loop.
    pub fn module_mut(&mut self) -> &mut EtModule {
        self.program.module_mut()
    }
}

impl Backend for ExecutorchBackend {
    fn describe(&self) -> String {
        let shape = self.program.convention.describe(self.program.output);
        format!("{}: {}, {}{shape}, {} pool threads", self.spec.title, self.spec.about, self.path().display(), crate::ffi::threads())
    }

    fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
        self.program.forward(input)
    }

    fn as_decoder(&mut self) -> Option<&mut dyn Decoder> {
        (self.program.output == OutputKind::NextToken).then_some(self as &mut dyn Decoder)
    }

    /// A decoder's stored weight constants a step of `forward` reads, counted from
    /// the file as it was read at open (`bench::weights`).
    fn weight_bytes_per_token(&self) -> Option<u64> {
        (self.program.output == OutputKind::NextToken).then(|| self.program.coverage.weight_bytes_per_token(&self.program.instructions))
    }

    /// A KV-cache program as runlens exports it keeps its cache in float32, the
    /// dtype it computes in (a program of one's own with another cache dtype is
    /// counted as float32 too).
    fn kv_cache_element_bytes(&self) -> Option<u64> {
        (self.program.output == OutputKind::NextToken && self.program.convention.cache_position).then_some(4)
    }

    /// Read from the program's inputs, as runlens drives it.
    fn cache_kind(&self) -> Option<&'static str> {
        let c = self.program.convention;
        (self.program.output == OutputKind::NextToken).then_some(match (c.caller_cache, c.cache_position) {
            (Some(_), _) => "inputs",
            (None, true) => "static",
            (None, false) => "none",
        })
    }

    fn load_time(&self) -> Option<Duration> {
        Some(self.load_time)
    }

    /// The shim's own C++ loop over `forward` (`runlens bench`'s `shim-loop-xnnpack` row).
    fn native_loop(&mut self) -> Option<&mut dyn crate::backend::NativeLoop> {
        Some(self)
    }
}

impl crate::backend::NativeLoop for ExecutorchBackend {
    fn last_run_ns(&mut self) -> u64 {
        self.module_mut().last_run_ns()
    }

    fn run_native(&mut self, input: &Encoded) -> anyhow::Result<u64> {
        let prepared = self.prepare(input)?;
        let mask = self.convention().with_mask.then_some(prepared.attention_mask.as_slice());
        let times = self.module_mut().forward_loop(&prepared.ids, mask, 1)?;
        times.first().copied().ok_or_else(|| anyhow::anyhow!("the shim's loop returned no time"))
    }
}

impl Decoder for ExecutorchBackend {
    fn max_len(&self) -> usize {
        self.program.convention.max_len
    }

    fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
        self.program.prefill(prompt)
    }

    fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>> {
        self.program.step(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(sizes: &[i64], dynamic: bool, dtype: &str) -> InputShape {
        InputShape { sizes: sizes.to_vec(), dynamic, dtype: dtype.into() }
    }

    fn plan(inputs: Vec<InputShape>, output: InputShape) -> PlanCoverage {
        PlanCoverage { inputs: inputs.len() as u64, outputs: 1, input_shapes: inputs, output_shapes: vec![output], ..PlanCoverage::empty("forward") }
    }

    #[test]
    fn kv_cache_and_window_programs_are_told_apart_by_their_inputs() {
        let logits = shape(&[1, 512], false, "float");
        let kv = plan(vec![shape(&[1, 64], true, "long"), shape(&[64], true, "long")], logits.clone());
        let c = InputConvention::of(&kv, None, OutputKind::NextToken).unwrap();
        assert_eq!(c, InputConvention { with_mask: false, cache_position: true, key_positions: false, fixed_len: None, chunk: 64, max_len: 64, caller_cache: None });
        assert!(c.describe(OutputKind::NextToken).contains("KV cache of 64"));
        assert!(c.describe(OutputKind::NextToken).contains("all of them"));

        // With key_positions [F]: attention over the filled part, F's bound the cache's
        // length, input_ids' the most tokens a call takes; a fixed or shorter F is not that input.
        let filled = plan(vec![shape(&[1, 64], true, "long"), shape(&[64], true, "long"), shape(&[256], true, "long")], logits.clone());
        let c = InputConvention::of(&filled, None, OutputKind::NextToken).unwrap();
        assert_eq!(c, InputConvention { with_mask: false, cache_position: true, key_positions: true, fixed_len: None, chunk: 64, max_len: 256, caller_cache: None });
        assert!(c.describe(OutputKind::NextToken).contains("filled part"));
        let fixed_f = plan(vec![shape(&[1, 64], true, "long"), shape(&[64], true, "long"), shape(&[64], false, "long")], logits.clone());
        assert!(InputConvention::of(&fixed_f, None, OutputKind::NextToken).is_err());
        let shorter_f = plan(vec![shape(&[1, 64], true, "long"), shape(&[64], true, "long"), shape(&[32], true, "long")], logits.clone());
        assert!(InputConvention::of(&shorter_f, None, OutputKind::NextToken).is_err());

        let window = plan(vec![shape(&[1, 32], false, "long"), shape(&[1, 32], false, "long")], shape(&[1, 32, 512], false, "float"));
        let c = InputConvention::of(&window, None, OutputKind::NextToken).unwrap();
        assert_eq!(c, InputConvention { with_mask: true, cache_position: false, key_positions: false, fixed_len: Some(32), chunk: 32, max_len: 32, caller_cache: None });
        assert!(c.describe(OutputKind::NextToken).contains("left-padded"));

        // A KV-cache program in a directory of another task, and shapes runlens cannot drive, say why.
        let err = InputConvention::of(&kv, None, OutputKind::TokenLogits).unwrap_err();
        assert!(err.contains("KV cache") && err.contains("[1, S, V]"), "{err}");
        let rank2_positions = plan(vec![shape(&[1, 64], true, "long"), shape(&[1, 64], true, "float")], logits.clone());
        assert!(InputConvention::of(&rank2_positions, None, OutputKind::NextToken).unwrap_err().contains("cache_position int64 [S]"));
        let rank4_out = plan(vec![shape(&[1, 64], true, "long"), shape(&[64], true, "long")], shape(&[1, 1, 64, 512], true, "float"));
        assert!(InputConvention::of(&rank4_out, None, OutputKind::NextToken).unwrap_err().contains("[1, V]"));
    }

    /// forward (one token) and prefill (a chunk), then keys [F, D] and values [1, F, D] per layer and KV head.
    fn caller_cache_plans(tensors: usize, chunk: i64, len: i64, d: i64) -> (PlanCoverage, PlanCoverage) {
        let cache = |n: usize| {
            let mut v: Vec<InputShape> = (0..n).map(|_| shape(&[len, d], true, "float")).collect();
            v.extend((0..n).map(|_| shape(&[1, len, d], true, "float")));
            v
        };
        let logits = shape(&[1, 512], false, "float");
        let mut step = vec![shape(&[1, 1], false, "long"), shape(&[1], false, "long"), shape(&[len], true, "long")];
        step.extend(cache(tensors));
        let mut prefill = vec![shape(&[1, chunk], true, "long"), shape(&[chunk], true, "long"), shape(&[len], true, "long")];
        prefill.extend(cache(tensors));
        let with = |inputs: Vec<InputShape>, name: &str| PlanCoverage { name: name.into(), ..plan(inputs, logits.clone()) };
        (with(step, "forward"), with(prefill, "prefill"))
    }

    #[test]
    fn a_program_taking_its_cache_as_inputs_is_read_from_both_methods() {
        let (step, prefill) = caller_cache_plans(6, 256, 2048, 64);
        let c = InputConvention::of(&step, Some(&prefill), OutputKind::NextToken).unwrap();
        let expected = InputConvention {
            with_mask: false,
            cache_position: true,
            key_positions: true,
            fixed_len: None,
            chunk: 256,
            max_len: 2048,
            caller_cache: Some(CacheInputs { tensors: 6, head_dim: 64 }),
        };
        assert_eq!(c, expected);
        assert!(c.describe(OutputKind::NextToken).contains("read in place"));
        // Without prefill, with a prefill of another cache, or values of another length: refused, saying why.
        let err = InputConvention::of(&step, None, OutputKind::NextToken).unwrap_err();
        assert!(err.contains("no method prefill"), "{err}");
        let (_, other) = caller_cache_plans(6, 256, 1024, 64);
        assert!(InputConvention::of(&step, Some(&other), OutputKind::NextToken).is_err());
        let mut odd = step.clone();
        odd.input_shapes[9] = shape(&[1, 1024, 64], true, "float");
        odd.inputs = odd.input_shapes.len() as u64;
        assert!(InputConvention::of(&odd, Some(&prefill), OutputKind::NextToken).is_err());
        assert!(InputConvention::of(&step, Some(&prefill), OutputKind::TokenLogits).unwrap_err().contains("as inputs"));
    }
}
