//! text-classification: a probability per label (config.json's `id2label`).

use serde::Serialize;

use super::{max_abs_diff, softmax};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LabelProb {
    pub label: String,
    pub prob: f64,
}

/// Every label with its probability, in label-id order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Classification {
    pub labels: Vec<LabelProb>,
    #[serde(skip)]
    pub logits: Vec<f32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ClassificationParity {
    /// The same most likely label.
    pub same_argmax: bool,
    /// Largest difference of the logits.
    pub max_abs_diff: f64,
}

impl Classification {
    /// Softmax of `logits`, named by `names` (`LABEL_i` where a name is missing).
    pub fn from_logits(logits: Vec<f32>, names: &[String]) -> Classification {
        let labels = softmax(&logits)
            .into_iter()
            .enumerate()
            .map(|(i, prob)| LabelProb { label: names.get(i).cloned().unwrap_or_else(|| format!("LABEL_{i}")), prob })
            .collect();
        Classification { labels, logits }
    }

    /// Index of the most likely label (the first on a tie).
    pub fn argmax(&self) -> Option<usize> {
        self.labels.iter().enumerate().max_by(|a, b| a.1.prob.total_cmp(&b.1.prob).then(b.0.cmp(&a.0))).map(|(i, _)| i)
    }

    /// Label indices, most likely first.
    pub fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.labels.len()).collect();
        order.sort_by(|&a, &b| self.labels[b].prob.total_cmp(&self.labels[a].prob).then(a.cmp(&b)));
        order
    }

    pub fn parity(&self, reference: &Classification) -> Option<ClassificationParity> {
        Some(ClassificationParity { same_argmax: self.argmax() == reference.argmax(), max_abs_diff: max_abs_diff(&self.logits, &reference.logits)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_get_names_probabilities_and_an_order() {
        let names = vec!["negative".to_string(), "neutral".to_string()];
        let c = Classification::from_logits(vec![0.5, 2.0, -1.0], &names);
        assert_eq!(c.labels[1].label, "neutral");
        assert_eq!(c.labels[2].label, "LABEL_2");
        assert_eq!(c.argmax(), Some(1));
        assert_eq!(c.order(), vec![1, 0, 2]);
        let d = Classification::from_logits(vec![2.5, 2.0, -1.0], &names);
        let p = d.parity(&c).unwrap();
        assert!(!p.same_argmax && (p.max_abs_diff - 2.0).abs() < 1e-9);
        assert!(Classification::from_logits(vec![1.0], &names).parity(&c).is_none());
    }
}
