//! `runlens bench --python` end to end: a short bench (one sequence length,
//! few runs, all backends and export variants), checking the JSON, CSV and plot it writes.
//! No timing assertions: only that every row and field is there and sane.
//!
//! Needs the model files and the venv: `make models`.

mod common;
use common::models_root;
use std::process::Command;

use serde_json::Value;


#[cfg(feature = "eager")]
const BACKENDS: &str = "eager,portable,xnnpack,xnnpack-int8,xnnpack-static,onnx";
#[cfg(feature = "eager")]
const RUST_ROWS: &[&str] = &["eager", "portable", "xnnpack", "xnnpack-int8", "xnnpack-static", "onnx", "shim-loop-xnnpack"];
// python-xnnpack-static only runs if the script pads the input to the program's fixed length.
#[cfg(feature = "eager")]
const PYTHON_ROWS: &[&str] = &["python-eager", "python-portable", "python-xnnpack", "python-xnnpack-int8", "python-xnnpack-static", "python-onnx"];
// The lite build (no eager path): the ExecuTorch and ONNX Runtime rows and their Python counterparts.
#[cfg(not(feature = "eager"))]
const BACKENDS: &str = "portable,xnnpack,xnnpack-int8,xnnpack-static,onnx";
#[cfg(not(feature = "eager"))]
const RUST_ROWS: &[&str] = &["portable", "xnnpack", "xnnpack-int8", "xnnpack-static", "onnx", "shim-loop-xnnpack"];
#[cfg(not(feature = "eager"))]
const PYTHON_ROWS: &[&str] = &["python-portable", "python-xnnpack", "python-xnnpack-int8", "python-xnnpack-static", "python-onnx"];
const ROW_FIELDS: [&str; 10] = ["runs", "min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms", "tokens_per_s", "gflops", "seq_len"];

#[test]
fn short_bench_with_python_writes_every_row_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (json, csv, plot) = (tmp.path().join("bench.json"), tmp.path().join("bench.csv"), tmp.path().join("bench.svg"));
    let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--models")
        .arg(models_root())
        .args(["--threads", "2", "--backends", BACKENDS, "bench", "--seq-lens", "8", "--iters", "3", "--warmup", "1", "--max-seconds", "1", "--python"])
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .arg("--plot")
        .arg(&plot)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench failed: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(!stdout.contains("aims") && !stdout.contains("MISSED"), "goals of ours are not the user's: {stdout}");
    assert!(stdout.contains("heat: temperature, clock and throttling unavailable") || stdout.contains("heat at the first cell"), "{stdout}");

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["threads"], 2);
    assert!(report["command"].as_str().unwrap().contains("bench"));
    let machine = &report["machine"];
    assert!(machine["cores"].as_u64().unwrap() >= 1);
    for key in ["cpu", "os"] {
        assert!(!machine[key].as_str().unwrap().is_empty(), "machine.{key}");
    }
    for package in ["torch", "executorch", "onnxruntime"] {
        assert!(machine["versions"][package].is_string(), "machine.versions.{package}: {machine}");
    }

    let results = report["results"].as_array().unwrap();
    for name in RUST_ROWS.iter().chain(PYTHON_ROWS.iter()) {
        let row = results.iter().find(|r| r["backend"] == *name).unwrap_or_else(|| panic!("no row {name}: {report}"));
        for field in ROW_FIELDS {
            let v = row[field].as_f64().unwrap_or_else(|| panic!("{name}.{field} missing"));
            assert!(v > 0.0 && v.is_finite(), "{name}.{field} = {v}");
        }
        assert_eq!(row["seq_len"], 8);
        let (min, p50, p99, max) = (row["min_ms"].as_f64().unwrap(), row["p50_ms"].as_f64().unwrap(), row["p99_ms"].as_f64().unwrap(), row["max_ms"].as_f64().unwrap());
        assert!(min <= p50 && p50 <= p99 && p99 <= max, "{name}: {row}");
        assert!(row["runs"].as_u64().unwrap() <= 3, "{name}: more runs than --iters");
        let ratio = &row["ratio_vs_python"];
        if name.starts_with("python-") {
            assert!(ratio.is_null(), "{name} has a ratio");
        } else {
            assert!(ratio.as_f64().is_some_and(|r| r > 0.0), "{name} has no ratio: {row}");
        }
    }

    // The wrapper's cost is measured inside each XNNPACK call, so it is positive
    // and a part of the call: at most the fastest whole call.
    let wrapper = report["wrapper_overhead"].as_array().expect("wrapper_overhead");
    assert_eq!(wrapper.len(), 1, "{report}");
    let w = &wrapper[0];
    assert_eq!(w["seq_len"], 8);
    assert!(w["calls"].as_u64().is_some_and(|n| (1..=3).contains(&n)), "{w}");
    let xnnpack_min_us = results.iter().find(|r| r["backend"] == "xnnpack").unwrap()["min_ms"].as_f64().unwrap() * 1e3;
    let (median, p90) = (w["median_us"].as_f64().unwrap(), w["p90_us"].as_f64().unwrap());
    assert!(0.0 < median && median <= p90 && p90 < xnnpack_min_us, "{w} vs the fastest call {xnnpack_min_us} us");
    assert!(w["paired_median_us"].as_f64().is_some(), "{w}");
    assert!(stdout.contains("wrapper overhead at 8 tokens (Rust call - shim's inner time"), "{stdout}");

    let loads = report["loads"].as_array().unwrap();
    for name in RUST_ROWS[..RUST_ROWS.len() - 1].iter().chain(PYTHON_ROWS.iter()) {
        let load = loads.iter().find(|l| l["backend"] == *name).unwrap_or_else(|| panic!("no load {name}"));
        assert!(load["load_ms"].as_f64().unwrap() > 0.0 && load["rss_mb"].as_f64().unwrap() > 0.0, "{load}");
    }

    let csv_text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = csv_text.lines().collect();
    assert!(lines[0].starts_with("backend,seq_len,runs,"), "{}", lines[0]);
    assert_eq!(lines.len() - 1, results.len(), "CSV and JSON rows differ");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.contains("<svg") && svg.contains("python-xnnpack"), "plot lacks the series");
}

/// A Pi that heats up: a fake sysfs tree (`RUNLENS_SYSFS_ROOT`) and a fake
/// `vcgencmd` (`RUNLENS_VCGENCMD`) that reports throttling from its second call
/// on. Every row records the readings at its start and end, and the cell
/// during which throttling appeared gets a warning.
#[test]
fn bench_rows_record_heat_and_warn_when_throttling_appears() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("sys/class/thermal/thermal_zone0/type", "cpu-thermal\n");
    write("sys/class/thermal/thermal_zone0/temp", "79800\n");
    for cpu in 0..4 {
        write(&format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"), "1500000\n");
        write(&format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq"), "2400000\n");
    }
    let calls = dir.path().join("calls");
    let vcgencmd = dir.path().join("vcgencmd");
    std::fs::write(
        &vcgencmd,
        format!("#!/bin/sh\necho x >> '{}'\nif [ $(wc -l < '{}') -le 1 ]; then echo throttled=0x0; else echo throttled=0x20002; fi\n", calls.display(), calls.display()),
    )
    .unwrap();
    std::fs::set_permissions(&vcgencmd, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let json = dir.path().join("bench.json");
    let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .env("RUNLENS_SYSFS_ROOT", &root)
        .env("RUNLENS_VCGENCMD", &vcgencmd)
        .arg("--models")
        .arg(models_root())
        .args(["--threads", "1", "--backends", "xnnpack-int8", "bench", "--seq-lens", "8", "--iters", "3", "--warmup", "1", "--max-seconds", "1", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench failed: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("WARNING: xnnpack-int8 at 8 tokens: throttling was flagged (get_throttled 0x20002)"), "{stdout}");
    assert!(stdout.contains("heat at the first cell: 80°C 1500 MHz"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let row = &report["results"][0];
    assert_eq!(row["heat_start"]["temp_c"], 79.8, "{row}");
    assert_eq!(row["heat_start"]["cpu_mhz"], 1500.0);
    assert_eq!(row["heat_start"]["max_mhz"], 2400.0);
    assert_eq!(row["heat_start"]["throttled"], 0);
    assert_eq!(row["heat_end"]["throttled"], 0x20002);
}

/// `bench --threads 1,2` sweeps like llama-bench's `-t`: one row per backend,
/// length and thread count, in one table with a threads column, one JSON, one
/// plot (latency against threads). `--threads` before the subcommand still
/// works, and a list is refused outside bench.
#[test]
fn bench_sweeps_thread_counts_in_one_table_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let (json, plot) = (dir.path().join("sweep.json"), dir.path().join("sweep.svg"));
    let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .arg("--models")
        .arg(models_root())
        .args(["--backends", "xnnpack-int8", "bench", "--threads", "1,2", "--seq-lens", "8", "--iters", "3", "--warmup", "1", "--max-seconds", "1", "--json"])
        .arg(&json)
        .arg("--plot")
        .arg(&plot)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench failed: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(" thr "), "no threads column: {stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["thread_sweep"], serde_json::json!([1, 2]));
    let threads: Vec<u64> = report["results"].as_array().unwrap().iter().map(|r| r["threads"].as_u64().unwrap()).collect();
    assert_eq!(threads, vec![1, 2], "{report}");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.contains("threads") && svg.contains("xnnpack-int8 8 tok"), "the plot is not against threads");

    // The global form before the subcommand: one count.
    let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .arg("--models")
        .arg(models_root())
        .args(["--threads", "2", "--backends", "xnnpack-int8", "bench", "--seq-lens", "8", "--iters", "2", "--warmup", "0", "--max-seconds", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("threads: 2,") && !stdout.contains(" thr "), "{stdout}");

    let out = Command::new(env!("CARGO_BIN_EXE_runlens")).args(["--threads", "1,2", "run", "a cat"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a list (1,2) is for `runlens bench`"));
}

/// A text-generation model (`models/tiny-gpt2`, `make test-models`): llama-bench's
/// pp and tg rows for every program, cache and no-cache, a prompt that leaves no
/// room skipped, the KV cache's speed-up line, and the files. No timing assertions.
#[test]
fn generation_bench_gives_prefill_and_decode_rows_for_every_program() {
    #[cfg(feature = "eager")]
    let backends = ["eager", "portable", "portable-nocache", "xnnpack", "xnnpack-nocache"];
    #[cfg(not(feature = "eager"))]
    let backends = ["portable", "portable-nocache", "xnnpack", "xnnpack-nocache"];
    let tmp = tempfile::tempdir().unwrap();
    let (json, csv, plot) = (tmp.path().join("gen.json"), tmp.path().join("gen.csv"), tmp.path().join("gen.svg"));
    let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["--model", "models/tiny-gpt2", "--threads", "1", "--backends", &backends.join(","), "bench"])
        // 125 + 8 new tokens fit neither the programs' 64 positions nor eager's 128.
        .args(["--prompt-lens", "4,125", "--gen-tokens", "8", "--iters", "2", "--warmup", "0", "--max-seconds", "1"])
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .arg("--plot")
        .arg(&plot)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench failed: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    for text in ["pp4", "tg8 @4", "KV cache: xnnpack over xnnpack-nocache at a 4-token prompt", "KV cache: portable over portable-nocache", "skipped: xnnpack at 125 tokens: 125 + 8 new tokens do not fit its 64 positions"] {
        assert!(stdout.contains(text), "{text:?} missing:\n{stdout}");
    }
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((report["gen_tokens"].as_u64(), report["model"].as_str()), (Some(8), Some("tiny-gpt2")));
    assert!(report["weights"].as_str().unwrap().contains("random weights"));
    let rows = report["results"].as_array().unwrap();
    assert_eq!(rows.len(), backends.len(), "one row per backend at 4 tokens: {rows:?}");
    for (row, name) in rows.iter().zip(backends) {
        assert_eq!((row["backend"].as_str(), row["prompt_len"].as_u64()), (Some(name), Some(4)));
        let cache = match name {
            "eager" => "dynamic",
            n if n.ends_with("-nocache") => "none",
            _ => "static",
        };
        assert_eq!(row["cache"].as_str(), Some(cache), "{name}");
        assert!((1..=2).contains(&row["runs"].as_u64().unwrap()), "{row}");
        for key in ["ttft_ms", "ttft_min_ms", "prompt_tokens_per_s", "decode_tokens_per_s", "decode_min"] {
            assert!(row[key].as_f64().unwrap() > 0.0, "{name}: {key} in {row}");
        }
        assert!(row["ttft_min_ms"].as_f64() <= row["ttft_ms"].as_f64() && row["ttft_ms"].as_f64() <= row["ttft_max_ms"].as_f64());
        assert!(row["decode_speedup_vs_python"].is_null(), "no Python rows without --python");
    }
    // The cache named: a tiny model's weights always fit in the last-level cache, so every row
    // with a weight figure says so, from the machine section's cache size, and the table marks it.
    let llc = report["machine"]["memory_read"]["llc_bytes"].as_u64();
    for row in rows {
        match (row["weight_bytes_per_token"].as_u64(), llc) {
            (Some(w), Some(c)) => {
                assert!(w < c, "a tiny model's {w} bytes a token and a {c}-byte cache");
                assert_eq!(row["weights_in_llc"], true, "{row}");
            }
            _ => assert!(row["weights_in_llc"].is_null(), "no weight or cache figure, no verdict: {row}"),
        }
    }
    if llc.is_some() {
        assert!(stdout.contains("% LLC") && stdout.contains("fit in the last-level cache"), "the LLC mark:\n{stdout}");
    }
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), backends.len());
    assert!(skipped.iter().all(|s| s["prompt_len"] == 125 && s["why"].as_str().unwrap().contains("do not fit")), "{skipped:?}");
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 1 + backends.len());
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.contains("time to first token") && svg.contains("xnnpack-nocache"));
}
