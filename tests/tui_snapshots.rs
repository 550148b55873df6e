//! Whole screens of the explorer rendered with ratatui's `TestBackend` and
//! compared with insta snapshots (`tests/snapshots/`). Every number comes from
//! fixed fake data and fixed instants (elapsed times are differences from one
//! `t0`), so nothing volatile reaches a snapshot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use runlens::app::{self, Action, App, AppConfig, CoverageView};
use runlens::backend::{named as spec, BackendSpec};
use runlens::model::Encoded;
use runlens::task::{Embedding, Task, TaskOutput};
use runlens::schedule::{Request, WorkerEvent};

fn fake_encode(text: &str) -> anyhow::Result<Encoded> {
    anyhow::ensure!(!text.trim().is_empty(), "the text is empty");
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut tokens = vec!["[CLS]".to_string()];
    let mut ids = vec![101];
    for w in &words {
        tokens.push(w.clone());
        ids.push(1000 + w.bytes().map(i64::from).sum::<i64>() * 7 % 29000);
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
        self.send(WorkerEvent::Loaded { description: format!("fake {kind}"), kind, load_time: Duration::from_millis(ms) })
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

/// Three columns of a task model with results for `text`, from `outputs` (eager, portable, xnnpack).
fn task_scene(task: Task, text: &str, outputs: [TaskOutput; 3]) -> Scene {
    let t0 = Instant::now();
    let config = AppConfig {
        kinds: ["eager", "portable", "xnnpack"].map(spec).to_vec(),
        threads: 2,
        model: "tiny-distilbert-mlm".to_string(),
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
    for (name, output) in ["eager", "portable", "xnnpack"].into_iter().zip(outputs) {
        s.send(WorkerEvent::Started { kind: spec(name), generation, at: s.t0 + Duration::from_millis(2_200) });
        s.send(WorkerEvent::Finished { kind: spec(name), generation, input: input.clone(), outcome: Ok(output), elapsed: Duration::from_millis(7) });
    }
    s.at(3_000);
    s
}

#[test]
fn fill_mask_panels_mark_a_column_that_disagrees() {
    let make = || task_scene(Task::FillMask, "the mask sat on the mat", [fake_fill(2, false), fake_fill(2, true), fake_fill(2, false)]);
    let screen = make().screen(80, 24);
    assert_eq!(screen.matches("cat").count(), 3, "every column lists the reference's top token: {screen}");
    assert!(screen.contains("TOP-1 DIFFERS") && screen.contains("same top-1"), "{screen}");
    check("fill_mask_80x24", screen);
    check("fill_mask_120x40", make().screen(120, 40));
}

#[test]
fn classification_panels_show_every_label() {
    let make = || task_scene(Task::TextClassification, "what a day", [fake_labels(vec![0.2, 0.1, 1.9]), fake_labels(vec![0.2, 0.1, 1.9]), fake_labels(vec![2.5, 0.1, 1.9])]);
    let screen = make().screen(80, 24);
    assert_eq!(screen.matches("positive").count(), 3, "{screen}");
    assert!(screen.contains("LABEL DIFFERS") && screen.contains("same label"), "{screen}");
    check("classification_80x24", screen);
    check("classification_120x40", make().screen(120, 40));
}
