//! `runlens footprint --json` end to end: every stack (Python eager, Python
//! ExecuTorch, runlens full eager and XNNPACK, runlens lite XNNPACK) measured
//! with positive figures and the right result, and the one ordering large enough
//! to assert on a noisy machine: the lite binary is resident in less memory than
//! the full one for the same XNNPACK run (it maps no libtorch).
//!
//! Compiled in the lite build (`make test-lite`), whose binary is the lite row;
//! the full binary comes from `make build` (target/release/runlens).
#![cfg(not(feature = "eager"))]

mod common;
use common::models_root;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const ROWS: [&str; 5] = ["python-eager", "python-executorch-xnnpack", "runlens-eager", "runlens-xnnpack", "runlens-lite-xnnpack"];
const POSITIVE: [&str; 8] =
    ["disk_mb", "libraries", "rss_after_load_mb", "rss_after_run_mb", "peak_rss_mb", "load_ms", "first_run_ms", "start_to_first_result_ms"];

#[test]
fn footprint_measures_every_stack_and_the_lite_binary_is_smaller() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let full = root.join("target/release/runlens");
    assert!(full.is_file(), "{} is missing: `make build` builds the full binary (`make test-lite` does)", full.display());
    let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .current_dir(root)
        .arg("--models")
        .arg(models_root())
        .args(["--threads", "2", "footprint", "--json", "--lite-binary", env!("CARGO_BIN_EXE_runlens"), "--full-binary"])
        .arg(&full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "footprint failed ({}): {stderr}\n{}", out.status, String::from_utf8_lossy(&out.stdout));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    let rows = report["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ROWS);
    for row in rows {
        assert_eq!(row["ok"], true, "{row}");
        for field in POSITIVE {
            let v = row[field].as_f64().unwrap_or_else(|| panic!("{}.{field} missing", row["name"]));
            assert!(v > 0.0 && v.is_finite(), "{}.{field} = {v}", row["name"]);
        }
        // The text is a reference.json sentence: every stack must compute Python's embedding.
        let cos = row["cosine_vs_reference"].as_f64().unwrap_or_else(|| panic!("{}: no cosine", row["name"]));
        assert!(cos >= 0.99999, "{}: cosine {cos}", row["name"]);
        let load = row["load_ms"].as_f64().unwrap() + row["first_run_ms"].as_f64().unwrap();
        assert!((row["start_to_first_result_ms"].as_f64().unwrap() - load).abs() < 1e-6, "{row}");
    }
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).unwrap();
    // What each build maps: the lite binary no libtorch, the full one and Python do.
    assert_eq!(row("runlens-lite-xnnpack")["libtorch_loaded"], false);
    for name in ["runlens-eager", "runlens-xnnpack", "python-eager"] {
        assert_eq!(row(name)["libtorch_loaded"], true, "{name}");
    }
    // The measured comparison: libtorch alone is about 100 MB resident here, far above the noise.
    let (lite, full) = (row("runlens-lite-xnnpack")["rss_after_run_mb"].as_f64().unwrap(), row("runlens-xnnpack")["rss_after_run_mb"].as_f64().unwrap());
    assert!(lite < full, "lite {lite} MiB is not below full {full} MiB");
    let ratio = report["lite_vs_full_xnnpack_rss"].as_f64().unwrap();
    assert!((ratio - lite / full).abs() < 1e-9, "{report}");
    assert!(row("runlens-lite-xnnpack")["disk_mb"].as_f64().unwrap() < row("runlens-xnnpack")["disk_mb"].as_f64().unwrap());
}
