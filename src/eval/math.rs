//! The numbers `runlens eval` reports, on logits as a decoder returns them
//! (float32, `[V]`): log-softmax through a log-sum-exp in f64, the KL
//! divergence of two next-token distributions, a token's negative
//! log-likelihood, perplexity, and the median first divergence.

/// `log Σ exp(x_i)` in f64, shifted by the largest logit so that nothing
/// overflows. NaN when any logit is NaN; `+inf` when one is `+inf`.
pub fn log_sum_exp(logits: &[f32]) -> f64 {
    let max = logits.iter().fold(f64::NEG_INFINITY, |m, &x| if (x as f64) > m || x.is_nan() { x as f64 } else { m });
    if max.is_nan() || max.is_infinite() {
        return max;
    }
    let sum: f64 = logits.iter().map(|&x| (x as f64 - max).exp()).sum();
    max + sum.ln()
}

/// KL(p || q) = Σ p_i (log p_i − log q_i) in nats, where p = softmax(`p_logits`)
/// (the reference's) and q = softmax(`q_logits`) (the column's), each
/// normalised in f64 by its own [`log_sum_exp`]. Identical logits give exactly
/// 0. NaN when either has a NaN, or the two have different lengths.
pub fn kl_divergence(p_logits: &[f32], q_logits: &[f32]) -> f64 {
    if p_logits.len() != q_logits.len() || p_logits.is_empty() {
        return f64::NAN;
    }
    let (lse_p, lse_q) = (log_sum_exp(p_logits), log_sum_exp(q_logits));
    let mut kl = 0.0;
    for (&a, &b) in p_logits.iter().zip(q_logits) {
        let log_p = a as f64 - lse_p;
        let p = log_p.exp();
        // A token the reference gives no weight adds nothing, whatever q says of it
        // (a NaN p is not 0: it makes the sum NaN).
        if p != 0.0 {
            kl += p * (log_p - (b as f64 - lse_q));
        }
    }
    kl
}

/// −log softmax(`logits`)[`target`], in nats (f64): the negative
/// log-likelihood of `target` as the next token. NaN for a target outside the
/// vocabulary or a NaN logit.
pub fn negative_log_likelihood(logits: &[f32], target: i64) -> f64 {
    match usize::try_from(target).ok().and_then(|t| logits.get(t)) {
        Some(&x) => log_sum_exp(logits) - x as f64,
        None => f64::NAN,
    }
}

/// exp(mean negative log-likelihood): `nll_sum` over `tokens` predicted tokens.
/// NaN with no token.
pub fn perplexity(nll_sum: f64, tokens: usize) -> f64 {
    if tokens == 0 {
        return f64::NAN;
    }
    (nll_sum / tokens as f64).exp()
}

/// The median of per-prompt first divergences, `None` standing for "identical
/// for every compared token" and ranking after any index. For an even count
/// the lower of the two middle values (so the result is one of the values: an
/// index, or `None` when more than half the prompts are identical). `None`
/// also for no prompt at all.
pub fn median_first_divergence(divergences: &[Option<usize>]) -> Option<usize> {
    if divergences.is_empty() {
        return None;
    }
    let mut sorted: Vec<usize> = divergences.iter().map(|d| d.unwrap_or(usize::MAX)).collect();
    sorted.sort_unstable();
    let median = sorted[(sorted.len() - 1) / 2];
    (median != usize::MAX).then_some(median)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_sum_exp_does_not_overflow_and_passes_nan_on() {
        assert!((log_sum_exp(&[1000.0, 1000.0]) - (1000.0 + 2f64.ln())).abs() < 1e-9);
        assert!((log_sum_exp(&[-1000.0, -1000.0]) - (-1000.0 + 2f64.ln())).abs() < 1e-9);
        assert!(log_sum_exp(&[0.0, f32::NAN]).is_nan());
        assert!(log_sum_exp(&[f32::NAN, 0.0]).is_nan());
    }

    #[test]
    fn kl_is_zero_for_the_same_logits_and_infinite_where_q_has_no_mass() {
        assert_eq!(kl_divergence(&[0.5, -2.0, 3.0], &[0.5, -2.0, 3.0]), 0.0);
        assert_eq!(kl_divergence(&[0.0, 0.0], &[0.0, f32::NEG_INFINITY]), f64::INFINITY);
        assert!(kl_divergence(&[0.0], &[0.0, 1.0]).is_nan());
        assert!(kl_divergence(&[0.0, 1.0], &[f32::NAN, 1.0]).is_nan());
        assert!(kl_divergence(&[0.0, f32::NAN], &[0.0, 1.0]).is_nan(), "a NaN in the reference too");
    }

    #[test]
    fn the_median_ranks_identical_prompts_last() {
        assert_eq!(median_first_divergence(&[Some(3), None, Some(1)]), Some(3));
        assert_eq!(median_first_divergence(&[Some(3), None, None]), None);
        assert_eq!(median_first_divergence(&[Some(4), Some(2)]), Some(2), "the lower middle");
        assert_eq!(median_first_divergence(&[]), None);
    }
}
