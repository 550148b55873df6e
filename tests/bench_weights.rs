//! The memory wall's two numbers (issue 26, item 4): the bytes of weights a
//! decode step reads, per backend, against PyTorch's own count of the same
//! checkpoint (tests/python/weight_bytes.py: every parameter once, less the tables
//! only gathered from); and the read-bandwidth probe's JSON in a bench report.

mod common;
use common::{model_path, runlens};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn python_weight_bytes(checkpoints: &[&str]) -> BTreeMap<String, u64> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dirs: Vec<String> = checkpoints.iter().map(|c| root.join("models/checkpoints").join(c).display().to_string()).collect();
    let out = Command::new(root.join(".venv/bin/python")).arg(root.join("tests/python/weight_bytes.py")).args(&dirs).output().expect("the venv's python runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let by_dir: BTreeMap<String, u64> = serde_json::from_slice(&out.stdout).unwrap();
    checkpoints.iter().zip(&dirs).map(|(c, d)| (c.to_string(), by_dir[d])).collect()
}

/// Every program of the tiny decoders, and their eager checkpoints, read what
/// PyTorch's model holds: exactly for the checkpoint, and for a program within
/// 1% (the export adds a few constants, RoPE's frequencies and masks, and
/// stores identical ones once: GPT-2's zero biases and its LayerNorms' ones and
/// zeros; at the tiny sizes these are visible, at real sizes nothing).
#[test]
fn weight_bytes_per_token_match_pytorch_count_of_the_checkpoint() {
    // tiny-gpt2: tied head, a position embedding; tiny-llama: untied head; tiny-qwen2: tied, biases.
    let expected = python_weight_bytes(&["tiny-gpt2", "tiny-llama", "tiny-qwen2"]);
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    for (name, want) in &expected {
        let dir = models.join(name);
        let eager = runlens::bench::weights::checkpoint(&dir.join("model.safetensors")).unwrap();
        assert_eq!(eager, *want, "{name}: eager's checkpoint");
        for program in ["portable", "xnnpack", "xnnpack-nocache"] {
            let got = runlens::bench::weights::program(&dir.join(format!("{program}.pte"))).unwrap();
            let extra = got as f64 / *want as f64 - 1.0;
            eprintln!("{name}/{program}: {got} bytes, PyTorch {want} ({:+.3}%)", extra * 100.0);
            assert!(extra.abs() < 0.01, "{name}/{program}: {got} bytes against PyTorch's {want} ({:+.3}%)", extra * 100.0);
            // The loaded program counts the same from what it read at open (bench and the explorer ask it).
            let model = runlens::model::ModelDir::open(&dir).unwrap();
            let spec = runlens::backend::catalog(&model, &[]).unwrap().into_iter().find(|s| s.name == program).unwrap();
            let loaded = runlens::task::load_backend(&spec, &model).unwrap();
            assert_eq!(loaded.weight_bytes_per_token(), Some(got), "{name}/{program}: the loaded backend's count");
        }
    }
    // What the gathered tables are worth: without them the count would be visibly off.
    assert!(expected["tiny-llama"] < 700_000 && expected["tiny-llama"] > 400_000);
}

#[test]
fn a_generation_bench_reports_bytes_bandwidth_and_the_fraction_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = runlens(&[
        "--model", &model_path("tiny-gpt2"), "--threads", "1", "--backends", "xnnpack", "bench", "--prompt-lens", "8",
        "--gen-tokens", "4", "--iters", "1", "--warmup", "0", "--json", json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let gbps = report["machine"]["memory_read_gbps"].as_f64().expect("machine.memory_read_gbps");
    assert!(gbps > 0.0 && gbps.is_finite(), "{}", report["machine"]);
    let probe = &report["machine"]["memory_read"];
    assert_eq!(probe["threads"], 1);
    assert!(probe["buffer_bytes"].as_u64().unwrap() >= 512 << 20, "a buffer past the caches: {probe}");
    let row = &report["results"][0];
    let bytes = row["weight_bytes_per_token"].as_u64().unwrap();
    assert_eq!(bytes, runlens::bench::weights::program(&Path::new(&model_path("tiny-gpt2")).join("xnnpack.pte")).unwrap());
    let achieved = row["achieved_gbps"].as_f64().unwrap();
    assert!((achieved - bytes as f64 * row["decode_tokens_per_s"].as_f64().unwrap() / 1e9).abs() < 1e-9 * achieved.max(1.0));
    assert!((row["fraction_of_read_bandwidth"].as_f64().unwrap() - achieved / gbps).abs() < 1e-9);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("memory read bandwidth:") && table.contains("of wall"), "{table}");
}
