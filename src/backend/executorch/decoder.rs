//! ExecuTorch programs as decoders (text-generation): the two ways a program
//! continues a sequence, told apart by its inputs ([`InputConvention`]):
//!
//! - **KV cache** (`cache_position`): the cache is a static buffer of `L`
//!   positions inside the program. Prefill is one call with the whole prompt
//!   and `cache_position = 0..n`; each new token one call with `[token]` and
//!   `[n]`. A program that also takes `key_positions` gets `0..n` (`0..n+1`
//!   for a step): its attention reads only those entries, so a step's cost
//!   follows the filled length, not `L`; it takes at most `chunk` tokens a
//!   call, so a longer prompt is fed in chunks. A new prompt starts again at
//!   position 0 (later, stale entries are never read, or masked by
//!   cache_position inside the program).
//! - **KV cache as inputs** ([`CallerCache`]): runlens holds the cache and hands
//!   the program its filled part as inputs, read in place (not copied); the
//!   program returns the new entries, which runlens writes. A prompt goes to
//!   method `prefill` in chunks, each new token to `forward`.
//! - **No cache** (the course's way): the whole sequence recomputed for every
//!   token. A fixed-length program takes a window of `L` tokens left-padded
//!   with the pad id, `attention_mask` 0 on the padding (the program takes
//!   positions from the mask), so the last real token is at `L - 1`; a
//!   dynamic-length one takes the sequence as it is.
//!
//! The output is the next token's logits `[1, V]`, or per position
//! `[1, S, V]`: then the last position's (the last real token in both cases).

use anyhow::Context;

use super::{CacheInputs, InputConvention};
use crate::backend::probe::kv_cache_inputs;
use crate::ffi::{EtModule, LongTensor, MethodInput};

/// The sequence a decoder program holds, and what its window is padded with.
#[derive(Clone, Debug, Default)]
pub struct Decoding {
    /// Prompt and new tokens so far (empty before the first prefill).
    sequence: Vec<i64>,
    /// What a fixed window is left-padded with (the manifest's `pad_token_id`).
    pub pad_id: i64,
    /// A program taking its cache as inputs: the cache (made at the first prefill).
    cache: Option<CallerCache>,
}

impl Decoding {
    pub fn prefill(&mut self, module: &mut EtModule, convention: &InputConvention, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
        self.sequence.clear();
        anyhow::ensure!(!prompt.is_empty(), "{}: the prompt is empty: type some text to continue", module.path().display());
        anyhow::ensure!(
            prompt.len() <= convention.max_len,
            "{}: the prompt has {} tokens and the program holds at most {}",
            module.path().display(),
            prompt.len(),
            convention.max_len
        );
        let logits = if convention.cache_position {
            // In calls of at most `chunk` tokens (the program's bound on input_ids).
            let chunk = convention.chunk.max(1);
            let mut logits = Vec::new();
            for (k, ids) in prompt.chunks(chunk).enumerate() {
                logits = self.run_kv(module, convention, ids, k * chunk, false)?;
            }
            logits
        } else {
            run_window(module, convention, prompt, self.pad_id)?
        };
        self.sequence.extend_from_slice(prompt);
        Ok(logits)
    }

    pub fn step(&mut self, module: &mut EtModule, convention: &InputConvention, token: i64) -> anyhow::Result<Vec<f32>> {
        let path = || module.path().display().to_string();
        anyhow::ensure!(!self.sequence.is_empty(), "{}: a step before any prefill (no sequence to continue)", path());
        anyhow::ensure!(
            self.sequence.len() < convention.max_len,
            "{}: the sequence already fills the program's {} positions",
            path(),
            convention.max_len
        );
        let logits = if convention.cache_position {
            self.run_kv(module, convention, &[token], self.sequence.len(), true)?
        } else {
            let mut sequence = self.sequence.clone();
            sequence.push(token);
            run_window(module, convention, &sequence, self.pad_id)?
        };
        self.sequence.push(token);
        Ok(logits)
    }
}

impl Decoding {
    /// `ids` at positions `start..start + n`: `forward(input_ids [1, n], cache_position [n])`,
    /// with `key_positions [F] = 0..F` when the program takes it ([`kv_cache_inputs`]);
    /// or through the cache runlens holds ([`CallerCache::run`]: method `forward` for a
    /// `step`, `prefill` for a prompt's chunk).
    fn run_kv(&mut self, module: &mut EtModule, convention: &InputConvention, ids: &[i64], start: usize, step: bool) -> anyhow::Result<Vec<f32>> {
        if let Some(shape) = convention.caller_cache {
            let cache = self.cache.get_or_insert_with(|| CallerCache::new(shape, convention.max_len));
            return cache.run(module, if step { "forward" } else { "prefill" }, ids, start);
        }
        let inputs = kv_cache_inputs(ids.to_vec(), start as i64, convention.key_positions);
        let tensors: Vec<LongTensor> = inputs.iter().map(|(data, sizes)| LongTensor::new(data, sizes)).collect();
        module.execute(&tensors)?;
        last_position(module)
    }
}

/// The KV cache of a program that takes it as inputs (`python/runlens_export/cache_inputs.py`):
/// per layer and KV head, the keys and the values of `max_len + 1` rows of `head_dim` floats,
/// row 0 kept at zero (the program hides it, and in a step puts the new token's own score
/// there), position p at row p + 1. A call hands the program the first `start + 1` rows of
/// each, their own memory (a row-major prefix is one block: nothing is sliced or copied),
/// and writes the `n` new rows it returns at `start + 1..`.
#[derive(Clone, Debug)]
struct CallerCache {
    shape: CacheInputs,
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
}

impl CallerCache {
    fn new(shape: CacheInputs, max_len: usize) -> CallerCache {
        // One row more than the positions, and XNNPACK's extra read past an input's end
        // (16 bytes) inside the allocation even when every row is handed in.
        let len = (max_len + 1) * shape.head_dim + 4;
        CallerCache { shape, keys: vec![vec![0.0; len]; shape.tensors], values: vec![vec![0.0; len]; shape.tensors] }
    }

    /// `method` (`forward`: one token; `prefill`: a chunk) at positions `start..start + ids.len()`.
    fn run(&mut self, module: &mut EtModule, method: &str, ids: &[i64], start: usize) -> anyhow::Result<Vec<f32>> {
        let (n, d, rows) = (ids.len(), self.shape.head_dim, start + 1);
        let file = module.path().display().to_string();
        anyhow::ensure!((start + n + 1) * d < self.keys.first().map_or(0, Vec::len), "{file}: positions past the cache");
        let id_sizes = [1, n as i64];
        let positions: Vec<i64> = (start as i64..(start + n) as i64).collect();
        let position_sizes = [n as i64];
        let key_positions: Vec<i64> = (0..rows as i64).collect();
        let key_sizes = [rows as i64];
        let (k_sizes, v_sizes) = ([rows as i64, d as i64], [1, rows as i64, d as i64]);
        let mut inputs = vec![
            MethodInput::Long { data: ids, sizes: &id_sizes },
            MethodInput::Long { data: &positions, sizes: &position_sizes },
            MethodInput::Long { data: &key_positions, sizes: &key_sizes },
        ];
        inputs.extend(self.keys.iter_mut().map(|k| MethodInput::Float { data: &mut k[..rows * d], sizes: &k_sizes }));
        inputs.extend(self.values.iter_mut().map(|v| MethodInput::Float { data: &mut v[..rows * d], sizes: &v_sizes }));
        let outputs = module.run_method(method, &mut inputs)?;
        drop(inputs);
        let [logits, new_keys, new_values] = outputs.as_slice() else {
            anyhow::bail!("{file}: {method} returned {} outputs; a cache-inputs program returns the logits, the new keys and the new values", outputs.len())
        };
        let expected = [self.shape.tensors * n * d; 2];
        anyhow::ensure!(
            [new_keys.data.len(), new_values.data.len()] == expected && logits.sizes.len() == 2 && logits.sizes[0] == 1,
            "{file}: {method} returned {:?}, {:?} and {:?}; expected logits [1, V] and {} new keys and values of {n} x {d}",
            logits.sizes,
            new_keys.sizes,
            new_values.sizes,
            self.shape.tensors
        );
        // [layers, kv_heads, n, d] in the order of the inputs: tensor i's n rows are one block.
        for (cache, new) in [(&mut self.keys, new_keys.data), (&mut self.values, new_values.data)] {
            for (i, rows_of) in cache.iter_mut().enumerate() {
                rows_of[rows * d..(rows + n) * d].copy_from_slice(&new[i * n * d..(i + 1) * n * d]);
            }
        }
        Ok(logits.data.to_vec())
    }
}

/// The whole sequence, left-padded to a fixed window, or as it is.
fn run_window(module: &mut EtModule, convention: &InputConvention, sequence: &[i64], pad_id: i64) -> anyhow::Result<Vec<f32>> {
    let len = convention.fixed_len.unwrap_or(sequence.len());
    let padding = len.checked_sub(sequence.len()).with_context(|| {
        format!("{}: the sequence has {} tokens and the window {len}", module.path().display(), sequence.len())
    })?;
    let mut ids = vec![pad_id; padding];
    ids.extend_from_slice(sequence);
    let mut mask = vec![0i64; padding];
    mask.resize(len, 1);
    let sizes = [1, len as i64];
    let mut inputs = vec![LongTensor::new(&ids, &sizes)];
    if convention.with_mask {
        inputs.push(LongTensor::new(&mask, &sizes));
    }
    module.execute(&inputs)?;
    last_position(module)
}

/// The next token's logits from the last output: `[1, V]` as it is, `[1, S, V]` at `S - 1`.
fn last_position(module: &EtModule) -> anyhow::Result<Vec<f32>> {
    let shape = module.output_shape();
    let data = module.last_output();
    let wrong = || {
        anyhow::anyhow!(
            "{}: the program returned {shape:?} ({} values); a text-generation program returns next-token logits [1, V] or per position [1, S, V]",
            module.path().display(),
            data.len()
        )
    };
    match shape.as_slice() {
        [1, v] if *v >= 1 && data.len() == *v => Ok(data.to_vec()),
        [1, s, v] if *s >= 1 && *v >= 1 && data.len() == s * v => Ok(data[(s - 1) * v..].to_vec()),
        _ => Err(wrong()),
    }
}
