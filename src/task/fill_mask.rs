//! fill-mask: the likeliest tokens at every mask of the text.
//!
//! A program of this task returns logits per position `[1, S, V]` (runlens'
//! export) or the logits of the one mask `[1, V]` (the course's wrapper finds
//! the mask with `argmax(input_ids == mask_id)`, i.e. the first one).

use serde::{Deserialize, Serialize};

use super::{max_abs_diff, max_or_nan, softmax, OutputTensor, TaskContext};
use crate::model::Encoded;

/// One predicted token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenProb {
    pub id: i64,
    pub token: String,
    pub prob: f64,
}

/// The predictions at one mask.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MaskPrediction {
    /// Token position of the mask in the input (0 = the first token, `[CLS]`).
    pub position: usize,
    /// The `top_k` likeliest tokens, most likely first.
    pub top: Vec<TokenProb>,
    /// The logits over the whole vocabulary (for parity; not in the JSON).
    #[serde(skip)]
    pub logits: Vec<f32>,
}

/// Every mask of one input.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FillMask {
    pub masks: Vec<MaskPrediction>,
    /// Masks of the input this program's output does not cover (a `[1, V]`
    /// program predicts only the first mask).
    pub uncovered: usize,
}

/// How two fill-mask outputs compare.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FillMaskParity {
    /// The same most likely token at every mask.
    pub same_top1: bool,
    /// Mean share of the top-k tokens both outputs have, over the masks (0..=1).
    pub topk_overlap: f64,
    /// Largest difference of the logits at the masks.
    pub max_abs_diff: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum FillMaskError {
    #[error("the text has no mask: type {0} where a word should be predicted")]
    NoMask(String),
    #[error("the mask was cut off: the text is longer than the model's maximum and was truncated before it; shorten the text")]
    MaskCut,
    #[error("the tokenizer has no mask token, so this model cannot fill masks")]
    NoMaskToken,
    #[error("unexpected output shape")]
    Shape,
}

/// The positions of the mask token among the real tokens of `input`.
pub fn mask_positions(input: &Encoded, mask_id: i64) -> Vec<usize> {
    input.ids.iter().zip(&input.attention_mask).enumerate().filter(|(_, (&id, &m))| id == mask_id && m != 0).map(|(i, _)| i).collect()
}

/// Check that `input` has a mask this task can predict (before running anything).
pub fn check_input(ctx: &TaskContext, input: &Encoded) -> Result<Vec<usize>, FillMaskError> {
    let (token, id) = ctx.mask.as_ref().ok_or(FillMaskError::NoMaskToken)?;
    let positions = mask_positions(input, *id);
    if positions.is_empty() {
        let typed = input.text.matches(token.as_str()).count() + input.text.matches("[MASK]").count();
        return Err(if input.truncated && typed > 0 { FillMaskError::MaskCut } else { FillMaskError::NoMask(token.clone()) });
    }
    Ok(positions)
}

pub(super) fn interpret(ctx: &TaskContext, input: &Encoded, out: OutputTensor) -> Result<FillMask, FillMaskError> {
    let positions = check_input(ctx, input)?;
    let (rows, vocab): (Vec<(usize, usize)>, usize) = match out.shape.as_slice() {
        // Per position: row p of the (possibly padded) sequence.
        [1, s, v] if *v > 0 && positions.iter().all(|&p| p < *s) => (positions.iter().map(|&p| (p, p)).collect(), *v),
        // The course's wrapper: the logits of the first mask only.
        [1, v] if *v > 0 => (vec![(positions[0], 0)], *v),
        _ => return Err(FillMaskError::Shape),
    };
    if out.data.len() != out.shape.iter().product::<usize>() {
        return Err(FillMaskError::Shape);
    }
    let masks = rows
        .iter()
        .map(|&(position, row)| {
            let logits = out.data[row * vocab..(row + 1) * vocab].to_vec();
            MaskPrediction { position, top: top_k(ctx, &logits), logits }
        })
        .collect::<Vec<_>>();
    Ok(FillMask { uncovered: positions.len() - masks.len(), masks })
}

/// The `ctx.top_k` likeliest tokens of `logits`, most likely first.
pub fn top_k(ctx: &TaskContext, logits: &[f32]) -> Vec<TokenProb> {
    let probs = softmax(logits);
    let mut order: Vec<usize> = (0..probs.len()).collect();
    let k = ctx.top_k.clamp(1, probs.len());
    order.select_nth_unstable_by(k - 1, |&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    order.truncate(k);
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    order
        .into_iter()
        .map(|i| TokenProb { id: i as i64, token: ctx.vocab.get(i).cloned().unwrap_or_else(|| format!("#{i}")), prob: probs[i] })
        .collect()
}

impl FillMask {
    /// Compare with the reference's predictions; `None` unless both cover the same masks.
    pub fn parity(&self, reference: &FillMask) -> Option<FillMaskParity> {
        if self.masks.len() != reference.masks.len() || self.masks.is_empty() {
            return None;
        }
        let mut same_top1 = true;
        let mut overlap = 0.0;
        let mut diff: f64 = 0.0;
        for (a, b) in self.masks.iter().zip(&reference.masks) {
            if a.position != b.position {
                return None;
            }
            same_top1 &= a.top.first().map(|t| t.id) == b.top.first().map(|t| t.id);
            let k = a.top.len().max(b.top.len()).max(1);
            let shared = a.top.iter().filter(|t| b.top.iter().any(|u| u.id == t.id)).count();
            overlap += shared as f64 / k as f64;
            diff = max_or_nan(diff, max_abs_diff(&a.logits, &b.logits)?);
        }
        Some(FillMaskParity { same_top1, topk_overlap: overlap / self.masks.len() as f64, max_abs_diff: diff })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{Task, TaskContext};
    use std::sync::Arc;

    fn ctx() -> TaskContext {
        let vocab: Vec<String> = ["[PAD]", "a", "b", "c", "[MASK]"].iter().map(|s| s.to_string()).collect();
        TaskContext { task: Task::FillMask, mask: Some(("[MASK]".into(), 4)), labels: vec![], vocab: Arc::new(vocab), top_k: 2, generation: None }
    }

    fn input(ids: &[i64]) -> Encoded {
        let mut e = Encoded::from_ids(ids);
        e.text = "a [MASK] b".into();
        e
    }

    #[test]
    fn predicts_every_mask_from_per_position_logits() {
        let inp = input(&[1, 4, 2, 4]);
        // [1, 4, 5]: position 1 likes "c" (3), position 3 likes "a" (1).
        let mut data = vec![0.0f32; 20];
        data[5 + 3] = 5.0;
        data[5 + 2] = 4.0;
        data[15 + 1] = 6.0;
        let out = interpret(&ctx(), &inp, OutputTensor::new(vec![1, 4, 5], data)).unwrap();
        assert_eq!(out.masks.len(), 2);
        assert_eq!((out.masks[0].position, out.masks[0].top[0].token.as_str(), out.masks[0].top[1].id), (1, "c", 2));
        assert_eq!((out.masks[1].position, out.masks[1].top[0].id), (3, 1));
        assert!(out.masks[0].top[0].prob > 0.5 && out.masks[0].top.len() == 2);
        assert_eq!(out.uncovered, 0);
        // The same through a course-style [1, V] program: the first mask only.
        let one = interpret(&ctx(), &inp, OutputTensor::new(vec![1, 5], vec![0.0, 0.0, 0.0, 5.0, 0.0])).unwrap();
        assert_eq!((one.masks.len(), one.uncovered, one.masks[0].position), (1, 1, 1));
        assert!(one.parity(&out).is_none(), "different masks covered: not comparable");
        let p = out.parity(&out).unwrap();
        assert!(p.same_top1 && p.topk_overlap == 1.0 && p.max_abs_diff == 0.0);
    }

    #[test]
    fn parity_of_two_different_outputs_is_what_a_hand_count_gives() {
        // Two masks (positions 1 and 3) over the vocabulary [PAD] a b c [MASK], top-2.
        let inp = input(&[1, 4, 2, 4]);
        let (mut mine, mut theirs) = (vec![0.0f32; 20], vec![0.0f32; 20]);
        // Mask at 1: mine ranks c, b; theirs c, a. Same top-1, one of two shared.
        // Logit differences there: a 4, b 4, c 0.5.
        (mine[5 + 3], mine[5 + 2]) = (5.0, 4.0);
        (theirs[5 + 3], theirs[5 + 1]) = (5.5, 4.0);
        // Mask at 3: mine ranks a, b; theirs b, a. Top-1 differs, both shared. Differences 3, 3.
        (mine[15 + 1], mine[15 + 2]) = (6.0, 3.0);
        (theirs[15 + 2], theirs[15 + 1]) = (6.0, 3.0);
        let mine = interpret(&ctx(), &inp, OutputTensor::new(vec![1, 4, 5], mine)).unwrap();
        let theirs = interpret(&ctx(), &inp, OutputTensor::new(vec![1, 4, 5], theirs)).unwrap();
        // Softmax by hand: at mask 1 mine has e^5 / (e^5 + e^4 + 3 e^0) on c.
        let e = std::f64::consts::E;
        let c = e.powi(5) / (e.powi(5) + e.powi(4) + 3.0);
        assert!((mine.masks[0].top[0].prob - c).abs() < 1e-12, "{:?} vs {c}", mine.masks[0].top);
        assert!((mine.masks[0].top[1].prob - e.powi(4) / (e.powi(5) + e.powi(4) + 3.0)).abs() < 1e-12);
        for p in [mine.parity(&theirs).unwrap(), theirs.parity(&mine).unwrap()] {
            assert!(!p.same_top1, "mask 3's top-1 differs: {p:?}");
            assert_eq!(p.topk_overlap, (0.5 + 1.0) / 2.0, "{p:?}");
            assert_eq!(p.max_abs_diff, 4.0, "{p:?}");
        }
        // Only mask 1 (the same top-1): agrees.
        let first = |f: &FillMask| FillMask { masks: f.masks[..1].to_vec(), uncovered: 1 };
        let p = first(&mine).parity(&first(&theirs)).unwrap();
        assert!(p.same_top1 && p.topk_overlap == 0.5 && p.max_abs_diff == 4.0, "{p:?}");
        // The same number of masks at other positions: not comparable.
        let mut moved = first(&theirs);
        moved.masks[0].position = 3;
        assert!(first(&mine).parity(&moved).is_none());
    }

    #[test]
    fn text_without_a_mask_or_with_the_mask_cut_off_is_a_clear_error() {
        let mut inp = input(&[1, 2, 3]);
        inp.text = "a b c".into();
        let err = interpret(&ctx(), &inp, OutputTensor::new(vec![1, 3, 5], vec![0.0; 15])).unwrap_err();
        assert!(err.to_string().contains("type [MASK]"), "{err}");
        inp.text = "a b c ... [MASK]".into();
        inp.truncated = true;
        assert!(matches!(check_input(&ctx(), &inp), Err(FillMaskError::MaskCut)));
        let bad = interpret(&ctx(), &input(&[1, 4]), OutputTensor::new(vec![1, 2, 5, 1], vec![0.0; 10])).unwrap_err();
        assert!(matches!(bad, FillMaskError::Shape));
    }
}
