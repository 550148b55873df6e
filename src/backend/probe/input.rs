//! The input runlens' probe runs a program on. Pure: it reads only what
//! runlens' reader found in the file (also compiled into the reader's fuzz target).

use crate::pte::PlanCoverage;

/// The input the probe runs: `[CLS] this is a sample sentence . [SEP]` (BERT
/// vocabulary ids), at the program's fixed length (padded, masked) or at 8
/// tokens, within its largest accepted length. The one place that decides
/// what a "representative input" of a program is.
pub fn representative_input(plan: Option<&PlanCoverage>) -> (Vec<i64>, Vec<i64>) {
    // A size read from a damaged file may be anything: never allocate beyond
    // this (the shim refuses more; ExecuTorch then reports the wrong length).
    const MAX_LEN: usize = 1 << 16;
    const IDS: [i64; 8] = [101, 2023, 2003, 1037, 7099, 6251, 1012, 102];
    let first = plan.and_then(|p| p.input_shapes.first());
    let len = match (plan.and_then(PlanCoverage::fixed_seq_len), first.and_then(|s| s.sizes.last())) {
        (Some(n), _) => n,
        (None, Some(&max)) if max >= 2 => usize::try_from(max).unwrap_or(IDS.len()).min(IDS.len()),
        _ => IDS.len(),
    }
    .clamp(1, MAX_LEN);
    let mut ids: Vec<i64> = IDS.iter().copied().take(len).collect();
    let mut mask = vec![1i64; ids.len()];
    if let Some(last) = ids.last_mut() {
        *last = 102;
    }
    ids.resize(len, 0);
    mask.resize(len, 0);
    (ids, mask)
}

/// The probe's inputs as `(data, sizes)` per input of `forward`, for every
/// convention runlens drives: `input_ids` (and `attention_mask`) `[1, S]` from
/// [`representative_input`], or for a decoder with its KV cache inside
/// (a second input of rank 1) `input_ids [1, S]` and `cache_position [S] = 0..S`,
/// and `key_positions [S] = 0..S` when it takes a third.
/// Ids are kept below the output's last dimension when it is smaller than
/// them (a small vocabulary: the tiny GPT-2 has 512 tokens).
pub fn probe_inputs(plan: Option<&PlanCoverage>) -> Vec<(Vec<i64>, Vec<i64>)> {
    let (mut ids, mask) = representative_input(plan);
    let vocab = plan
        .and_then(|p| p.output_shapes.first())
        .filter(|s| (2..=3).contains(&s.sizes.len()))
        .and_then(|s| s.sizes.last().copied())
        .filter(|&v| v >= 1);
    if let Some(v) = vocab {
        for id in &mut ids {
            *id %= v;
        }
    }
    let len = ids.len() as i64;
    let second = plan.and_then(|p| p.input_shapes.get(1));
    let inputs = plan.map_or(2, |p| p.inputs);
    if second.is_some_and(|s| s.sizes.len() == 1) {
        return kv_cache_inputs(ids, 0, inputs >= 3);
    }
    if inputs >= 2 {
        vec![(ids, vec![1, len]), (mask, vec![1, len])]
    } else {
        vec![(ids, vec![1, len])]
    }
}

/// A KV-cache program's inputs as `(data, sizes)`: `ids` at positions
/// `start..start + n` (`input_ids [1, n]`, `cache_position [n]`), and when it
/// takes `key_positions`, `0..F` (`[F]`, F = start + n: the filled length once
/// these are written, what its attention reads). The one place that lays them out
/// (the decoder driver, the probe).
pub fn kv_cache_inputs(ids: Vec<i64>, start: i64, key_positions: bool) -> Vec<(Vec<i64>, Vec<i64>)> {
    let n = ids.len() as i64;
    let filled = start + n;
    let mut inputs = vec![(ids, vec![1, n]), ((start..filled).collect(), vec![n])];
    if key_positions {
        inputs.push(((0..filled).collect(), vec![filled]));
    }
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pte::InputShape;

    fn plan(sizes: Vec<i64>, dynamic: bool) -> PlanCoverage {
        PlanCoverage {
            inputs: 2,
            outputs: 1,
            input_shapes: vec![InputShape { sizes, dynamic, dtype: "long".into() }],
            ..PlanCoverage::empty("forward")
        }
    }

    #[test]
    fn representative_input_fits_the_program() {
        let (ids, mask) = representative_input(Some(&plan(vec![1, 128], true)));
        assert_eq!(ids, vec![101, 2023, 2003, 1037, 7099, 6251, 1012, 102]);
        assert_eq!(mask, vec![1; 8]);
        let (ids, mask) = representative_input(Some(&plan(vec![1, 16], false)));
        assert_eq!(ids.len(), 16);
        assert_eq!(&ids[6..9], &[1012, 102, 0]);
        assert_eq!(mask.iter().sum::<i64>(), 8);
        let (ids, mask) = representative_input(Some(&plan(vec![1, 4], true)));
        assert_eq!((ids, mask), (vec![101, 2023, 2003, 102], vec![1; 4]));
        assert_eq!(representative_input(None).0.len(), 8);
        assert_eq!(representative_input(Some(&plan(vec![1, i64::MAX], false))).0.len(), 1 << 16);
        assert_eq!(representative_input(Some(&plan(vec![1, 0], false))).0, vec![102]);
    }

    #[test]
    fn a_kv_cache_decoder_gets_cache_positions_and_ids_inside_its_vocabulary() {
        let mut p = plan(vec![1, 64], true);
        p.input_shapes.push(InputShape { sizes: vec![64], dynamic: true, dtype: "long".into() });
        p.output_shapes.push(InputShape { sizes: vec![1, 512], dynamic: false, dtype: "float".into() });
        let inputs = probe_inputs(Some(&p));
        assert_eq!(inputs.len(), 2);
        assert_eq!(inputs[0].1, vec![1, 8]);
        assert!(inputs[0].0.iter().all(|&id| (0..512).contains(&id)));
        assert_eq!(inputs[1], ((0..8).collect(), vec![8]));
        // One whose attention reads the filled part gets key_positions 0..S as well.
        p.inputs = 3;
        p.input_shapes.push(InputShape { sizes: vec![64], dynamic: true, dtype: "long".into() });
        let inputs = probe_inputs(Some(&p));
        assert_eq!(inputs.len(), 3);
        assert_eq!(inputs[2], ((0..8).collect(), vec![8]));
        // A later chunk: its positions, and key_positions up to the last of them.
        let later = kv_cache_inputs(vec![7, 8], 3, true);
        assert_eq!(later, vec![(vec![7, 8], vec![1, 2]), (vec![3, 4], vec![2]), ((0..5).collect(), vec![5])]);
        assert_eq!(kv_cache_inputs(vec![7], 4, false).len(), 2);
        // An encoder keeps its ids and its mask.
        let mut p = plan(vec![1, 128], true);
        p.output_shapes.push(InputShape { sizes: vec![1, 8, 30522], dynamic: true, dtype: "float".into() });
        let inputs = probe_inputs(Some(&p));
        assert_eq!(inputs[0].0, representative_input(Some(&p)).0);
        assert_eq!(inputs[1], (vec![1; 8], vec![1, 8]));
    }
}
