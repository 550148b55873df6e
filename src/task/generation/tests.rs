//! The greedy loop against a FAKE decoder (a script of next tokens, no model)
//! and a byte-level tokenizer.json written here.

use std::ops::ControlFlow;

use super::*;
use crate::backend::Decoder;

/// A fake decoder: its logits are one-hot at the next id of `script`, whatever
/// the input; it records what it was called with.
struct FakeDecoder {
    script: Vec<i64>,
    vocab: usize,
    max_len: usize,
    prefills: Vec<Vec<i64>>,
    steps: Vec<i64>,
}

impl FakeDecoder {
    fn new(script: &[i64], vocab: usize, max_len: usize) -> FakeDecoder {
        FakeDecoder { script: script.to_vec(), vocab, max_len, prefills: Vec::new(), steps: Vec::new() }
    }

    fn logits(&self) -> anyhow::Result<Vec<f32>> {
        let n = self.steps.len();
        let id = *self.script.get(n).ok_or_else(|| anyhow::anyhow!("the fake decoder's script ends after {n} tokens"))?;
        let mut logits = vec![-1.0; self.vocab];
        logits[id as usize] = 3.0;
        Ok(logits)
    }
}

impl Decoder for FakeDecoder {
    fn max_len(&self) -> usize {
        self.max_len
    }

    fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
        self.prefills.push(prompt.to_vec());
        self.steps.clear();
        self.logits()
    }

    fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>> {
        self.steps.push(token);
        self.logits()
    }
}

/// A byte-level BPE tokenizer.json: the 256 byte tokens (id = byte value),
/// `Ġhello` (256; no merge makes it, it is for decoding), `<|endoftext|>` (257, special).
fn byte_level_tokenizer() -> (tempfile::TempDir, Detokenizer) {
    let mut vocab = serde_json::Map::new();
    let table = detokenizer::char_to_byte();
    for (c, b) in &table {
        vocab.insert(c.to_string(), serde_json::json!(*b as u32));
    }
    vocab.insert("Ġhello".to_string(), serde_json::json!(256));
    vocab.insert("<|endoftext|>".to_string(), serde_json::json!(257));
    let byte_level = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    let json = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 257, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true}],
        "normalizer": null, "pre_tokenizer": byte_level, "post_processor": null, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": []}
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
    let detok = Detokenizer::from_file(&path).unwrap();
    (dir, detok)
}

const EOS: i64 = 257;
const VOCAB: usize = 258;

fn run(decoder: &mut FakeDecoder, prompt: &[i64], opts: GenerateOptions) -> (anyhow::Result<Generation>, Vec<TokenStep>) {
    let (_dir, detok) = byte_level_tokenizer();
    let mut seen = Vec::new();
    let out = greedy(decoder, &detok, prompt, &opts, &mut |s: &TokenStep| {
        seen.push(s.clone());
        ControlFlow::Continue(())
    });
    (out, seen)
}

fn opts(max_new_tokens: usize) -> GenerateOptions {
    GenerateOptions { max_new_tokens, eos_token_ids: vec![EOS] }
}

#[test]
fn stops_at_the_end_of_text_and_keeps_its_id() {
    let mut fake = FakeDecoder::new(&[b'h' as i64, b'i' as i64, EOS, b'x' as i64], VOCAB, 64);
    let (out, seen) = run(&mut fake, &[256, 32], opts(10));
    let g = out.unwrap();
    assert_eq!(g.ids, [b'h' as i64, b'i' as i64, EOS]);
    assert_eq!(g.stop, Stop::EndOfText);
    assert_eq!(g.text, "hi", "no special token in the text");
    assert_eq!(seen.iter().map(|s| s.text.as_str()).collect::<Vec<_>>(), ["h", "i", ""]);
    assert_eq!(seen.iter().map(|s| s.index).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(g.prompt_len, 2);
    assert_eq!(fake.prefills, [vec![256, 32]]);
    assert_eq!(fake.steps, [b'h' as i64, b'i' as i64], "each new token is fed back, the EOS is not");
    assert_eq!(g.token_latencies.len(), 3);
    assert_eq!(g.ttft, g.token_latencies[0]);
    assert_eq!(g.stop.name(), "end-of-text");
    assert_eq!(serde_json::to_string(&g.stop).unwrap(), "\"end-of-text\"");
}

#[test]
fn stops_at_max_new_tokens() {
    let mut fake = FakeDecoder::new(&[b'a' as i64; 40], VOCAB, 64);
    let (out, seen) = run(&mut fake, &[b'x' as i64], opts(5));
    let g = out.unwrap();
    assert_eq!(g.ids.len(), 5);
    assert_eq!(seen.len(), 5);
    assert_eq!(g.stop, Stop::MaxNewTokens);
    assert_eq!(g.text, "aaaaa");
    assert_eq!(fake.steps.len(), 4, "no decoder call after the last token");
    assert!(g.decode_tokens_per_s().is_some_and(|v| v > 0.0) || g.token_latencies[1..].iter().all(|d| d.is_zero()));
}

#[test]
fn stops_when_prompt_and_new_tokens_fill_the_maximum_length() {
    let mut fake = FakeDecoder::new(&[b'a' as i64; 40], VOCAB, 8);
    let (out, _) = run(&mut fake, &[1, 2, 3], opts(32));
    let g = out.unwrap();
    assert_eq!(g.stop, Stop::MaxLength);
    assert_eq!(g.prompt_len + g.ids.len(), 8);
    // The decoder never held more than its maximum: prefill 3, then 4 appended (the 5th new token is not fed back).
    assert_eq!(fake.prefills[0].len() + fake.steps.len(), 7);

    // A prompt one shorter than the maximum: exactly one new token.
    let mut fake = FakeDecoder::new(&[b'a' as i64; 40], VOCAB, 8);
    let (out, _) = run(&mut fake, &[1; 7], opts(32));
    let g = out.unwrap();
    assert_eq!((g.ids.len(), g.stop), (1, Stop::MaxLength));
    assert!(fake.steps.is_empty());
}

#[test]
fn a_break_from_on_token_cancels_within_one_token() {
    let (_dir, detok) = byte_level_tokenizer();
    let mut fake = FakeDecoder::new(&[b'a' as i64; 40], VOCAB, 64);
    let mut seen = 0;
    let g = greedy(&mut fake, &detok, &[1, 2], &opts(32), &mut |s: &TokenStep| {
        seen += 1;
        if s.index == 2 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(g.stop, Stop::Cancelled);
    assert_eq!(g.ids.len(), 3);
    assert_eq!(seen, 3);
    assert_eq!(fake.steps.len(), 2, "no decoder call after the Break");

    // A Break on the token that ends generation anyway reports the natural stop.
    let mut fake = FakeDecoder::new(&[EOS], VOCAB, 64);
    let g = greedy(&mut fake, &detok, &[1], &opts(32), &mut |_: &TokenStep| ControlFlow::Break(())).unwrap();
    assert_eq!((g.ids, g.stop), (vec![EOS], Stop::EndOfText));
}

#[test]
fn an_empty_prompt_is_a_clear_error_before_the_decoder_runs() {
    let mut fake = FakeDecoder::new(&[1], VOCAB, 64);
    let (out, seen) = run(&mut fake, &[], opts(4));
    let err = out.unwrap_err();
    assert_eq!(err.downcast_ref::<PromptError>(), Some(&PromptError::Empty));
    assert!(err.to_string().contains("prompt is empty"), "{err}");
    assert!(seen.is_empty() && fake.prefills.is_empty());
}

#[test]
fn a_prompt_that_fills_the_maximum_length_is_an_error_naming_both_numbers() {
    for prompt_len in [8, 9, 30] {
        let mut fake = FakeDecoder::new(&[1], VOCAB, 8);
        let (out, _) = run(&mut fake, &vec![5; prompt_len], opts(4));
        let err = out.unwrap_err();
        assert_eq!(err.downcast_ref::<PromptError>(), Some(&PromptError::TooLong { prompt_len, max_len: 8 }));
        let msg = err.to_string();
        assert!(msg.contains(&format!("{prompt_len} tokens")) && msg.contains("at most 8") && msg.contains("at most 7 tokens"), "{msg}");
        assert!(fake.prefills.is_empty());
    }
}

#[test]
fn a_character_split_across_tokens_is_held_until_it_completes() {
    // "é" is C3 A9, "€" is E2 82 AC: one byte token each.
    let script = [b'h' as i64, 0xC3, 0xA9, 256, 0xE2, 0x82, 0xAC, EOS];
    let mut fake = FakeDecoder::new(&script, VOCAB, 64);
    let (out, seen) = run(&mut fake, &[b'x' as i64], opts(32));
    let g = out.unwrap();
    let texts: Vec<&str> = seen.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["h", "", "é", " hello", "", "", "€", ""]);
    assert_eq!(g.text, "hé hello€");
    assert_eq!(texts.concat(), g.text, "the streamed pieces add up to the whole text");
}

#[test]
fn bytes_no_later_token_can_complete_become_a_replacement_character() {
    let (_dir, detok) = byte_level_tokenizer();
    let mut stream = detok.stream();
    assert_eq!(stream.push(0xC3), "");
    assert_eq!(stream.push(b'a' as i64), "\u{FFFD}a", "a lead byte followed by ASCII");
    assert_eq!(stream.push(0xA9), "\u{FFFD}", "a lone continuation byte");
    assert_eq!(stream.push(0xE2), "");
    assert_eq!(stream.finish(), "\u{FFFD}", "held bytes at the end");
    assert_eq!(detok.decode(&[0xC3, b'a' as i64, 0xA9]), "\u{FFFD}a\u{FFFD}");
    assert_eq!(detok.decode(&[99_999, -1]), "", "an id outside the vocabulary has no text");
    assert_eq!(detok.decode(&[EOS]), "", "a special token has no text");
}

#[test]
fn terminal_safe_text_has_no_control_characters_but_keeps_newlines() {
    assert_eq!(terminal_safe("a\u{1b}[2Jb\u{5}\n\tc\u{7f}\u{9b}é"), "a␛[2Jb␅\n\tc␡\u{FFFD}é");
}

#[test]
fn argmax_takes_the_first_of_equal_logits_and_rejects_nan() {
    assert_eq!(argmax(&[0.0, 2.0, 2.0, 1.0]).unwrap(), 1);
    assert!(argmax(&[]).is_err());
    assert!(argmax(&[0.0, f32::NAN]).unwrap_err().to_string().contains("NaN"));
}

#[test]
fn decoder_errors_pass_through() {
    let mut fake = FakeDecoder::new(&[b'a' as i64, b'b' as i64], VOCAB, 64);
    let (out, seen) = run(&mut fake, &[1], opts(10));
    assert!(out.unwrap_err().to_string().contains("script ends"));
    assert_eq!(seen.len(), 2);
}
