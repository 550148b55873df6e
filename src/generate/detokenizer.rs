//! Token ids back to text, one token at a time, with the decoder the model's
//! `tokenizer.json` declares (the tokenizers crate, the code transformers'
//! `decode` runs): byte-level BPE (GPT-2, Llama 3, Qwen), or SentencePiece-style
//! BPE with `▁` and byte-fallback `<0xNN>` pieces (Llama 2, TinyLlama).
//! Special tokens (`<|endoftext|>`, `</s>`) produce no text, as
//! `decode(skip_special_tokens=True)`.
//!
//! A token's text can depend on its neighbours (SentencePiece strips the space
//! of the first piece; a UTF-8 character can be split across byte tokens), so
//! [`TextStream`] decodes a small window the way tokenizers' `DecodeStream`
//! does: the tokens of the last text shown, then the new ones; the new text is
//! the window's decode after the text already shown. While the window's text
//! ends in U+FFFD (the bytes may be an unfinished character) nothing is shown:
//! the token is held until a later one completes the character. Half a
//! character is never shown.
//!
//! What a generation shows is transformers' `TextStreamer`'s text for the
//! continuation: the stream starts with the prompt's ids
//! ([`Detokenizer::stream_after`]), so the new text is the decode of prompt
//! and new tokens after the prompt's own text (` there`, with the space
//! SentencePiece would strip from a first piece). The text of a whole
//! generation, pieces and [`TextStream::finish`] together, equals what
//! `TextStreamer(skip_prompt=False)` prints after the prompt (tests/chat.rs
//! checks it for both tokenizer kinds). The pieces themselves differ:
//! TextStreamer holds text back until a space, a newline or a CJK character
//! (a word may still change), runlens shows each token's text as soon as its
//! characters are complete, so at every token runlens has shown at least what
//! TextStreamer has printed. Where a later byte-fallback piece turns text
//! already shown into U+FFFD (`<0x41>` then an unfinished `<0xC3>` run), the
//! stream goes on from the same character count, as TextStreamer does.

use std::path::Path;

use anyhow::{anyhow, Context};
use tokenizers::Tokenizer;

/// The model's tokenizer, for turning ids back into text. The default has no
/// tokens: every id decodes to nothing (fakes and benchmarks that check ids only).
#[derive(Clone, Debug, Default)]
pub struct Detokenizer {
    tokenizer: Option<Tokenizer>,
}

impl Detokenizer {
    /// Read `tokenizer.json` (the tokenizers format).
    pub fn from_file(path: &Path) -> anyhow::Result<Detokenizer> {
        let tokenizer = Tokenizer::from_file(path)
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("cannot read tokenizer {}", path.display()))?;
        Ok(Detokenizer::new(&tokenizer))
    }

    /// A loaded tokenizer.
    pub fn new(tokenizer: &Tokenizer) -> Detokenizer {
        Detokenizer { tokenizer: Some(tokenizer.clone()) }
    }

    /// How many ids it knows (added tokens included).
    pub fn len(&self) -> usize {
        self.tokenizer.as_ref().map_or(0, |t| t.get_vocab_size(true))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text of `ids`, special tokens left out, as transformers'
    /// `decode(skip_special_tokens=True)`; bytes that are not UTF-8 become
    /// U+FFFD. Ids the vocabulary lacks have no text.
    pub fn decode(&self, ids: &[i64]) -> String {
        let ids: Vec<u32> = ids.iter().filter_map(|&id| u32::try_from(id).ok()).collect();
        self.decode_u32(&ids)
    }

    fn decode_u32(&self, ids: &[u32]) -> String {
        match &self.tokenizer {
            // The decoders (byte-level, byte fallback, metaspace, strip) do not fail on ids; an error has no text.
            Some(t) if !ids.is_empty() => t.decode(ids, true).unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// A stream with no text before it.
    pub fn stream(&self) -> TextStream<'_> {
        TextStream { detok: self, window: Vec::new(), shown: 0, shown_text: String::new(), prompt_text: String::new(), text: String::new() }
    }

    /// A stream that continues `prompt`: its pieces are the text the new
    /// tokens add after the prompt's own ([`TextStream::prompt_text`]).
    pub fn stream_after(&self, prompt: &[i64]) -> TextStream<'_> {
        let mut stream = self.stream();
        for &id in prompt {
            stream.push(id);
        }
        stream.prompt_text = std::mem::take(&mut stream.text);
        stream
    }

    /// The text `ids` add after `prompt`: what a stream after `prompt` shows
    /// for them, [`TextStream::finish`] included.
    pub fn continuation(&self, prompt: &[i64], ids: &[i64]) -> String {
        let mut stream = self.stream_after(prompt);
        for &id in ids {
            stream.push(id);
        }
        stream.into_text()
    }
}

/// The text of a growing sequence, token by token.
#[derive(Debug)]
pub struct TextStream<'a> {
    detok: &'a Detokenizer,
    /// The tokens of the text last shown (`..shown`), then those not shown yet.
    window: Vec<u32>,
    shown: usize,
    /// The decode of `window[..shown]` alone.
    shown_text: String,
    /// What the prompt's ids showed ([`Detokenizer::stream_after`]).
    prompt_text: String,
    /// Everything shown since the prompt.
    text: String,
}

impl TextStream<'_> {
    /// Add a token: the text it completes (empty while a character is held,
    /// and for a special token).
    pub fn push(&mut self, id: i64) -> String {
        let Ok(id) = u32::try_from(id) else { return String::new() };
        if self.detok.tokenizer.is_none() {
            return String::new();
        }
        self.window.push(id);
        let decoded = self.detok.decode_u32(&self.window);
        if decoded.ends_with(char::REPLACEMENT_CHARACTER) {
            return String::new();
        }
        let new = after(&decoded, &self.shown_text);
        if new.is_empty() {
            return new;
        }
        // The tokens just shown are the next window's context.
        self.window.drain(..self.shown);
        self.shown = self.window.len();
        self.shown_text = self.detok.decode_u32(&self.window);
        self.text.push_str(&new);
        new
    }

    /// The text the prompt's ids showed (a stream from [`Detokenizer::stream_after`]).
    pub fn prompt_text(&self) -> &str {
        &self.prompt_text
    }

    /// Everything shown since the prompt.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text still held at the end (bytes no token completed, as U+FFFD;
    /// empty when none are).
    pub fn finish(self) -> String {
        self.rest()
    }

    /// Everything since the prompt, the held rest included: the whole continuation.
    pub fn into_text(self) -> String {
        let rest = self.rest();
        self.text + &rest
    }

    fn rest(&self) -> String {
        if self.window.len() == self.shown {
            return String::new();
        }
        after(&self.detok.decode_u32(&self.window), &self.shown_text)
    }
}

/// `decoded` after the text already shown: what follows `shown` when it is a
/// prefix; else (a later byte-fallback piece changed shown text) what follows
/// as many characters as were shown, as TextStreamer's `print_len` counts.
fn after(decoded: &str, shown: &str) -> String {
    match decoded.strip_prefix(shown) {
        Some(rest) => rest.to_string(),
        None => decoded.chars().skip(shown.chars().count()).collect(),
    }
}

/// `text` safe to write to a terminal: control characters (a random model
/// emits bytes such as ESC that would start escape sequences) become their
/// Unicode control pictures (`␅`, `␛`; DEL `␡`), C1 controls U+FFFD; newlines
/// and tabs stay. The generated text itself keeps them (it equals Python's).
pub fn terminal_safe(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + c as u32).unwrap_or(char::REPLACEMENT_CHARACTER),
            '\u{7f}' => '\u{2421}',
            '\u{80}'..='\u{9f}' => char::REPLACEMENT_CHARACTER,
            _ => c,
        })
        .collect()
}

/// GPT-2's table from the characters of byte-level tokens back to bytes (the
/// inverse of `bytes_to_unicode` in GPT-2's `encoder.py`): printable bytes
/// stand for themselves, the others are shifted to U+0100 and up. The tests
/// write byte-level vocabularies with it.
#[cfg(test)]
pub(crate) fn char_to_byte() -> std::collections::HashMap<char, u8> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    let mut map = std::collections::HashMap::with_capacity(256);
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let c = if printable(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).unwrap_or(char::REPLACEMENT_CHARACTER)
        };
        map.insert(c, b);
    }
    map
}
