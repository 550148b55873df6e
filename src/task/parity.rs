//! How one output compares with the reference column's ([`TaskParity`], per
//! task), what a person reads of it ([`TaskParity::verdict`]; never "same"
//! when a compared value is NaN or infinite) and how `run --json` writes it
//! ([`VsReference`]).

use serde::Serialize;

use super::generation::{self, GenerationParity};
use super::{ClassificationParity, FillMaskParity, Parity};

/// How one output compares with the reference column's, per task.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TaskParity {
    Embedding(Parity),
    FillMask(FillMaskParity),
    Classification(ClassificationParity),
    Generation(GenerationParity),
}

impl TaskParity {
    /// The outputs agree on what a person reads (the same top token at every
    /// mask, the same label, an embedding within cosine 0.9999, the same generated ids).
    /// A NaN or infinite value anywhere (a difference that is not finite, a
    /// generation's first-step logits cosine that is NaN) never agrees.
    pub fn agrees(&self) -> bool {
        if self.not_finite().is_some() {
            return false;
        }
        match self {
            TaskParity::Embedding(p) => p.cosine >= 0.9999,
            TaskParity::FillMask(p) => p.same_top1,
            TaskParity::Classification(p) => p.same_argmax,
            TaskParity::Generation(p) => p.same_ids,
        }
    }

    /// The largest element-wise difference of the compared values (NaN when
    /// either side has a NaN, infinite when one has an infinity); 0 for
    /// text-generation, which compares ids, not values (see [`TaskParity::compares_values`]).
    pub fn max_abs_diff(&self) -> f64 {
        match self {
            TaskParity::Embedding(p) => p.max_abs_diff,
            TaskParity::FillMask(p) => p.max_abs_diff,
            TaskParity::Classification(p) => p.max_abs_diff,
            TaskParity::Generation(_) => 0.0,
        }
    }

    /// Whether [`max_abs_diff`](Self::max_abs_diff) means something (not for generated ids).
    pub fn compares_values(&self) -> bool {
        !matches!(self, TaskParity::Generation(_))
    }

    /// `Some("NaN")` or `Some("INF")` when a compared value is not finite: a
    /// NaN (or an infinity) on either side of the difference, an embedding's
    /// or a generation's first-step logits cosine that is NaN. Then the outputs
    /// never agree, whatever their top tokens, labels or ids.
    pub fn not_finite(&self) -> Option<&'static str> {
        let cosine = match self {
            TaskParity::Embedding(p) => Some(p.cosine),
            TaskParity::Generation(p) => p.first_logits_cosine,
            _ => None,
        };
        let diff = if self.compares_values() { self.max_abs_diff() } else { 0.0 };
        if diff.is_nan() || cosine.is_some_and(f64::is_nan) {
            Some("NaN")
        } else if diff.is_infinite() {
            Some("INF")
        } else {
            None
        }
    }

    /// The one word `run` prints for the task's headline comparison (the top
    /// token at every mask, the label, the ids): `same`, `DIFFERS`, or, when a
    /// compared value is not finite, `NaN` / `INF` (never `same`).
    pub fn same_word(&self) -> &'static str {
        match self.not_finite() {
            Some(word) => word,
            None if self.agrees() => "same",
            None => "DIFFERS",
        }
    }

    /// The explorer's verdict in a column: `cos 0.9999998`, `same top-1` /
    /// `TOP-1 DIFFERS`, `same label` / `LABEL DIFFERS`, `same ids` /
    /// `IDS DIFFER`; `NaN LOGITS` / `INF LOGITS` when the compared logits are
    /// not finite (never `same ...` then).
    pub fn verdict(&self) -> String {
        match (self, self.not_finite()) {
            (TaskParity::Embedding(e), _) => format!("cos {:.7}", e.cosine),
            (_, Some(word)) => format!("{word} LOGITS"),
            (TaskParity::FillMask(f), None) if f.same_top1 => "same top-1".to_string(),
            (TaskParity::FillMask(_), None) => "TOP-1 DIFFERS".to_string(),
            (TaskParity::Classification(c), None) if c.same_argmax => "same label".to_string(),
            (TaskParity::Classification(_), None) => "LABEL DIFFERS".to_string(),
            (TaskParity::Generation(g), None) if g.same_ids => "same ids".to_string(),
            (TaskParity::Generation(_), None) => "IDS DIFFER".to_string(),
        }
    }

    /// text-generation: this parity with the top-1 agreement measured for it
    /// (teacher-forced on the reference's new ids while its backend was
    /// loaded); no change for the other tasks.
    pub fn with_top1(self, top1: Option<generation::Top1Agreement>) -> TaskParity {
        match self {
            TaskParity::Generation(p) => TaskParity::Generation(GenerationParity { top1, ..p }),
            other => other,
        }
    }

    /// text-generation: against a quantized reference the logits fields
    /// (first-step cosine, top-1 agreement) measure nothing and are dropped;
    /// no change otherwise, nor for the other tasks.
    pub fn against_quantized_reference(self) -> TaskParity {
        match self {
            TaskParity::Generation(p) => TaskParity::Generation(GenerationParity { first_logits_cosine: None, top1: None, ..p }),
            other => other,
        }
    }

    /// `run`'s parity of a backend: text-generation's completed with the
    /// top-1 agreement measured for it, or without the logits fields when the
    /// reference (`reference_quantized`) is quantized ([`parity::logits_note`](generation::parity::logits_note)
    /// says why); the other tasks' as they are.
    pub fn completed(self, reference_quantized: bool, top1: Option<generation::Top1Agreement>) -> TaskParity {
        if reference_quantized {
            self.against_quantized_reference()
        } else {
            self.with_top1(top1)
        }
    }
}

/// One output against the reference's, as `run --json` has it in the
/// backend's object: `parity` (the task's [`TaskParity`]; null for the
/// reference itself and when not comparable), `max_abs_diff_vs_reference`
/// (null for text-generation, which compares ids) and, for
/// feature-extraction, `cosine_vs_reference`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VsReference(pub Option<TaskParity>);

impl Serialize for VsReference {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("parity", &self.0)?;
        m.serialize_entry("max_abs_diff_vs_reference", &self.0.filter(TaskParity::compares_values).map(|p| p.max_abs_diff()))?;
        if let Some(TaskParity::Embedding(p)) = self.0 {
            m.serialize_entry("cosine_vs_reference", &p.cosine)?;
        }
        m.end()
    }
}
