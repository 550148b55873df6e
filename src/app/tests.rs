//! The app's rules, on fake inputs: editing, debounce, modes, the corpus, F5, F4, parity.

use super::*;
use crate::backend::named as spec;
use crate::schedule::WorkerEvent;
use crate::task::{Embedding, TaskOutput, TaskParity};

fn fake_encode(text: &str) -> anyhow::Result<Encoded> {
    anyhow::ensure!(!text.trim().is_empty(), "the text is empty");
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut ids = vec![101];
    ids.extend(words.iter().map(|w| w.len() as i64 + 1000));
    ids.push(102);
    let mut tokens = vec!["[CLS]".to_string()];
    tokens.extend(words.iter().map(|w| w.to_string()));
    tokens.push("[SEP]".to_string());
    Ok(Encoded { text: text.to_string(), attention_mask: vec![1; ids.len()], tokens, ids, truncated: false })
}

fn specs(names: &[&str]) -> Vec<BackendSpec> {
    names.iter().map(|n| spec(n)).collect()
}

fn embedding(v: Vec<f32>) -> Result<TaskOutput, String> {
    Ok(TaskOutput::Embedding(Embedding(v)))
}

fn app(names: &[&str]) -> (App, Instant) {
    let t0 = Instant::now();
    let config = AppConfig {
        kinds: specs(names),
        threads: 2,
        model: "m".into(),
        task: Task::FeatureExtraction,
        corpus: vec!["one two".into()],
        variants: specs(&["eager", "portable", "xnnpack", "xnnpack-int8", "xnnpack-static"]),
    };
    (App::new(config, Box::new(fake_encode), t0), t0)
}

fn runs(requests: &[Request]) -> Vec<(u64, String)> {
    requests
        .iter()
        .filter_map(|r| match r {
            Request::Run(job) => Some((job.generation, job.input.text.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_input_line_edits_anywhere_in_unicode_text() {
    let mut line = InputLine::default();
    for c in "héllo".chars() {
        line.insert(c);
    }
    line.home();
    line.right();
    line.delete();
    assert_eq!(line.text(), "hllo");
    line.insert('é');
    line.end();
    line.backspace();
    line.left();
    line.insert_str("\tx\ny\u{7}");
    assert_eq!((line.text(), line.cursor()), ("hél x yl", 7));
    line.right();
    line.right();
    assert_eq!(line.cursor(), 8, "the cursor stops at the end");
    assert!(line.clear() && line.text().is_empty() && line.cursor() == 0 && !line.backspace());
}

#[test]
fn typing_runs_after_the_debounce_and_enter_at_once() {
    let (mut app, t0) = app(&["eager", "xnnpack"]);
    assert!(matches!(&app.drain_requests()[..], [Request::EmbedCorpus(k, _)] if k.name == "xnnpack"));
    for c in "a cat".chars() {
        app.apply(Action::Insert(c));
    }
    assert!(runs(&app.drain_requests()).is_empty(), "nothing runs while typing");
    assert_eq!(app.next_deadline(), Some(t0 + DEBOUNCE));
    app.set_now(t0 + DEBOUNCE / 2);
    assert!(!app.tick());
    app.set_now(t0 + DEBOUNCE);
    assert!(app.tick());
    assert_eq!(runs(&app.drain_requests()), vec![(5, "a cat".to_string())]);
    assert_eq!(app.next_deadline(), None);
    assert!(app.columns().iter().all(|c| c.pending == Some(5)));

    app.apply(Action::Insert('s'));
    let requests = app.drain_requests();
    assert!(matches!(requests[..], [Request::Cancel]), "what waited for the old text is dropped");
    app.apply(Action::RunNow);
    assert_eq!(runs(&app.drain_requests()), vec![(6, "a cats".to_string())]);

    app.apply(Action::Clear);
    app.apply(Action::RunNow);
    assert!(runs(&app.drain_requests()).is_empty(), "empty text never runs");
    assert!(app.encoded().is_none() && app.encode_error().is_none());
}

#[test]
fn repeat_on_runs_the_current_text_and_modes_reach_the_scheduler() {
    let (mut app, _) = app(&["eager"]);
    app.drain_requests();
    app.apply(Action::Paste("same text".into()));
    app.apply(Action::RunNow);
    app.drain_requests();
    app.apply(Action::ToggleRepeat);
    let requests = app.drain_requests();
    assert!(matches!(requests[0], Request::SetRepeat(true)));
    assert_eq!(runs(&requests), vec![(1, "same text".to_string())]);
    app.apply(Action::ToggleSerial);
    assert!(matches!(app.drain_requests()[..], [Request::SetSerial(true)]));
    assert!(app.is_serial() && app.is_repeat());
}

#[test]
fn the_corpus_moves_to_the_next_backend_when_one_fails() {
    let (mut app, _) = app(&["eager", "portable", "xnnpack"]);
    app.drain_requests();
    app.on_worker(WorkerEvent::LoadFailed { kind: spec("xnnpack"), error: "broken".into() });
    assert!(matches!(&app.drain_requests()[..], [Request::EmbedCorpus(k, _)] if k.name == "eager"));
    app.on_worker(WorkerEvent::CorpusEmbedded { kind: spec("eager"), outcome: Err("no".into()), elapsed: Duration::ZERO });
    assert!(matches!(&app.drain_requests()[..], [Request::EmbedCorpus(k, _)] if k.name == "portable"));
    app.on_worker(WorkerEvent::LoadFailed { kind: spec("portable"), error: "broken".into() });
    assert!(matches!(app.corpus().state, CorpusState::Failed(_)));
}

#[test]
fn f5_switches_the_xnnpack_column_and_runs_the_text_on_the_new_program() {
    let (mut app, t0) = app(&["eager", "xnnpack"]);
    app.drain_requests();
    app.apply(Action::Paste("a cat".into()));
    app.apply(Action::RunNow);
    app.drain_requests();
    let input = app.encoded().map(|e| Arc::new(e.clone())).unwrap();
    app.on_worker(WorkerEvent::Loaded { kind: spec("xnnpack"), description: "x".into(), load_time: Duration::ZERO, weight_bytes: None });
    app.on_worker(WorkerEvent::Finished {
        kind: spec("xnnpack"),
        generation: 1,
        input: input.clone(),
        outcome: embedding(vec![1.0, 0.0]),
        elapsed: Duration::from_millis(2),
    });
    assert_eq!(app.column("xnnpack").unwrap().stats.count(), 1);

    app.apply(Action::NextVariant);
    let requests = app.drain_requests();
    match &requests[..] {
        [Request::Switch { from, to, job: Some(job) }, Request::EmbedCorpus(k, _)] if from.name == "xnnpack" && to.name == "xnnpack-int8" && k.name == "eager" => {
            assert_eq!((job.generation, job.input.text.as_str()), (1, "a cat"));
        }
        other => panic!("the switch, and the corpus the old program was embedding goes to eager: {other:?}"),
    }
    let column = app.column("xnnpack-int8").expect("the column shows the int8 program");
    assert_eq!((column.phase.clone(), column.stats.count(), column.pending), (Phase::Loading, 0, Some(1)));
    assert!(column.output.is_none() && column.coverage.is_none());
    assert!(app.column("xnnpack").is_none());
    assert_eq!(app.columns()[0].kind.name, "eager", "the other columns stay");

    // A late result of the old program is ignored.
    app.on_worker(WorkerEvent::Finished {
        kind: spec("xnnpack"),
        generation: 1,
        input,
        outcome: embedding(vec![1.0, 0.0]),
        elapsed: Duration::from_millis(2),
    });
    assert!(app.column("xnnpack-int8").unwrap().output.is_none());
    let _ = t0;

    app.apply(Action::NextVariant);
    app.apply(Action::NextVariant);
    assert_eq!(app.columns()[1].kind.name, "xnnpack", "three presses come back to the plain program");
}

#[test]
fn f5_skips_variants_that_are_missing_or_already_shown() {
    let t0 = Instant::now();
    let config = AppConfig {
        kinds: specs(&["xnnpack", "xnnpack-static"]),
        threads: 1,
        model: "m".into(),
        task: Task::FeatureExtraction,
        corpus: vec![],
        variants: specs(&["xnnpack", "xnnpack-static"]),
    };
    let mut app = App::new(config, Box::new(fake_encode), t0);
    app.drain_requests();
    assert!(!app.can_switch_variant(), "int8 is missing and static has its own column");
    app.apply(Action::NextVariant);
    assert!(app.drain_requests().is_empty());
    assert_eq!(app.columns()[0].kind.name, "xnnpack");
}

#[test]
fn f4_asks_for_one_traced_run_of_the_current_text_and_keeps_only_its_result() {
    let (mut app, t0) = app(&["eager", "portable", "xnnpack"]);
    app.apply(Action::ToggleProfile);
    assert!(matches!(app.profile().unwrap().state, ProfileState::Failed(_)), "no text yet");
    assert!(app.take_profile_request().is_none());
    app.apply(Action::CloseProfile);
    assert!(app.profile().is_none());

    app.on_worker(WorkerEvent::LoadFailed { kind: spec("portable"), error: "broken".into() });
    app.apply(Action::Paste("a cat".into()));
    app.apply(Action::ToggleProfile);
    let request = app.take_profile_request().expect("a traced run is asked for");
    assert_eq!(request.kinds, specs(&["xnnpack"]), "ExecuTorch columns that did not fail");
    assert_eq!(request.input.text, "a cat");
    assert!(app.take_profile_request().is_none(), "asked for once");
    assert!(matches!(app.profile().unwrap().state, ProfileState::Running { since } if since == t0));
    assert!(app.is_busy());

    // Closed and opened again: the first run's result no longer counts.
    app.apply(Action::ToggleProfile);
    app.apply(Action::ToggleProfile);
    let second = app.take_profile_request().unwrap();
    assert_ne!(second.id, request.id);
    app.on_profile(request.id, Err("old".into()));
    assert!(matches!(app.profile().unwrap().state, ProfileState::Running { .. }));
    app.on_profile(second.id, Err("ExecuTorch said no".into()));
    assert!(matches!(&app.profile().unwrap().state, ProfileState::Failed(m) if m == "ExecuTorch said no"));
    assert_eq!(app.profile().unwrap().text, "a cat");
}

#[test]
fn f6_asks_for_one_per_module_run_on_every_live_column_and_replaces_the_profile() {
    let (mut app, _t0) = app(&["eager", "portable", "xnnpack"]);
    app.apply(Action::ToggleLayers);
    assert!(matches!(app.layers().unwrap().state, LayersState::Failed(_)), "no text yet");
    assert!(app.take_layers_request().is_none());
    app.apply(Action::CloseLayers);
    assert!(app.layers().is_none());

    app.on_worker(WorkerEvent::LoadFailed { kind: spec("portable"), error: "broken".into() });
    app.apply(Action::Paste("a cat".into()));
    app.apply(Action::ToggleProfile);
    app.apply(Action::ToggleLayers);
    assert!(app.profile().is_none(), "one view at a time");
    let request = app.take_layers_request().expect("a per-module run is asked for");
    assert_eq!(request.kinds, specs(&["eager", "xnnpack"]), "every column that did not fail, eager included");
    assert!(app.is_busy());
    app.apply(Action::ToggleLayers);
    app.apply(Action::ToggleLayers);
    let second = app.take_layers_request().unwrap();
    app.on_layers(request.id, Err("old".into()));
    assert!(matches!(app.layers().unwrap().state, LayersState::Running { .. }));
    app.on_layers(second.id, Err("no sidecar".into()));
    assert!(matches!(&app.layers().unwrap().state, LayersState::Failed(m) if m == "no sidecar"));
}

#[test]
fn parity_compares_outputs_for_the_same_input_only() {
    let (mut app, t0) = app(&["xnnpack", "eager"]);
    assert_eq!(app.reference(), Some(1), "eager is the reference wherever it is");
    app.apply(Action::Paste("x".into()));
    app.apply(Action::RunNow);
    let input = app.encoded().map(|e| Arc::new(e.clone())).unwrap();
    let finish = |kind, generation, v: Vec<f32>| WorkerEvent::Finished {
        kind,
        generation,
        input: input.clone(),
        outcome: embedding(v),
        elapsed: Duration::from_millis(2),
    };
    app.on_worker(WorkerEvent::Started { kind: spec("xnnpack"), generation: 1, at: t0 });
    app.on_worker(finish(spec("xnnpack"), 1, vec![0.6, 0.8]));
    assert_eq!(app.parity(0), ParityView::Unavailable);
    app.on_worker(finish(spec("eager"), 1, vec![0.8, 0.6]));
    match app.parity(0) {
        ParityView::Value(TaskParity::Embedding(p)) => assert!((p.cosine - 0.96).abs() < 1e-6),
        other => panic!("{other:?}"),
    }
    assert_eq!(app.parity(1), ParityView::Reference);
    assert_eq!(app.column("xnnpack").unwrap().stats.count(), 1);
}

#[test]
fn coverage_is_asked_for_every_unread_program_at_start_and_after_f5() {
    let (mut app, _t0) = app(&["eager", "portable", "xnnpack"]);
    let coverage = |jobs: Vec<JobRequest>| -> Vec<Vec<String>> {
        jobs.into_iter()
            .filter_map(|j| match j {
                JobRequest::Coverage(c) => Some(c.kinds.iter().map(|k| k.name.clone()).collect()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(coverage(app.drain_jobs()), vec![vec!["portable".to_string(), "xnnpack".to_string()]], "the .pte columns, eager not");
    app.on_job(JobDone::Coverage(vec![(spec("portable"), Ok(CoverageView::default())), (spec("xnnpack"), Err("unreadable".into()))]));
    assert_eq!(app.column("portable").unwrap().coverage, Some(Ok(CoverageView::default())));
    assert_eq!(app.column("xnnpack").unwrap().coverage, Some(Err("unreadable".into())));

    app.apply(Action::NextVariant);
    assert_eq!(coverage(app.drain_jobs()), vec![vec!["xnnpack-int8".to_string()]], "only the program F5 brought in");
    assert!(app.drain_jobs().is_empty(), "asked for once");
}

fn generation_app(names: &[&str]) -> App {
    let config = AppConfig {
        kinds: specs(names),
        threads: 2,
        model: "m".into(),
        task: Task::TextGeneration,
        corpus: Vec::new(),
        variants: specs(names),
    };
    App::new(config, Box::new(fake_encode), Instant::now())
}

/// `(backend, generation, reference ids)` of every teacher-forced pass asked for.
fn teacher_passes(requests: &[Request]) -> Vec<(String, u64, Vec<i64>)> {
    requests
        .iter()
        .filter_map(|r| match r {
            Request::TeacherForce(kind, work) => Some((kind.name.clone(), work.job.generation, work.reference.to_vec())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_generation_column_gets_its_top1_teacher_forced_on_the_reference_columns_ids() {
    use crate::task::generation::{Generation, Stop, Top1Agreement};
    let mut app = generation_app(&["eager", "xnnpack", "portable"]);
    app.apply(Action::Paste("x y".into()));
    app.apply(Action::RunNow);
    app.drain_requests();
    let input = app.encoded().map(|e| Arc::new(e.clone())).unwrap();
    let finish = |kind: &str, generation: u64, ids: &[i64], first_logits: Vec<f32>| WorkerEvent::Finished {
        kind: spec(kind),
        generation,
        input: input.clone(),
        outcome: Ok(TaskOutput::Generation(Generation {
            prompt_len: input.len(),
            ids: ids.to_vec(),
            text: String::new(),
            ttft: Duration::from_millis(1),
            token_latencies: vec![Duration::from_millis(1); ids.len()],
            stop: Stop::MaxNewTokens,
            first_logits,
        })),
        elapsed: Duration::from_millis(3),
    };
    let logits = |app: &App, index| match app.parity(index) {
        ParityView::Value(TaskParity::Generation(p)) => (p.first_logits_cosine, p.top1),
        other => panic!("{other:?}"),
    };

    // A column done before the reference waits for it.
    app.on_worker(finish("xnnpack", 1, &[5, 6, 9], vec![1.0, 0.0]));
    assert!(teacher_passes(&app.drain_requests()).is_empty());
    app.on_worker(finish("portable", 1, &[5, 6, 7], vec![3.0, 4.0]));
    app.on_worker(finish("eager", 1, &[5, 6, 7], vec![3.0, 4.0]));
    // Other ids: one pass on eager's ids. The same ids: every position, with no pass.
    assert_eq!(teacher_passes(&app.drain_requests()), vec![("xnnpack".to_string(), 1, vec![5, 6, 7])]);
    let (cos, top1) = logits(&app, 1);
    assert!((cos.unwrap() - 0.6).abs() < 1e-12 && top1.is_none(), "{cos:?} {top1:?}");
    assert_eq!(app.column("xnnpack").unwrap().top1, Some((1, Top1State::Pending)));
    assert_eq!(logits(&app, 2), (Some(1.0), Some(Top1Agreement { agreed: 3, positions: 3 })));

    app.on_worker(WorkerEvent::TeacherForced { kind: spec("xnnpack"), generation: 1, outcome: Ok(Top1Agreement { agreed: 2, positions: 3 }) });
    assert_eq!(logits(&app, 1).1, Some(Top1Agreement { agreed: 2, positions: 3 }));
    // Repeat mode brings the same text again: asked once.
    app.on_worker(finish("xnnpack", 1, &[5, 6, 9], vec![3.0, 4.0]));
    assert!(teacher_passes(&app.drain_requests()).is_empty());

    // A new text: the old pass's late report is not shown for it.
    app.apply(Action::Paste(" z".into()));
    app.apply(Action::RunNow);
    app.on_worker(WorkerEvent::TeacherForced { kind: spec("portable"), generation: 1, outcome: Ok(Top1Agreement { agreed: 0, positions: 3 }) });
    app.on_worker(finish("eager", 2, &[5], vec![1.0, 1.0]));
    app.on_worker(finish("portable", 2, &[4], vec![1.0, 1.0]));
    assert_eq!(teacher_passes(&app.drain_requests()), vec![("portable".to_string(), 2, vec![5])]);
    app.on_worker(WorkerEvent::TeacherForced { kind: spec("portable"), generation: 2, outcome: Err("boom".into()) });
    assert_eq!(app.column("portable").unwrap().top1, Some((2, Top1State::Failed("boom".into()))));
    assert_eq!(logits(&app, 2).1, None, "a failed pass gives no figure");
}

// ---- F8: the model list and the switch to another model directory ----

fn entry(name: &str, opened: Result<(&str, Task), &str>) -> crate::model::DirEntry {
    crate::model::DirEntry {
        path: std::path::PathBuf::from("models").join(name),
        name: name.to_string(),
        opened: opened.map(|(m, t)| (m.to_string(), t)).map_err(str::to_string),
    }
}

/// An app on `models/minilm` whose list holds three directories, one broken.
fn app_with_model_list() -> App {
    let (app, _) = app(&["eager", "xnnpack"]);
    let list: ListModels = Box::new(|| {
        vec![
            entry("broken", Err("models/broken/manifest.json is not a readable manifest: EOF")),
            entry("minilm", Ok(("all-MiniLM-L6-v2", Task::FeatureExtraction))),
            entry("tiny-gpt2", Ok(("tiny-gpt2", Task::TextGeneration))),
        ]
    });
    app.with_model_list(list, std::path::PathBuf::from("models/minilm"))
}

#[test]
fn the_model_list_opens_on_the_current_model_moves_and_chooses_another_with_the_text() {
    let mut app = app_with_model_list();
    app.apply(Action::Paste("a cat".into()));
    app.drain_requests();
    assert!(app.models().is_none());
    app.apply(Action::ToggleModels);
    let view = app.models().expect("F8 opens the list");
    assert_eq!((view.entries.len(), view.cursor, view.current), (3, 1, Some(1)), "the cursor starts on the model open now");

    // The ends hold the cursor.
    app.apply(Action::MoveModel(-1));
    app.apply(Action::MoveModel(-1));
    assert_eq!(app.models().unwrap().cursor, 0);
    // A directory that cannot be opened says why and stays.
    app.apply(Action::ChooseModel);
    let view = app.models().unwrap();
    assert!(view.message.as_deref().is_some_and(|m| m.contains("not a readable manifest")), "{:?}", view.message);
    assert!(app.switch_request().is_none() && view.switching.is_none());
    app.apply(Action::MoveModel(5));
    assert_eq!(app.models().unwrap().cursor, 2);
    assert!(app.models().unwrap().message.is_none(), "moving clears the message");

    // The paste under the list does not reach the text; choosing switches with the text as it is.
    app.apply(Action::Paste(" ignored".into()));
    app.apply(Action::ChooseModel);
    let request = app.switch_request().expect("a switch is asked for");
    assert_eq!(request, &SwitchRequest { dir: "models/tiny-gpt2".into(), text: "a cat".into() });
    assert!(matches!(app.drain_requests()[..], [Request::Cancel]), "nothing waits on the old model");
    assert!(app.is_busy(), "the switch keeps the elapsed time ticking");
    // While the old model unloads, the list stays and its cursor holds.
    app.apply(Action::CloseModels);
    app.apply(Action::MoveModel(-1));
    app.apply(Action::ChooseModel);
    let view = app.models().expect("the list stays while switching");
    assert_eq!((view.cursor, view.switching.map(|s| s.0)), (2, Some(2)));
    app.set_unloaded();
    assert!(app.models().unwrap().unloaded);
}

#[test]
fn choosing_the_model_open_closes_the_list_and_esc_closes_it_too() {
    let mut app = app_with_model_list();
    app.apply(Action::ToggleModels);
    app.apply(Action::ChooseModel);
    assert!(app.models().is_none() && app.switch_request().is_none());
    app.apply(Action::ToggleModels);
    app.apply(Action::CloseModels);
    assert!(app.models().is_none());
    app.apply(Action::ToggleHelp);
    app.apply(Action::ToggleModels);
    assert!(app.models().is_some() && !app.show_help(), "the list replaces the help");
    app.apply(Action::ToggleModels);
    assert!(app.models().is_none(), "F8 again closes it");
}

#[test]
fn a_new_session_gets_the_text_back_a_note_and_a_refused_switch_in_the_list() {
    let (t0, mut app) = {
        let app = app_with_model_list();
        (app.now(), app)
    };
    app.drain_requests();
    app.set_text("a cat");
    assert_eq!(app.input().text(), "a cat");
    app.set_now(t0 + DEBOUNCE);
    assert!(app.tick(), "the text carried over runs once its debounce is over");
    assert_eq!(runs(&app.drain_requests()), vec![(1, "a cat".to_string())]);

    app.set_note("--backends not all in tiny-gpt2: its default columns".into());
    assert!(app.note().is_some());
    app.apply(Action::Left);
    assert!(app.note().is_none(), "the next key clears the note");

    app.switch_refused(std::path::Path::new("models/tiny-gpt2"), "not enough memory to load eager, xnnpack together".into());
    let view = app.models().expect("a refused switch opens the list");
    assert_eq!((view.cursor, view.current), (2, Some(1)));
    assert!(view.message.as_deref().is_some_and(|m| m.starts_with("not enough memory")));
    assert!(app.switch_request().is_none());
}
