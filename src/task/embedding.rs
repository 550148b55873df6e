//! Sentence embeddings and how two of them are compared.

use serde::Serialize;

/// One sentence embedding: mean-pooled, L2-normalised (norm 1 when the model is right).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Embedding(pub Vec<f32>);

/// How close one backend's embedding is to another's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Parity {
    pub cosine: f64,
    pub max_abs_diff: f64,
}

impl Embedding {
    pub fn values(&self) -> &[f32] {
        &self.0
    }

    pub fn dim(&self) -> usize {
        self.0.len()
    }

    pub fn norm(&self) -> f64 {
        self.0.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt()
    }

    /// Cosine similarity (in f64); 0 when either vector is zero.
    pub fn cosine(&self, other: &Embedding) -> f64 {
        let dot: f64 = self.0.iter().zip(&other.0).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
        let denom = self.norm() * other.norm();
        if denom == 0.0 {
            0.0
        } else {
            dot / denom
        }
    }

    /// Cosine and largest element-wise difference; `None` when the dimensions differ.
    pub fn parity(&self, reference: &Embedding) -> Option<Parity> {
        if self.dim() != reference.dim() {
            return None;
        }
        Some(Parity { cosine: self.cosine(reference), max_abs_diff: super::max_abs_diff(&self.0, &reference.0)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parity_of_identical_and_different_vectors() {
        let a = Embedding(vec![0.6, 0.8, 0.0]);
        let p = a.parity(&a).unwrap();
        assert!((p.cosine - 1.0).abs() < 1e-12 && p.max_abs_diff == 0.0);
        let b = Embedding(vec![0.8, 0.6, 0.0]);
        let p = a.parity(&b).unwrap();
        assert!((p.cosine - 0.96).abs() < 1e-6, "{p:?}");
        assert!((p.max_abs_diff - 0.2).abs() < 1e-6, "{p:?}");
        assert!(a.parity(&Embedding(vec![1.0])).is_none());
        assert!((a.norm() - 1.0).abs() < 1e-6);
    }
}
