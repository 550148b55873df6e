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
//! - **No cache** (the course's way): the whole sequence recomputed for every
//!   token. A fixed-length program takes a window of `L` tokens left-padded
//!   with the pad id, `attention_mask` 0 on the padding (the program takes
//!   positions from the mask), so the last real token is at `L - 1`; a
//!   dynamic-length one takes the sequence as it is.
//!
//! The output is the next token's logits `[1, V]`, or per position
//! `[1, S, V]`: then the last position's (the last real token in both cases).

use anyhow::Context;

use super::InputConvention;
use crate::backend::probe::kv_cache_inputs;
use crate::ffi::{EtModule, LongTensor};

/// The sequence a decoder program holds, and what its window is padded with.
#[derive(Clone, Debug, Default)]
pub struct Decoding {
    /// Prompt and new tokens so far (empty before the first prefill).
    sequence: Vec<i64>,
    /// What a fixed window is left-padded with (the manifest's `pad_token_id`).
    pub pad_id: i64,
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
                logits = run_kv(module, convention, ids, (k * chunk) as i64)?;
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
            run_kv(module, convention, &[token], self.sequence.len() as i64)?
        } else {
            let mut sequence = self.sequence.clone();
            sequence.push(token);
            run_window(module, convention, &sequence, self.pad_id)?
        };
        self.sequence.push(token);
        Ok(logits)
    }
}

/// `forward(input_ids [1, n], cache_position [n])` at positions `start..start + n`, and
/// `key_positions [F] = 0..F` when the program takes it ([`kv_cache_inputs`]).
fn run_kv(module: &mut EtModule, convention: &InputConvention, ids: &[i64], start: i64) -> anyhow::Result<Vec<f32>> {
    let inputs = kv_cache_inputs(ids.to_vec(), start, convention.key_positions);
    let tensors: Vec<LongTensor> = inputs.iter().map(|(data, sizes)| LongTensor::new(data, sizes)).collect();
    module.execute(&tensors)?;
    last_position(module)
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
