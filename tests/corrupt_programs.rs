//! Damaged programs through the real `runlens run`, as a user runs it: copies
//! of `portable.pte` and `xnnpack.pte` with 1 to 16 bytes flipped, zeroed or
//! randomized (nine in ten inside the program flatbuffer, where ExecuTorch's
//! checks are), or one kernel argument nudged to a nearby value, each from a
//! fixed seed. A run passes when it ends with status 0
//! (the damage did not matter) or 1 with an error naming the file; a signal,
//! a panic (101), an ExecuTorch abort (134) or a timeout fails the test.
//!
//! `RUNLENS_FUZZ_CASES` (default 40, at least 20) sets the cases per program;
//! two run at a time. Each program must have cases of both good outcomes (with
//! the default seeds: portable 3 ran, 37 refused; xnnpack 6 and 34). Every case prints one line (`--nocapture`), and the counts at the end.
//! `RUNLENS_FUZZ_BIN` runs another binary (an older runlens, for the README's
//! before/after figures).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;

const TIMEOUT: Duration = Duration::from_secs(90);
const DEFAULT_CASES: u64 = 40;
/// Fewer cases per program than this is not a test of anything.
const MIN_CASES: u64 = 20;
const WORKERS: usize = 2;
const PROGRAMS: [&str; 2] = ["portable.pte", "xnnpack.pte"];

/// The files `run` needs besides the program.
const COMPANIONS: [&str; 3] = ["tokenizer.json", "config.json", "manifest.json"];

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03 | 1)
    }
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One byte changed: (offset, before, after).
type Change = (usize, u8, u8);

/// The size of the program flatbuffer (the `eh00` header's program_size), else the whole file.
fn flatbuffer_len(bytes: &[u8]) -> usize {
    if bytes.len() >= 24 && &bytes[8..12] == b"eh00" {
        let size = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
        if size > 0 && size <= bytes.len() {
            return size;
        }
    }
    bytes.len()
}

/// The changes of case `seed`. Two cases in three: 1 to 16 bytes flipped (one
/// bit), zeroed or randomized, nine in ten inside the flatbuffer. One in three:
/// one kernel-call argument of `forward` nudged to a nearby value index (what
/// a flipped low bit of an index does; where ExecuTorch's type checks abort).
fn mutation(real: &[u8], sites: &[common::damage::ArgumentSite], seed: u64) -> Vec<Change> {
    let mut rng = Rng::new(seed);
    if seed % 3 == 2 && !sites.is_empty() {
        let site = &sites[rng.below(sites.len() as u64) as usize];
        let delta = 1 + rng.below(4) as i32;
        let value = if rng.below(2) == 0 { site.value + delta } else { (site.value - delta).max(0) };
        let (old, new) = (site.value.to_le_bytes(), value.to_le_bytes());
        return (0..4).filter(|&i| old[i] != new[i]).map(|i| (site.offset + i, old[i], new[i])).collect();
    }
    let flat = flatbuffer_len(real) as u64;
    let count = 1 + rng.below(16);
    let mut changes = Vec::new();
    for _ in 0..count {
        let at = if rng.below(10) < 9 { rng.below(flat) } else { rng.below(real.len() as u64) } as usize;
        let before = real[at];
        let after = match rng.below(3) {
            0 => before ^ (1 << rng.below(8)),
            1 => 0,
            _ => rng.next() as u8,
        };
        if after != before {
            changes.push((at, before, after));
        }
    }
    changes
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Outcome {
    Ran,
    ErrorNamingFile,
    /// Failures of the test:
    ErrorWithoutFile,
    Abort,
    Panic,
    Signal,
    Timeout,
    OtherStatus,
}

struct Finished {
    outcome: Outcome,
    detail: String,
    elapsed: Duration,
}

/// A models directory of its own: the companions linked, the program written.
fn case_dir(root: &Path, real_dir: &Path) -> PathBuf {
    std::fs::create_dir_all(root).unwrap();
    for name in COMPANIONS {
        let from = real_dir.join(name);
        let to = root.join(name);
        if from.is_file() && !to.exists() {
            std::os::unix::fs::symlink(&from, &to).unwrap();
        }
    }
    root.to_path_buf()
}

fn run_case(dir: &Path, program: &str, cache: &Path) -> Finished {
    let backend = program.trim_end_matches(".pte");
    let start = Instant::now();
    let bin = std::env::var_os("RUNLENS_FUZZ_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_runlens")), PathBuf::from);
    let mut child = Command::new(bin)
        .arg("--models")
        .arg(dir)
        .args(["--backends", backend, "--threads", "1", "run", "--", "hello world"])
        .env("RUNLENS_CACHE_DIR", cache)
        .env_remove("RUNLENS_ET_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start runlens");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    let output = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let path = dir.join(program).display().to_string();
    use std::os::unix::process::ExitStatusExt;
    let outcome = match status {
        None => Outcome::Timeout,
        Some(s) if s.signal().is_some() => Outcome::Signal,
        Some(s) => match s.code() {
            Some(0) => Outcome::Ran,
            Some(1) if text.contains(&path) => Outcome::ErrorNamingFile,
            Some(1) => Outcome::ErrorWithoutFile,
            Some(101) => Outcome::Panic,
            Some(134) => Outcome::Abort,
            _ => Outcome::OtherStatus,
        },
    };
    let detail = match status {
        Some(s) => format!("{s}: {}", last_lines(&text, 3)),
        None => format!("timeout: {}", last_lines(&text, 3)),
    };
    Finished { outcome, detail, elapsed }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[test]
fn damaged_programs_end_in_a_result_or_an_error_naming_the_file() {
    let real_dir = common::models().root().to_path_buf();
    for name in PROGRAMS.iter().chain(COMPANIONS[..2].iter()) {
        assert!(real_dir.join(name).is_file(), "{} is missing: run `make models` first", real_dir.join(name).display());
    }
    let cases: u64 = std::env::var("RUNLENS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES);
    assert!(cases >= MIN_CASES, "RUNLENS_FUZZ_CASES={cases}: at least {MIN_CASES} cases per program");
    let originals: Vec<Vec<u8>> = PROGRAMS.iter().map(|p| std::fs::read(real_dir.join(p)).unwrap()).collect();
    let sites: Vec<Vec<common::damage::ArgumentSite>> = originals.iter().map(|b| common::damage::kernel_arguments(b)).collect();
    assert!(sites.iter().all(|s| !s.is_empty()), "no kernel-call arguments found in {PROGRAMS:?}");
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let jobs: Vec<(usize, u64)> = (0..cases).flat_map(|seed| (0..PROGRAMS.len()).map(move |p| (p, seed))).collect();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    let start = Instant::now();
    std::thread::scope(|scope| {
        for worker in 0..WORKERS {
            let (jobs, next, results, originals, sites, real_dir, cache) = (&jobs, &next, &results, &originals, &sites, &real_dir, &cache);
            let root = work.path().join(format!("worker{worker}"));
            scope.spawn(move || {
                let dir = case_dir(&root, real_dir);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(p, seed)) = jobs.get(i) else { break };
                    let program = PROGRAMS[p];
                    let changes = mutation(&originals[p], &sites[p], seed);
                    let mut bytes = originals[p].clone();
                    for &(at, _, after) in &changes {
                        bytes[at] = after;
                    }
                    std::fs::write(dir.join(program), &bytes).unwrap();
                    let finished = run_case(&dir, program, cache);
                    eprintln!(
                        "{program} seed {seed:>3}: {:?} in {:.1} s, changes {:?}: {}",
                        finished.outcome,
                        finished.elapsed.as_secs_f64(),
                        changes,
                        finished.detail
                    );
                    results.lock().unwrap().push((program, seed, changes, finished));
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    let mut counts = std::collections::BTreeMap::new();
    for (program, _, _, f) in &results {
        *counts.entry((*program, f.outcome)).or_insert(0u32) += 1;
    }
    eprintln!("{} cases in {:.0} s: {counts:?}", results.len(), start.elapsed().as_secs_f64());
    let bad: Vec<String> = results
        .iter()
        .filter(|(_, _, _, f)| f.outcome > Outcome::ErrorNamingFile)
        .map(|(program, seed, changes, f)| format!("{program} seed {seed} {changes:?}: {:?}: {}", f.outcome, f.detail))
        .collect();
    assert!(bad.is_empty(), "{} damaged programs ended badly:\n{}", bad.len(), bad.join("\n"));
    // Every case ran to an outcome, and both good outcomes occur for each program:
    // damage that did not matter, and damage refused with the file named. (A
    // runner that never runs the damaged file, or runs the original, would give
    // one class only.)
    assert_eq!(results.len(), jobs.len(), "every case has an outcome");
    for program in PROGRAMS {
        for outcome in [Outcome::Ran, Outcome::ErrorNamingFile] {
            let n = counts.get(&(program, outcome)).copied().unwrap_or(0);
            assert!(n > 0, "{program}: no case ended {outcome:?} in {cases}: {counts:?}");
        }
    }
}

/// A copy of `program` with one Int argument redirected to a Tensor, in a
/// models directory of its own under `work`.
fn program_with_redirected_argument(work: &Path, program: &str, skip: usize) -> (PathBuf, common::damage::Redirected) {
    let real_dir = common::models().root().to_path_buf();
    let mut bytes = std::fs::read(real_dir.join(program)).unwrap_or_else(|e| panic!("{program}: {e}: run `make models` first"));
    let changed = common::damage::int_argument_to_tensor(&mut bytes, skip)
        .unwrap_or_else(|| panic!("{program}: no kernel call with an Int and a Tensor argument to redirect"));
    let dir = case_dir(&work.join(program.trim_end_matches(".pte")), &real_dir);
    std::fs::write(dir.join(program), &bytes).unwrap();
    (dir, changed)
}

/// The regression case of the issue: ExecuTorch aborted the whole process
/// ("EValue is not an int", or "not a Scalar"), silently. Now the probe names the file, the
/// method, the instruction and the reason, and `run` exits with 1.
#[test]
fn an_int_argument_pointing_at_a_tensor_is_an_error_not_an_abort() {
    let work = tempfile::tempdir().unwrap();
    for program in PROGRAMS {
        // The third such call: an instruction past the first, to check the index.
        let (dir, changed) = program_with_redirected_argument(work.path(), program, 2);
        let finished = run_case(&dir, program, &work.path().join("cache"));
        eprintln!("{program}: {changed:?}: {:?}: {}", finished.outcome, finished.detail);
        assert_eq!(finished.outcome, Outcome::ErrorNamingFile, "{program} {changed:?}: {}", finished.detail);
        let instruction = format!("instruction {} (kernel {})", changed.instruction, changed.operator);
        for part in ["ExecuTorch aborts on this program", "method 'forward'", instruction.as_str(), "F evalue.h", "EValue is not a"] {
            assert!(finished.detail.contains(part), "{program}: {part:?} missing from: {}", finished.detail);
        }
    }
}

/// What the probe cannot foresee (here: the probe turned off) still ends the
/// process, but with the file, the method and ExecuTorch's reason on stderr
/// and status 134, never a silent SIGABRT.
#[test]
fn an_abort_the_probe_did_not_see_names_the_file_and_the_reason() {
    let work = tempfile::tempdir().unwrap();
    let program = "xnnpack.pte";
    let (dir, changed) = program_with_redirected_argument(work.path(), program, 2);
    let output = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .arg("--models")
        .arg(&dir)
        .args(["--backends", "xnnpack", "run", "--", "hello world"])
        .env("RUNLENS_PROBE", "0")
        .env("RUNLENS_CACHE_DIR", work.path().join("cache"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(134), "{changed:?}: {}\n{stderr}", output.status);
    let path = dir.join(program).display().to_string();
    for part in ["ExecuTorch aborted runlens while running", path.as_str(), "method 'forward'", "EValue is not a", "RUNLENS_PROBE=0"] {
        assert!(stderr.contains(part), "{part:?} missing from: {stderr}");
    }
}
