//! Damaged GGUF files through the real `runlens run`, as a user runs them
//! (`--program x=FILE.gguf`): copies of tiny-llama's `llamacpp-f32.gguf` with
//! 1 to 8 bytes flipped, zeroed or randomized, nine in ten inside the header
//! (metadata and tensor table, where a damaged byte changes what llama.cpp is
//! told), each from a fixed seed. A run passes when it ends with status 0 (the
//! damage did not matter: a weight changed) or 1 with an error naming the
//! file; a signal, a panic (101), an abort (134) or a timeout fails the test.
//!
//! `RUNLENS_FUZZ_CASES` (default 60, at least 20) sets the cases; two run at a
//! time. The reader's own fuzz (`src/gguf/tests/mutations.rs`) mutates
//! hundreds more in-process; this one checks that what the reader lets through
//! llama.cpp survives too.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_CASES: u64 = 60;
const MIN_CASES: u64 = 20;
const WORKERS: usize = 2;

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03 | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `bytes` with 1 to 8 bytes damaged, nine in ten of them inside the first `header` bytes.
fn damaged(bytes: &[u8], header: usize, seed: u64) -> (Vec<u8>, String) {
    let mut rng = Rng::new(seed);
    let mut out = bytes.to_vec();
    let n = 1 + rng.below(8) as usize;
    let mut what = Vec::new();
    for _ in 0..n {
        let at = if rng.below(10) < 9 { 4 + rng.below(header as u64 - 4) as usize } else { rng.below(bytes.len() as u64) as usize };
        let (how, value) = match rng.below(3) {
            0 => ("flip", out[at] ^ 0xff),
            1 => ("zero", 0),
            _ => ("random", rng.next() as u8),
        };
        out[at] = value;
        what.push(format!("{how}@{at}"));
    }
    (out, what.join(" "))
}

fn run_case(model: &Path, file: &Path) -> (Option<i32>, String, Duration) {
    let start = Instant::now();
    let program = format!("x={}", file.display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .args(["--model", model.to_str().unwrap(), "--threads", "1", "--program", &program, "--backends", "x", "run", "--json", "--max-new-tokens", "2", "Hello there"])
        .env("RUNLENS_CACHE_DIR", file.parent().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            #[cfg(unix)]
            let code = {
                use std::os::unix::process::ExitStatusExt;
                status.code().or(status.signal().map(|s| 1000 + s))
            };
            // `run --json` puts a backend's error in its JSON, the rest goes to stderr.
            let said = format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
            return (code, said, start.elapsed());
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return (None, "timeout".into(), start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn damaged_gguf_files_end_in_a_clean_error_or_a_clean_run() {
    let cases: u64 = std::env::var("RUNLENS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES);
    assert!(cases >= MIN_CASES, "RUNLENS_FUZZ_CASES={cases}: at least {MIN_CASES}");
    let dir = common::model_dir("tiny-llama");
    let real = dir.root().join("llamacpp-f32.gguf");
    let bytes = std::fs::read(&real).unwrap();
    let header = runlens::gguf::read_path(&real).unwrap().data_start as usize;
    let tmp = tempfile::tempdir().unwrap();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(u64, String, Option<i32>, String)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as u64;
                if i >= cases {
                    break;
                }
                let (data, what) = damaged(&bytes, header, 1000 + i);
                let file: PathBuf = tmp.path().join(format!("case-{i}.gguf"));
                std::fs::write(&file, data).unwrap();
                let (code, stderr, took) = run_case(dir.root(), &file);
                let last = stderr.split("\"error\":").nth(1).or_else(|| stderr.lines().rev().find(|l| !l.trim().is_empty())).unwrap_or("").to_string();
                println!("case {i:3} [{what}] -> {code:?} in {took:.1?}: {}", last.chars().take(160).collect::<String>());
                let _ = std::fs::remove_file(&file);
                results.lock().unwrap().push((i, what, code, stderr));
            });
        }
    });
    let results = results.into_inner().unwrap();
    let bad: Vec<_> = results.iter().filter(|(_, _, code, stderr)| !(matches!(code, Some(0)) || (*code == Some(1) && stderr.contains("case-")))).collect();
    let ran = results.iter().filter(|r| r.2 == Some(0)).count();
    let refused = results.iter().filter(|r| r.2 == Some(1)).count();
    println!("{cases} cases: {ran} ran, {refused} refused with an error naming the file, {} bad", bad.len());
    assert!(bad.is_empty(), "cases that crashed, hung or failed without naming the file: {:#?}", bad.iter().map(|(i, w, c, e)| (i, w, c, e.lines().last())).collect::<Vec<_>>());
    assert!(ran > 0 && refused > 0, "both outcomes occur with these seeds: {ran} ran, {refused} refused");
}
