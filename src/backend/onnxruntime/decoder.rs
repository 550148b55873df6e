//! A decoder's ONNX file with its KV cache as inputs and outputs, as Optimum
//! lays one out and runlens' export writes it
//! (python/runlens_export/onnx_decoder.py): `input_ids` `[1, S]`,
//! `attention_mask` `[1, P + S]`, `position_ids` `[1, S]` (where the graph
//! takes it) and `past_key_values.{i}.key` / `.value` `[1, kv_heads, P,
//! head_dim]` in; `logits` `[1, S, V]` and `present.{i}.key` / `.value`
//! `[1, kv_heads, P + S, head_dim]` out. One ONNX Runtime run for the prompt,
//! then one a token, each run's presents handed back as the next run's pasts
//! without a copy (ONNX Runtime's own values, kept between runs).
//!
//! The cache and the logits may be float16 (transformers.js' `model_fp16.onnx`):
//! the empty pasts of the prompt's run are made in the graph's type, the presents
//! handed back as they come, the logits widened to float32.
//!
//! Optimum's merged file (`decoder_model_merged.onnx`) also takes
//! `use_cache_branch` `[1]`, a boolean choosing between its two decoders under an
//! `If`: false for the prompt's run (the decoder without a cache, which ignores
//! the pasts), true for each token after it. Its weights may be in external data
//! beside it, which ONNX Runtime reads from the file's folder.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, Tensor};

use super::{log, open_as, threads, Extra};
use crate::backend::{Backend, BackendSpec, Decoder, ProfiledRun};
use crate::onnx::{Dim, ElemType, OnnxModel};
use crate::tensor::{argmax, Encoded, OutputTensor};

/// The graph's layout as runlens drives it, read from the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PastLayout {
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Whether the graph takes `position_ids` (GPT-2's files may not).
    pub position_ids: bool,
    /// Whether it takes Optimum's `use_cache_branch` (a merged decoder).
    pub use_cache_branch: bool,
    /// The pasts' element type: float32, or float16 (transformers.js' fp16 files).
    pub cache: ElemType,
    /// The logits' element type: float32 or float16.
    pub logits: ElemType,
}

/// The element types a cache or the logits may have.
fn float(elem: Option<ElemType>) -> Option<ElemType> {
    elem.filter(|e| [ElemType::FLOAT32, ElemType::FLOAT16].contains(e))
}

fn past_name(layer: usize, kind: &str) -> String {
    format!("past_key_values.{layer}.{kind}")
}

fn present_name(layer: usize, kind: &str) -> String {
    format!("present.{layer}.{kind}")
}

/// The decoder layout of `model`, or why runlens cannot drive it (naming what the graph has).
pub fn check(model: &OnnxModel) -> Result<PastLayout, String> {
    let has = |name: &str| model.inputs.iter().find(|i| i.name == name);
    for required in ["input_ids", "attention_mask"] {
        if has(required).is_none() {
            return Err(format!("the graph has no input {required} (its inputs: {}); a decoder's are {}", model.describe_inputs(), EXPECTED));
        }
    }
    let mut layers = 0;
    while has(&past_name(layers, "key")).is_some() {
        layers += 1;
    }
    if layers == 0 {
        return Err(format!("the graph takes no past_key_values.0.key (its inputs: {}); a decoder's are {}", model.describe_inputs(), EXPECTED));
    }
    let branch = has(USE_CACHE_BRANCH);
    if let Some(flag) = branch {
        let one = matches!(flag.shape.as_deref(), None | Some([Dim::Size(1)]));
        if flag.elem_type != Some(ElemType::BOOL) || !one {
            return Err(format!("its input {flag} is not Optimum's use_cache_branch, a boolean [1]"));
        }
    }
    let known = |name: &str| {
        ["input_ids", "attention_mask", "position_ids", USE_CACHE_BRANCH].contains(&name)
            || (0..layers).any(|i| name == past_name(i, "key") || name == past_name(i, "value"))
    };
    if let Some(other) = model.inputs.iter().find(|i| !known(&i.name)) {
        return Err(format!("the graph takes an input {:?} runlens cannot give (its inputs: {}); a decoder's are {}", other.name, model.describe_inputs(), EXPECTED));
    }
    let mut geometry = None;
    let mut cache = None;
    for i in 0..layers {
        for kind in ["key", "value"] {
            let Some(past) = has(&past_name(i, kind)) else {
                return Err(format!("the graph has past_key_values.{i}.key but no {} (its inputs: {})", past_name(i, kind), model.describe_inputs()));
            };
            let Some(elem) = float(past.elem_type) else {
                return Err(format!("its input {past} is neither float32 nor float16, the caches runlens feeds"));
            };
            if *cache.get_or_insert(elem) != elem {
                return Err(format!("its input {past} is not of layer 0's type"));
            }
            let dims = match past.shape.as_deref() {
                Some([_, Dim::Size(h), _, Dim::Size(d)]) if *h > 0 && *d > 0 => (*h as usize, *d as usize),
                _ => return Err(format!("its input {past} is not [batch, kv_heads, past, head_dim] with the heads and their width fixed")),
            };
            if *geometry.get_or_insert(dims) != dims {
                return Err(format!("its input {past} is not as wide as layer 0's cache"));
            }
            if !model.outputs.iter().any(|o| o.name == present_name(i, kind)) {
                return Err(format!("the graph has no output {} for its input {} (its outputs: {})", present_name(i, kind), past.name, model.describe_outputs()));
            }
        }
    }
    let Some(logits) = model.outputs.iter().find(|o| o.name == "logits").and_then(|o| float(o.elem_type)) else {
        return Err(format!("the graph has no float32 or float16 output logits (its outputs: {})", model.describe_outputs()));
    };
    let (kv_heads, head_dim) = geometry.unwrap_or((0, 0));
    Ok(PastLayout {
        layers,
        kv_heads,
        head_dim,
        position_ids: has("position_ids").is_some(),
        use_cache_branch: branch.is_some(),
        cache: cache.unwrap_or(ElemType::FLOAT32),
        logits,
    })
}

const EXPECTED: &str = "input_ids, attention_mask, position_ids and past_key_values.{i}.key/value (the presents as outputs), and use_cache_branch in Optimum's merged file";
const USE_CACHE_BRANCH: &str = "use_cache_branch";

pub struct OnnxDecoder {
    spec: BackendSpec,
    session: Session,
    path: PathBuf,
    layout: PastLayout,
    /// The presents of the last run: the next run's pasts, layer by layer, key then value.
    past: Vec<DynValue>,
    filled: usize,
    max_len: usize,
    weight_bytes_per_token: u64,
    load_time: Duration,
}

/// ONNX Runtime's profile of a decoder's file ([`super::profiled_runs`]), driven
/// as its column drives it in a session with the profiler on (its file named from
/// `prefix`): the prompt's run, then `runs` more of the prompt from an empty
/// cache ([`ProfiledRun::Prompt`]), or one warm-up step and `runs` steps, each
/// fed the last one's greedy token ([`ProfiledRun::DecodeStep`]). The path of
/// the profiler's file.
pub(super) fn profiled(path: &Path, model: &OnnxModel, layout: PastLayout, prompt: &[i64], runs: u32, run: ProfiledRun, prefix: &Path) -> anyhow::Result<String> {
    let spec = BackendSpec::program("profile", path);
    let steps = match run {
        ProfiledRun::Prompt => 0,
        ProfiledRun::DecodeStep => runs as usize + 1,
    };
    let mut d = OnnxDecoder::open_as(&spec, path, model, layout, prompt.len() + steps, Extra::Profiled(prefix))?;
    let mut logits = d.prefill(prompt)?;
    match run {
        ProfiledRun::Prompt => {
            for _ in 0..runs {
                d.prefill(prompt)?;
            }
        }
        ProfiledRun::DecodeStep => {
            for _ in 0..steps {
                logits = d.step(argmax(&logits)?)?;
            }
        }
    }
    d.session.end_profiling().map_err(|e| anyhow::anyhow!("{}: ONNX Runtime's profiler: {e}", path.display()))
}

impl OnnxDecoder {
    pub(super) fn open(spec: &BackendSpec, path: &Path, model: &OnnxModel, layout: PastLayout, max_len: usize) -> anyhow::Result<OnnxDecoder> {
        Self::open_as(spec, path, model, layout, max_len, Extra::None)
    }

    /// [`OnnxDecoder::open`], the session doing what `extra` says besides running.
    fn open_as(spec: &BackendSpec, path: &Path, model: &OnnxModel, layout: PastLayout, max_len: usize, extra: Extra) -> anyhow::Result<OnnxDecoder> {
        let env = super::environment()?;
        let start = Instant::now();
        let session = open_as(&env, path, threads(), &spec.name, extra)
            .map_err(|e| anyhow::anyhow!("{}: ONNX Runtime cannot load it: {e}{}", path.display(), log::last_words(&spec.name)))?;
        Ok(OnnxDecoder {
            spec: spec.clone(),
            session,
            path: path.to_path_buf(),
            layout,
            past: Vec::new(),
            filled: 0,
            max_len,
            weight_bytes_per_token: model.weight_bytes_per_token,
            load_time: start.elapsed(),
        })
    }

    /// One run over `tokens` after the `filled` positions of the kept pasts
    /// (none: empty ones): the last position's logits `[V]`; the presents kept.
    fn forward(&mut self, tokens: &[i64]) -> anyhow::Result<Vec<f32>> {
        let path = self.path.display().to_string();
        let (s, filled, l) = (tokens.len(), self.filled, &self.layout);
        anyhow::ensure!(filled + s <= self.max_len, "{path}: {} positions, over the {} this column holds", filled + s, self.max_len);
        let ids = Tensor::from_array(([1usize, s], tokens.to_vec()))?;
        let mask = Tensor::from_array(([1usize, filled + s], vec![1i64; filled + s]))?;
        let mut feeds: Vec<(String, SessionInputValue<'_>)> = vec![("input_ids".into(), ids.into()), ("attention_mask".into(), mask.into())];
        if l.position_ids {
            let positions: Vec<i64> = (filled..filled + s).map(|p| p as i64).collect();
            feeds.push(("position_ids".into(), Tensor::from_array(([1usize, s], positions))?.into()));
        }
        if l.use_cache_branch {
            // The merged file's decoder with a cache once there is one (the prompt's run has none).
            feeds.push((USE_CACHE_BRANCH.into(), Tensor::from_array(([1usize], vec![!self.past.is_empty()]))?.into()));
        }
        if self.past.is_empty() {
            let shape = [1usize, l.kv_heads, 0, l.head_dim];
            for i in 0..l.layers {
                for kind in ["key", "value"] {
                    let empty: SessionInputValue<'_> = match l.cache {
                        ElemType::FLOAT16 => Tensor::from_array((shape, Vec::<half::f16>::new()))?.into(),
                        _ => Tensor::from_array((shape, Vec::<f32>::new()))?.into(),
                    };
                    feeds.push((past_name(i, kind), empty));
                }
            }
        } else {
            for (n, value) in self.past.iter().enumerate() {
                feeds.push((past_name(n / 2, if n % 2 == 0 { "key" } else { "value" }), value.into()));
            }
        }
        let mut outputs = self.session.run(feeds).map_err(|e| anyhow::anyhow!("{path}: ONNX Runtime's run failed: {e}{}", log::last_words(&self.spec.name)))?;
        let logits = {
            let value = outputs.get("logits").ok_or_else(|| anyhow::anyhow!("{path}: no output logits"))?;
            let bad = |e: ort::Error| anyhow::anyhow!("{path}: output logits: {e}");
            // The last position's row, widened to float32 where the graph gives float16.
            let last = |shape: &ort::value::Shape, len: usize| -> anyhow::Result<std::ops::Range<usize>> {
                let v = *shape.last().unwrap_or(&0) as usize;
                anyhow::ensure!(v > 0 && len >= v && len % v == 0, "{path}: logits {shape:?} for {s} tokens");
                Ok(len - v..len)
            };
            match l.logits {
                ElemType::FLOAT16 => {
                    let (shape, data) = value.try_extract_tensor::<half::f16>().map_err(bad)?;
                    data[last(shape, data.len())?].iter().map(|x| x.to_f32()).collect()
                }
                _ => {
                    let (shape, data) = value.try_extract_tensor::<f32>().map_err(bad)?;
                    data[last(shape, data.len())?].to_vec()
                }
            }
        };
        let mut presents = Vec::with_capacity(2 * l.layers);
        for i in 0..l.layers {
            for kind in ["key", "value"] {
                let name = present_name(i, kind);
                presents.push(outputs.remove(&name).ok_or_else(|| anyhow::anyhow!("{path}: no output {name}"))?);
            }
        }
        drop(outputs);
        self.past = presents;
        self.filled = filled + s;
        Ok(logits)
    }
}

impl Decoder for OnnxDecoder {
    fn max_len(&self) -> usize {
        self.max_len
    }

    fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
        anyhow::ensure!(!prompt.is_empty(), "{}: the prompt is empty: type some text to continue", self.path.display());
        self.past.clear();
        self.filled = 0;
        self.forward(prompt)
    }

    fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>> {
        anyhow::ensure!(self.filled > 0, "{}: a step before any prefill", self.path.display());
        self.forward(&[token])
    }
}

impl Backend for OnnxDecoder {
    fn describe(&self) -> String {
        let l = &self.layout;
        format!(
            "{}: {}, {} ({} layers' past keys and values in and out, {} KV heads of {}, {}), CPU execution provider, {} intra-op threads, sequential",
            self.spec.title,
            self.spec.about,
            self.path.display(),
            l.layers,
            l.kv_heads,
            l.head_dim,
            l.cache.name(),
            threads()
        )
    }

    fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
        let logits = self.prefill(&input.ids)?;
        Ok(OutputTensor::new(vec![1, logits.len()], logits))
    }

    fn as_decoder(&mut self) -> Option<&mut dyn Decoder> {
        Some(self)
    }

    fn weight_bytes_per_token(&self) -> Option<u64> {
        Some(self.weight_bytes_per_token)
    }

    fn kv_cache_element_bytes(&self) -> Option<u64> {
        Some(if self.layout.cache == ElemType::FLOAT16 { 2 } else { 4 })
    }

    fn load_time(&self) -> Option<Duration> {
        Some(self.load_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::ValueInfo;

    fn value(name: &str, elem: i32, shape: Option<Vec<Dim>>) -> ValueInfo {
        ValueInfo::new(name, elem, shape)
    }

    fn decoder(layers: usize, position_ids: bool) -> OnnxModel {
        let seq = || Some(vec![Dim::Size(1), Dim::Named("sequence".into())]);
        let past = || Some(vec![Dim::Size(1), Dim::Size(3), Dim::Named("past".into()), Dim::Size(64)]);
        let mut inputs = vec![value("input_ids", 7, seq()), value("attention_mask", 7, seq())];
        if position_ids {
            inputs.push(value("position_ids", 7, seq()));
        }
        let mut outputs = vec![value("logits", 1, None)];
        for i in 0..layers {
            for kind in ["key", "value"] {
                inputs.push(value(&past_name(i, kind), 1, past()));
                outputs.push(value(&present_name(i, kind), 1, past()));
            }
        }
        OnnxModel::with_io(inputs, outputs)
    }

    /// Optimum's decoder layout is read from the graph; each departure is refused naming what the graph has.
    #[test]
    fn the_past_present_layout_is_read_from_the_graph() {
        let f32 = ElemType::FLOAT32;
        let layout = PastLayout { layers: 2, kv_heads: 3, head_dim: 64, position_ids: true, use_cache_branch: false, cache: f32, logits: f32 };
        assert_eq!(check(&decoder(2, true)), Ok(layout));
        assert_eq!(check(&decoder(1, false)).map(|l| l.position_ids), Ok(false));
        let mut m = decoder(2, true);
        m.outputs.retain(|o| o.name != "present.1.value");
        assert!(check(&m).unwrap_err().starts_with("the graph has no output present.1.value for its input past_key_values.1.value"));
        let mut m = decoder(2, true);
        m.inputs.retain(|i| i.name != "past_key_values.0.value");
        assert!(check(&m).unwrap_err().contains("no past_key_values.0.value"));
        // Optimum's merged file: its flag is read; one of another type or shape is refused.
        let mut m = decoder(1, true);
        m.inputs.push(value("use_cache_branch", 9, Some(vec![Dim::Size(1)])));
        assert_eq!(check(&m).map(|l| l.use_cache_branch), Ok(true));
        m.inputs.last_mut().unwrap().elem_type = Some(ElemType::INT64);
        assert!(check(&m).unwrap_err().contains("is not Optimum's use_cache_branch, a boolean [1]"));
        let mut m = decoder(1, true);
        m.inputs.push(value("cache_position", 7, Some(vec![Dim::Named("sequence".into())])));
        assert!(check(&m).unwrap_err().starts_with("the graph takes an input \"cache_position\" runlens cannot give"));
        let mut m = decoder(1, true);
        m.inputs[3].shape = Some(vec![Dim::Size(1), Dim::Named("heads".into()), Dim::Unknown, Dim::Size(64)]);
        assert!(check(&m).unwrap_err().contains("with the heads and their width fixed"));
        // transformers.js' fp16 files: every past and the logits float16; a mixture, or another type, refused.
        let mut m = decoder(1, true);
        m.inputs.iter_mut().chain(m.outputs.iter_mut()).filter(|v| v.elem_type == Some(f32)).for_each(|v| v.elem_type = Some(ElemType::FLOAT16));
        assert_eq!(check(&m).map(|l| (l.cache, l.logits)), Ok((ElemType::FLOAT16, ElemType::FLOAT16)));
        m.inputs[3].elem_type = Some(f32);
        assert!(check(&m).unwrap_err().contains("is not of layer 0's type"));
        let mut m = decoder(1, true);
        m.inputs[3].elem_type = Some(ElemType(11));
        assert!(check(&m).unwrap_err().contains("is neither float32 nor float16"));
        let encoder = OnnxModel { inputs: decoder(0, false).inputs, ..decoder(0, false) };
        assert!(check(&encoder).unwrap_err().starts_with("the graph takes no past_key_values.0.key"));
    }
}
