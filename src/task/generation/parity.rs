//! How near one decoder's next-token logits stay to a reference's, beyond
//! "the same ids or not": a quantized program may pick another token early and
//! then follow its own continuation, which says nothing about the tokens after.
//!
//! - the cosine of two first-step (prefill) logit vectors (`task::cosine`);
//! - [`teacher_forced`]: the prompt, then the reference's tokens fed one by one
//!   (not the decoder's own picks), counting the positions where the decoder's
//!   likeliest token is the reference's: the top-1 agreement ([`Top1Agreement`]);
//! - [`divergence`]: where a continuation's ids leave the reference's, as the
//!   tokens come (the explorer) or once both ended ([`super::GenerationParity`]);
//! - [`logits_note`]: why `run --json` has no logits fields.
//!
//! `run` and the explorer only call these, and show what they return.

use super::argmax;
use crate::backend::{Backend, Decoder};
use crate::model::Task;

/// How a continuation's ids compare with the reference's for the same prompt,
/// as far as both have come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Divergence {
    /// This continuation is the reference.
    Reference,
    /// The same ids as far as both have gone (`compared` tokens); `complete` once both ended with the same ids.
    Same { compared: usize, complete: bool },
    /// The ids differ from token `index` on (an index into the new ids).
    At(usize),
    /// No tokens of the reference for this prompt (yet).
    Waiting,
}

/// Compare the new ids `mine` with `reference`'s (both for the same prompt),
/// each `done` once it ended: the first index where they differ, or where the
/// one that ended first stopped while the other went on.
pub fn divergence(mine: &[i64], mine_done: bool, reference: &[i64], reference_done: bool) -> Divergence {
    let compared = mine.len().min(reference.len());
    if let Some(i) = mine.iter().zip(reference).position(|(a, b)| a != b) {
        return Divergence::At(i);
    }
    // One ended before the other: they differ where the shorter stopped.
    if (mine_done && reference.len() > mine.len()) || (reference_done && mine.len() > reference.len()) {
        return Divergence::At(compared);
    }
    if compared == 0 {
        return Divergence::Waiting;
    }
    Divergence::Same { compared, complete: mine_done && reference_done && mine.len() == reference.len() }
}

/// The top-1 agreement known without a pass: a continuation with the
/// reference's very ids agreed at every position (the greedy loop fed its
/// decoder exactly those and took its likeliest each time); `None` when a
/// [`teacher_forced`] pass must measure it.
pub fn known_without_a_pass(generated: &[i64], reference: &[i64]) -> Option<Top1Agreement> {
    (generated == reference).then_some(Top1Agreement { agreed: reference.len(), positions: reference.len() })
}

/// [`top1_agreement`] of `backend` (called `name` in errors), its decoder
/// asked of it: `run` calls it while the backend is loaded.
pub fn top1_agreement_of(backend: &mut dyn Backend, name: &str, prompt: &[i64], generated: &[i64], reference: &[i64]) -> anyhow::Result<Top1Agreement> {
    let decoder = super::decoder_of(backend, name)?;
    top1_agreement(decoder, prompt, generated, reference)
}

/// [`teacher_forced_until`] on `backend` (called `name` in errors), its
/// decoder asked of it: the explorer's worker calls it.
pub fn teacher_forced_on(
    backend: &mut dyn Backend,
    name: &str,
    prompt: &[i64],
    reference: &[i64],
    stop: &mut dyn FnMut() -> bool,
) -> anyhow::Result<Option<Top1Agreement>> {
    let decoder = super::decoder_of(backend, name)?;
    teacher_forced_until(decoder, prompt, reference, stop)
}

/// `run`'s note on a text-generation report whose logits fields
/// (`parity.first_logits_cosine`, `parity.top1_agreement`) are null: the
/// reference (`reference`, quantized with `quantization`) measures nothing
/// against a float32 one, or `first_failed`, the reference run first, failed
/// so no backend was teacher-forced. `None` for the other tasks.
pub fn logits_note(task: Task, reference: &str, quantization: Option<&str>, first_failed: Option<&str>) -> Option<String> {
    if !task.generates() {
        return None;
    }
    match quantization {
        Some(scheme) => Some(format!(
            "the reference {reference} is quantized ({scheme}): parity.first_logits_cosine and parity.top1_agreement are measured \
             against a float32 reference only; add eager to --backends, or name a float32 program first"
        )),
        None => first_failed.map(|name| {
            format!("no parity.top1_agreement: {name}, the reference run first, failed, so no backend was teacher-forced on its ids")
        }),
    }
}

/// Positions where a decoder's likeliest next token was the reference's, fed
/// the reference's sequence (teacher-forced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Top1Agreement {
    pub agreed: usize,
    /// Positions compared: the reference's new tokens (fewer when the decoder holds fewer).
    pub positions: usize,
}

impl Top1Agreement {
    /// `agreed / positions`; `None` with no position compared.
    pub fn fraction(&self) -> Option<f64> {
        (self.positions > 0).then(|| self.agreed as f64 / self.positions as f64)
    }
}

/// Prefill `prompt`, then step with each of `reference`'s tokens in turn (not
/// the decoder's own picks), and count the positions where the decoder's
/// likeliest next token is the reference's: position 0 is the prefill's,
/// position k the step after `reference[k - 1]`. One pass of the decoder,
/// `reference.len() - 1` steps; positions past the decoder's maximum length are
/// left out (and not counted).
pub fn teacher_forced(decoder: &mut dyn Decoder, prompt: &[i64], reference: &[i64]) -> anyhow::Result<Top1Agreement> {
    let agreement = teacher_forced_until(decoder, prompt, reference, &mut || false)?;
    Ok(agreement.expect("never stopped"))
}

/// [`teacher_forced`], asking `stop` before each step: `None` once it says
/// yes (the explorer's worker stops a pass for a text no longer shown).
pub fn teacher_forced_until(
    decoder: &mut dyn Decoder,
    prompt: &[i64],
    reference: &[i64],
    stop: &mut dyn FnMut() -> bool,
) -> anyhow::Result<Option<Top1Agreement>> {
    anyhow::ensure!(!prompt.is_empty(), "the prompt is empty: there is nothing to continue");
    let room = decoder.max_len().saturating_sub(prompt.len());
    let positions = reference.len().min(room);
    let mut agreement = Top1Agreement { agreed: 0, positions };
    if positions == 0 {
        return Ok(Some(agreement));
    }
    let mut logits = decoder.prefill(prompt)?;
    for (k, &token) in reference[..positions].iter().enumerate() {
        // A NaN logit (argmax's error) never agrees.
        agreement.agreed += usize::from(argmax(&logits).ok() == Some(token));
        if k + 1 < positions {
            if stop() {
                return Ok(None);
            }
            logits = decoder.step(token)?;
        }
    }
    Ok(Some(agreement))
}

/// The top-1 agreement of a decoder whose own greedy continuation of `prompt`
/// was `generated`, against `reference`: when the two are the same ids the
/// greedy loop already fed the decoder exactly the reference's tokens and took
/// its likeliest each time, so every position agreed and no pass is run;
/// otherwise one [`teacher_forced`] pass.
pub fn top1_agreement(decoder: &mut dyn Decoder, prompt: &[i64], generated: &[i64], reference: &[i64]) -> anyhow::Result<Top1Agreement> {
    let room = decoder.max_len().saturating_sub(prompt.len());
    match known_without_a_pass(generated, reference) {
        Some(agreement) if reference.len() <= room => Ok(agreement),
        _ => teacher_forced(decoder, prompt, reference),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FAKE decoder: its next token is a function of the last token fed
    /// (`next[last]`), one-hot logits over `vocab`; it records every call.
    struct Chain {
        next: Vec<i64>,
        max_len: usize,
        calls: Vec<String>,
    }

    impl Chain {
        fn logits(&self, last: i64) -> Vec<f32> {
            let mut l = vec![0.0; self.next.len()];
            l[self.next[last as usize] as usize] = 1.0;
            l
        }
    }

    impl Decoder for Chain {
        fn max_len(&self) -> usize {
            self.max_len
        }
        fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
            self.calls.push(format!("prefill {prompt:?}"));
            Ok(self.logits(*prompt.last().unwrap()))
        }
        fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>> {
            self.calls.push(format!("step {token}"));
            Ok(self.logits(token))
        }
    }

    #[test]
    fn teacher_forcing_feeds_the_references_tokens_not_the_decoders_own() {
        // The decoder continues 1 -> 2 -> 3 -> 4 -> 5; the reference is 2, 9, 4, 5:
        // position 1 disagrees (the decoder says 3), and fed 9 it says 9 -> 4 agrees again.
        let mut next: Vec<i64> = (0..10).map(|i| (i + 1) % 10).collect();
        next[9] = 4;
        let mut d = Chain { next, max_len: 64, calls: Vec::new() };
        let a = teacher_forced(&mut d, &[0, 1], &[2, 9, 4, 5]).unwrap();
        assert_eq!(a, Top1Agreement { agreed: 3, positions: 4 });
        assert_eq!(a.fraction(), Some(0.75));
        assert_eq!(d.calls, ["prefill [0, 1]", "step 2", "step 9", "step 4"], "the reference's tokens, the last one never fed");
    }

    #[test]
    fn the_same_ids_need_no_pass_and_a_divergence_does_not_hide_the_rest() {
        let mut d = Chain { next: (0..10).map(|i| (i + 1) % 10).collect(), max_len: 64, calls: Vec::new() };
        let same = top1_agreement(&mut d, &[0], &[1, 2, 3], &[1, 2, 3]).unwrap();
        assert_eq!((same, d.calls.len()), (Top1Agreement { agreed: 3, positions: 3 }, 0));
        // Free-running, the decoder left the reference at its first token and never met it
        // again; teacher-forced it agrees everywhere but there.
        let forced = top1_agreement(&mut d, &[0], &[1, 2, 3, 4], &[5, 6, 7, 8]).unwrap();
        assert_eq!(forced, Top1Agreement { agreed: 3, positions: 4 });
        assert_eq!(d.calls.len(), 4);
    }

    #[test]
    fn positions_past_the_decoders_length_are_left_out_and_nan_never_agrees() {
        let mut d = Chain { next: (0..10).map(|i| (i + 1) % 10).collect(), max_len: 4, calls: Vec::new() };
        // Prompt of 2 in a decoder of 4: room for 2 of the reference's 3 tokens, even if the ids were the same.
        assert_eq!(top1_agreement(&mut d, &[0, 1], &[2, 3, 4], &[2, 3, 4]).unwrap(), Top1Agreement { agreed: 2, positions: 2 });
        assert_eq!(Top1Agreement { agreed: 0, positions: 0 }.fraction(), None);
        assert_eq!(argmax(&[0.0, f32::NAN, 1.0]).ok(), None);
        assert_eq!(argmax(&[1.0, 3.0, 3.0]).ok(), Some(1), "the first on ties");
        assert!(teacher_forced(&mut d, &[], &[1]).is_err());
    }

    #[test]
    fn divergence_as_the_tokens_come_and_once_both_ended() {
        assert_eq!(divergence(&[1, 2], false, &[], false), Divergence::Waiting);
        assert_eq!(divergence(&[1, 2], false, &[1, 2, 3], false), Divergence::Same { compared: 2, complete: false });
        assert_eq!(divergence(&[1, 2, 3], true, &[1, 2, 3], true), Divergence::Same { compared: 3, complete: true });
        assert_eq!(divergence(&[1, 9, 3], false, &[1, 2, 3], true), Divergence::At(1));
        assert_eq!(divergence(&[1, 2], true, &[1, 2, 3], false), Divergence::At(2));
        assert_eq!(divergence(&[1, 2, 3, 4], false, &[1, 2, 3], true), Divergence::At(3));
        assert_eq!(known_without_a_pass(&[4, 5], &[4, 5]), Some(Top1Agreement { agreed: 2, positions: 2 }));
        assert_eq!(known_without_a_pass(&[4, 5], &[4, 6]), None);
    }

    #[test]
    fn the_note_says_why_the_logits_fields_are_null() {
        let quantized = logits_note(Task::TextGeneration, "xnnpack-8da4w", Some("8da4w"), None).unwrap();
        assert!(quantized.contains("xnnpack-8da4w is quantized (8da4w)") && quantized.contains("float32"), "{quantized}");
        let failed = logits_note(Task::TextGeneration, "portable", None, Some("eager")).unwrap();
        assert!(failed.contains("eager, the reference run first, failed"), "{failed}");
        assert_eq!(logits_note(Task::TextGeneration, "eager", None, None), None);
        assert_eq!(logits_note(Task::FillMask, "xnnpack-8da4w", Some("8da4w"), None), None, "only text-generation has logits fields");
    }

    #[test]
    fn a_pass_stops_between_steps_when_asked() {
        let mut d = Chain { next: (0..10).map(|i| (i + 1) % 10).collect(), max_len: 64, calls: Vec::new() };
        let mut asked = 0;
        let stopped = teacher_forced_until(&mut d, &[0], &[1, 2, 3, 4], &mut || {
            asked += 1;
            asked == 2
        });
        assert_eq!(stopped.unwrap(), None);
        assert_eq!(d.calls, ["prefill [0]", "step 1"], "no step after the stop");
    }
}
