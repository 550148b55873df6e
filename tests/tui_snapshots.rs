//! Whole screens of the explorer rendered with ratatui's `TestBackend` and
//! compared with insta snapshots (`tests/snapshots/`). Every number comes from
//! fixed fake data and fixed instants (elapsed times are differences from one
//! `t0`), so nothing volatile reaches a snapshot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use runlens::app::{self, Action, App, AppConfig, CoverageView};
use runlens::backend::BackendSpec;
mod common;
use common::named as spec;
use runlens::model::Encoded;
use runlens::task::{Embedding, Task, TaskOutput};
use runlens::schedule::{Request, WorkerEvent};

/// A WordPiece-like tokenizer: `[CLS]`, the lower-cased words, `[MASK]` (103)
/// where the text has one, `[SEP]`.
fn fake_encode(text: &str) -> anyhow::Result<Encoded> {
    anyhow::ensure!(!text.trim().is_empty(), "the text is empty");
    let mut tokens = vec!["[CLS]".to_string()];
    let mut ids = vec![101];
    for (i, part) in text.split("[MASK]").enumerate() {
        if i > 0 {
            tokens.push("[MASK]".to_string());
            ids.push(103);
        }
        let words = part.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).map(str::to_lowercase);
        for w in words {
            ids.push(1000 + w.bytes().map(i64::from).sum::<i64>() * 7 % 29000);
            tokens.push(w);
        }
    }
    tokens.push("[SEP]".to_string());
    ids.push(102);
    Ok(Encoded { text: text.to_string(), attention_mask: vec![1; ids.len()], tokens, ids, truncated: false })
}

/// A bag-of-words embedding: deterministic, unit norm, similar for shared words.
fn fake_embed(e: &Encoded) -> Embedding {
    let mut v = vec![0f32; 384];
    for &id in &e.ids[1..e.ids.len() - 1] {
        let mut h = id as u64 ^ 0x9E37_79B9_7F4A_7C15;
        for x in v.iter_mut() {
            h ^= h << 13;
            h ^= h >> 7;
            h ^= h << 17;
            *x += (h % 2001) as f32 / 1000.0 - 1.0;
        }
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    Embedding(v.into_iter().map(|x| x / n).collect())
}

/// The same embedding as another runtime might give it: nudged by `by` in a few dimensions.
fn nudged(e: &Embedding, by: f32) -> Embedding {
    Embedding(e.0.iter().enumerate().map(|(i, &x)| if i % 97 == 3 { x + by } else { x }).collect())
}

const SENTENCE: &str = "A cat sleeps on the warm sofa";

struct Scene {
    app: App,
    t0: Instant,
}

impl Scene {
    fn new() -> Scene {
        let t0 = Instant::now();
        let config = AppConfig {
            kinds: ["eager", "portable", "xnnpack"].map(spec).to_vec(),
            threads: 2,
            model: "all-MiniLM-L6-v2".to_string(),
            task: Task::FeatureExtraction,
            corpus: app::corpus_sentences(),
            variants: ["eager", "portable", "xnnpack", "xnnpack-int8", "xnnpack-static"].map(spec).to_vec(),
        };
        Scene { app: App::new(config, Box::new(fake_encode), t0), t0 }
    }

    fn at(&mut self, ms: u64) -> &mut Self {
        self.app.set_now(self.t0 + Duration::from_millis(ms));
        self
    }

    fn send(&mut self, event: WorkerEvent) -> &mut Self {
        self.app.on_worker(event);
        self
    }

    fn load(&mut self, kind: BackendSpec, ms: u64) -> &mut Self {
        self.send(WorkerEvent::Loaded { description: format!("fake {kind}"), kind, load_time: Duration::from_millis(ms), weight_bytes: None })
    }

    fn embed_corpus(&mut self) -> &mut Self {
        let requests = self.app.drain_requests();
        let corpus = requests
            .iter()
            .find_map(|r| match r {
                Request::EmbedCorpus(kind, sentences) => Some((kind.clone(), sentences.clone())),
                _ => None,
            })
            .expect("the app asks for the corpus at start");
        assert_eq!(corpus.0.name, "xnnpack", "the fastest backend embeds the corpus");
        let embeddings = corpus.1.iter().map(fake_embed).collect();
        self.send(WorkerEvent::CorpusEmbedded { kind: corpus.0, outcome: Ok(embeddings), elapsed: Duration::from_millis(240) })
    }

    fn type_text(&mut self, text: &str) -> &mut Self {
        for c in text.chars() {
            self.app.apply(Action::Insert(c));
        }
        self
    }

    /// One finished run of the current text, `ms` long.
    fn result(&mut self, kind: BackendSpec, ms: f64, nudge: f32) -> &mut Self {
        let input = Arc::new(self.app.encoded().expect("text typed").clone());
        let generation = self.app.generation();
        let embedding = nudged(&fake_embed(&input), nudge);
        self.send(WorkerEvent::Started { kind: kind.clone(), generation, at: self.t0 })
            .send(WorkerEvent::Finished { kind, generation, input, outcome: Ok(TaskOutput::Embedding(embedding)), elapsed: Duration::from_secs_f64(ms / 1e3) })
    }

    fn coverage(&mut self) -> &mut Self {
        self.app.set_coverage(
            &spec("portable"),
            Ok(CoverageView {
                coverage: 0.0,
                kernel_calls: 367,
                delegate_calls: 0,
                top_operators: vec![("aten::addmm.out".into(), 36), ("aten::add.out".into(), 30), ("aten::view_copy.out".into(), 96)],
                file_bytes: 91_372_544,
                ..Default::default()
            }),
        );
        self.app.set_coverage(
            &spec("xnnpack"),
            Ok(CoverageView {
                coverage: 0.28,
                kernel_calls: 136,
                delegate_calls: 53,
                top_operators: vec![("aten::native_layer_norm.out".into(), 13), ("aten::view_copy.out".into(), 48)],
                file_bytes: 91_420_160,
                ..Default::default()
            }),
        );
        self
    }

    /// Everything loaded, the corpus embedded, the sentence run a few times.
    fn with_results() -> Scene {
        let mut s = Scene::new();
        s.at(600).load(spec("eager"), 512).load(spec("portable"), 205).load(spec("xnnpack"), 198).embed_corpus().coverage();
        s.at(2_000).type_text(SENTENCE);
        s.at(2_200);
        assert!(s.app.tick(), "the debounce is over");
        for (i, (e, p, x)) in [(31.2, 412.0, 3.1), (9.8, 398.0, 2.4), (8.7, 405.5, 2.2), (9.1, 401.0, 2.9)].into_iter().enumerate() {
            s.result(spec("eager"), e, 0.0);
            if i < 2 {
                s.result(spec("portable"), p, 1.2e-7);
            }
            s.result(spec("xnnpack"), x, -2.4e-7);
        }
        s.at(4_000);
        s
    }

    fn screen(&self, width: u16, height: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| runlens::ui::draw(f, &self.app)).unwrap();
        terminal.backend().to_string()
    }
}

/// Snapshot one screen. Nothing volatile needs filtering: every latency, load
/// time and elapsed time on screen comes from the fixed data above.
fn check(name: &str, screen: String) {
    insta::assert_snapshot!(name, screen);
}

#[test]
fn loading() {
    let mut s = Scene::new();
    s.at(1_250);
    check("loading", s.screen(80, 24));
}

/// A loading column says what it will need at its peak, and how far the process's
/// resident memory has come towards what every column will hold (docs/memory.md).
#[test]
fn loading_columns_say_what_they_will_need() {
    let mut s = Scene::new();
    let needs = [("eager", 147u64), ("portable", 98), ("xnnpack", 96)].map(|(name, mib)| (name.to_string(), mib << 20));
    s.app = s.app.with_needs(needs.into_iter().collect(), Some(120 << 20));
    s.app.set_resident(Some(300 << 20));
    s.at(1_250).load(spec("xnnpack"), 900);
    let screen = s.screen(120, 40);
    assert!(screen.contains("◌ loading 1.2 s · needs ~147 MiB") && screen.contains("needs ~98 MiB"), "{screen}");
    assert!(screen.contains("loading… 300 MiB of ~461 MiB resident"), "{screen}");
    // Without estimates (a directory whose files cannot be read), the line is as before.
    let mut plain = Scene::new();
    plain.at(1_250);
    assert!(plain.screen(120, 40).contains("◌ loading 1.2 s ") && !plain.screen(120, 40).contains("needs ~"));
}

#[test]
fn results_shown() {
    let s = Scene::with_results();
    let screen = s.screen(80, 24);
    // The same nearest sentence in every column: parity at a glance.
    assert_eq!(screen.matches("nearest").count(), 3, "{screen}");
    assert_eq!(screen.matches("The cat is asleep on").count(), 3, "{screen}");
    check("results_80x24", screen);
}

#[test]
fn results_on_a_large_terminal() {
    check("results_120x40", Scene::with_results().screen(120, 40));
}

#[test]
fn one_backend_in_error() {
    let mut s = Scene::new();
    s.at(600).load(spec("eager"), 512).load(spec("xnnpack"), 198);
    s.send(WorkerEvent::LoadFailed {
        kind: spec("portable"),
        error: "cannot load models/minilm/portable.pte: ExecuTorch error 0x23 (InvalidProgram): the file is truncated".into(),
    });
    s.embed_corpus().coverage();
    s.at(2_000).type_text(SENTENCE).at(2_200);
    s.app.tick();
    s.result(spec("eager"), 9.4, 0.0).result(spec("xnnpack"), 2.6, -2.4e-7);
    s.at(3_000);
    check("one_backend_in_error", s.screen(80, 24));
}

#[test]
fn running_and_stale_output() {
    let mut s = Scene::with_results();
    // New text: the old outputs are greyed and marked, runs in progress say so.
    s.type_text(" today").at(4_300);
    s.app.tick();
    let generation = s.app.generation();
    let t0 = s.t0;
    s.send(WorkerEvent::Started { kind: spec("portable"), generation, at: t0 + Duration::from_millis(4_000) });
    s.at(4_420);
    check("running_and_stale", s.screen(80, 24));
}

#[test]
fn help_overlay() {
    let mut s = Scene::with_results();
    s.app.apply(Action::ToggleHelp);
    check("help_overlay", s.screen(80, 24));
}

#[test]
fn too_small_terminal() {
    let s = Scene::with_results();
    check("too_small", s.screen(60, 20));
}

#[test]
fn serial_and_repeat_in_the_status_bar() {
    let mut s = Scene::with_results();
    s.app.apply(Action::ToggleSerial);
    s.app.apply(Action::ToggleRepeat);
    let screen = s.screen(80, 24);
    let status = screen.lines().last().unwrap().to_string();
    assert!(status.contains("SERIAL") && status.contains("REPEAT") && status.contains("2 threads"), "{status}");
    assert!(status.contains("all-MiniLM-L6-v2") && status.contains("F1 help") && status.contains("Esc quit"), "{status}");
}

// ---- the task panels (fill-mask, text-classification) ----

use runlens::task::{Classification, FillMask, MaskPrediction, TokenProb};

/// A fill-mask output over a vocabulary of 8 words; `swap` makes the second
/// word the most likely (a runtime that disagrees).
fn fake_fill(position: usize, swap: bool) -> TaskOutput {
    let words = ["cat", "dog", "child", "man", "bird", "woman", "fox", "baby"];
    let mut logits: Vec<f32> = (0..8).map(|i| 4.0 - i as f32 * 0.6).collect();
    if swap {
        logits.swap(0, 1);
    }
    let probs = {
        let e: Vec<f64> = logits.iter().map(|&l| f64::from(l).exp()).collect();
        let s: f64 = e.iter().sum();
        e.into_iter().map(|x| x / s).collect::<Vec<_>>()
    };
    let mut order: Vec<usize> = (0..8).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
    let top = order.iter().take(5).map(|&i| TokenProb { id: i as i64, token: words[i].to_string(), prob: probs[i] }).collect();
    TaskOutput::FillMask(FillMask { masks: vec![MaskPrediction { position, top, logits }], uncovered: 0 })
}

fn fake_labels(logits: Vec<f32>) -> TaskOutput {
    TaskOutput::Classification(Classification::from_logits(logits, &["negative".to_string(), "neutral".to_string(), "positive".to_string()]))
}

/// Three columns of the task model `model` with results for `text`, from `outputs` (eager, portable, xnnpack).
fn task_scene(task: Task, model: &str, text: &str, outputs: [TaskOutput; 3]) -> Scene {
    let t0 = Instant::now();
    let config = AppConfig {
        kinds: ["eager", "portable", "xnnpack"].map(spec).to_vec(),
        threads: 2,
        model: model.to_string(),
        task,
        corpus: app::corpus_sentences(),
        variants: ["eager", "portable", "xnnpack"].map(spec).to_vec(),
    };
    let mut s = Scene { app: App::new(config, Box::new(fake_encode), t0), t0 };
    assert!(s.app.drain_requests().is_empty(), "no corpus for {task}");
    s.at(600).load(spec("eager"), 512).load(spec("portable"), 205).load(spec("xnnpack"), 198).coverage();
    s.at(2_000).type_text(text).at(2_200);
    s.app.tick();
    let input = Arc::new(s.app.encoded().unwrap().clone());
    let generation = s.app.generation();
    for output in &outputs {
        if let TaskOutput::FillMask(f) = output {
            for m in &f.masks {
                assert_eq!(input.tokens.get(m.position).map(String::as_str), Some("[MASK]"), "a prediction where {text:?} has no mask");
            }
        }
    }
    for (name, output) in ["eager", "portable", "xnnpack"].into_iter().zip(outputs) {
        s.send(WorkerEvent::Started { kind: spec(name), generation, at: s.t0 + Duration::from_millis(2_200) });
        s.send(WorkerEvent::Finished { kind: spec(name), generation, input: input.clone(), outcome: Ok(output), elapsed: Duration::from_millis(7) });
    }
    s.at(3_000);
    s
}

/// A fill-mask text as the explorer runs it: with a mask (token 2, after `[CLS] the`).
const FILL_MASK_TEXT: &str = "the [MASK] sat on the mat";

#[test]
fn fill_mask_panels_mark_a_column_that_disagrees() {
    let make = || task_scene(Task::FillMask, "tiny-distilbert-mlm", FILL_MASK_TEXT, [fake_fill(2, false), fake_fill(2, true), fake_fill(2, false)]);
    let screen = make().screen(80, 24);
    assert_eq!(screen.matches("cat").count(), 3, "every column lists the reference's top token: {screen}");
    assert!(screen.contains("TOP-1 DIFFERS") && screen.contains("same top-1"), "{screen}");
    check("fill_mask_80x24", screen);
    check("fill_mask_120x40", make().screen(120, 40));
}

#[test]
fn classification_panels_show_every_label() {
    let make = || task_scene(Task::TextClassification, "tiny-bert-cls", "what a day", [fake_labels(vec![0.2, 0.1, 1.9]), fake_labels(vec![0.2, 0.1, 1.9]), fake_labels(vec![2.5, 0.1, 1.9])]);
    let screen = make().screen(80, 24);
    assert_eq!(screen.matches("positive").count(), 3, "{screen}");
    assert!(screen.contains("LABEL DIFFERS") && screen.contains("same label"), "{screen}");
    check("classification_80x24", screen);
    check("classification_120x40", make().screen(120, 40));
}

#[test]
fn a_nan_logit_is_never_the_same_label() {
    // The NaN column's argmax is the reference's label (the first): the line
    // used to read "same label" (and its probabilities 0 everywhere).
    let scene = task_scene(
        Task::TextClassification,
        "tiny-bert-cls",
        "what a day",
        [fake_labels(vec![1.9, 0.1, 0.2]), fake_labels(vec![1.9, 0.1, f32::NAN]), fake_labels(vec![1.9, 0.1, 0.2])],
    );
    let screen = scene.screen(80, 24);
    assert!(screen.contains("vs eager NaN LOGITS"), "{screen}");
    assert_eq!(screen.matches("same label").count(), 1, "only the clean column: {screen}");
}

// ---- text generation: four columns writing as they go ----

use runlens::task::generation::{Generation, Stop, TokenStep, Top1Agreement};

/// The continuation every column writes (a reference run), one token a piece.
const CONTINUATION: [&str; 24] = [
    " the", " river", " ran", " down", " to", " the", " sea", " and", " the", " old", " man", " walked", " along", " the", " shore", " until",
    " the", " sun", " went", " down", " over", " the", " hills", ".",
];

/// tiny-gpt2's tokenizer (`models/tiny-gpt2/tokenizer.json`: GPT-2's byte-level
/// BPE trained on the assets text; no `[CLS]`/`[SEP]`, a leading space is `Ġ`)
/// on the prompts the scenes type, pieces and ids as it gives them; other text
/// (a prompt being typed) one piece per character, with made-up ids.
fn fake_gpt2_encode(text: &str) -> anyhow::Result<Encoded> {
    const PROMPT: [(&str, i64); 10] =
        [("O", 47), ("n", 78), ("ce", 332), ("Ġ", 221), ("up", 382), ("on", 264), ("Ġa", 259), ("Ġt", 258), ("im", 378), ("e", 69)];
    const THERE: [(&str, i64); 2] = [("Ġthe", 262), ("re", 287)];
    anyhow::ensure!(!text.trim().is_empty(), "the text is empty");
    let pieces: Vec<(String, i64)> = match text {
        "Once upon a time" => PROMPT.iter().map(|&(t, id)| (t.to_string(), id)).collect(),
        "Once upon a time there" => PROMPT.iter().chain(&THERE).map(|&(t, id)| (t.to_string(), id)).collect(),
        _ => text.chars().map(|c| (if c == ' ' { "Ġ".to_string() } else { c.to_string() }, 300 + i64::from(u32::from(c) % 200))).collect(),
    };
    let (tokens, ids): (Vec<String>, Vec<i64>) = pieces.into_iter().unzip();
    Ok(Encoded { text: text.to_string(), attention_mask: vec![1; ids.len()], tokens, ids, truncated: false })
}

/// The columns of a GPT-2 model directory: the cache's difference beside the delegate's.
fn generation_kinds() -> Vec<BackendSpec> {
    let mut nocache = spec("xnnpack-nocache");
    nocache.column = "xnnpack-nocache".into();
    nocache.title = "XNNPACK no cache".into();
    vec![spec("eager"), spec("portable"), spec("xnnpack"), nocache]
}

/// A prompt typed and run; `tokens` per column: how many it has written,
/// its TTFT and per-token time (ms), whether it is done, the index where its
/// ids leave the reference's (if they do).
fn generation_scene(columns: [(usize, f64, f64, bool, Option<usize>); 4]) -> Scene {
    let t0 = Instant::now();
    let kinds = generation_kinds();
    let config = AppConfig {
        kinds: kinds.clone(),
        threads: 2,
        model: "tiny-gpt2".to_string(),
        task: Task::TextGeneration,
        corpus: app::corpus_sentences(),
        variants: kinds.clone(),
    };
    let mut s = Scene { app: App::new(config, Box::new(fake_gpt2_encode), t0), t0 };
    s.at(600);
    for kind in &kinds {
        s.load(kind.clone(), 150);
    }
    s.at(2_000).type_text("Once upon a time").at(2_200);
    s.app.tick();
    let input = Arc::new(s.app.encoded().unwrap().clone());
    let generation = s.app.generation();
    for (kind, (n, ttft, per_token, done, diverge)) in kinds.into_iter().zip(columns) {
        s.send(WorkerEvent::Started { kind: kind.clone(), generation, at: s.t0 + Duration::from_millis(2_200) });
        let mut ids = Vec::new();
        let mut latencies = Vec::new();
        for index in 0..n {
            let differs = diverge.is_some_and(|d| index >= d);
            // Ids inside tiny-gpt2's 512 and never its end-of-text 0 (the loop would stop there).
            let (id, text) = if differs { (400 + index as i64, [" a", " little", " boat"][index % 3].to_string()) } else { (100 + index as i64, CONTINUATION[index].to_string()) };
            // Latencies vary a little, so the sparkline has a shape.
            let ms = if index == 0 { ttft } else { per_token * (1.0 + 0.25 * ((index * 5 % 7) as f64 / 7.0)) };
            let latency = Duration::from_secs_f64(ms / 1e3);
            ids.push(id);
            latencies.push(latency);
            s.send(WorkerEvent::Token { kind: kind.clone(), generation, step: TokenStep { index, id, text, latency } });
        }
        if done {
            // The first step's logits: a column that diverges has them a little off eager's.
            let first_logits = if diverge.is_some() { vec![1.0, 2.1, 2.9, 0.2] } else { vec![1.0, 2.0, 3.0, 0.0] };
            let g = Generation { prompt_len: input.len(), text: String::new(), ttft: latencies[0], token_latencies: latencies.clone(), ids, stop: Stop::MaxNewTokens, first_logits };
            let elapsed = latencies.iter().sum();
            s.send(WorkerEvent::Finished { kind: kind.clone(), generation, input: input.clone(), outcome: Ok(TaskOutput::Generation(g)), elapsed });
            if diverge.is_some() {
                // Its teacher-forced pass on eager's ids (the app asked for it when it finished).
                let outcome = Ok(Top1Agreement { agreed: 20, positions: n });
                s.send(WorkerEvent::TeacherForced { kind, generation, outcome });
            }
        }
    }
    s.at(4_600);
    s
}

/// eager and the two XNNPACK programs have finished 24 tokens (XNNPACK's ids
/// leave eager's at the 8th); portable is still crawling at its 6th.
fn generating() -> Scene {
    generation_scene([(24, 12.4, 4.1, true, None), (6, 380.0, 96.0, false, None), (24, 3.1, 1.2, true, Some(7)), (24, 6.2, 5.3, true, None)])
}

#[test]
fn generation_columns_write_and_mark_the_divergence() {
    let screen = generating().screen(80, 24);
    assert!(screen.contains("≠ eager at token 8") && screen.contains("same ids as eager"), "{screen}");
    assert!(screen.contains("sea ≠little"), "the first differing token is marked: {screen}");
    assert!(screen.contains("ttft 380 ms"), "portable's time to first token: {screen}");
    assert!(screen.contains("9.2 tok/s · 6 tok") && screen.contains("▶ running"), "portable is still writing: {screen}");
    check("generation_80x24", screen);
    check("generation_120x40", generating().screen(120, 40));
}

#[test]
fn a_new_prompt_clears_every_column_at_once() {
    let mut s = generating();
    s.type_text(" there").at(4_700);
    let screen = s.screen(80, 24);
    assert!(!screen.contains("river"), "no token of the old prompt under the new one: {screen}");
    s.app.tick();
    let generation = s.app.generation();
    s.send(WorkerEvent::Started { kind: spec("portable"), generation, at: s.t0 + Duration::from_millis(4_900) }).at(5_000);
    let screen = s.screen(80, 24);
    assert!(!screen.contains("river") && screen.contains("prefilling"), "{screen}");
}

/// A fake layers report (fixed numbers, not measured): MiniLM-shaped rows for
/// three layers, eager, portable and xnnpack, with an unmapped remainder on
/// xnnpack and a drift on it from layer 1.
fn fake_layers_report() -> runlens::layers::LayersReport {
    use runlens::layers::report::Gap;
    use runlens::layers::{BackendLayers, LayersReport};
    let parts = ["attention.self", "attention.output", "attention.output.LayerNorm", "intermediate", "output", "output.LayerNorm"];
    let mut rows = vec![("model".to_string(), 0.02), ("embeddings".to_string(), 0.2)];
    for n in 0..3 {
        for (i, p) in parts.iter().enumerate() {
            rows.push((format!("encoder.layer.{n}.{p}"), [1.1, 0.4, 0.05, 1.5, 1.4, 0.05][i] * [0.5, 1.0, 3.0][n]));
        }
    }
    rows.push(("head".to_string(), 0.03));
    // Each backend its own spread: portable's time in the feed-forward (its addmm), xnnpack's in the norms.
    let backend = |name: &str, scale: f64, unmapped_ms: f64| {
        let weight = |r: &str| match (name, r) {
            ("portable", r) if r.ends_with("intermediate") || r.ends_with(".output") => 4.0,
            ("xnnpack", r) if r.ends_with("LayerNorm") => 10.0,
            _ => 1.0,
        };
        let rows: Vec<(String, f64)> = rows.iter().map(|(r, ms)| (r.clone(), ms * scale * weight(r))).collect();
        BackendLayers {
            name: name.into(),
            total_ms: rows.iter().map(|r| r.1).sum::<f64>() + unmapped_ms,
            rows,
            unmapped_count: u64::from(unmapped_ms > 0.0),
            unmapped_ms,
            runs: 3,
            note: None,
        }
    };
    let mut report = LayersReport::new(
        "the cat sat".into(),
        "fake".into(),
        vec![backend("eager", 1.0, 0.0), backend("portable", 40.0, 0.0), backend("xnnpack", 0.2, 0.01)],
    );
    for (row, cosine) in [("encoder.layer.0.attention.output.LayerNorm", 0.999_999_9), ("encoder.layer.1.output.LayerNorm", 0.998), ("encoder.layer.2.output.LayerNorm", 0.99)] {
        report.gaps.insert((row.to_string(), "xnnpack".to_string()), Gap { cosine, max_abs_diff: 0.01, at: "kernel" });
    }
    report
}

/// The layers view (F6) at `outcome` (`None`: still running).
fn layers_scene(outcome: Option<Result<runlens::layers::LayersReport, String>>) -> Scene {
    let mut s = Scene::with_results();
    s.app.apply(Action::ToggleLayers);
    let request = s.app.take_layers_request().expect("F6 asks for a per-module run");
    assert_eq!(request.kinds.len(), 3, "every column");
    if let Some(outcome) = outcome {
        s.app.on_layers(request.id, outcome);
    }
    s.at(4_700);
    s
}

#[test]
fn layers_view_shows_every_row_or_one_per_layer() {
    let wide = layers_scene(Some(Ok(fake_layers_report()))).screen(120, 40);
    assert!(wide.contains("L1 attention.self") && wide.contains("unmapped") && wide.contains("first drifts at L1 output.LayerNorm"), "{wide}");
    check("layers_120x40", wide);
    let small = layers_scene(Some(Ok(fake_layers_report()))).screen(80, 24);
    assert!(small.contains("layer 2 (all rows)") && small.contains("total"), "{small}");
    check("layers_80x24", small);
    let failed = layers_scene(Some(Err("xnnpack: cannot time it per module: xnnpack.modules.json: not JSON".into()))).screen(80, 24);
    assert!(failed.contains("xnnpack.modules.json: not JSON"), "{failed}");
    check("layers_failed_80x24", failed);
    check("layers_running_80x24", layers_scene(None).screen(80, 24));
}

// ---- the model list (F8) ----

/// The explorer on MiniLM with F8's list open: the current model marked, a
/// decoder, a directory whose manifest is broken (the cursor on it: its error
/// in full under the list).
fn models_scene(cursor_down: isize) -> Scene {
    use runlens::model::DirEntry;
    let mut s = Scene::with_results();
    let entry = |name: &str, opened: Result<(&str, Task), &str>| DirEntry {
        path: std::path::PathBuf::from("models").join(name),
        name: name.to_string(),
        opened: opened.map(|(m, t)| (m.to_string(), t)).map_err(str::to_string),
    };
    let list: app::ListModels = Box::new(move || {
        vec![
            entry("broken", Err("models/broken/manifest.json is not a readable manifest: EOF while parsing an object at line 1 column 9; re-export the directory")),
            entry("minilm", Ok(("all-MiniLM-L6-v2", Task::FeatureExtraction))),
            entry("smollm2-135m-instruct", Ok(("SmolLM2-135M-Instruct", Task::TextGeneration))),
            entry("tiny-bert-cls", Ok(("tiny-bert-cls", Task::TextClassification))),
            entry("tiny-distilbert-mlm", Ok(("tiny-distilbert-mlm", Task::FillMask))),
        ]
    });
    s.app = s.app.with_model_list(list, "models/minilm".into());
    s.app.apply(Action::ToggleModels);
    s.app.apply(Action::MoveModel(cursor_down));
    s
}

#[test]
fn the_model_list_shows_each_directory_its_model_and_task_and_marks_the_current() {
    let screen = models_scene(1).screen(80, 24);
    assert!(screen.contains("model directories (5)"), "{screen}");
    assert!(screen.contains("smollm2-135m-instruct  SmolLM2-135M-Instruct · text-generation"), "{screen}");
    assert!(screen.lines().any(|l| l.contains("  minilm ") && l.contains("feature-extraction  ● open")), "the model open now is marked:\n{screen}");
    assert!(screen.contains("› smollm2-135m-instruct"), "the cursor's line:\n{screen}");
    assert!(screen.contains("✖ models/broken/manifest.json is not a readable"), "{screen}");
    assert!(screen.contains("Enter switch"), "{screen}");
    assert!(screen.contains(SENTENCE), "the input line stays above the list:\n{screen}");
    check("models_80x24", screen);
    // On the broken one: its error in full under the list.
    let broken = models_scene(-1).screen(80, 24);
    assert!(broken.contains("re-export the directory"), "{broken}");
    // A switch under way says so.
    let mut switching = models_scene(1);
    switching.app.apply(Action::ChooseModel);
    switching.at(5_200);
    let screen = switching.screen(80, 24);
    assert!(screen.contains("unloading all-MiniLM-L6-v2… 1.2 s, then smollm2-135m-instruct loads"), "{screen}");
    check("models_switching_80x24", screen);
}

/// Glyph sets: every screen drawn with the console set uses only characters
/// that all of console-setup's Lat15 / Uni2 fonts (Fixed, Terminus,
/// TerminusBold, VGA, 16 px) draw, read from the fonts' own Unicode tables by
/// `scripts/console_font_codepoints.py` into `tests/data/console-font-codepoints.txt`;
/// with the ASCII set, only 7-bit characters.
///
/// The intersection of the fonts' tables, not their union (the words;
/// `tests/data/console-font-codepoints-union.txt`): the user picks the font, and
/// a screen that passes the intersection shows on every one of them, so it
/// passes the union too. The union is Uni2's table and would let `Δ` through,
/// which a Lat15 console shows as its replacement glyph.
mod glyphs {
    use std::collections::HashSet;

    use ratatui::buffer::Buffer;
    use ratatui::style::Color;
    use runlens::app::Action;
    use runlens::profile::{BackendProfile, DelegateOperatorProfile, OperatorKind, OperatorProfile, ProfileReport};
    use runlens::ui::{GlyphSet, Theme};

    use super::*;

    fn console_codepoints() -> HashSet<char> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/console-font-codepoints.txt");
        let text = std::fs::read_to_string(path).expect("tests/data/console-font-codepoints.txt");
        let points: HashSet<char> = text
            .lines()
            .filter_map(|l| l.strip_prefix("U+"))
            .map(|h| char::from_u32(u32::from_str_radix(h, 16).expect("hex")).expect("a code point"))
            .collect();
        assert!(points.len() > 500 && points.contains(&'█') && !points.contains(&'▄'), "{path} does not look like the fonts' table");
        points
    }

    #[test]
    fn the_intersection_checked_is_inside_the_union_and_stricter() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/console-font-codepoints-union.txt");
        let text = std::fs::read_to_string(path).expect("tests/data/console-font-codepoints-union.txt");
        let union: HashSet<char> = text
            .lines()
            .filter_map(|l| l.strip_prefix("U+"))
            .map(|h| char::from_u32(u32::from_str_radix(h, 16).expect("hex")).expect("a code point"))
            .collect();
        let all = console_codepoints();
        assert!(all.is_subset(&union), "the intersection has code points the union lacks: regenerate both (`make console-font-data`)");
        assert!(union.contains(&'Δ') && !all.contains(&'Δ'), "Δ: in Uni2 only, so in the union and not in the intersection");
    }

    fn profile_report() -> ProfileReport {
        let op = |name: &str, kind, count, total_ms, share| OperatorProfile { name: name.into(), kind, count, total_ms, share };
        let backend = |name: &str, total_ms: f64, operators: Vec<OperatorProfile>, inside: Vec<DelegateOperatorProfile>| BackendProfile {
            name: name.into(),
            total_ms,
            operators,
            file: format!("{name}.pte"),
            runs: 3,
            execute_ms: Some(total_ms),
            control_ms: 0.0,
            instructions_per_run: 0,
            delegate_events_per_run: 0,
            delegate_operators: inside,
            profiler: runlens::profile::trace::PROFILER.to_string(),
        };
        let inside = |name: &str, count, total_ms, share| DelegateOperatorProfile { delegate: "XnnpackBackend".into(), name: name.into(), count, total_ms, share };
        ProfileReport {
            text: SENTENCE.into(),
            tokens: 9,
            run: Default::default(),
            backends: vec![
                backend("portable", 120.0, vec![op("aten::addmm.out", OperatorKind::Kernel, 36, 109.2, 0.91), op("aten::bmm.out", OperatorKind::Kernel, 12, 10.8, 0.09)], vec![]),
                backend(
                    "xnnpack",
                    4.0,
                    vec![op("XnnpackBackend", OperatorKind::Delegate, 53, 3.88, 0.97), op("aten::native_layer_norm.out", OperatorKind::Kernel, 13, 0.12, 0.03)],
                    vec![inside("Fully Connected (NC, F32) GEMM", 36, 3.5, 0.875), inside("Softmax (NC, F32)", 6, 0.1, 0.025)],
                ),
            ],
        }
    }

    /// Every screen of the explorer, named, with the size it is drawn at.
    fn screens() -> Vec<(&'static str, Scene, u16, u16)> {
        let mut out = Vec::new();
        let mut loading = Scene::new();
        loading.at(1_250);
        out.push(("loading", loading, 80, 24));
        out.push(("results 80x24", Scene::with_results(), 80, 24));
        out.push(("results 120x40", Scene::with_results(), 120, 40));
        let mut error = Scene::new();
        error.at(600).load(spec("eager"), 512).load(spec("xnnpack"), 198);
        error.send(WorkerEvent::LoadFailed { kind: spec("portable"), error: "cannot load models/minilm/portable.pte: the file is truncated".into() });
        error.embed_corpus().coverage().at(2_000).type_text(SENTENCE).at(2_200);
        error.app.tick();
        error.result(spec("eager"), 9.4, 0.0).result(spec("xnnpack"), 2.6, -2.4e-7).at(3_000);
        out.push(("errors", error, 80, 24));
        let mut stale = Scene::with_results();
        stale.type_text(" today").at(4_300);
        stale.app.tick();
        let generation = stale.app.generation();
        let t0 = stale.t0;
        stale.send(WorkerEvent::Started { kind: spec("portable"), generation, at: t0 + Duration::from_millis(4_000) }).at(4_420);
        out.push(("running and stale", stale, 80, 24));
        let mut help = Scene::with_results();
        help.app.apply(Action::ToggleHelp);
        out.push(("help", help, 80, 24));
        out.push(("too small", Scene::with_results(), 60, 20));
        let mut modes = Scene::with_results();
        modes.app.apply(Action::ToggleSerial);
        modes.app.apply(Action::ToggleRepeat);
        modes.app.set_heat(hot_pi());
        out.push(("serial and repeat", modes, 120, 40));
        // The task panels, with a column that disagrees.
        let fill = || super::task_scene(Task::FillMask, "tiny-distilbert-mlm", FILL_MASK_TEXT, [super::fake_fill(2, false), super::fake_fill(2, true), super::fake_fill(2, false)]);
        out.push(("fill-mask 80x24", fill(), 80, 24));
        out.push(("fill-mask 120x40", fill(), 120, 40));
        let labels = || {
            super::task_scene(
                Task::TextClassification,
                "tiny-bert-cls",
                "what a day",
                [super::fake_labels(vec![0.2, 0.1, 1.9]), super::fake_labels(vec![0.2, 0.1, 1.9]), super::fake_labels(vec![2.5, 0.1, 1.9])],
            )
        };
        out.push(("classification 80x24", labels(), 80, 24));
        out.push(("classification 120x40", labels(), 120, 40));
        out.push(("generation 80x24", super::generating(), 80, 24));
        out.push(("generation 120x40", super::generating(), 120, 40));
        for outcome in [None, Some(Ok(profile_report())), Some(Err("xnnpack.pte: not a readable ExecuTorch program".to_string()))] {
            let mut profile = Scene::with_results();
            profile.app.apply(Action::ToggleProfile);
            let request = profile.app.take_profile_request().expect("F4 asks for a traced run");
            let name = match &outcome {
                None => "profile running",
                Some(Ok(_)) => "profile",
                Some(Err(_)) => "profile failed",
            };
            if let Some(outcome) = outcome {
                profile.app.on_profile(request.id, outcome);
            }
            out.push((name, profile, 120, 40));
        }
        out.push(("model list", super::models_scene(1), 80, 24));
        out.push(("model list 120x40", super::models_scene(-1), 120, 40));
        out.push(("layers running", super::layers_scene(None), 80, 24));
        out.push(("layers failed", super::layers_scene(Some(Err("portable: cannot time it".into()))), 80, 24));
        for (w, h) in [(80, 24), (120, 40)] {
            out.push(("layers", super::layers_scene(Some(Ok(super::fake_layers_report()))), w, h));
        }
        out
    }

    fn hot_pi() -> runlens::heat::HeatSample {
        runlens::heat::HeatSample { temp_c: Some(82.4), cpu_mhz: Some(1500.0), max_mhz: Some(2400.0), throttled: Some(0x4) }
    }

    #[test]
    fn the_status_bar_shows_temperature_clock_and_throttling_or_unavailable() {
        let mut s = Scene::with_results();
        let status = |s: &Scene| text(&draw(s, 120, 40, GlyphSet::Console)).lines().last().unwrap().to_string();
        assert!(!status(&s).contains("heat"), "nothing before the first reading");
        s.app.set_heat(hot_pi());
        assert!(status(&s).contains("· 82°C 1500 MHz THROTTLED"), "{}", status(&s));
        s.app.set_heat(runlens::heat::HeatSample::default());
        assert!(status(&s).contains("· heat n/a"), "{}", status(&s));
    }

    fn draw(scene: &Scene, width: u16, height: u16, glyphs: GlyphSet) -> Buffer {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        let theme = Theme::new(glyphs);
        terminal.draw(|f| runlens::ui::draw_with(f, &scene.app, &theme)).unwrap();
        terminal.backend().buffer().clone()
    }

    fn text(buf: &Buffer) -> String {
        (0..buf.area.height).map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n").collect()
    }

    #[test]
    fn every_screen_uses_only_characters_the_console_fonts_have() {
        let fonts = console_codepoints();
        for (name, scene, width, height) in screens() {
            let buf = draw(&scene, width, height, GlyphSet::Console);
            let missing: Vec<char> = buf.content.iter().flat_map(|c| c.symbol().chars()).filter(|c| !fonts.contains(c)).collect();
            assert!(missing.is_empty(), "{name}: characters the console fonts lack: {missing:?}\n{}", text(&buf));
        }
        // The check can fail: the same screen in the Unicode set has characters the fonts lack.
        let unicode = draw(&Scene::with_results(), 80, 24, GlyphSet::Unicode);
        assert!(unicode.content.iter().flat_map(|c| c.symbol().chars()).any(|c| !fonts.contains(&c)));
    }

    #[test]
    fn console_colours_are_the_16_with_backgrounds_among_the_8() {
        let base = [Color::Reset, Color::Black, Color::Red, Color::Green, Color::Yellow, Color::Blue, Color::Magenta, Color::Cyan, Color::Gray];
        for (name, scene, width, height) in screens() {
            let buf = draw(&scene, width, height, GlyphSet::Console);
            for cell in &buf.content {
                assert!(!matches!(cell.fg, Color::Rgb(..) | Color::Indexed(_)), "{name}: foreground {:?}", cell.fg);
                assert!(base.contains(&cell.bg), "{name}: background {:?} (the console shows 8)", cell.bg);
            }
        }
    }

    #[test]
    fn every_screen_is_seven_bit_with_the_ascii_set_and_nothing_is_lost() {
        for (name, scene, width, height) in screens() {
            let buf = draw(&scene, width, height, GlyphSet::Ascii);
            let screen = text(&buf);
            assert!(screen.is_ascii(), "{name}:\n{screen}");
            // No character fell through to "?": the stand-in table covers everything drawn.
            let unicode = text(&draw(&scene, width, height, GlyphSet::Unicode));
            assert_eq!(screen.matches('?').count(), unicode.matches('?').count(), "{name}: a glyph without an ASCII stand-in:\n{unicode}");
        }
    }

    /// The console set keeps what each view means: bars of three heights in
    /// the embedding strip and sparkline, the gauge's filled and empty parts,
    /// parity's max difference, the profile's bars.
    #[test]
    fn the_console_set_keeps_each_views_meaning() {
        let s = Scene::with_results();
        let screen = text(&draw(&s, 120, 40, GlyphSet::Console));
        for glyph in ['░', '▒', '█'] {
            assert!(screen.contains(glyph), "no {glyph} on the console screen:\n{screen}");
        }
        assert!(screen.contains("max|d|") && screen.contains("delegated █") && screen.contains("░░ 28%"), "{screen}");
        check("results_120x40_console", screen);
        check("results_80x24_ascii", text(&draw(&s, 80, 24, GlyphSet::Ascii)));
        let (_, profile, w, h) = screens().into_iter().find(|(n, ..)| *n == "profile").unwrap();
        let profile = text(&draw(&profile, w, h, GlyphSet::Console));
        assert!(profile.contains("└ Fully Connected") && profile.contains("███"), "{profile}");
        // The layers view's heat shades stay three steps apart on the console.
        let (_, layers, w, h) = screens().into_iter().find(|(n, _, w, _)| *n == "layers" && *w == 120).unwrap();
        let layers = text(&draw(&layers, w, h, GlyphSet::Console));
        assert!(["░░", "▒▒", "██"].iter().all(|g| layers.contains(g)), "{layers}");
    }
}
