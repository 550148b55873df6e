//! Chat prompts and streamed text against transformers, on the tiny decoder
//! checkpoints (`models/checkpoints/tiny-{llama,qwen2,qwen3,llama2-sp}`,
//! tests/python/tiny_checkpoint.py) and the `chat_reference.json` that
//! tests/python/chat_reference.py writes beside each (`make test-models`):
//!
//! - the chat template rendered here equals `apply_chat_template(tokenize=False,
//!   add_generation_prompt=True)`, its ids equal `apply_chat_template`'s, and
//!   the raw ids equal `tokenizer(text)`'s, for every prompt;
//! - the streamed text (the prompt's ids, then new ids one at a time, then the
//!   held rest) equals what `TextStreamer` prints for the same ids, for
//!   byte-level BPE (Llama 3, Qwen) and SentencePiece-style BPE with
//!   byte-fallback pieces (TinyLlama-like), ids that split a character and ids
//!   that are no UTF-8 included; at every token runlens has shown at least what
//!   TextStreamer has printed, and nothing that the whole text does not start with;
//! - a template written to use what Hugging Face templates use (Python methods,
//!   `tojson`'s options, loop controls, namespaces) renders as transformers'
//!   Jinja environment renders it;
//! - a template that fails and a model without one are clear errors, and raw
//!   prompts still work.
//!
//! Tokenizers only: no model runs, no eager build needed.

use std::path::{Path, PathBuf};

use runlens::task::generation::Detokenizer;
use runlens::model::{encode_prompt, ChatError, ChatTemplate, PromptFormat, TextTokenizer, CHAT_TEMPLATE_FILE};

const ARCHS: [&str; 4] = ["tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-llama2-sp"];

#[derive(serde::Deserialize)]
struct ChatReference {
    prompts: Vec<Prompt>,
    streams: Vec<Stream>,
    features: Features,
}

/// A template using Python methods, tojson's options, loop controls and namespaces, rendered by transformers.
#[derive(serde::Deserialize)]
struct Features {
    template: String,
    texts: Vec<String>,
    rendered: Vec<String>,
}

#[derive(serde::Deserialize)]
struct Prompt {
    text: String,
    raw_ids: Vec<i64>,
    rendered: Option<String>,
    chat_ids: Option<Vec<i64>>,
    chat_tokens: Option<Vec<String>>,
    chat_error: Option<String>,
}

#[derive(serde::Deserialize)]
struct Stream {
    name: String,
    prompt_ids: Vec<i64>,
    new_ids: Vec<i64>,
    new_tokens: Vec<String>,
    /// What TextStreamer printed for `put(prompt)`, then per new token, then at `end()`.
    prompt_printed: String,
    printed: Vec<String>,
    prompt_text: String,
    new_text: String,
    text: String,
}

fn checkpoint(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/checkpoints").join(name)
}

fn reference(name: &str) -> ChatReference {
    let path = checkpoint(name).join("chat_reference.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}; run `make test-models`", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn tokenizer(dir: &Path) -> TextTokenizer {
    TextTokenizer::load(&dir.join("tokenizer.json"), usize::MAX / 2).unwrap()
}

#[test]
fn chat_prompts_equal_apply_chat_template_and_raw_prompts_equal_encode() {
    for name in ARCHS {
        let dir = checkpoint(name);
        let reference = reference(name);
        let tok = tokenizer(&dir);
        let template = ChatTemplate::load(&dir).unwrap_or_else(|e| panic!("{name}: {e}")).unwrap_or_else(|| panic!("{name} has a template"));
        assert!(reference.prompts.len() >= 5 && reference.prompts.iter().any(|p| !p.text.is_ascii()), "{name}: prompts with non-ASCII text");
        for p in &reference.prompts {
            assert_eq!(p.chat_error, None, "{name}: transformers rendered {:?}", p.text);
            let rendered = template.render_prompt(&p.text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(Some(&rendered), p.rendered.as_ref(), "{name}: the rendered chat of {:?}", p.text);
            let chat = encode_prompt(&tok, PromptFormat::Chat, Some(&template), &p.text).unwrap();
            assert_eq!(Some(&chat.ids), p.chat_ids.as_ref(), "{name}: apply_chat_template's ids for {:?}", p.text);
            assert_eq!(Some(&chat.tokens), p.chat_tokens.as_ref(), "{name}: tokens of {:?}", p.text);
            assert_eq!(chat.text, p.text);
            let raw = encode_prompt(&tok, PromptFormat::Raw, Some(&template), &p.text).unwrap();
            assert_eq!(raw.ids, p.raw_ids, "{name}: raw ids of {:?}", p.text);
            assert_ne!(raw.ids, chat.ids);
        }
    }
}

#[test]
fn what_hugging_face_templates_use_renders_as_transformers_renders_it() {
    for name in ARCHS {
        let dir = checkpoint(name);
        let f = reference(name).features;
        let special = ChatTemplate::load(&dir).unwrap().unwrap().special_tokens().clone();
        let template = ChatTemplate::new(f.template.clone(), dir.join("features.jinja"), special).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(f.texts.len(), f.rendered.len());
        for (text, want) in f.texts.iter().zip(&f.rendered) {
            assert_eq!(&template.render_prompt(text).unwrap_or_else(|e| panic!("{name}: {e}")), want, "{name}: {text:?}");
        }
    }
}

/// The pieces a stream after `prompt` shows for `new` (one per id), and the held rest.
fn streamed(detok: &Detokenizer, prompt: &[i64], new: &[i64]) -> (String, Vec<String>, String) {
    let mut stream = detok.stream_after(prompt);
    let prompt_text = stream.prompt_text().to_string();
    let pieces: Vec<String> = new.iter().map(|&id| stream.push(id)).collect();
    let shown = stream.text().to_string();
    assert_eq!(shown, pieces.concat());
    (prompt_text, pieces, stream.finish())
}

#[test]
fn streamed_text_equals_what_text_streamer_prints() {
    let mut held_byte_fallback = false;
    for name in ARCHS {
        let dir = checkpoint(name);
        let reference = reference(name);
        let detok = Detokenizer::from_file(&dir.join("tokenizer.json")).unwrap();
        for must in ["text", "split-bytes", "invalid-bytes", "special-and-newline", "chat"] {
            assert!(reference.streams.iter().any(|s| s.name == must), "{name} has the {must} stream");
        }
        for s in &reference.streams {
            let what = format!("{name} {}", s.name);
            assert_eq!(detok.decode(&s.prompt_ids), s.prompt_text, "{what}: decode of the prompt");
            assert_eq!(detok.decode(&s.new_ids), s.new_text, "{what}: decode of the new ids");
            let all: Vec<i64> = s.prompt_ids.iter().chain(&s.new_ids).copied().collect();
            assert_eq!(detok.decode(&all), s.text, "{what}: decode of prompt and new ids");

            let (prompt_text, pieces, rest) = streamed(&detok, &s.prompt_ids, &s.new_ids);
            assert_eq!(prompt_text, s.prompt_text, "{what}: the prompt's own text");
            // TextStreamer(skip_prompt=False) printed the prompt, then the continuation.
            assert_eq!(s.printed.len(), s.new_ids.len() + 1, "{what}: one print per token and end()'s");
            let printed = format!("{}{}", s.prompt_printed, s.printed.concat());
            let continuation = format!("{}{rest}", pieces.concat());
            assert_eq!(format!("{prompt_text}{continuation}"), printed, "{what}: the whole text TextStreamer printed");
            assert_eq!(detok.continuation(&s.prompt_ids, &s.new_ids), continuation, "{what}");
            // Never behind TextStreamer: at each token, what it has printed is a prefix of what runlens has shown...
            let mut shown = prompt_text.clone();
            let mut py = s.prompt_printed.clone();
            assert!(shown.starts_with(&py), "{what}: after the prompt, {shown:?} vs {py:?}");
            for (i, piece) in pieces.iter().enumerate() {
                shown.push_str(piece);
                py.push_str(&s.printed[i]);
                // ...but for a run of byte-fallback pieces still open: a later byte can turn the
                // whole run into U+FFFD (the decoder's rule), so its text is held, not shown.
                let open_run = s.new_tokens[i].starts_with("<0x");
                let consistent = if open_run { shown.starts_with(&py) || py.starts_with(&shown) } else { shown.starts_with(&py) };
                assert!(consistent, "{what}: after new token {i} ({:?}) runlens showed {shown:?}, TextStreamer {py:?}", s.new_tokens[i]);
                // Nothing shown changes later: half a character is held, not shown as U+FFFD.
                assert!(s.text.starts_with(&shown), "{what}: after new token {i} ({:?}) runlens showed {shown:?}, the whole text is {:?}", s.new_tokens[i], s.text);
                if piece.is_empty() && s.new_tokens[i].starts_with("<0x") {
                    held_byte_fallback = true;
                }
            }
        }
    }
    assert!(held_byte_fallback, "some byte-fallback piece was held until its character completed");
}

/// A copy of a checkpoint's tokenizer files, for damaging.
fn copy_tokenizer(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for file in ["tokenizer.json", "tokenizer_config.json", CHAT_TEMPLATE_FILE] {
        std::fs::copy(checkpoint(name).join(file), dir.path().join(file)).unwrap();
    }
    dir
}

#[test]
fn a_template_that_fails_is_a_clear_error_naming_the_file_and_raw_still_works() {
    let dir = copy_tokenizer("tiny-llama");
    let tok = tokenizer(dir.path());
    let file = dir.path().join(CHAT_TEMPLATE_FILE);
    std::fs::write(&file, "{{ bos_token }}\n{% if messages[0].role == 'user' %}\n{{ raise_exception('System message required') }}\n{% endif %}").unwrap();
    let template = ChatTemplate::load(dir.path()).unwrap().unwrap();
    let err = encode_prompt(&tok, PromptFormat::Chat, Some(&template), "Hello").unwrap_err();
    let msg = format!("{err:#}");
    assert!(matches!(err.downcast_ref::<ChatError>(), Some(ChatError::Render { .. })), "{msg}");
    assert!(msg.contains(&file.display().to_string()) && msg.contains("System message required") && msg.contains("line 3"), "{msg}");
    let raw = encode_prompt(&tok, PromptFormat::Raw, Some(&template), "Hello").unwrap();
    assert_eq!(raw.ids[0], 0, "<|begin_of_text|> added by the tokenizer");

    // One that does not parse fails at load, naming the file.
    std::fs::write(&file, "{% for m in messages %}").unwrap();
    let err = ChatTemplate::load(dir.path()).unwrap_err();
    assert!(matches!(err, ChatError::Syntax { .. }) && err.to_string().contains(&file.display().to_string()), "{err}");
}

#[test]
fn a_model_without_a_template_has_no_chat_format() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(checkpoint("tiny-qwen2").join("tokenizer.json"), dir.path().join("tokenizer.json")).unwrap();
    assert!(ChatTemplate::load(dir.path()).unwrap().is_none());
    assert_eq!(PromptFormat::default_for(false), PromptFormat::Raw);
    let tok = tokenizer(dir.path());
    let err = encode_prompt(&tok, PromptFormat::Chat, None, "Hello").unwrap_err();
    assert!(matches!(err.downcast_ref::<ChatError>(), Some(ChatError::NoTemplate)), "{err}");
    assert!(err.to_string().contains("no chat template") && err.to_string().contains("raw"), "{err}");
    assert!(encode_prompt(&tok, PromptFormat::Raw, None, "Hello").is_ok());
    assert!(encode_prompt(&tok, PromptFormat::Chat, None, "  ").unwrap_err().to_string().contains("empty"));
}
