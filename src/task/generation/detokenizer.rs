//! Token ids back to text for byte-level BPE (GPT-2's tokenizer), one token
//! at a time.
//!
//! A byte-level BPE token is a run of bytes, spelled in `tokenizer.json` with
//! GPT-2's byte-to-character table (`Ġ` is the space byte). A UTF-8 character
//! may be split across tokens, so a token's bytes can end inside a character:
//! [`TextStream`] holds those bytes until the character completes, and never
//! shows half a character. Special tokens (`<|endoftext|>`) produce no text, as
//! transformers' `decode(skip_special_tokens=True)`.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, Context};

/// Every token's bytes, by id, read from the model's `tokenizer.json`.
#[derive(Clone, Debug, Default)]
pub struct Detokenizer {
    /// The bytes of token `id` (empty for special tokens and ids without a token).
    pieces: Vec<Vec<u8>>,
}

impl Detokenizer {
    /// Read `tokenizer.json` (the tokenizers format).
    pub fn from_file(path: &Path) -> anyhow::Result<Detokenizer> {
        let tokenizer = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("cannot read tokenizer {}", path.display()))?;
        Ok(Detokenizer::new(&tokenizer))
    }

    /// The byte table of a loaded tokenizer. Characters outside GPT-2's byte
    /// table (a tokenizer that is not byte-level) stand for their own UTF-8 bytes.
    pub fn new(tokenizer: &tokenizers::Tokenizer) -> Detokenizer {
        let byte_of = char_to_byte();
        let vocab = tokenizer.get_vocab(true);
        let size = vocab.values().map(|&id| id as usize + 1).max().unwrap_or(0);
        let mut pieces = vec![Vec::new(); size];
        let special: Vec<u32> = tokenizer.get_added_tokens_decoder().into_iter().filter(|(_, t)| t.special).map(|(id, _)| id).collect();
        for (token, id) in vocab {
            if special.contains(&id) {
                continue;
            }
            let mut bytes = Vec::with_capacity(token.len());
            for c in token.chars() {
                match byte_of.get(&c) {
                    Some(&b) => bytes.push(b),
                    None => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            pieces[id as usize] = bytes;
        }
        Detokenizer { pieces }
    }

    /// How many ids it knows.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The bytes of one token (empty for a special token or an unknown id).
    pub fn bytes(&self, id: i64) -> &[u8] {
        usize::try_from(id).ok().and_then(|i| self.pieces.get(i)).map_or(&[], Vec::as_slice)
    }

    /// The text of `ids`, special tokens left out; bytes that are not UTF-8
    /// become U+FFFD (as Python's `errors="replace"`).
    pub fn decode(&self, ids: &[i64]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| self.bytes(id).iter().copied()).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// A stream for one generation.
    pub fn stream(&self) -> TextStream<'_> {
        TextStream { detok: self, held: Vec::new() }
    }
}

/// The text of a growing sequence, token by token.
#[derive(Debug)]
pub struct TextStream<'a> {
    detok: &'a Detokenizer,
    /// Bytes of a character not yet complete.
    held: Vec<u8>,
}

impl TextStream<'_> {
    /// Add a token: the text it completes (empty while a character is held).
    pub fn push(&mut self, id: i64) -> String {
        self.held.extend_from_slice(self.detok.bytes(id));
        let mut text = String::new();
        loop {
            match std::str::from_utf8(&self.held) {
                Ok(s) => {
                    text.push_str(s);
                    self.held.clear();
                    return text;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // from_utf8 said the first `valid` bytes are UTF-8.
                    text.push_str(std::str::from_utf8(&self.held[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // The bytes end inside a character: hold them.
                        None => {
                            self.held.drain(..valid);
                            return text;
                        }
                        // Bytes no later token can complete: U+FFFD, as the full decode gives.
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            self.held.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// The bytes still held at the end, as U+FFFD (empty when none are).
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.held).into_owned()
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
