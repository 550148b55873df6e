//! A column's generation as it grows (text-generation): the tokens that have
//! come in for one input, and what they measure. Only the tokens of the text
//! now in the input line are ever kept for drawing; [`compare`] asks the task
//! ([`crate::task::generation::parity::divergence`]) where a column's ids first
//! leave the reference column's.

use std::sync::Arc;
use std::time::Duration;

use super::{App, Column, Output, Top1State};
use crate::schedule::inbox::TeacherJob;
use crate::schedule::{Job, Request};
use crate::task::TaskOutput;

pub use crate::task::generation::Divergence;
use crate::task::generation::{Stop, TokenStep};

/// The tokens a column has written so far for input `generation`.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveGeneration {
    /// The input generation (the app's text counter) these tokens are for.
    pub generation: u64,
    pub tokens: Vec<TokenStep>,
    /// Why it ended; `None` while tokens are still coming.
    pub stop: Option<Stop>,
}

impl LiveGeneration {
    pub fn new(generation: u64) -> LiveGeneration {
        LiveGeneration { generation, tokens: Vec::new(), stop: None }
    }

    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.tokens.iter().map(|t| t.id)
    }

    /// Time to the first token: the prefill and the first argmax.
    pub fn ttft(&self) -> Option<Duration> {
        self.tokens.first().map(|t| t.latency)
    }

    /// Decode tokens per second: the tokens after the first over their time.
    pub fn decode_tokens_per_s(&self) -> Option<f64> {
        let decode = self.tokens.get(1..)?;
        let secs: f64 = decode.iter().map(|t| t.latency.as_secs_f64()).sum();
        (!decode.is_empty() && secs > 0.0).then(|| decode.len() as f64 / secs)
    }

    /// The text written so far.
    pub fn text(&self) -> String {
        self.tokens.iter().map(|t| t.text.as_str()).collect()
    }

    pub fn is_done(&self) -> bool {
        self.stop.is_some()
    }
}

/// Compare `mine` with `reference` (both for the same input), as far as their tokens have come.
pub fn compare(mine: &LiveGeneration, reference: &LiveGeneration) -> Divergence {
    let (ids, reference_ids): (Vec<i64>, Vec<i64>) = (mine.ids().collect(), reference.ids().collect());
    crate::task::generation::parity::divergence(&ids, mine.is_done(), &reference_ids, reference.is_done())
}

impl App {
    /// The tokens column `index` has written for the text now in the input
    /// line; never those of an earlier text.
    pub fn live(&self, index: usize) -> Option<&LiveGeneration> {
        self.columns[index].live.as_ref().filter(|l| l.generation == self.generation)
    }

    /// Where column `index`'s tokens leave the reference column's, for the current text.
    pub fn divergence(&self, index: usize) -> Divergence {
        let Some(reference) = self.reference() else { return Divergence::Waiting };
        if index == reference {
            return Divergence::Reference;
        }
        match (self.live(index), self.live(reference)) {
            (Some(mine), Some(theirs)) => compare(mine, theirs),
            _ => Divergence::Waiting,
        }
    }

    /// text-generation: once the reference column and another have finished the
    /// current text, the other's top-1 agreement teacher-forced on the
    /// reference's new ids: known at once when its ids are the same (the greedy
    /// loop fed it exactly those), else one pass queued on its worker. Asked
    /// once per column and text.
    pub(super) fn ask_top1(&mut self) {
        let Some(r) = self.reference() else { return };
        let current = self.generation;
        let finished = |c: &Column| match &c.output {
            Some(Output { generation, output: TaskOutput::Generation(g), input, .. }) if *generation == current && g.finished() => {
                Some((g.ids.clone(), input.clone()))
            }
            _ => None,
        };
        let Some((reference, _)) = finished(&self.columns[r]) else { return };
        let reference = Arc::new(reference);
        for i in (0..self.columns.len()).filter(|&i| i != r) {
            if self.columns[i].top1.as_ref().is_some_and(|(g, _)| *g == current) {
                continue;
            }
            let Some((ids, input)) = finished(&self.columns[i]) else { continue };
            let state = match crate::task::generation::parity::known_without_a_pass(&ids, &reference) {
                Some(agreement) => Top1State::Done(agreement),
                None => {
                    let work = TeacherJob { job: Job { generation: current, input }, reference: reference.clone() };
                    self.requests.push(Request::TeacherForce(self.columns[i].kind.clone(), work));
                    Top1State::Pending
                }
            };
            self.columns[i].top1 = Some((current, state));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(ids: &[i64], done: bool) -> LiveGeneration {
        let tokens = ids
            .iter()
            .enumerate()
            .map(|(index, &id)| TokenStep { index, id, text: format!(" t{id}"), latency: Duration::from_millis(if index == 0 { 40 } else { 10 }) })
            .collect();
        LiveGeneration { generation: 1, tokens, stop: done.then_some(Stop::MaxNewTokens) }
    }

    #[test]
    fn measures_ttft_and_decode_rate() {
        let g = live(&[5, 6, 7], false);
        assert_eq!(g.ttft(), Some(Duration::from_millis(40)));
        assert!((g.decode_tokens_per_s().unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(g.text(), " t5 t6 t7");
        assert_eq!(live(&[5], false).decode_tokens_per_s(), None);
        assert_eq!(live(&[], false).ttft(), None);
    }

    #[test]
    fn finds_the_first_divergence_as_tokens_come() {
        assert_eq!(compare(&live(&[1, 2], false), &live(&[], false)), Divergence::Waiting);
        assert_eq!(compare(&live(&[1, 2], false), &live(&[1, 2, 3], false)), Divergence::Same { compared: 2, complete: false });
        assert_eq!(compare(&live(&[1, 2, 3], true), &live(&[1, 2, 3], true)), Divergence::Same { compared: 3, complete: true });
        assert_eq!(compare(&live(&[1, 9, 3], false), &live(&[1, 2, 3], true)), Divergence::At(1));
        assert_eq!(compare(&live(&[1, 2], true), &live(&[1, 2, 3], false)), Divergence::At(2), "stopped early (end of text)");
        assert_eq!(compare(&live(&[1, 2, 3, 4], false), &live(&[1, 2, 3], true)), Divergence::At(3), "went on past the reference's end");
    }
}
