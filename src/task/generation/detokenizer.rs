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
//! the window's decode after the text already shown. When the window's bytes
//! end inside a UTF-8 character (read from the tokens: GPT-2's byte table, or
//! `<0xNN>` pieces) the text that character could still change is held until
//! a later token completes it: half a character is never shown, and bytes no
//! token can complete show as U+FFFD at once, as the full decode has them. For
//! a decoder that is neither, text ending in U+FFFD is held (DecodeStream's rule).
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
//! already shown into U+FFFD (`<0x41>` then `<0xC3>` and a word: the run of
//! bytes is invalid, so each of its bytes decodes to U+FFFD), the stream goes
//! on from the same character count, as TextStreamer's does. A run of
//! byte-fallback pieces is held until a piece of another kind ends it (its
//! bytes are decoded together: an invalid run is one U+FFFD per byte), so the
//! shown text is the full decode's.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use anyhow::{anyhow, Context};
use tokenizers::Tokenizer;

/// The model's tokenizer, for turning ids back into text. The default has no
/// tokens: every id decodes to nothing (fakes and benchmarks that check ids only).
#[derive(Clone, Debug, Default)]
pub struct Detokenizer {
    inner: Option<Inner>,
}

#[derive(Clone, Debug)]
struct Inner {
    tokenizer: Tokenizer,
    /// How token strings spell bytes, when the decoder is one that produces bytes.
    bytes: Option<ByteSpelling>,
    /// Ids of special tokens (no text, no bytes).
    special: HashSet<u32>,
}

/// How a vocabulary spells raw bytes.
#[derive(Clone, Debug)]
enum ByteSpelling {
    /// Byte-level BPE: every character stands for one byte (GPT-2's table).
    ByteLevel(HashMap<char, u8>),
    /// `<0xNN>` pieces for bytes; every other piece is whole UTF-8 text.
    ByteFallback,
}

impl Detokenizer {
    /// Read `tokenizer.json` (the tokenizers format).
    pub fn from_file(path: &Path) -> anyhow::Result<Detokenizer> {
        let tokenizer = Tokenizer::from_file(path)
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("cannot read tokenizer {}", path.display()))?;
        Ok(Detokenizer::owning(tokenizer))
    }

    /// A loaded tokenizer (copied).
    pub fn new(tokenizer: &Tokenizer) -> Detokenizer {
        Detokenizer::owning(tokenizer.clone())
    }

    fn owning(tokenizer: Tokenizer) -> Detokenizer {
        let decoder = tokenizer.get_decoder().and_then(|d| serde_json::to_string(d).ok()).unwrap_or_default();
        let bytes = if decoder.contains("\"ByteLevel\"") {
            Some(ByteSpelling::ByteLevel(char_to_byte()))
        } else if decoder.contains("\"ByteFallback\"") {
            Some(ByteSpelling::ByteFallback)
        } else {
            None
        };
        let special = tokenizer.get_added_tokens_decoder().into_iter().filter(|(_, t)| t.special).map(|(id, _)| id).collect();
        Detokenizer { inner: Some(Inner { tokenizer, bytes, special }) }
    }

    /// How many ids it knows (added tokens included).
    pub fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, |i| i.tokenizer.get_vocab_size(true))
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
        match &self.inner {
            // The decoders (byte-level, byte fallback, metaspace, strip) do not fail on ids; an error has no text.
            Some(i) if !ids.is_empty() => i.tokenizer.decode(ids, true).unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// The raw bytes of a token, when the vocabulary spells bytes (special tokens: none).
    /// A byte-fallback piece (`<0xNN>`) of a SentencePiece-style vocabulary.
    fn is_byte_piece(&self, id: u32) -> bool {
        let Some(inner) = self.inner.as_ref() else { return false };
        matches!(inner.bytes, Some(ByteSpelling::ByteFallback))
            && !inner.special.contains(&id)
            && inner.tokenizer.id_to_token(id).is_some_and(|t| byte_piece(&t).is_some())
    }

    fn token_bytes(&self, id: u32) -> Option<Vec<u8>> {
        let inner = self.inner.as_ref()?;
        let spelling = inner.bytes.as_ref()?;
        if inner.special.contains(&id) {
            return Some(Vec::new());
        }
        let Some(token) = inner.tokenizer.id_to_token(id) else { return Some(Vec::new()) };
        let mut bytes = Vec::with_capacity(token.len());
        match spelling {
            ByteSpelling::ByteLevel(table) => {
                for c in token.chars() {
                    match table.get(&c) {
                        Some(&b) => bytes.push(b),
                        None => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                    }
                }
            }
            ByteSpelling::ByteFallback => match byte_piece(&token) {
                Some(b) => bytes.push(b),
                None => bytes.extend_from_slice(token.as_bytes()),
            },
        }
        Some(bytes)
    }

    /// The id of the token that is the single byte `b`.
    fn byte_token(&self, b: u8) -> Option<u32> {
        let inner = self.inner.as_ref()?;
        match inner.bytes.as_ref()? {
            ByteSpelling::ByteLevel(table) => {
                let c = table.iter().find(|(_, &v)| v == b).map(|(&c, _)| c)?;
                inner.tokenizer.token_to_id(&c.to_string())
            }
            ByteSpelling::ByteFallback => inner.tokenizer.token_to_id(&format!("<0x{b:02X}>")),
        }
    }

    /// A stream with no text before it.
    pub fn stream(&self) -> TextStream<'_> {
        TextStream { detok: self, window: Vec::new(), context: 0, context_text: String::new(), partial: String::new(), prompt_text: String::new(), text: String::new() }
    }

    /// A stream that continues `prompt`: its pieces are the text the new
    /// tokens add after the prompt's own ([`TextStream::prompt_text`]).
    pub fn stream_after(&self, prompt: &[i64]) -> TextStream<'_> {
        let mut stream = self.stream();
        for &id in prompt {
            stream.push(id);
        }
        // The prompt is whole: what it still holds (a byte-fallback run at its end) is its text too.
        let rest = stream.rest();
        stream.text.push_str(&rest);
        stream.context = stream.window.len();
        stream.context_text = self.decode_u32(&stream.window);
        stream.partial.clear();
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

/// `<0xNN>` -> the byte NN.
fn byte_piece(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// How many bytes at the end of `bytes` begin a UTF-8 character that more
/// bytes could still complete (0 when the end is complete, or invalid for good),
/// and the bytes that would complete it.
fn unfinished_tail(bytes: &[u8]) -> (usize, Vec<u8>) {
    let n = bytes.len();
    // The last byte that is not a continuation byte (10xxxxxx), within a character's reach.
    let Some(lead_at) = (n.saturating_sub(4)..n).rev().find(|&i| bytes[i] & 0xC0 != 0x80) else { return (0, Vec::new()) };
    let lead = bytes[lead_at];
    let need = match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return (0, Vec::new()),
    };
    let have = n - lead_at;
    if have >= need {
        return (0, Vec::new());
    }
    // The second byte's range is narrower after some lead bytes (no overlongs, surrogates, > U+10FFFF).
    let second = match lead {
        0xE0 => 0xA0..=0xBF,
        0xED => 0x80..=0x9F,
        0xF0 => 0x90..=0xBF,
        0xF4 => 0x80..=0x8F,
        _ => 0x80..=0xBF,
    };
    if have >= 2 && !second.contains(&bytes[lead_at + 1]) {
        return (0, Vec::new());
    }
    let completion = (have..need).map(|i| if i == 1 { *second.start() } else { 0x80 }).collect();
    (have, completion)
}

/// The text of a growing sequence, token by token.
#[derive(Debug)]
pub struct TextStream<'a> {
    detok: &'a Detokenizer,
    /// The context (`..context`: tokens whose text was all shown), then the tokens since.
    window: Vec<u32>,
    context: usize,
    /// The decode of `window[..context]` alone.
    context_text: String,
    /// Text of the tokens since the context already shown (the part before a held character).
    partial: String,
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
        if self.detok.inner.is_none() {
            return String::new();
        }
        self.window.push(id);
        let decoded = self.detok.decode_u32(&self.window);
        // A run of byte-fallback pieces is decoded as one: until a piece of
        // another kind ends it, a later byte can still turn the whole run into
        // U+FFFD, one per byte (the ByteFallback decoder's rule), so the run's
        // text is held, and the stream shows exactly what the full decode has.
        let run_start = (self.context..self.window.len()).rev().take_while(|&i| self.detok.is_byte_piece(self.window[i])).last();
        let before_run;
        let (stable, complete) = match run_start {
            Some(start) => {
                before_run = self.detok.decode_u32(&self.window[..start]);
                (before_run.as_str(), false)
            }
            None => match self.held_tail() {
            Some(None) => (decoded.as_str(), true),
            // What the window decodes to with the character completed: the text before it is settled.
            Some(Some(completed)) => (&decoded[..common_prefix(&decoded, &completed)], false),
            // A decoder that does not spell bytes: text ending in U+FFFD may be unfinished.
            None if decoded.ends_with(char::REPLACEMENT_CHARACTER) => ("", false),
            None => (decoded.as_str(), true),
            },
        };
        let shown = format!("{}{}", self.context_text, self.partial);
        let new = after(stable, &shown);
        if complete && !new.is_empty() {
            // The tokens since the context were all shown: they are the next window's context.
            self.window.drain(..self.context);
            self.context = self.window.len();
            self.context_text = self.detok.decode_u32(&self.window);
            self.partial.clear();
        } else {
            self.partial.push_str(&new);
        }
        self.text.push_str(&new);
        new
    }

    /// `Some(None)`: the window's bytes end on a whole character (or on bytes
    /// no token can complete). `Some(Some(text))`: they end inside one, and
    /// `text` is the window decoded with that character completed. `None`: the
    /// bytes are unknown (the decoder does not spell bytes, or no byte token
    /// can complete them).
    fn held_tail(&self) -> Option<Option<String>> {
        let mut tail = Vec::new();
        for &id in self.window.iter().rev() {
            let mut bytes = self.detok.token_bytes(id)?;
            bytes.extend_from_slice(&tail);
            tail = bytes;
            if tail.len() >= 4 {
                break;
            }
        }
        let (held, completion) = unfinished_tail(&tail);
        if held == 0 {
            return Some(None);
        }
        let mut probe = self.window.clone();
        for b in completion {
            probe.push(self.detok.byte_token(b)?);
        }
        Some(Some(self.detok.decode_u32(&probe)))
    }

    /// The text the prompt's ids showed (a stream from [`Detokenizer::stream_after`]).
    pub fn prompt_text(&self) -> &str {
        &self.prompt_text
    }

    /// Everything shown since the prompt.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text still held at the end (an unfinished character, as U+FFFD;
    /// empty when none is).
    pub fn finish(self) -> String {
        self.rest()
    }

    /// Everything since the prompt, the held rest included: the whole continuation.
    pub fn into_text(self) -> String {
        let rest = self.rest();
        self.text + &rest
    }

    fn rest(&self) -> String {
        if self.window.len() == self.context {
            return String::new();
        }
        after(&self.detok.decode_u32(&self.window), &format!("{}{}", self.context_text, self.partial))
    }
}

/// The byte length of the longest common prefix of `a` and `b`, on a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices().zip(b.chars()).find(|((_, ca), cb)| ca != cb).map_or_else(|| a.len().min(b.len()), |((i, _), _)| i)
}

/// `decoded` after the text already shown: what follows `shown` when it is a
/// prefix; else (a later byte-fallback piece changed shown text, or less is
/// settled than was shown) what follows as many characters as were shown, as
/// TextStreamer's `print_len` counts.
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
/// stand for themselves, the others are shifted to U+0100 and up.
pub(crate) fn char_to_byte() -> HashMap<char, u8> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    let mut map = HashMap::with_capacity(256);
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

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn an_unfinished_character_is_told_from_bytes_that_no_byte_completes() {
        assert_eq!(unfinished_tail(b"abc"), (0, vec![]));
        assert_eq!(unfinished_tail(b"a\xC3"), (1, vec![0x80]));
        assert_eq!(unfinished_tail(b"\xE2\x82"), (2, vec![0x80]));
        assert_eq!(unfinished_tail(b"\xE0"), (1, vec![0xA0, 0x80]), "E0 takes A0..BF next");
        assert_eq!(unfinished_tail(b"\xF0\x9F\x99"), (3, vec![0x80]));
        assert_eq!(unfinished_tail(b"\xF4"), (1, vec![0x80, 0x80, 0x80]));
        assert_eq!(unfinished_tail("é€".as_bytes()), (0, vec![]), "complete");
        assert_eq!(unfinished_tail(b"\xA9"), (0, vec![]), "a lone continuation byte");
        assert_eq!(unfinished_tail(b"a\x80\x80\x80\x80"), (0, vec![]), "continuation bytes past a character's reach");
        assert_eq!(unfinished_tail(b"\xC3\xA9\xA9"), (0, vec![]), "one continuation too many");
        assert_eq!(unfinished_tail(b"\xED\xA0"), (0, vec![]), "a surrogate never completes");
        assert_eq!(unfinished_tail(b"\xF5"), (0, vec![]), "no such lead byte");
        assert_eq!(unfinished_tail(b"\xC0"), (0, vec![]), "overlong lead");
    }

    #[test]
    fn byte_pieces_and_common_prefixes() {
        assert_eq!(byte_piece("<0x0A>"), Some(b'\n'));
        assert_eq!(byte_piece("<0xC3>"), Some(0xC3));
        assert_eq!(byte_piece("<0x0>"), None);
        assert_eq!(byte_piece("▁the"), None);
        assert_eq!(common_prefix("ab\u{FFFD}", "abé"), 2);
        assert_eq!(common_prefix("é", "è"), 0);
        assert_eq!(common_prefix("abc", "ab"), 2);
        assert_eq!(after("abc", "ab"), "c");
        assert_eq!(after("\u{FFFD}\u{FFFD} x", "A"), "\u{FFFD} x", "shown text that changed: go on by characters");
        assert_eq!(after("", "A"), "");
    }
}
