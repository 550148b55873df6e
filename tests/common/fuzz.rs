//! What the fuzz tests of model files share: a seeded generator, a run of the
//! real binary on one damaged file (its own cache directory, a timeout), the
//! cases spread over two workers, and the verdict: a clean run (status 0) or a
//! clean error (status 1 with a message naming the file), never a signal, a
//! panic, an abort or a timeout.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const TIMEOUT: Duration = Duration::from_secs(60);
pub const WORKERS: usize = 2;

/// xorshift64*, seeded.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03 | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// One case's outcome: exit status (1000 + signal when killed by one; `None`
/// on a timeout), stderr then stdout, and its time.
pub struct Outcome {
    pub case: u64,
    pub what: String,
    pub code: Option<i32>,
    pub said: String,
    pub took: Duration,
}

impl Outcome {
    /// A clean run, or a clean error: naming `file_name`, or the column's own
    /// error in `run --json` (what a run that loaded meets: "the decoder returned
    /// NaN at logit 0" names its column, not its file).
    pub fn is_clean(&self, file_name: &str) -> bool {
        let panicked = self.said.contains("panicked at") || self.said.contains("RUST_BACKTRACE");
        let column_error = self.said.contains("\"ok\":false") && self.said.contains("\"error\":\"");
        !panicked && (self.code == Some(0) || (self.code == Some(1) && (self.said.contains(file_name) || column_error)))
    }

    /// The error's text, or the last line said.
    pub fn last_words(&self) -> String {
        let last = self.said.split("\"error\":").nth(1).or_else(|| self.said.lines().rev().find(|l| !l.trim().is_empty())).unwrap_or("");
        last.chars().take(200).collect()
    }
}

/// `runlens --model MODEL --threads 1 --program x=FILE --backends x ARGS...`
/// with the probe's cache in `cache`.
pub fn run_case(model: &Path, file: &Path, cache: &Path, args: &[&str]) -> (Option<i32>, String, Duration) {
    let start = Instant::now();
    let program = format!("x={}", file.display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .args(["--model", model.to_str().unwrap(), "--threads", "1", "--program", &program, "--backends", "x"])
        .args(args)
        .env("RUNLENS_CACHE_DIR", cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read both pipes on threads so a chatty run cannot block on a full pipe.
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut s);
        s
    });
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            use std::os::unix::process::ExitStatusExt;
            break Some(status.code().unwrap_or_else(|| 1000 + status.signal().unwrap_or(0)));
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let said = format!("{}{}", String::from_utf8_lossy(&err.join().unwrap()), String::from_utf8_lossy(&out.join().unwrap()));
    (code, said, start.elapsed())
}

/// Run `cases` cases over [`WORKERS`] threads: `make(i)` writes case `i`'s file
/// under `work` and says what it did, with the model directory and the run's
/// arguments; the file is removed after its run. The outcomes, in case order.
pub fn run_cases(
    cases: u64,
    work: &Path,
    make: &(dyn Fn(u64, &Path) -> (PathBuf, String, PathBuf, Vec<String>) + Sync),
) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
    let cache = work.join("cache");
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as u64;
                if i >= cases {
                    break;
                }
                let (file, what, model, args) = make(i, work);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let (code, said, took) = run_case(&model, &file, &cache, &args);
                let o = Outcome { case: i, what, code, said, took };
                println!("case {i:3} [{}] -> {code:?} in {took:.1?}: {}", o.what, o.last_words());
                let _ = std::fs::remove_file(&file);
                results.lock().unwrap().push(o);
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|o| o.case);
    results
}

/// Assert every outcome is clean (each file is named `case-N.EXT`), and that
/// both a clean run and a clean error occurred; print the tally.
pub fn assert_clean(results: &[Outcome], ext: &str) {
    let bad: Vec<&Outcome> = results.iter().filter(|o| !o.is_clean(&format!("case-{}.{ext}", o.case))).collect();
    let ran = results.iter().filter(|o| o.code == Some(0)).count();
    let refused = results.iter().filter(|o| o.code == Some(1)).count();
    let total: Duration = results.iter().map(|o| o.took).sum();
    let in_child = results.iter().filter(|o| o.said.contains("in runlens' probe")).count();
    println!(
        "{} cases: {ran} ran, {refused} refused with an error ({in_child} of them crashes of the probe's child), {} bad; {total:.1?} of runs",
        results.len(),
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "cases that crashed, panicked, hung or failed without naming the file: {:#?}",
        bad.iter().map(|o| (o.case, &o.what, o.code, o.said.lines().rev().take(3).collect::<Vec<_>>())).collect::<Vec<_>>()
    );
    assert!(ran > 0 && refused > 0, "both outcomes occur with these seeds: {ran} ran, {refused} refused");
}
