//! The three passes `runlens eval` makes over a decoder, each through the
//! generation task's own loops (never a loop of its own over a model):
//!
//! - [`reference_pass`]: the reference's greedy continuation of a prompt
//!   ([`greedy`]), every next-token logits row kept ([`LogitRows`]);
//! - [`compare_pass`]: a column teacher-forced on that continuation
//!   ([`teacher_forced`]: the prompt in one prefill, then each reference token
//!   with `step`), its rows compared with the reference's as they come: top-1
//!   agreement, KL, and the first position whose likeliest token is not the
//!   reference's;
//! - [`text_pass`]: a text's perplexity, window by window, teacher-forced on
//!   the text's own tokens.
//!
//! Each pass sees the logits through [`Observed`], a [`Decoder`] that shows
//! every row it returns to a closure before handing it on.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use super::math::{kl_divergence, negative_log_likelihood};
use super::store::LogitRows;
use crate::backend::Decoder;
use crate::task::generation::parity::teacher_forced;
use crate::task::generation::{argmax, greedy, Detokenizer, GenerateOptions, Generation};

/// `inner`, with every logits row it returns shown to `seen` first.
struct Observed<'a, F> {
    inner: &'a mut dyn Decoder,
    seen: F,
}

impl<F: FnMut(&[f32]) -> anyhow::Result<()>> Decoder for Observed<'_, F> {
    fn max_len(&self) -> usize {
        self.inner.max_len()
    }

    fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
        let logits = self.inner.prefill(prompt)?;
        (self.seen)(&logits)?;
        Ok(logits)
    }

    fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>> {
        let logits = self.inner.step(token)?;
        (self.seen)(&logits)?;
        Ok(logits)
    }
}

/// The reference's greedy continuation of `prompt` (`opts`: at most
/// `max_new_tokens`, its end-of-text ids), one row of `store` per new token:
/// row k holds the logits new token k was picked from.
pub fn reference_pass(
    decoder: &mut dyn Decoder,
    detok: &Detokenizer,
    prompt: &[i64],
    opts: &GenerateOptions,
    store: &mut LogitRows,
) -> anyhow::Result<Generation> {
    let mut observed = Observed { inner: decoder, seen: |logits: &[f32]| store.push(logits) };
    greedy(&mut observed, detok, prompt, opts, &mut |_| ControlFlow::Continue(()))
}

/// One prompt, one column against the reference's continuation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PromptFigures {
    /// Positions compared: the reference's new tokens (fewer only when the
    /// column's decoder holds fewer).
    pub positions: usize,
    /// Positions where the column's likeliest token was the reference's.
    pub top1_agreed: usize,
    /// The first position where it was not: where the column's own greedy
    /// continuation leaves the reference's (see [`compare_pass`]); `None`
    /// when it agreed at every position, so its continuation is the reference's.
    pub first_divergence: Option<usize>,
    /// KL(p_ref || p_col) summed over the positions, in nats.
    pub kl_sum: f64,
}

impl PromptFigures {
    /// The reference against itself: every position agreed, KL 0.
    pub fn of_reference(new_tokens: usize) -> PromptFigures {
        PromptFigures { positions: new_tokens, top1_agreed: new_tokens, first_divergence: None, kl_sum: 0.0 }
    }
}

/// Teacher-force `decoder` on `reference` (the reference's new ids for
/// `prompt`, whose logits rows are `store`'s rows from `first_row` on) and
/// compare each position's next-token distribution with the reference's.
///
/// The first divergence is read from the same pass: up to the first position
/// where the column's likeliest token differs from the reference's, its own
/// greedy loop would have fed it exactly the reference's tokens (the same
/// prefill, the same steps), so its free-running continuation leaves the
/// reference's exactly there, and follows it to the end (its end-of-text
/// included) when there is no such position. One pass gives both, where a
/// free-running generation would cost a second.
pub fn compare_pass(
    decoder: &mut dyn Decoder,
    prompt: &[i64],
    reference: &[i64],
    store: &mut LogitRows,
    first_row: usize,
) -> anyhow::Result<PromptFigures> {
    let mut position = 0;
    let mut kl_sum = 0.0;
    let mut first_divergence = None;
    let mut reference_row = Vec::new();
    let agreement = {
        let mut observed = Observed {
            inner: decoder,
            seen: |logits: &[f32]| -> anyhow::Result<()> {
                store.read(first_row + position, &mut reference_row)?;
                anyhow::ensure!(
                    logits.len() == reference_row.len(),
                    "{} logits where the reference has {}: not the same vocabulary",
                    logits.len(),
                    reference_row.len()
                );
                kl_sum += kl_divergence(&reference_row, logits);
                // As teacher_forced counts: a NaN logit (argmax's error) never agrees.
                if first_divergence.is_none() && argmax(logits).ok() != reference.get(position).copied() {
                    first_divergence = Some(position);
                }
                position += 1;
                Ok(())
            },
        };
        teacher_forced(&mut observed, prompt, reference)?
    };
    anyhow::ensure!(position == agreement.positions, "the decoder returned {position} rows for {} positions", agreement.positions);
    Ok(PromptFigures { positions: agreement.positions, top1_agreed: agreement.agreed, first_divergence, kl_sum })
}

/// A text's figures on one decoder.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextFigures {
    /// Windows the text was cut into.
    pub windows: usize,
    /// Tokens predicted: every token of a window but its first.
    pub predicted: usize,
    /// Their negative log-likelihoods, summed (nats).
    pub nll_sum: f64,
    /// Predicted tokens that were the decoder's likeliest.
    pub top1_correct: usize,
}

impl TextFigures {
    pub fn perplexity(&self) -> f64 {
        super::math::perplexity(self.nll_sum, self.predicted)
    }
}

/// The text `ids` cut into consecutive windows of `window` tokens (the last
/// one shorter; a last window of one token predicts nothing and is left out).
pub fn text_windows(ids: &[i64], window: usize) -> impl Iterator<Item = &[i64]> {
    ids.chunks(window.max(2)).filter(|w| w.len() >= 2)
}

/// The negative log-likelihood of each token of `ids` given the tokens before
/// it in its window ([`text_windows`]): each window prefilled with its first
/// token, then stepped through the rest ([`teacher_forced`] on the window's
/// own tokens), the logits after token k scoring token k + 1.
pub fn text_pass(decoder: &mut dyn Decoder, ids: &[i64], window: usize) -> anyhow::Result<TextFigures> {
    anyhow::ensure!(window >= 2, "a window of {window} tokens predicts nothing");
    anyhow::ensure!(
        window <= decoder.max_len(),
        "windows of {window} tokens, and this decoder holds at most {}",
        decoder.max_len()
    );
    let mut figures = TextFigures { windows: 0, predicted: 0, nll_sum: 0.0, top1_correct: 0 };
    for chunk in text_windows(ids, window) {
        let targets = &chunk[1..];
        let mut k = 0;
        let mut nll_sum = 0.0;
        let agreement = {
            let mut observed = Observed {
                inner: &mut *decoder,
                seen: |logits: &[f32]| -> anyhow::Result<()> {
                    nll_sum += negative_log_likelihood(logits, targets[k]);
                    k += 1;
                    Ok(())
                },
            };
            teacher_forced(&mut observed, &chunk[..1], targets)?
        };
        anyhow::ensure!(agreement.positions == targets.len(), "the decoder scored {} of a window's {} tokens", agreement.positions, targets.len());
        figures.windows += 1;
        figures.predicted += agreement.positions;
        figures.nll_sum += nll_sum;
        figures.top1_correct += agreement.agreed;
    }
    Ok(figures)
}
