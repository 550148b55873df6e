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
//!
//! Below it (issue 41): 100 GGUFs of four architectures whose hyperparameters
//! and tensor infos are mutated, run with the probe on (llama.cpp loads each
//! in a child process first), and a real GGUF that makes llama.cpp abort
//! (`block_count` 0), which fails its column and not the process.

mod common;

use std::path::PathBuf;
use std::process::Command;

const DEFAULT_CASES: u64 = 60;
const MIN_CASES: u64 = 20;

use common::fuzz::Rng;

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

#[test]
fn damaged_gguf_files_end_in_a_clean_error_or_a_clean_run() {
    let cases: u64 = std::env::var("RUNLENS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES);
    assert!(cases >= MIN_CASES, "RUNLENS_FUZZ_CASES={cases}: at least {MIN_CASES}");
    let dir = common::model_dir("tiny-llama");
    let real = dir.root().join("llamacpp-f32.gguf");
    let bytes = std::fs::read(&real).unwrap();
    let header = runlens::gguf::read_path(&real).unwrap().data_start as usize;
    let tmp = tempfile::tempdir().unwrap();
    let results = common::fuzz::run_cases(cases, tmp.path(), &|i, work| {
        let (data, what) = damaged(&bytes, header, 1000 + i);
        let file: PathBuf = work.join(format!("case-{i}.gguf"));
        std::fs::write(&file, data).unwrap();
        let args = ["run", "--json", "--max-new-tokens", "2", "Hello there"].map(String::from).to_vec();
        (file, what, dir.root().to_path_buf(), args)
    });
    // A clean error names the damaged file (stricter than common::fuzz::assert_clean, which
    // also takes a column's own JSON error).
    let bad: Vec<_> = results.iter().filter(|o| !(o.code == Some(0) || (o.code == Some(1) && o.said.contains("case-")))).collect();
    let ran = results.iter().filter(|o| o.code == Some(0)).count();
    let refused = results.iter().filter(|o| o.code == Some(1)).count();
    println!("{cases} cases: {ran} ran, {refused} refused with an error naming the file, {} bad", bad.len());
    assert!(bad.is_empty(), "cases that crashed, hung or failed without naming the file: {:#?}", bad.iter().map(|o| (o.case, &o.what, o.code, o.said.lines().last())).collect::<Vec<_>>());
    assert!(ran > 0 && refused > 0, "both outcomes occur with these seeds: {ran} ran, {refused} refused");
}

// --- Hyperparameters and tensor infos mutated (issue 41: every runtime's file probed) ---

/// Where `key`'s value starts in `bytes` and its GGUF value type: after the
/// key's u64 length, its bytes and its u32 type.
fn value_at(bytes: &[u8], key: &str) -> Option<(usize, u32)> {
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(key.as_bytes());
    let at = bytes.windows(needle.len()).position(|w| w == needle.as_slice())? + needle.len();
    Some((at + 4, u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())))
}

/// Where tensor `name`'s info starts after its name: its u32 dimension count.
fn tensor_info_at(bytes: &[u8], header_end: usize, name: &str) -> Option<usize> {
    let mut needle = (name.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(name.as_bytes());
    let at = bytes[..header_end].windows(needle.len()).rposition(|w| w == needle.as_slice())?;
    Some(at + needle.len())
}

/// Write `value` as GGUF scalar type `ty` at `at`; false for a type that is no scalar.
fn write_scalar(bytes: &mut [u8], at: usize, ty: u32, value: f64) -> bool {
    let mut put = |b: &[u8]| bytes[at..at + b.len()].copy_from_slice(b);
    match ty {
        0 => put(&(value as i64 as u8).to_le_bytes()),
        1 => put(&(value as i64 as i8).to_le_bytes()),
        2 => put(&(value as i64 as u16).to_le_bytes()),
        3 => put(&(value as i64 as i16).to_le_bytes()),
        4 => put(&(value as i64 as u32).to_le_bytes()),
        5 => put(&(value as i64 as i32).to_le_bytes()),
        6 => put(&(value as f32).to_le_bytes()),
        7 => put(&[(value as i64 & 0xff) as u8]),
        10 => put(&(value as i128 as u64).to_le_bytes()),
        11 => put(&(value as i64).to_le_bytes()),
        12 => put(&value.to_le_bytes()),
        _ => return false,
    }
    true
}

/// One mutation of a hyperparameter (most often the architecture's own:
/// block count, widths, head counts, context and rope lengths), a tensor's
/// dims, type or offset. What it did.
fn mutate_gguf(rng: &mut Rng, bytes: &mut [u8], header: &runlens::gguf::GgufFile) -> String {
    let arch = header.architecture().unwrap_or("llama").to_string();
    let header_end = header.data_start as usize;
    let odd = |rng: &mut Rng, was: f64| -> f64 {
        let random = (rng.next() >> 44) as f64;
        *rng.pick(&[0.0, 1.0, -1.0, 2.0, 3.0, was + 1.0, was - 1.0, was * 2.0, (was / 2.0).floor(), 4294967295.0, 2147483648.0, 65536.0, random])
    };
    match rng.below(10) {
        0..=5 => {
            let own: Vec<&String> = header.metadata.iter().map(|(k, _)| k).filter(|k| k.starts_with(&format!("{arch}."))).collect();
            let all: Vec<&String> = header.metadata.iter().map(|(k, _)| k).collect();
            let key = if rng.below(5) > 0 && !own.is_empty() { *rng.pick(&own) } else { *rng.pick(&all) };
            let Some((at, ty)) = value_at(bytes, key) else { return format!("{key} not found") };
            let was = header.get(key).and_then(|v| v.as_u64()).map_or(1.0, |v| v as f64);
            let value = if ty == 6 || ty == 12 { *rng.pick(&[0.0, -1.0, f64::NAN, f64::INFINITY, 1e30, 1e-30, was * 2.0]) } else { odd(rng, was) };
            if write_scalar(bytes, at, ty, value) {
                format!("{key} = {value}")
            } else {
                format!("{key} (type {ty}, kept)")
            }
        }
        n => {
            let t = rng.pick(&header.tensors);
            let Some(at) = tensor_info_at(bytes, header_end, &t.name) else { return format!("{} not found", t.name) };
            let n_dims = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let dims_at = at + 4;
            let type_at = dims_at + 8 * n_dims;
            match n {
                6 | 7 => {
                    let d = rng.below(n_dims as u64) as usize;
                    let was = t.dims.get(d).copied().unwrap_or(1) as f64;
                    let v = odd(rng, was) as i128 as u64;
                    bytes[dims_at + 8 * d..dims_at + 8 * d + 8].copy_from_slice(&v.to_le_bytes());
                    format!("{} dim {d} = {v}", t.name)
                }
                8 => {
                    let ty = rng.below(42) as u32;
                    bytes[type_at..type_at + 4].copy_from_slice(&ty.to_le_bytes());
                    format!("{} ggml type {ty}", t.name)
                }
                _ => {
                    let off = t.offset as i128 + *rng.pick(&[32i128, -32, 1, 64, 1 << 20, 1 << 40]);
                    bytes[type_at + 4..type_at + 12].copy_from_slice(&(off.max(0) as u64).to_le_bytes());
                    format!("{} offset {off}", t.name)
                }
            }
        }
    }
}

/// The decoders' GGUF files: (model directory, file).
fn gguf_sources() -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for model in ["tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gpt2"] {
        let dir = common::model_dir(model).root().to_path_buf();
        for file in ["llamacpp-f32.gguf", "llamacpp-q8_0.gguf", "llamacpp-q4_0.gguf"] {
            out.push((dir.clone(), dir.join(file)));
        }
    }
    out
}

/// 100 GGUFs of the tiny decoders (four architectures, f32, Q8_0 and Q4_0)
/// with one to three hyperparameters or tensor infos mutated, through the real
/// binary with the probe on: each a clean run or a clean error naming the file
/// (llama.cpp's aborts and crashes happen in the probe's child, whose end
/// becomes that error). `RUNLENS_FUZZ_CASES` sets the cases here too.
#[test]
fn gguf_files_with_mutated_hyperparameters_end_in_a_clean_error_or_a_clean_run() {
    let cases: u64 = std::env::var("RUNLENS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    assert!(cases >= MIN_CASES, "RUNLENS_FUZZ_CASES={cases}: at least {MIN_CASES}");
    let sources: Vec<(PathBuf, PathBuf, Vec<u8>, runlens::gguf::GgufFile)> = gguf_sources()
        .into_iter()
        .map(|(dir, file)| {
            let header = runlens::gguf::read_path(&file).unwrap_or_else(|e| panic!("{e} (`make test-models`)"));
            (dir, file.clone(), std::fs::read(&file).unwrap(), header)
        })
        .collect();
    let work = tempfile::tempdir().unwrap();
    let results = common::fuzz::run_cases(cases, work.path(), &|i, work| {
        let mut rng = Rng::new(7000 + i);
        let (dir, file, bytes, header) = rng.pick(&sources);
        let mut data = bytes.clone();
        let n = 1 + rng.below(3);
        let what: Vec<String> = (0..n).map(|_| mutate_gguf(&mut rng, &mut data, header)).collect();
        let case = work.join(format!("case-{i}.gguf"));
        std::fs::write(&case, data).unwrap();
        let source = format!("{}/{}", dir.file_name().unwrap().to_string_lossy(), file.file_name().unwrap().to_string_lossy());
        let args = ["run", "--json", "--max-new-tokens", "2", "Hello there"].map(String::from).to_vec();
        (case, format!("{source}: {}", what.join("; ")), dir.clone(), args)
    });
    common::fuzz::assert_clean(&results, "gguf");
}

/// A real GGUF that makes llama.cpp abort: tiny-llama's with `llama.block_count`
/// 0 passes runlens' header checks, and llama.cpp's reading of the
/// hyperparameters fails `GGML_ASSERT(hparams.n_layer_all > 0 ...)`. With the
/// probe, the child dies, the column says so naming the file, llama.cpp and the
/// assertion, and the other column runs; without it (`RUNLENS_PROBE=0`) the
/// whole process aborts, which is what the probe is for.
#[test]
fn a_gguf_that_makes_llama_cpp_abort_fails_its_column_not_the_process() {
    let dir = common::model_dir("tiny-llama").root().to_path_buf();
    let mut bytes = std::fs::read(dir.join("llamacpp-f32.gguf")).unwrap();
    let (at, ty) = value_at(&bytes, "llama.block_count").unwrap();
    assert!(write_scalar(&mut bytes, at, ty, 0.0));
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("no-blocks.gguf");
    std::fs::write(&file, &bytes).unwrap();
    let run = |probe: &str| {
        Command::new(env!("CARGO_BIN_EXE_runlens"))
            .args(["--model", dir.to_str().unwrap(), "--threads", "1", "--program", &format!("x={}", file.display()), "--backends", "xnnpack,x"])
            .args(["run", "--json", "--max-new-tokens", "2", "Hello there"])
            .env("RUNLENS_CACHE_DIR", work.path().join("cache"))
            .env("RUNLENS_PROBE", probe)
            .env("GGML_NO_BACKTRACE", "1")
            .output()
            .unwrap()
    };
    let out = run("1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let row = |name: &str| json["backends"].as_array().unwrap().iter().find(|b| b["name"] == name).cloned().unwrap_or_else(|| panic!("no {name}: {json}"));
    assert_eq!(row("xnnpack")["ok"], true, "{json}");
    let why = row("x")["error"].as_str().unwrap_or_default().to_string();
    for part in [format!("{}: llama.cpp crashed (SIGABRT) in runlens' probe", file.display()).as_str(), "GGML_ASSERT(hparams.n_layer_all > 0", "convert it again"] {
        assert!(why.contains(part), "{part:?} missing from: {why}");
    }
    // Without the probe llama.cpp takes the process down: the file is a real crash.
    let out = run("0");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "status {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
}
