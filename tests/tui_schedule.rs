//! The scheduling rules of the explorer, without a terminal, on fake backends
//! that sleep: latest input wins, stale results are dropped, a slow backend
//! never holds up a fast one, serial mode runs one backend at a time, repeat
//! mode re-runs, a failing backend stays in its column.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use runlens::app::{Action, App, AppConfig, Phase, Tokenize};
use runlens::backend::{Backend, BackendSpec};
mod common;
use common::named as spec;
use runlens::model::Encoded;
use runlens::task::{OutputTensor, Task, TaskContext};
use runlens::schedule::{Job, Loader, Request, Scheduler, Sink, WorkerEvent};

const WAIT: Duration = Duration::from_secs(20);

/// A fake backend: sleeps, then returns an embedding made from the ids. It logs
/// every run and how many fakes were running at once.
struct FakeBackend {
    kind: BackendSpec,
    delay: Duration,
    log: Arc<Log>,
}

#[derive(Default)]
struct Log {
    runs: Mutex<Vec<(BackendSpec, String)>>,
    running: AtomicUsize,
    most_at_once: AtomicUsize,
}

impl Log {
    fn runs_of(&self, kind: BackendSpec) -> Vec<String> {
        self.runs.lock().unwrap().iter().filter(|(k, _)| *k == kind).map(|(_, t)| t.clone()).collect()
    }
}

impl Backend for FakeBackend {
    fn describe(&self) -> String {
        format!("fake {} sleeping {:?}", self.kind, self.delay)
    }
    fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
        let now = self.log.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.log.most_at_once.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        self.log.runs.lock().unwrap().push((self.kind.clone(), input.text.clone()));
        self.log.running.fetch_sub(1, Ordering::SeqCst);
        if input.text.contains("explode") {
            panic!("fake backend exploded");
        }
        if input.text.contains("fail") {
            anyhow::bail!("fake failure on {:?}", input.text);
        }
        Ok(OutputTensor::new(vec![1, input.ids.len()], input.ids.iter().map(|&i| i as f32).collect()))
    }
}

fn loader(delays: &[(BackendSpec, u64)], log: &Arc<Log>) -> Loader {
    let delays = delays.to_vec();
    let log = log.clone();
    Arc::new(move |kind| {
        let ms = delays.iter().find(|(k, _)| k == kind).map(|(_, ms)| *ms).unwrap_or(1);
        if ms == u64::MAX {
            anyhow::bail!("fake load failure of {kind}");
        }
        Ok(Box::new(FakeBackend { kind: kind.clone(), delay: Duration::from_millis(ms), log: log.clone() }) as Box<dyn Backend>)
    })
}

/// Sentence embeddings: the context the fakes' outputs are read with.
fn ctx() -> Arc<TaskContext> {
    Arc::new(TaskContext::plain(Task::FeatureExtraction))
}

fn channel_sink() -> (Sink, Receiver<WorkerEvent>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    (Arc::new(move |e| drop(tx.lock().unwrap().send(e))), rx)
}

fn fake_encode(text: &str) -> anyhow::Result<Encoded> {
    anyhow::ensure!(!text.trim().is_empty(), "the text is empty");
    let mut ids = vec![101];
    ids.extend(text.split_whitespace().map(|w| 1000 + w.bytes().map(i64::from).sum::<i64>()));
    ids.push(102);
    let mut tokens = vec!["[CLS]".to_string()];
    tokens.extend(text.split_whitespace().map(str::to_lowercase));
    tokens.push("[SEP]".to_string());
    Ok(Encoded { text: text.to_string(), attention_mask: vec![1; ids.len()], tokens, ids, truncated: false })
}

fn job(generation: u64, text: &str) -> Job {
    Job { generation, input: Arc::new(fake_encode(text).unwrap()) }
}

/// The next event matching `want`, failing after [`WAIT`].
fn wait_for(rx: &Receiver<WorkerEvent>, what: &str, mut want: impl FnMut(&WorkerEvent) -> bool) -> WorkerEvent {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(e) if want(&e) => return e,
            Ok(_) => continue,
            Err(_) => panic!("timed out waiting for {what}"),
        }
    }
}

/// Hand the app's requests to the scheduler, as the event loop does.
fn pump(app: &mut App, scheduler: &mut Scheduler) {
    for r in app.drain_requests() {
        scheduler.handle(r);
    }
}

fn loaded(rx: &Receiver<WorkerEvent>, n: usize) {
    for _ in 0..n {
        wait_for(rx, "a backend to load", |e| matches!(e, WorkerEvent::Loaded { .. }));
    }
}

#[test]
fn latest_input_wins_and_nothing_queues_behind_a_busy_backend() {
    let log = Arc::new(Log::default());
    let (sink, rx) = channel_sink();
    let scheduler = Scheduler::start(&[spec("portable")], ctx(), loader(&[(spec("portable"), 300)], &log), sink).unwrap();
    loaded(&rx, 1);
    scheduler.submit(job(1, "one"));
    wait_for(&rx, "run 1 to start", |e| matches!(e, WorkerEvent::Started { generation: 1, .. }));
    // While it runs, three newer inputs arrive; only the last may run.
    for (g, t) in [(2, "two"), (3, "three"), (4, "four")] {
        scheduler.submit(job(g, t));
    }
    wait_for(&rx, "run 4 to finish", |e| matches!(e, WorkerEvent::Finished { generation: 4, .. }));
    assert_eq!(log.runs_of(spec("portable")), vec!["one", "four"]);
    assert!(rx.try_recv().is_err(), "no other run happened");
    assert!(scheduler.shutdown(WAIT));
}

#[test]
fn results_carry_their_input_and_the_app_drops_stale_ones() {
    let log = Arc::new(Log::default());
    let (sink, rx) = channel_sink();
    let kinds = [spec("eager"), spec("portable")];
    let mut scheduler = Scheduler::start(&kinds, ctx(), loader(&[(spec("eager"), 5), (spec("portable"), 400)], &log), sink).unwrap();
    let config = AppConfig { kinds: kinds.to_vec(), threads: 2, model: "fake".into(), task: Task::FeatureExtraction, corpus: vec![], variants: vec![] };
    let tokenize: Tokenize = Box::new(fake_encode);
    let t0 = Instant::now();
    let mut app = App::new(config, tokenize, t0);

    for c in "first".chars() {
        app.apply(Action::Insert(c));
    }
    app.apply(Action::RunNow);
    pump(&mut app, &mut scheduler);
    let first_gen = app.generation();
    // Portable is busy with "first" when the text changes.
    let started = wait_for(&rx, "portable to start", |e| matches!(&e, WorkerEvent::Started { kind, .. } if kind.name == "portable"));
    app.on_worker(started);
    for c in " second".chars() {
        app.apply(Action::Insert(c));
    }
    app.set_now(Instant::now() + Duration::from_secs(1)); // the debounce is over
    assert!(app.tick());
    pump(&mut app, &mut scheduler);
    assert_ne!(app.generation(), first_gen);

    // Feed every event to the app until portable has answered for the new text.
    let mut portable_results = Vec::new();
    let deadline = Instant::now() + WAIT;
    while !portable_results.iter().any(|(g, _)| *g == app.generation()) {
        let e = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("portable to answer for the new text");
        if let WorkerEvent::Finished { kind, generation, input, .. } = &e {
            if kind.name == "portable" {
                assert_eq!(input.text, if *generation == first_gen { "first" } else { "first second" }, "a result carries its own input");
                portable_results.push((*generation, input.text.clone()));
            }
        }
        app.on_worker(e);
        let column = app.column("portable").unwrap();
        if let Some(out) = &column.output {
            assert_eq!(out.input.text, "first second", "a result for old text is never the output");
        }
    }
    assert_eq!(portable_results[0], (first_gen, "first".to_string()), "the old run finished, and was dropped");
    let portable = app.column("portable").unwrap();
    assert_eq!(portable.stale_dropped, 1);
    assert_eq!(portable.stats.count(), 1, "a dropped result is not counted in the latency either");
    assert!(app.is_current(portable.output.as_ref().unwrap()));
    assert!(scheduler.shutdown(WAIT));
}

#[test]
fn a_slow_backend_never_delays_a_fast_one() {
    let log = Arc::new(Log::default());
    let (sink, rx) = channel_sink();
    let kinds = [spec("portable"), spec("xnnpack")];
    let scheduler =
        Scheduler::start(&kinds, ctx(), loader(&[(spec("portable"), 2_000), (spec("xnnpack"), 2)], &log), sink).unwrap();
    loaded(&rx, 2);
    let mut fast_done = 0;
    for g in 1..=5 {
        scheduler.submit(job(g, &format!("input {g}")));
        // Each fast result comes back while the slow backend is still on its first input.
        let e = wait_for(&rx, "a result", |e| matches!(e, WorkerEvent::Finished { .. }));
        let WorkerEvent::Finished { kind, generation, .. } = e else { unreachable!() };
        assert_eq!((kind, generation), (spec("xnnpack"), g), "the fast backend answered first");
        fast_done += 1;
    }
    assert_eq!(fast_done, 5);
    assert!(log.runs_of(spec("portable")).is_empty(), "the slow one is still on its first run");
    // The slow one then runs only the latest input it was given.
    wait_for(&rx, "the slow result", |e| matches!(&e, WorkerEvent::Finished { kind, .. } if kind.name == "portable"));
    wait_for(&rx, "the slow result for input 5", |e| {
        matches!(&e, WorkerEvent::Finished { kind, generation: 5, .. } if kind.name == "portable")
    });
    assert_eq!(log.runs_of(spec("portable")), vec!["input 1", "input 5"]);
    assert!(scheduler.shutdown(WAIT));
}

#[test]
fn serial_mode_runs_one_backend_at_a_time() {
    let kinds = ["eager", "portable", "xnnpack"].map(spec);
    let delays: Vec<(BackendSpec, u64)> = kinds.iter().map(|k| (k.clone(), 150)).collect();
    for serial in [false, true] {
        let log = Arc::new(Log::default());
        let (sink, rx) = channel_sink();
        let mut scheduler = Scheduler::start(&kinds, ctx(), loader(&delays, &log), sink).unwrap();
        scheduler.handle(Request::SetSerial(serial));
        loaded(&rx, 3);
        scheduler.submit(job(1, "together"));
        for _ in 0..3 {
            wait_for(&rx, "every backend to finish", |e| matches!(e, WorkerEvent::Finished { .. }));
        }
        let most = log.most_at_once.load(Ordering::SeqCst);
        if serial {
            assert_eq!(most, 1, "serial: one backend at a time");
        } else {
            assert!(most >= 2, "parallel: backends run at the same time (saw {most})");
        }
        assert!(scheduler.shutdown(WAIT));
    }
}

#[test]
fn serial_repeat_takes_turns() {
    let kinds = [spec("eager"), spec("xnnpack")];
    let log = Arc::new(Log::default());
    let (sink, rx) = channel_sink();
    let mut scheduler = Scheduler::start(&kinds, ctx(), loader(&[(spec("eager"), 20), (spec("xnnpack"), 5)], &log), sink).unwrap();
    scheduler.handle(Request::SetSerial(true));
    scheduler.handle(Request::SetRepeat(true));
    loaded(&rx, 2);
    scheduler.submit(job(1, "again"));
    let mut order = Vec::new();
    for _ in 0..10 {
        let e = wait_for(&rx, "repeated runs", |e| matches!(e, WorkerEvent::Finished { .. }));
        order.push(e.kind().clone());
    }
    scheduler.handle(Request::SetRepeat(false));
    assert_eq!(log.most_at_once.load(Ordering::SeqCst), 1);
    // First come, first served: the fast one never runs twice while the slow one waits.
    for pair in order.windows(2) {
        assert_ne!(pair[0], pair[1], "turns alternate: {order:?}");
    }
    assert!(scheduler.shutdown(WAIT));
}

#[test]
fn repeat_reruns_until_a_new_input_or_until_off() {
    let log = Arc::new(Log::default());
    let (sink, rx) = channel_sink();
    let mut scheduler = Scheduler::start(&[spec("xnnpack")], ctx(), loader(&[(spec("xnnpack"), 5)], &log), sink).unwrap();
    loaded(&rx, 1);
    scheduler.handle(Request::SetRepeat(true));
    scheduler.submit(job(1, "same"));
    for _ in 0..5 {
        wait_for(&rx, "a repeated run", |e| matches!(e, WorkerEvent::Finished { generation: 1, .. }));
    }
    scheduler.submit(job(2, "new"));
    wait_for(&rx, "the new input", |e| matches!(e, WorkerEvent::Finished { generation: 2, .. }));
    for _ in 0..3 {
        wait_for(&rx, "the new input repeated", |e| matches!(e, WorkerEvent::Finished { generation: 2, .. }));
    }
    scheduler.handle(Request::SetRepeat(false));
    std::thread::sleep(Duration::from_millis(100));
    while rx.try_recv().is_ok() {}
    std::thread::sleep(Duration::from_millis(100));
    assert!(rx.try_recv().is_err(), "repeat off: the worker is idle");
    assert!(scheduler.shutdown(WAIT));
}

#[test]
fn a_failing_backend_reports_in_its_column_and_the_others_keep_working() {
    let log = Arc::new(Log::default());
    let (sink, rx) = channel_sink();
    let kinds = ["eager", "portable", "xnnpack"].map(spec);
    let mut scheduler = Scheduler::start(&kinds, ctx(),
        loader(&[(spec("eager"), 1), (spec("portable"), u64::MAX), (spec("xnnpack"), 1)], &log),
        sink,
    )
    .unwrap();
    let config = AppConfig {
        kinds: kinds.to_vec(),
        threads: 1,
        model: "fake".into(),
        task: Task::FeatureExtraction,
        corpus: vec!["a b".into(), "c d".into()],
        variants: vec![],
    };
    let mut app = App::new(config, Box::new(fake_encode), Instant::now());
    pump(&mut app, &mut scheduler);
    // Loading, the corpus on xnnpack, then a run that fails, one that panics and one that works.
    for _ in 0..4 {
        let e = wait_for(&rx, "loads and the corpus", |e| {
            matches!(e, WorkerEvent::Loaded { .. } | WorkerEvent::LoadFailed { .. } | WorkerEvent::CorpusEmbedded { .. })
        });
        app.on_worker(e);
    }
    assert!(matches!(&app.column("portable").unwrap().phase, Phase::Failed(e) if e.contains("fake load failure")));
    assert!(app.corpus().embeddings.len() == 2, "the corpus was embedded by xnnpack");
    for text in ["please fail", "explode now", "fine"] {
        app.apply(Action::Clear);
        app.apply(Action::Paste(text.into()));
        app.apply(Action::RunNow);
        pump(&mut app, &mut scheduler);
        for _ in 0..2 {
            let e = wait_for(&rx, "two results", |e| matches!(e, WorkerEvent::Finished { .. }));
            app.on_worker(e);
        }
        let eager = app.column("eager").unwrap();
        match text {
            "please fail" => assert!(eager.run_error.as_ref().is_some_and(|(_, m)| m.contains("fake failure"))),
            "explode now" => assert!(eager.run_error.as_ref().is_some_and(|(_, m)| m.contains("panicked: fake backend exploded"))),
            _ => {
                assert!(eager.run_error.is_none());
                assert_eq!(eager.output.as_ref().unwrap().input.text, "fine");
            }
        }
    }
    assert!(app.column("portable").unwrap().output.is_none());
    assert!(scheduler.shutdown(WAIT));
}

#[test]
fn switching_the_variant_loads_the_new_program_and_runs_the_current_text_on_it() {
    let log = Arc::new(Log::default());
    let (sink, rx) = channel_sink();
    let kinds = [spec("eager"), spec("xnnpack")];
    // The old program is busy with a slow run when the user presses F5.
    let delays = [(spec("eager"), 1), (spec("xnnpack"), 300), (spec("xnnpack-int8"), 1)];
    let mut scheduler = Scheduler::start(&kinds, ctx(), loader(&delays, &log), sink).unwrap();
    let config = AppConfig {
        kinds: kinds.to_vec(),
        threads: 1,
        model: "fake".into(),
        task: Task::FeatureExtraction,
        corpus: vec![],
        variants: ["eager", "portable", "xnnpack", "xnnpack-int8", "xnnpack-static"].map(spec).to_vec(),
    };
    let mut app = App::new(config, Box::new(fake_encode), Instant::now());
    loaded(&rx, 2);
    app.apply(Action::Paste("a dog".into()));
    app.apply(Action::RunNow);
    pump(&mut app, &mut scheduler);
    wait_for(&rx, "the old program to start", |e| matches!(&e, WorkerEvent::Started { kind, .. } if kind.name == "xnnpack"));

    app.apply(Action::NextVariant);
    pump(&mut app, &mut scheduler);
    let deadline = Instant::now() + WAIT;
    let mut old_finished = false;
    while !old_finished || app.column("xnnpack-int8").and_then(|c| c.output.as_ref()).is_none() {
        let e = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("the int8 program to answer");
        old_finished |= matches!(&e, WorkerEvent::Finished { kind, .. } if kind.name == "xnnpack");
        app.on_worker(e);
    }
    let column = app.column("xnnpack-int8").unwrap();
    assert_eq!(column.phase, Phase::Ready);
    assert_eq!(column.output.as_ref().unwrap().input.text, "a dog", "the current text ran on the new program");
    assert_eq!(column.stats.count(), 1, "only the new program's run is in its latency");
    assert_eq!(log.runs_of(spec("xnnpack-int8")), vec!["a dog".to_string()]);
    assert!(scheduler.shutdown(WAIT), "the old worker is gone and the new one stops");
    assert_eq!(log.runs_of(spec("xnnpack")).len(), 1, "the old program finished its run and took no more");
    assert!(app.column("xnnpack").is_none(), "its late result did not bring the old column back");
}

// ---- text generation: the greedy loop on fake decoders ----

mod generation {
    use std::ops::ControlFlow;

    use runlens::backend::Decoder;
    use runlens::task::generation::{Detokenizer, GenerateOptions, Stop};
    use runlens::task::GenerationContext;
    use runlens::task::TaskOutput;

    use super::*;

    const VOCAB: usize = 50;

    /// The id a fake decoder predicts after `last`: a fixed walk through the vocabulary.
    fn next_id(last: i64) -> i64 {
        (last * 7 + 3) % VOCAB as i64
    }

    /// What a fake writes after `prompt`: its greedy ids.
    fn expected_ids(prompt: &[i64], n: usize) -> Vec<i64> {
        let mut ids = vec![next_id(*prompt.last().unwrap())];
        while ids.len() < n {
            ids.push(next_id(*ids.last().unwrap()));
        }
        ids
    }

    /// A fake decoder: sleeps `delay` per call, then puts all the weight on
    /// [`next_id`] of the last token. Every call is logged with its backend.
    struct FakeDecoder {
        kind: BackendSpec,
        delay: Duration,
        calls: Arc<Mutex<Vec<BackendSpec>>>,
    }

    impl FakeDecoder {
        fn logits(&self, last: i64) -> Vec<f32> {
            std::thread::sleep(self.delay);
            self.calls.lock().unwrap().push(self.kind.clone());
            let mut logits = vec![0.0; VOCAB];
            logits[next_id(last) as usize] = 1.0;
            logits
        }
    }

    impl Decoder for FakeDecoder {
        fn max_len(&self) -> usize {
            1024
        }
        fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
            Ok(self.logits(*prompt.last().expect("a prompt")))
        }
        fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>> {
            Ok(self.logits(token))
        }
    }

    impl Backend for FakeDecoder {
        fn describe(&self) -> String {
            format!("fake decoder {} sleeping {:?} a token", self.kind, self.delay)
        }
        fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
            Ok(OutputTensor::new(vec![1, VOCAB], self.prefill(&input.ids)?))
        }
        fn as_decoder(&mut self) -> Option<&mut dyn Decoder> {
            Some(self)
        }
    }

    fn decoders(delays: &[(BackendSpec, u64)], calls: &Arc<Mutex<Vec<BackendSpec>>>) -> Loader {
        let delays = delays.to_vec();
        let calls = calls.clone();
        Arc::new(move |kind| {
            let ms = delays.iter().find(|(k, _)| k == kind).map_or(1, |(_, ms)| *ms);
            Ok(Box::new(FakeDecoder { kind: kind.clone(), delay: Duration::from_millis(ms), calls: calls.clone() }) as Box<dyn Backend>)
        })
    }

    fn generation_ctx(max_new_tokens: usize) -> Arc<TaskContext> {
        // The fakes' ids are checked, not their text: a detokenizer without tokens will do.
        let setup = GenerationContext { detokenizer: Arc::new(Detokenizer::default()), options: GenerateOptions { max_new_tokens, eos_token_ids: Vec::new() } };
        Arc::new(TaskContext { generation: Some(setup), ..TaskContext::plain(Task::TextGeneration) })
    }

    fn prompt(generation: u64, ids: &[i64]) -> Job {
        let input = Encoded { text: format!("prompt {generation}"), tokens: ids.iter().map(|i| format!("t{i}")).collect(), ids: ids.to_vec(), attention_mask: vec![1; ids.len()], truncated: false };
        Job { generation, input: Arc::new(input) }
    }

    #[test]
    fn a_new_prompt_cancels_the_generation_in_flight_within_one_token() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (sink, rx) = channel_sink();
        let scheduler = Scheduler::start(&[spec("portable")], generation_ctx(32), decoders(&[(spec("portable"), 100)], &calls), sink).unwrap();
        loaded(&rx, 1);
        scheduler.submit(prompt(1, &[3, 4]));
        wait_for(&rx, "the third token of the first prompt", |e| matches!(e, WorkerEvent::Token { generation: 1, step, .. } if step.index == 2));
        scheduler.submit(prompt(2, &[5]));
        let mut late_tokens = Vec::new();
        let mut first_outcome = None;
        let deadline = Instant::now() + WAIT;
        loop {
            let e = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("the second prompt to finish");
            match e {
                WorkerEvent::Token { generation: 1, step, .. } => late_tokens.push(step.index),
                WorkerEvent::Finished { generation: 1, outcome, .. } => first_outcome = Some(outcome),
                WorkerEvent::Finished { generation: 2, outcome, .. } => {
                    let Ok(TaskOutput::Generation(g)) = outcome else { panic!("the second prompt generates: {outcome:?}") };
                    assert_eq!(g.ids, expected_ids(&[5], 32), "the new prompt's continuation, all of it");
                    assert_eq!(g.stop, Stop::MaxNewTokens);
                    break;
                }
                _ => {}
            }
        }
        assert!(late_tokens.len() <= 1, "at most the token in progress comes after the new prompt: {late_tokens:?}");
        let Some(Ok(TaskOutput::Generation(first))) = first_outcome else { panic!("the first generation ends, cancelled: {first_outcome:?}") };
        assert_eq!(first.stop, Stop::Cancelled);
        assert!(first.ids.len() <= 4, "{} tokens of 32", first.ids.len());
        assert_eq!(first.ids, expected_ids(&[3, 4], first.ids.len()));
        assert_eq!(calls.lock().unwrap().len(), first.ids.len() + 32, "no decoder call after the cancel");
        assert!(scheduler.shutdown(WAIT));
    }

    #[test]
    fn stale_tokens_never_show_under_a_new_prompt() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (sink, rx) = channel_sink();
        let kinds = [spec("eager"), spec("portable")];
        let loader = decoders(&[(spec("eager"), 2), (spec("portable"), 60)], &calls);
        let mut scheduler = Scheduler::start(&kinds, generation_ctx(12), loader, sink).unwrap();
        let config = AppConfig { kinds: kinds.to_vec(), threads: 2, model: "fake-gpt2".into(), task: Task::TextGeneration, corpus: vec![], variants: vec![] };
        let mut app = App::new(config, Box::new(fake_encode), Instant::now());
        for c in "first".chars() {
            app.apply(Action::Insert(c));
        }
        app.apply(Action::RunNow);
        pump(&mut app, &mut scheduler);
        let first = app.generation();
        // Portable has written a token of the first prompt when the text changes.
        loop {
            let e = wait_for(&rx, "events of the first prompt", |_| true);
            let portable_token = matches!(&e, WorkerEvent::Token { kind, .. } if kind.name == "portable");
            app.on_worker(e);
            if portable_token {
                break;
            }
        }
        let portable = app.columns().iter().position(|c| c.kind.name == "portable").unwrap();
        assert_eq!(app.live(portable).map(|l| l.tokens.len()), Some(1));
        for c in " second".chars() {
            app.apply(Action::Insert(c));
        }
        assert!(app.drain_requests().iter().any(|r| matches!(r, Request::Cancel)), "typing stops the generation in flight");
        scheduler.handle(Request::Cancel);
        assert!(app.columns().iter().enumerate().all(|(i, _)| app.live(i).is_none()), "the old continuation is gone at once");
        app.set_now(Instant::now() + Duration::from_secs(1));
        assert!(app.tick());
        pump(&mut app, &mut scheduler);
        let second = app.generation();
        let want = expected_ids(&fake_encode("first second").unwrap().ids, 12);

        let mut stale_tokens = 0;
        let deadline = Instant::now() + WAIT;
        while app.column("portable").unwrap().output.as_ref().is_none_or(|o| o.generation != second) {
            let e = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("portable to finish the new prompt");
            stale_tokens += matches!(&e, WorkerEvent::Token { generation, .. } if *generation == first) as usize;
            app.on_worker(e);
            for i in 0..app.columns().len() {
                if let Some(live) = app.live(i) {
                    assert_eq!(live.generation, second);
                    assert_eq!(live.ids().collect::<Vec<_>>(), want[..live.tokens.len()], "only the new prompt's tokens show");
                }
            }
        }
        assert!(stale_tokens <= 2, "the old generations stopped within a token: {stale_tokens} late tokens");
        for i in 0..2 {
            let live = app.live(i).unwrap();
            assert_eq!((live.ids().collect::<Vec<_>>(), live.stop), (want.clone(), Some(Stop::MaxNewTokens)));
            assert_eq!(app.columns()[i].stats.count(), 11, "per-token latencies of the new prompt only (decode tokens)");
        }
        assert_eq!(app.divergence(portable), runlens::app::Divergence::Same { compared: 12, complete: true });
        assert!(scheduler.shutdown(WAIT));
    }

    #[test]
    fn serial_mode_generates_one_backend_at_a_time() {
        let kinds = ["eager", "portable", "xnnpack"].map(spec);
        let delays: Vec<(BackendSpec, u64)> = kinds.iter().map(|k| (k.clone(), 10)).collect();
        for serial in [false, true] {
            let calls = Arc::new(Mutex::new(Vec::new()));
            let (sink, rx) = channel_sink();
            let mut scheduler = Scheduler::start(&kinds, generation_ctx(8), decoders(&delays, &calls), sink).unwrap();
            scheduler.handle(Request::SetSerial(serial));
            loaded(&rx, 3);
            scheduler.submit(prompt(1, &[9, 10, 11]));
            for _ in 0..3 {
                let e = wait_for(&rx, "every backend to finish", |e| matches!(e, WorkerEvent::Finished { .. }));
                let WorkerEvent::Finished { outcome: Ok(TaskOutput::Generation(g)), .. } = e else { panic!("a generation: {e:?}") };
                assert_eq!(g.ids, expected_ids(&[11], 8));
            }
            // Serial: each backend's calls in one block (the turn is held for the whole generation).
            let calls = calls.lock().unwrap();
            let blocks = 1 + calls.windows(2).filter(|w| w[0] != w[1]).count();
            assert_eq!(calls.len(), 24);
            if serial {
                assert_eq!(blocks, 3, "serial: one generation after another: {calls:?}");
            } else {
                assert!(blocks > 3, "parallel: the generations interleave: {calls:?}");
            }
            assert!(scheduler.shutdown(WAIT));
        }
    }

    /// The greedy loop's callback is where the worker stops; a Break ends it at once.
    #[test]
    fn a_break_from_the_callback_ends_the_loop() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut fake = FakeDecoder { kind: spec("eager"), delay: Duration::ZERO, calls };
        let detok = Detokenizer::default();
        let mut seen = 0;
        let g = runlens::task::generation::greedy(&mut fake, &detok, &[1], &GenerateOptions { max_new_tokens: 32, eos_token_ids: Vec::new() }, &mut |_| {
            seen += 1;
            if seen == 3 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        })
        .unwrap();
        assert_eq!((g.ids.len(), g.stop), (3, Stop::Cancelled));
    }
}
