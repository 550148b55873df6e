//! The memory check (docs/memory.md): under a memory limit, a set of columns
//! that does not fit is refused before anything loads (exit 2, a message that
//! names memory, the figures and a set that fits), and the set it names runs;
//! nothing is killed. The limit is a real cgroup where the test can make one
//! (root and cgroup v1's memory controller: a child of this process's own
//! memory cgroup, removed after), and always one given with `--memory-budget`
//! and `RUNLENS_MEMORY_BUDGET`; the test says on stderr which ran.

mod common;

use std::process::{Command, Output};

use common::{model_path, runlens};

const TEXT: &str = "The cat sat on the mat.";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The set a refusal suggests: the list after "--backends ".
fn suggested(message: &str) -> String {
    let at = message.find("fit one at a time: --backends ").or_else(|| message.find("fit together: --backends ")).unwrap_or_else(|| panic!("no set that fits is named:\n{message}"));
    let rest = &message[at..];
    let list = &rest[rest.find("--backends ").unwrap() + "--backends ".len()..];
    list.split_whitespace().next().unwrap().to_string()
}

/// Asserts a refusal: exit 2 before anything ran, a message naming memory and figures.
fn assert_refused(out: &Output, what: &str) -> String {
    let message = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{what}: expected exit 2\n{message}");
    assert!(out.stdout.is_empty(), "{what}: something ran before the refusal: {}", String::from_utf8_lossy(&out.stdout));
    for words in ["not enough memory", "Nothing was loaded", "MiB", "may take", "--memory-budget"] {
        assert!(message.contains(words), "{what}: the message lacks {words:?}:\n{message}");
    }
    message
}

/// What `runlens memory --json` says of MiniLM: (its columns' peaks by name, the default set).
fn estimates(model: &str) -> (Vec<(String, u64)>, Vec<String>) {
    let out = runlens(&["--model", model, "memory", "--json"]);
    assert!(out.status.success(), "runlens memory: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let columns = report["columns"].as_array().unwrap().iter().map(|c| (c["name"].as_str().unwrap().to_string(), c["peak"].as_u64().unwrap())).collect();
    let asked = report["asked"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
    (columns, asked)
}

/// What runlens holds before loading, in bytes, as a refusal of `run` states it ("runlens' own 124 MiB").
fn runlens_itself(model: &str) -> u64 {
    let out = runlens(&["--model", model, "--memory-budget", "1M", "run", TEXT]);
    let message = assert_refused(&out, "a 1 MiB budget");
    let at = message.find("runlens' own ").expect("the message says what runlens holds") + "runlens' own ".len();
    let mut words = message[at..].split_whitespace();
    let value: f64 = words.next().unwrap().parse().unwrap();
    let unit = match words.next().unwrap().trim_end_matches(',') {
        "KiB" => 1u64 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        u => panic!("unit {u}"),
    };
    (value * unit as f64) as u64
}

#[test]
fn a_budget_refuses_a_set_that_does_not_fit_and_the_named_set_runs() {
    eprintln!("memory test: an injected limit (--memory-budget, RUNLENS_MEMORY_BUDGET)");
    let model = model_path("minilm");
    let (columns, asked) = estimates(&model);
    let peak = |name: &str| columns.iter().find(|(n, _)| n == name).map(|(_, p)| *p).unwrap();
    let largest = asked.iter().map(|n| peak(n)).max().unwrap();
    let smallest = columns.iter().map(|(_, p)| *p).min().unwrap();
    assert!(smallest < largest, "{columns:?}");
    let held = runlens_itself(&model);

    // One at a time (run): room between the smallest column and the largest asked for.
    let budget = (held + (smallest + largest) / 2).to_string();
    let out = runlens(&["--model", &model, "--memory-budget", &budget, "run", TEXT]);
    let message = assert_refused(&out, "run");
    let set = suggested(&message);
    assert!(message.contains("one at a time"), "{message}");
    for name in set.split(',') {
        // (runlens' own memory, read to 3 figures, may differ by a MiB from this run's)
        assert!(peak(name) <= (smallest + largest) / 2 + (1 << 20), "{name} is suggested but does not fit: {message}");
    }
    // The set it names runs under the same budget.
    let out = runlens(&["--model", &model, "--memory-budget", &budget, "--backends", &set, "run", "--json", TEXT]);
    assert!(out.status.success(), "the suggested set {set} failed: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["backends"].as_array().unwrap().len(), set.split(',').count());

    // The explorer holds every column at once: refused before the terminal is touched
    // (no terminal here), given as RUNLENS_MEMORY_BUDGET.
    let together: u64 = asked.iter().map(|n| peak(n)).sum();
    let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .args(["--model", &model])
        .env("RUNLENS_MEMORY_BUDGET", (held + together / 2).to_string())
        .output()
        .unwrap();
    let message = assert_refused(&out, "the explorer");
    assert!(message.contains("together") && message.contains(&asked.join(", ")), "{message}");
    suggested(&message);
    // Every command that loads checks: bench, profile and layers too.
    for command in [&["bench", "--seq-lens", "8", "--iters", "1"][..], &["profile", TEXT], &["layers", TEXT]] {
        let mut args = vec!["--model", model.as_str(), "--memory-budget", "1M"];
        args.extend(command);
        assert_refused(&runlens(&args), command[0]);
    }
}

/// A memory cgroup (v1) made for the test below this process's own, removed on drop.
struct Cgroup {
    dir: std::path::PathBuf,
}

impl Cgroup {
    /// `Err` says why the machine cannot give one (not root, no v1 memory controller).
    fn make(limit: u64) -> Result<Cgroup, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let own = runlens::memory::limit::own_cgroup(&own, 1).ok_or("no cgroup v1 memory controller")?;
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let (point, root) = runlens::memory::limit::cgroup_mounts(&mounts).v1_memory.ok_or("the v1 memory controller is not mounted")?;
        let parent = runlens::memory::limit::cgroup_levels(&point, &root, &own).remove(0);
        // One per test: the tests of this file run at once, in one process.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = parent.join(format!("runlens-test-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e} (not root?)", dir.display()))?;
        let cgroup = Cgroup { dir };
        std::fs::write(cgroup.dir.join("memory.limit_in_bytes"), limit.to_string()).map_err(|e| format!("cannot set the limit: {e}"))?;
        Ok(cgroup)
    }

    /// `runlens ARGS` with its process put into the cgroup before it starts.
    #[cfg_attr(not(feature = "eager"), allow(dead_code))]
    fn runlens(&self, args: &[&str]) -> Output {
        self.runlens_env(args, &[])
    }

    /// [`Cgroup::runlens`] with these environment variables set.
    fn runlens_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new("sh")
            .args(["-c", r#"echo $$ > "$0/cgroup.procs" && exec "$@""#])
            .arg(&self.dir)
            .arg(env!("CARGO_BIN_EXE_runlens"))
            .args(args)
            .envs(env.iter().copied())
            .output()
            .expect("sh starts")
    }

    /// How many processes the kernel's OOM killer ended in the cgroup (`oom_kill` of memory.oom_control).
    fn oom_kills(&self) -> u64 {
        let text = std::fs::read_to_string(self.dir.join("memory.oom_control")).unwrap_or_default();
        runlens::memory::limit::stat_value(&text, "oom_kill").unwrap_or(0)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Its processes have exited; an empty cgroup is removed with rmdir.
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("memory test: cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// The full build only: the lite build (no libtorch) is small enough to run
/// MiniLM's default columns under this limit (the injected one adapts to it).
#[cfg(feature = "eager")]
#[test]
fn a_real_cgroup_limit_refuses_before_loading_and_kills_nothing() {
    // The limit under which `runlens run` on MiniLM was OOM-killed (exit 137, no word).
    const LIMIT: u64 = 150 << 20;
    let model = model_path("minilm");
    // Its libraries in the page cache (charged where they were first read) and every
    // program's probe verdict cached, as after any earlier start.
    let every: Vec<String> = estimates(&model).0.into_iter().map(|(name, _)| name).collect();
    let warm = runlens(&["--model", &model, "--backends", &every.join(","), "run", TEXT]);
    assert!(warm.status.success(), "{}", stderr(&warm));
    let cgroup = match Cgroup::make(LIMIT) {
        Ok(c) => c,
        Err(why) => return eprintln!("memory test: no real cgroup ({why}); the injected limit ran alone"),
    };
    eprintln!("memory test: a real cgroup v1 limit of 150 MiB at {}", cgroup.dir.display());
    let out = cgroup.runlens(&["--model", &model, "run", TEXT]);
    let message = assert_refused(&out, "run under the cgroup");
    assert!(message.contains("cgroup v1 limit 150 MiB"), "the limit is not the cgroup's:\n{message}");
    let set = suggested(&message);
    let out = cgroup.runlens(&["--model", &model, "--backends", &set, "run", TEXT]);
    assert!(out.status.success(), "the suggested set {set} failed under the cgroup ({:?}): {}", out.status, stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(set.split(',').next().unwrap()));
    let out = cgroup.runlens(&["--model", &model]);
    assert_refused(&out, "the explorer under the cgroup");
    assert_eq!(cgroup.oom_kills(), 0, "the OOM killer ended a process in {}", cgroup.dir.display());
}

/// One column of `runlens memory --json`.
#[derive(Debug)]
struct Column {
    name: String,
    quantized: bool,
    peak: u64,
    estimated: u64,
    measured: Option<u64>,
    /// Its parts by name (bytes).
    parts: Vec<(String, u64)>,
}

fn columns_of(model: &str, env: &[(&str, &str)]) -> Vec<Column> {
    let out = Command::new(env!("CARGO_BIN_EXE_runlens")).args(["--model", model, "memory", "--json"]).envs(env.iter().copied()).output().unwrap();
    assert!(out.status.success(), "runlens memory: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Column {
            name: c["name"].as_str().unwrap().to_string(),
            quantized: c["quantized"].as_bool().unwrap(),
            peak: c["peak"].as_u64().unwrap(),
            estimated: c["estimated_peak"].as_u64().unwrap(),
            measured: c["measured_peak"].as_u64(),
            parts: c["parts"].as_array().unwrap().iter().map(|p| (p["what"].as_str().unwrap().to_string(), p["bytes"].as_u64().unwrap())).collect(),
        })
        .collect()
}

/// The issue's test, on SmolLM2-135M-Instruct's real weights: under a limit
/// between its 4-bit column's need and its float columns', the float set is
/// refused (exit 2, a message naming memory) and the 4-bit column runs to a
/// clean exit; nothing is OOM-killed. The 4-bit column is llama.cpp's shipped
/// Q4_1 file: `eager-int4` peaks as high as float eager while it loads (it is
/// built in float32 first), so no limit lies between it and the float set.
/// The 4-bit columns run once without a limit first: their estimates must not
/// be under their measured peaks (a first run has only the estimate), and the
/// limit stands on the figure the check then uses (read from `runlens memory
/// --json`, never a fixed size). Its own cache directory: the measurements are
/// this test's.
#[test]
fn a_limit_between_the_4bit_column_and_the_float_set_refuses_the_floats_and_runs_the_4bit() {
    const FOUR_BIT: &str = "llamacpp-q4_1";
    const MIB: u64 = 1 << 20;
    let model = model_path("smollm2-135m-instruct");
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_str().unwrap();
    let env = [("RUNLENS_CACHE_DIR", cache_dir)];
    let run = |budget: Option<&str>, set: &str| {
        let mut args = vec!["--model", model.as_str(), "--threads", "1", "--backends", set];
        if let Some(b) = budget {
            args.extend(["--memory-budget", b]);
        }
        args.extend(["run", "--max-new-tokens", "4", "What is the capital of France?"]);
        Command::new(env!("CARGO_BIN_EXE_runlens")).args(&args).envs(env).output().unwrap()
    };

    let before = columns_of(&model, &env);
    let four_bit = before.iter().find(|c| c.name == FOUR_BIT).unwrap_or_else(|| panic!("{FOUR_BIT} is not listed: {before:?}"));
    assert_eq!(four_bit.measured, None, "a fresh cache holds no measurement");

    // A run without a limit measures each 4-bit column's peak (eager-int4's too, where
    // this build has eager), and the check takes it with its margin. A first run, before
    // any measurement, stands on the estimate: it must not be under the measured peak.
    let four_bits: Vec<&str> = [FOUR_BIT, "eager-int4"].into_iter().filter(|n| before.iter().any(|c| c.name == *n)).collect();
    for name in &four_bits {
        let out = run(None, name);
        assert!(out.status.success(), "{name} without a limit: {}", stderr(&out));
    }
    let columns = columns_of(&model, &env);
    for name in &four_bits {
        let c = columns.iter().find(|c| c.name == *name).unwrap();
        let measured = c.measured.unwrap_or_else(|| panic!("the run left no measured peak for {name}: {c:?}"));
        assert!(c.estimated >= measured, "{name}'s estimate {} MiB is under its measured peak {} MiB", c.estimated >> 20, measured >> 20);
    }
    let four_bit = columns.iter().find(|c| c.name == FOUR_BIT).unwrap();
    let measured = four_bit.measured.unwrap_or_else(|| panic!("the run left no measured peak for {FOUR_BIT}: {four_bit:?}"));
    // The run read every weight of the mapped file: a measurement below that measured nothing.
    let weights = four_bit.parts.iter().find(|(what, _)| what.contains("weights")).map(|(_, b)| *b).unwrap();
    assert!(measured >= weights * 9 / 10, "measured {measured} bytes, less than its {weights} bytes of weights read by the run");
    assert!(four_bit.peak >= measured + measured / 10, "the check's figure {} lacks the margin over the measured {measured}", four_bit.peak);

    let floats: Vec<&Column> = columns.iter().filter(|c| !c.quantized).collect();
    assert!(!floats.is_empty(), "no float column: {columns:?}");
    let float_set = floats.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(",");
    // `run` holds one column at a time: the set needs its largest.
    let float_need = floats.iter().map(|c| c.peak).max().unwrap();
    let held = runlens_itself(&model);
    // Just above what the 4-bit column needs (16 MiB for runlens' own memory, which moves
    // between starts): a column whose figure is under its real peak is killed here.
    let limit = held + four_bit.peak + 16 * MIB;
    assert!(limit < held + float_need, "no limit lies between {FOUR_BIT} ({} bytes) and the float set {float_set} ({float_need})", four_bit.peak);
    eprintln!("memory test: {FOUR_BIT} needs {} MiB, the float set {float_set} {} MiB; limit {} MiB", four_bit.peak / MIB, float_need / MIB, limit / MIB);

    // The limit given as a budget.
    let budget = limit.to_string();
    let message = assert_refused(&run(Some(&budget), &float_set), "the float set under a budget");
    assert!(message.contains(&floats.iter().max_by_key(|c| c.peak).unwrap().name), "{message}");
    let out = run(Some(&budget), FOUR_BIT);
    assert!(out.status.success(), "{FOUR_BIT} under the budget {budget}: {:?} {}", out.status, stderr(&out));

    // A real cgroup with that limit.
    let cgroup = match Cgroup::make(limit) {
        Ok(c) => c,
        Err(why) => return eprintln!("memory test: no real cgroup ({why}); the injected limit ran alone"),
    };
    eprintln!("memory test: a real cgroup v1 limit of {} MiB at {}", limit / MIB, cgroup.dir.display());
    let args = |set: &str| -> Vec<String> {
        ["--model", &model, "--threads", "1", "--backends", set, "run", "--max-new-tokens", "4", "What is the capital of France?"].map(String::from).to_vec()
    };
    let floats_args = args(&float_set);
    let out = cgroup.runlens_env(&floats_args.iter().map(String::as_str).collect::<Vec<_>>(), &env);
    let message = assert_refused(&out, "the float set under the cgroup");
    assert!(message.contains("cgroup v1 limit"), "the limit is not the cgroup's:\n{message}");
    let four_args = args(FOUR_BIT);
    let out = cgroup.runlens_env(&four_args.iter().map(String::as_str).collect::<Vec<_>>(), &env);
    assert!(out.status.success(), "{FOUR_BIT} under the cgroup's {} MiB: {:?} {}", limit / MIB, out.status, stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(FOUR_BIT), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(cgroup.oom_kills(), 0, "the OOM killer ended a process in {}", cgroup.dir.display());
}

/// The KV cache a llama.cpp column is estimated to hold is the one its context makes:
/// float32 for an f32 GGUF, as the model's geometry gives it, and half that for a quantized
/// file's float16 one (the estimate once gave the f32 file a float16 cache).
#[test]
fn a_llamacpp_column_s_kv_cache_is_estimated_in_the_type_its_context_holds() {
    let out = runlens(&["--model", &model_path("tiny-llama"), "--backends", "llamacpp-f32,llamacpp-q8_0", "memory", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kv = |name: &str| -> (u64, String) {
        let column = j["columns"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no {name}: {j}"));
        let part = column["parts"].as_array().unwrap().iter().find(|p| p["what"].as_str().unwrap().starts_with("KV cache")).unwrap_or_else(|| panic!("{name} has no KV cache part: {column}"));
        (part["bytes"].as_u64().unwrap(), part["what"].as_str().unwrap().to_string())
    };
    // layers x (keys, values) x KV heads x head_dim x L positions x 4 bytes, from the model's files.
    let dir = std::path::PathBuf::from(model_path("tiny-llama"));
    let read = |f: &str| -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap() };
    let (config, manifest) = (read("config.json"), read("manifest.json"));
    let n = |k: &str| config[k].as_u64().unwrap_or_else(|| panic!("{k}: {config}"));
    let eager = n("num_hidden_layers") * 2 * n("num_key_value_heads") * n("head_dim") * manifest["max_seq_len"].as_u64().unwrap() * 4;
    let (f32_kv, f32_what) = kv("llamacpp-f32");
    let (q8_kv, q8_what) = kv("llamacpp-q8_0");
    assert!(eager > 0);
    assert_eq!(f32_kv, eager, "{f32_what}");
    assert_eq!(2 * q8_kv, eager, "{q8_what}");
    assert!(f32_what.contains("float32") && q8_what.contains("float16"), "{f32_what} / {q8_what}");
}
