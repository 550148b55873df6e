//! Text to token ids with the model's own `tokenizer.json` (the `tokenizers`
//! crate, the same code the Python tokenizer runs).

use std::path::Path;

use anyhow::{anyhow, bail, Context};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use super::MAX_SEQ_LEN;

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
    /// The text was longer than [`MAX_SEQ_LEN`] tokens and was cut.
    pub truncated: bool,
}

/// The id of `[PAD]` in the model's vocabulary.
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

    /// An input of exactly `len` tokens (`[CLS]`, repeated word pieces, `[SEP]`)
    /// for benchmarks at a chosen sequence length. `len` is clamped to 2..=MAX_SEQ_LEN.
    pub fn synthetic(tokenizer: &SentenceTokenizer, len: usize) -> anyhow::Result<Encoded> {
        let len = len.clamp(2, MAX_SEQ_LEN);
        let words = "the quick brown fox jumps over the lazy dog ".repeat(len);
        let mut enc = tokenizer.encode(&words)?;
        let sep = enc.ids[enc.ids.len() - 1];
        let sep_tok = enc.tokens[enc.tokens.len() - 1].clone();
        enc.ids.truncate(len - 1);
        enc.tokens.truncate(len - 1);
        enc.ids.push(sep);
        enc.tokens.push(sep_tok);
        enc.attention_mask = vec![1; len];
        enc.truncated = false;
        enc.text = enc.tokens[1..len - 1].join(" ");
        Ok(enc)
    }
}

/// The model's tokenizer, truncating at [`MAX_SEQ_LEN`] tokens.
pub struct SentenceTokenizer {
    inner: Tokenizer,
}

impl SentenceTokenizer {
    pub fn load(path: &Path) -> anyhow::Result<SentenceTokenizer> {
        let mut inner = Tokenizer::from_file(path)
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("cannot read tokenizer {}", path.display()))?;
        inner
            .with_truncation(Some(TruncationParams {
                max_length: MAX_SEQ_LEN,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| anyhow!("cannot set truncation on {}: {e}", path.display()))?;
        inner.with_padding(None);
        Ok(SentenceTokenizer { inner })
    }

    /// Tokenize `text`. Empty (or all-whitespace) text is an error: there is nothing to embed.
    pub fn encode(&self, text: &str) -> anyhow::Result<Encoded> {
        if text.trim().is_empty() {
            bail!("the text is empty: give a sentence to embed");
        }
        let encoding = self.inner.encode(text, true).map_err(|e| anyhow!("cannot tokenize the text: {e}"))?;
        Ok(Encoded {
            text: text.to_string(),
            tokens: encoding.get_tokens().to_vec(),
            ids: encoding.get_ids().iter().map(|&id| i64::from(id)).collect(),
            attention_mask: encoding.get_attention_mask().iter().map(|&m| i64::from(m)).collect(),
            truncated: !encoding.get_overflowing().is_empty(),
        })
    }
}
