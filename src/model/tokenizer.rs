//! Text to token ids with the model's own `tokenizer.json` (the `tokenizers`
//! crate, the same code the Python tokenizer runs).

use std::path::Path;

use anyhow::{anyhow, bail, Context};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::tensor::Encoded;

/// The model's tokenizer, truncating at the model's maximum length.
pub struct TextTokenizer {
    inner: Tokenizer,
    max_len: usize,
    /// The mask token and its id, when the vocabulary has one (fill-mask).
    mask: Option<(String, i64)>,
}

impl TextTokenizer {
    /// Read `tokenizer.json`; inputs longer than `max_len` tokens are cut (and say so).
    pub fn load(path: &Path, max_len: usize) -> anyhow::Result<TextTokenizer> {
        let mut inner = Tokenizer::from_file(path)
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("cannot read tokenizer {}", path.display()))?;
        inner
            .with_truncation(Some(TruncationParams {
                max_length: max_len,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| anyhow!("cannot set truncation on {}: {e}", path.display()))?;
        inner.with_padding(None);
        let mask = ["[MASK]", "<mask>"]
            .iter()
            .find_map(|t| inner.token_to_id(t).map(|id| (t.to_string(), i64::from(id))));
        Ok(TextTokenizer { inner, max_len, mask })
    }

    /// An input of exactly `len` tokens (`[CLS]`, repeated word pieces, `[SEP]`)
    /// for benchmarks at a chosen sequence length. `len` is clamped to 2..=the model's maximum.
    pub fn synthetic(&self, len: usize) -> anyhow::Result<Encoded> {
        let len = len.clamp(2, self.max_len());
        let words = "the quick brown fox jumps over the lazy dog ".repeat(len);
        let mut enc = self.encode(&words)?;
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

    /// The longest input, in tokens.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The mask token (`[MASK]`, `<mask>`) and its id.
    pub fn mask_token(&self) -> Option<(String, i64)> {
        self.mask.clone()
    }

    /// Every token string, indexed by id (ids the vocabulary skips are empty).
    pub fn vocab(&self) -> Vec<String> {
        let map = self.inner.get_vocab(true);
        let size = map.values().map(|&id| id as usize + 1).max().unwrap_or(0);
        let mut vocab = vec![String::new(); size];
        for (token, id) in map {
            vocab[id as usize] = token;
        }
        vocab
    }

    /// Tokenize a prompt already formatted for the model (a rendered chat
    /// template) as transformers' `apply_chat_template` does: the special
    /// tokens written in it (`<|im_start|>`, `</s>`) are recognised as tokens
    /// and none is added (`add_special_tokens=False`: no second BOS).
    /// `text` is what was typed ([`Encoded::text`]).
    pub fn encode_formatted(&self, formatted: &str, text: &str) -> anyhow::Result<Encoded> {
        let encoding = self.inner.encode(formatted, false).map_err(|e| anyhow!("cannot tokenize the formatted prompt: {e}"))?;
        Ok(encoded(text, &encoding))
    }

    /// Tokenize `text`. Empty (or all-whitespace) text is an error: there is
    /// nothing to run. `[MASK]` typed for a model whose mask token is another
    /// (`<mask>`) is read as that token.
    pub fn encode(&self, text: &str) -> anyhow::Result<Encoded> {
        if text.trim().is_empty() {
            bail!("the text is empty: type a sentence");
        }
        let model_text;
        let input = match &self.mask {
            Some((token, _)) if token != "[MASK]" && text.contains("[MASK]") => {
                model_text = text.replace("[MASK]", token);
                model_text.as_str()
            }
            _ => text,
        };
        let encoding = self.inner.encode(input, true).map_err(|e| anyhow!("cannot tokenize the text: {e}"))?;
        Ok(encoded(text, &encoding))
    }
}

/// The tokenizer's encoding of `text` as runlens' input.
fn encoded(text: &str, encoding: &tokenizers::Encoding) -> Encoded {
    Encoded {
        text: text.to_string(),
        tokens: encoding.get_tokens().to_vec(),
        ids: encoding.get_ids().iter().map(|&id| i64::from(id)).collect(),
        attention_mask: encoding.get_attention_mask().iter().map(|&m| i64::from(m)).collect(),
        truncated: !encoding.get_overflowing().is_empty(),
    }
}
