//! `runlens profile` on the exported MiniLM programs: the shares of a profile
//! sum to 1, the operators named are those `inspect` lists for the file (with
//! the same call counts), every kernel event maps to the operator the kernel
//! itself names, and bad programs or dumps give errors, not crashes.
//!
//! Needs the model files: `make models`. No test asserts a speed.

mod common;
use common::models_root;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use runlens::ffi::EtModule;
use runlens::model::{Encoded, ModelDir};
use runlens::profile::etdump::{self, EtDump};
use runlens::backend::OutputKind;
use runlens::profile::{profile_file, BackendProfile, OperatorKind, ProfileError};
use runlens::pte;


fn pte_path(name: &str) -> PathBuf {
    ModelDir::open(&models_root()).unwrap().require(name).unwrap_or_else(|missing| panic!("{missing}"))
}

/// "[CLS] a cat sleeps [SEP]" as the tokenizer gives it (ids need not be exact here).
fn input() -> Encoded {
    let ids = vec![101, 1037, 4937, 25126, 102];
    Encoded { text: "a cat sleeps".into(), tokens: Vec::new(), attention_mask: vec![1; ids.len()], ids, truncated: false }
}

fn profile(name: &str, runs: u32) -> BackendProfile {
    let path = pte_path(name);
    profile_file(name, &path, &input(), runs, OutputKind::Pooled).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()))
}

#[test]
fn shares_sum_to_one_and_rows_sum_to_the_total() {
    for (file, runs) in [("portable.pte", 2), ("xnnpack.pte", 3)] {
        let p = profile(file, runs);
        assert_eq!(p.runs, runs as usize, "{file}: one Execute block per traced run, the warm-up dropped");
        let shares: f64 = p.operators.iter().map(|o| o.share).sum();
        assert!((shares - 1.0).abs() < 1e-9, "{file}: shares sum to {shares}");
        let rows: f64 = p.operators.iter().map(|o| o.total_ms).sum();
        assert!((rows - p.total_ms).abs() <= 1e-9 * p.total_ms.max(1.0), "{file}: rows {rows} vs total {}", p.total_ms);
        assert!(p.total_ms > 0.0 && p.operators.iter().all(|o| (0.0..=1.0).contains(&o.share)), "{file}");
        // Instructions run inside Method::execute: their sum cannot exceed it.
        let execute = p.execute_ms.expect("a Method::execute event per run");
        assert!(p.total_ms <= execute, "{file}: instructions {} ms > Method::execute {execute} ms", p.total_ms);
        let sorted = p.operators.windows(2).all(|w| w[0].share >= w[1].share);
        assert!(sorted, "{file}: rows are sorted by share");
    }
}

/// Calls per run by operator and by delegate backend, as the profile counts them.
fn profile_counts(p: &BackendProfile) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let pick = |kind| p.operators.iter().filter(|o| o.kind == kind).map(|o| (o.name.clone(), o.count)).collect();
    (pick(OperatorKind::Kernel), pick(OperatorKind::Delegate))
}

#[test]
fn the_operators_named_are_those_inspect_lists() {
    // xnnpack-static.pte takes exactly 128 tokens: the 5-token input must be padded, as its backend does.
    for file in ["portable.pte", "xnnpack.pte", "xnnpack-int8.pte", "xnnpack-static.pte"] {
        let report = pte::inspect_file(&pte_path(file)).unwrap();
        let plan = report.plan("forward").unwrap();
        let p = profile(file, 1);
        let (kernels, delegates) = profile_counts(&p);
        // The program has no jumps: every instruction runs once per run.
        assert_eq!(kernels, plan.operators, "{file}: kernel rows vs inspect's operators");
        assert_eq!(delegates, plan.delegates, "{file}: delegate rows vs inspect's delegate calls");
        assert_eq!(p.instructions_per_run, plan.kernel_calls + plan.delegate_calls, "{file}");
    }
}

/// Sums read straight off a dump's events, per run: the `DELEGATE_CALL`
/// instruction events, and the events a delegate logged inside its calls.
struct RawSums {
    delegate_calls_ms: f64,
    inside_ms: f64,
    inside_events: u64,
}

/// One traced run of `file` as `profile_file` makes it (the same aggregate),
/// with the sums of its dump computed apart from the aggregate.
fn profile_with_raw_sums(file: &str, runs: u32) -> (BackendProfile, RawSums) {
    use runlens::profile::aggregate::{DELEGATE_EVENT, EXECUTE_BLOCK};
    let path = pte_path(file);
    let traced = runlens::profile::trace_file(&path, &input(), runs, runlens::profile::ProfiledRun::Prompt, OutputKind::Pooled).unwrap_or_else(|e| panic!("{file}: {e:#}"));
    let p = runlens::profile::profile_of(file, &traced).unwrap();
    let blocks: Vec<_> = traced.dump.runs.iter().filter(|b| b.name == EXECUTE_BLOCK).collect();
    assert_eq!(blocks.len(), runs as usize, "{file}");
    let events = || blocks.iter().flat_map(|b| &b.events);
    let per_run = |t: u64| traced.ratio.ms(t) / f64::from(runs);
    let delegate_calls = events().filter(|e| e.delegate_id.is_none() && e.name == DELEGATE_EVENT).map(|e| e.ticks()).sum();
    let inside = events().filter(|e| e.delegate_id.is_some()).map(|e| e.ticks()).sum();
    let inside_events = events().filter(|e| e.delegate_id.is_some()).count() as u64 / u64::from(runs);
    (p, RawSums { delegate_calls_ms: per_run(delegate_calls), inside_ms: per_run(inside), inside_events })
}

/// XNNPACK logs its own per-operator timings inside each delegate call; the
/// profile sums them per operator type. They must belong to the XNNPACK
/// delegate, fit inside its calls' time, and count the fully-connected
/// operators the file's XNNPACK graphs hold (XNNPACK names them itself, so
/// this checks runlens' grouping against the file independently).
#[test]
fn operators_inside_xnnpack_calls_fit_inside_them_and_match_the_file() {
    let mut fc_names = Vec::new();
    for file in ["xnnpack.pte", "xnnpack-int8.pte"] {
        let report = pte::inspect_file(&pte_path(file)).unwrap();
        let plan = report.plan("forward").unwrap();
        let (p, raw) = profile_with_raw_sums(file, 2);
        assert!(!p.delegate_operators.is_empty(), "{file}: XNNPACK logged no events of its own");
        assert!(p.delegate_operators.iter().all(|d| d.delegate == pte::XNNPACK_BACKEND_ID), "{file}");
        let calls: u64 = p.delegate_operators.iter().map(|d| d.count).sum();
        assert_eq!(calls, p.delegate_events_per_run, "{file}: every delegate event is in one row");
        for d in &p.delegate_operators {
            let suffix = d.name.rsplit_once(" #").map(|(_, n)| n.bytes().all(|b| b.is_ascii_digit()));
            assert_ne!(suffix, Some(true), "{file}: {:?} keeps XNNPACK's #n", d.name);
        }
        let delegate = p.operators.iter().find(|o| o.kind == OperatorKind::Delegate).unwrap();
        let inside: f64 = p.delegate_operators.iter().map(|d| d.total_ms).sum();
        assert!(inside <= delegate.total_ms, "{file}: operators inside {inside} ms > the delegate calls' {} ms", delegate.total_ms);
        let outside = p.outside_operators_ms(delegate).unwrap();
        assert!((inside + outside - delegate.total_ms).abs() < 1e-9, "{file}");
        // Each of the three against the dump's own events, summed apart from the aggregate.
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(raw.inside_ms > 0.0 && raw.inside_events == p.delegate_events_per_run, "{file}: {} events inside", raw.inside_events);
        assert!(close(delegate.total_ms, raw.delegate_calls_ms), "{file}: delegate row {} ms vs its events' {} ms", delegate.total_ms, raw.delegate_calls_ms);
        assert!(close(inside, raw.inside_ms), "{file}: operators inside {inside} ms vs the delegate's events' {} ms", raw.inside_ms);
        let expected_outside = raw.delegate_calls_ms - raw.inside_ms;
        assert!(expected_outside > 0.0 && close(outside, expected_outside), "{file}: outside {outside} ms vs {expected_outside} ms from the events");
        let fc: Vec<_> = p.delegate_operators.iter().filter(|d| d.name.starts_with("Fully Connected")).collect();
        let fc_count: u64 = fc.iter().map(|d| d.count).sum();
        assert_eq!(Some(&fc_count), plan.xnnpack_nodes.get("XNNFullyConnected"), "{file}: runtime FC operators vs the file's FC nodes");
        fc_names.push(fc.iter().map(|d| d.name.clone()).collect::<Vec<_>>().join(", "));
    }
    // The int8 program must run XNNPACK's quantized GEMM (QC8W: per-channel int8 weights).
    assert!(!fc_names[0].contains("QC8W") && fc_names[1].contains("QC8W"), "{fc_names:?}");
    assert!(profile("portable.pte", 1).delegate_operators.is_empty(), "no delegate, no delegate events");
}

/// One traced run of `file`, decoded, with the program's instruction table.
fn traced_dump(file: &str) -> (EtDump, pte::PlanInstructions, Vec<u8>) {
    let path = pte_path(file);
    let (_, table) = pte::read_program_file(&path).unwrap();
    let mut module = EtModule::load(&path, true).unwrap();
    let _ = module.take_etdump();
    let input = input();
    module.forward(&input.ids, Some(&input.attention_mask)).unwrap();
    let bytes = module.take_etdump().unwrap();
    (etdump::decode(&bytes).unwrap(), table.plan("forward").unwrap().clone(), bytes)
}

/// The kernels log their own events (`native_call_addmm.out`) inside each
/// OPERATOR_CALL: the operator runlens maps that instruction to must be the
/// one the kernel names. This checks the mapping independently of runlens.
#[test]
fn kernel_events_name_the_operator_their_instruction_maps_to() {
    let (dump, plan, _) = traced_dump("portable.pte");
    assert_eq!(dump.runs.len(), 1);
    assert_eq!(dump.runs[0].name, "Execute");
    let mut checked = 0;
    for event in &dump.runs[0].events {
        let Some(kernel) = event.name.strip_prefix("native_call_") else { continue };
        let (chain, index) = event.instruction_ref().expect("kernel events carry their instruction");
        let Some(pte::Instruction::Kernel { op }) = plan.get(chain, index) else {
            panic!("{} at chain {chain} instruction {index} is not a kernel call", event.name)
        };
        let operator = plan.operator(op).unwrap();
        let short = operator.rsplit("::").next().unwrap();
        assert_eq!(short, kernel, "instruction {index}: {operator} vs the kernel's {}", event.name);
        checked += 1;
    }
    assert!(checked >= 100, "only {checked} kernel events");
}

#[test]
fn a_damaged_etdump_is_an_error_not_a_crash() {
    let (_, _, bytes) = traced_dump("xnnpack.pte");
    assert!(etdump::decode(&bytes).is_ok());
    for cut in [0, 3, 4, 12, bytes.len() / 2, bytes.len() - 1] {
        assert!(etdump::decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut wrong_id = bytes.clone();
    wrong_id[8..12].copy_from_slice(b"ET12");
    assert!(matches!(etdump::decode(&wrong_id), Err(etdump::DumpError::NotAnEtDump(_))));
    // Flipped bytes anywhere: decoded or refused, never a panic.
    for start in 0..64 {
        let mut flipped = bytes.clone();
        for i in (start..flipped.len()).step_by(97) {
            flipped[i] ^= 0x5a;
        }
        let _ = etdump::decode(&flipped);
    }
}

// ---- bad programs ----

fn corrupted_copies() -> Vec<(&'static str, Vec<u8>)> {
    let real = std::fs::read(pte_path("xnnpack.pte")).unwrap();
    let mut copies = common::corrupted_copies(&real).to_vec();
    copies.push(("empty", Vec::new()));
    copies
}

#[test]
fn a_profile_of_a_bad_program_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    for (what, bytes) in corrupted_copies() {
        let path = tmp.path().join("xnnpack.pte");
        std::fs::write(&path, &bytes).unwrap();
        let err = profile_file("xnnpack", &path, &input(), 1, OutputKind::Pooled).expect_err(what);
        let message = format!("{err:#}");
        assert!(message.contains("xnnpack.pte"), "{what}: {message}");
        if what != "flipped bytes" {
            assert!(matches!(err, ProfileError::Program { .. }), "{what}: the .pte reader refuses it first: {message}");
        }
    }
    let err = profile_file("xnnpack", &pte_path("xnnpack.pte"), &input(), 0, OutputKind::Pooled).unwrap_err();
    assert!(matches!(err, ProfileError::Runs { runs: 0, .. }), "{err}");
}

fn runlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlens")).args(args).output().expect("runlens starts")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_binary_exits_cleanly_on_a_bad_program() {
    let tmp = tempfile::tempdir().unwrap();
    let real = ModelDir::open(&models_root()).unwrap();
    std::os::unix::fs::symlink(real.tokenizer().unwrap(), tmp.path().join("tokenizer.json")).unwrap();
    std::os::unix::fs::symlink(real.root().join("manifest.json"), tmp.path().join("manifest.json")).unwrap();
    for (what, bytes) in corrupted_copies() {
        std::fs::write(tmp.path().join("xnnpack.pte"), &bytes).unwrap();
        let out = runlens(&["profile", "--backends", "xnnpack", "--models", tmp.path().to_str().unwrap(), "hello"]);
        // A signal (abort, segfault) leaves no exit code.
        assert_eq!(out.status.code(), Some(1), "{what}: {:?}, stderr: {}", out.status, stderr(&out));
        assert!(stderr(&out).contains("xnnpack.pte"), "{what}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{what}: nothing on stdout");
    }
    let out = runlens(&["profile", "--backends", "eager", "--models", tmp.path().to_str().unwrap(), "hello"]);
    #[cfg(feature = "eager")]
    {
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("eager has no per-operator profile"), "{}", stderr(&out));
    }
    // The lite build refuses the name itself, as a usage error.
    #[cfg(not(feature = "eager"))]
    {
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("built without the PyTorch eager path"), "{}", stderr(&out));
    }
}

#[test]
fn profile_json_is_one_object_of_the_documented_shape() {
    let root = models_root();
    let out = runlens(&["profile", "--json", "--runs", "1", "--backends", "xnnpack", "--models", root.to_str().unwrap(), "A kitten is sleeping"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("exactly one JSON object on stdout");
    assert_eq!(json["text"], "A kitten is sleeping");
    let backends = json["backends"].as_array().unwrap();
    assert_eq!(backends.len(), 1);
    let b = &backends[0];
    assert_eq!(b["name"], "xnnpack");
    assert!(b["total_ms"].is_f64());
    let ops = b["operators"].as_array().unwrap();
    assert!(!ops.is_empty());
    for o in ops {
        assert!(o["name"].is_string() && o["count"].is_u64() && o["total_ms"].is_f64() && o["share"].is_f64(), "{o}");
        assert!(o["kind"] == "kernel" || o["kind"] == "delegate", "{o}");
    }
    assert!(ops.iter().any(|o| o["kind"] == "delegate" && o["name"] == pte::XNNPACK_BACKEND_ID), "{b}");
    let inside = b["delegate_operators"].as_array().expect("the operators inside the delegate calls");
    assert!(!inside.is_empty(), "{b}");
    for d in inside {
        assert!(d["delegate"] == pte::XNNPACK_BACKEND_ID && d["name"].is_string() && d["count"].is_u64(), "{d}");
        assert!(d["total_ms"].is_f64() && d["share"].is_f64(), "{d}");
    }
}

// ---- the explorer's profile view (F4), rendered into a buffer ----

mod view {
    use std::time::{Duration, Instant};

    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::widgets::Widget;
    use runlens::app::{ProfileState, ProfileView};
    use runlens::profile::{BackendProfile, DelegateOperatorProfile, OperatorKind, OperatorProfile, ProfileReport};
    use runlens::ui::profile::ProfilePanel;

    fn lines(buf: &Buffer) -> Vec<String> {
        (0..buf.area.height).map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>()).collect()
    }

    fn render(view: &ProfileView, now: Instant, width: u16, height: u16) -> Vec<String> {
        let mut buf = Buffer::empty(Rect::new(0, 0, width, height));
        ProfilePanel { view, now }.render(buf.area, &mut buf);
        lines(&buf)
    }

    /// The F4 view of a finished profile, `height` rows at 80 columns.
    fn ready_screen(report: ProfileReport, height: u16) -> Vec<String> {
        let view = ProfileView { id: 1, text: "a cat".into(), state: ProfileState::Ready(report) };
        render(&view, Instant::now(), 80, height)
    }

    /// Expected rows, with ♯ for the × of the calls column (one cell, unlike in source).
    fn expect(rows: &[&str]) -> Vec<String> {
        rows.iter().map(|l| l.replace('♯', "×")).collect()
    }

    fn op(name: &str, kind: OperatorKind, count: u64, total_ms: f64, share: f64) -> OperatorProfile {
        OperatorProfile { name: name.into(), kind, count, total_ms, share }
    }

    fn backend(name: &str, total_ms: f64, operators: Vec<OperatorProfile>) -> BackendProfile {
        BackendProfile {
            name: name.into(),
            total_ms,
            operators,
            file: format!("{name}.pte"),
            runs: 3,
            execute_ms: Some(total_ms * 1.01),
            control_ms: 0.0,
            instructions_per_run: 0,
            delegate_events_per_run: 0,
            delegate_operators: Vec::new(),
            profiler: runlens::profile::trace::PROFILER.to_string(),
        }
    }

    /// An XNNPACK profile: the delegate row and two kernels left outside it.
    fn xnnpack_backend() -> BackendProfile {
        backend(
            "xnnpack",
            4.0,
            vec![
                op("XnnpackBackend", OperatorKind::Delegate, 53, 3.88, 0.97),
                op("aten::native_layer_norm.out", OperatorKind::Kernel, 13, 0.08, 0.02),
                op("aten::expand_copy.out", OperatorKind::Kernel, 28, 0.04, 0.01),
            ],
        )
    }

    fn inside(name: &str, count: u64, total_ms: f64, share: f64) -> DelegateOperatorProfile {
        DelegateOperatorProfile { delegate: "XnnpackBackend".into(), name: name.into(), count, total_ms, share }
    }

    #[test]
    fn a_delegate_row_is_followed_by_the_operators_inside_it() {
        let mut xnnpack = xnnpack_backend();
        xnnpack.delegate_operators = vec![
            inside("Fully Connected (NC, F32) GEMM", 36, 3.5, 0.875),
            inside("Batch Matrix Multiply (NC, F32) GEMM", 12, 0.2, 0.05),
            inside("Softmax (NC, F32)", 6, 0.1, 0.025),
        ];
        let screen = ready_screen(ProfileReport { text: "a cat".into(), tokens: 4, run: Default::default(), backends: vec![xnnpack] }, 8);
        let expected = expect(&[
            "╭ profile · a separate traced run (ETDump or ORT's profiler) · F4 closes ──────╮",
            "│ \"a cat\": 4 tokens · mean of 3 traced runs · share of each backend's time     │",
            "│ xnnpack  4.000 ms/run · 53 x XnnpackBackend subgraphs = 97% of xnnpack time  │",
            "│   XnnpackBackend             delegate   53♯    3.880 ms  97.0% ███████████▋  │",
            "│   ↳ Fully Connected (NC, F3… inside     36♯    3.500 ms  87.5% ██████████▌   │",
            "│   ↳ Batch Matrix Multiply (… inside     12♯    0.200 ms   5.0% ▋             │",
            "│   … 2 more operators, 3.0% together                                          │",
            "╰──────────────────────────────────────────────────────────────────────────────╯",
        ]);
        assert_eq!(screen, expected, "\n{}", screen.join("\n"));
    }

    #[test]
    fn the_view_says_it_is_a_separate_traced_run_and_shows_the_top_operators() {
        let report = ProfileReport {
            text: "a cat".into(),
            tokens: 4,
            run: Default::default(),
            backends: vec![
                backend(
                    "portable",
                    120.0,
                    vec![
                        op("aten::addmm.out", OperatorKind::Kernel, 36, 109.2, 0.91),
                        op("aten::bmm.out", OperatorKind::Kernel, 12, 6.0, 0.05),
                        op("aten::permute_copy.out", OperatorKind::Kernel, 66, 2.4, 0.02),
                        op("aten::gelu.out", OperatorKind::Kernel, 6, 1.2, 0.01),
                        op("aten::add.out", OperatorKind::Kernel, 22, 1.2, 0.01),
                    ],
                ),
                xnnpack_backend(),
            ],
        };
        let screen = ready_screen(report, 12);
        let expected = expect(&[
            "╭ profile · a separate traced run (ETDump or ORT's profiler) · F4 closes ──────╮",
            "│ \"a cat\": 4 tokens · mean of 3 traced runs · share of each backend's time     │",
            "│ portable  120.000 ms/run · 36 x aten::addmm.out = 91% of portable time       │",
            "│   aten::addmm.out            kernel     36♯  109.200 ms  91.0% ██████████▉   │",
            "│   aten::bmm.out              kernel     12♯    6.000 ms   5.0% ▋             │",
            "│   aten::permute_copy.out     kernel     66♯    2.400 ms   2.0% ▎             │",
            "│   … 2 more operators, 2.0% together                                          │",
            "│ xnnpack  4.000 ms/run · 53 x XnnpackBackend subgraphs = 97% of xnnpack time  │",
            "│   XnnpackBackend             delegate   53♯    3.880 ms  97.0% ███████████▋  │",
            "│   aten::native_layer_norm.o… kernel     13♯    0.080 ms   2.0% ▎             │",
            "│   aten::expand_copy.out      kernel     28♯    0.040 ms   1.0% ▏             │",
            "╰──────────────────────────────────────────────────────────────────────────────╯",
        ]);
        assert_eq!(screen, expected, "\n{}", screen.join("\n"));
    }

    #[test]
    fn running_and_failed_views_say_so() {
        let t0 = Instant::now();
        let view = ProfileView { id: 2, text: "a cat".into(), state: ProfileState::Running { since: t0 } };
        let screen = render(&view, t0 + Duration::from_millis(1500), 80, 4);
        assert!(screen[1].contains("\"a cat\": loading the programs with the tracer") && screen[1].contains("1.5 s"), "{screen:?}");
        let view = ProfileView { id: 3, text: "a cat".into(), state: ProfileState::Failed("xnnpack.pte: not a readable ExecuTorch program".into()) };
        let screen = render(&view, t0, 80, 5);
        assert!(screen[1].contains("no profile") && screen[2].contains("xnnpack.pte: not a readable"), "{screen:?}");
    }
}
