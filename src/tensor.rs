//! The data that crosses between layers, as plain values: the encoded input
//! every backend takes ([`Encoded`]) and the tensor a backend returns
//! ([`OutputTensor`]). This module imports nothing of runlens: the tokenizer
//! ([`crate::model`]) makes an `Encoded`, a backend turns it into an
//! `OutputTensor`, and the task layer ([`crate::task`]) reads that.

/// One tokenized input, ready for any backend: shape `[1, len]` of int64.
#[derive(Clone, Debug, PartialEq)]
pub struct Encoded {
    /// The text as the user gave it.
    pub text: String,
    /// Word pieces, `[CLS]` and `[SEP]` included.
    pub tokens: Vec<String>,
    pub ids: Vec<i64>,
    /// 1 for every real token (no padding is added here).
    pub attention_mask: Vec<i64>,
    /// The text was longer than the model's maximum length and was cut.
    pub truncated: bool,
}

/// The id of `[PAD]` in BERT vocabularies (the tokenizer's own pad id is used when it has one).
pub const PAD_ID: i64 = 0;

impl Encoded {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// This input padded with `[PAD]` (mask 0) to exactly `len` tokens, for a
    /// program exported for a fixed length; masked mean pooling ignores the
    /// padding. An error when the input is longer: it can be padded, not cut.
    pub fn padded_to(&self, len: usize) -> anyhow::Result<Encoded> {
        anyhow::ensure!(
            self.ids.len() <= len && self.ids.len() == self.attention_mask.len(),
            "the program takes exactly {len} tokens and this input has {} (mask {}); it can be padded, not cut",
            self.ids.len(),
            self.attention_mask.len()
        );
        let mut padded = self.clone();
        padded.ids.resize(len, PAD_ID);
        padded.attention_mask.resize(len, 0);
        padded.tokens.resize(len, "[PAD]".to_string());
        Ok(padded)
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// An input of these ids, every one real (tests, and programs fed by id).
    pub fn from_ids(ids: &[i64]) -> Encoded {
        Encoded { text: String::new(), tokens: Vec::new(), ids: ids.to_vec(), attention_mask: vec![1; ids.len()], truncated: false }
    }
}

/// A backend's raw output: the first output tensor of the program (or of the
/// eager model), float32, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl OutputTensor {
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> OutputTensor {
        OutputTensor { shape, data }
    }

    /// `[1, 8, 384]`, for messages.
    pub fn describe_shape(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(ToString::to_string).collect();
        format!("[{}]", dims.join(", "))
    }
}

/// The index of the largest logit (the first one on ties, as torch's argmax).
pub fn argmax(logits: &[f32]) -> anyhow::Result<i64> {
    anyhow::ensure!(!logits.is_empty(), "the decoder returned no logits");
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        anyhow::ensure!(!v.is_nan(), "the decoder returned NaN at logit {i}");
        if v > logits[best] {
            best = i;
        }
    }
    Ok(best as i64)
}
