//! End to end: the real `runlens` binary (no subcommand: the explorer) in a
//! tmux session of 120x40, driven with `send-keys` and read with
//! `capture-pane`. Needs tmux (`make test` installs it) and the models
//! (`make models`). Every wait has a timeout and fails with the screen it saw.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;

const WIDTH: u16 = 120;
const HEIGHT: u16 = 40;
/// Loading three backends and a portable run (about 1 s each here) can take a while on 2 cores.
const RESULTS_TIMEOUT: Duration = Duration::from_secs(120);
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
const SENTENCE: &str = "A kitten is sleeping on the sofa";
#[cfg(feature = "eager")]
/// What of each column's title shows at 120 columns: five columns of 24 shorten
/// "ExecuTorch XNNPACK · F5" to "XNNPACK · F5".
const TITLES: &[&str] = &["PyTorch eager", "ExecuTorch portable", "XNNPACK", "llama.cpp f32", "ONNX Runtime"];
/// The lite build (no eager path) shows the ExecuTorch, llama.cpp and ONNX Runtime columns only.
#[cfg(not(feature = "eager"))]
const TITLES: &[&str] = &["ExecuTorch portable", "XNNPACK", "llama.cpp f32", "ONNX Runtime"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn require_setup() {
    let tmux = Command::new("tmux").arg("-V").output();
    assert!(
        tmux.is_ok_and(|o| o.status.success()),
        "tmux is needed for the end-to-end test of the explorer: install it (`make test` does, with apt-get)"
    );
    let models = root().join("models/minilm");
    for file in ["tokenizer.json", "model.safetensors", "portable.pte", "xnnpack.pte"] {
        assert!(models.join(file).is_file(), "{} is missing: run `make models` first", models.join(file).display());
    }
}

/// A tmux server of its own (private socket, no user config), killed on drop.
struct Tmux {
    socket: String,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run tmux {args:?}: {e}"))
    }

    /// Start the binary from the repository root (so `models/` is found) in a
    /// shell script that reports how it ended and the terminal modes after it.
    fn start(name: &str) -> Tmux {
        Self::start_with(name, "", "")
    }

    /// [`start`](Self::start) with shell text before the binary (`VAR=value `)
    /// and after it (` --models 'DIR'`), quoted by the caller.
    fn start_with(name: &str, env: &str, args: &str) -> Tmux {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let script = dir.path().join("run.sh");
        std::fs::write(
            &script,
            format!(
                "cd '{root}'\nexport RUNLENS_CACHE_DIR='{cache}'\n{env}'{bin}'{args}\nstatus=$?\nprintf '\\nrunlens exited with status %s\\n' \"$status\"\n\
                 printf 'modes: %s\\n' \"$(stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' ')\"\n\
                 exec sleep 600\n",
                root = root().display(),
                cache = dir.path().join("cache").display(),
                bin = env!("CARGO_BIN_EXE_runlens"),
            ),
        )
        .expect("write the session script");
        let script = script.display().to_string();
        Tmux::with_command(name, dir, &["sh", &script])
    }

    /// An interactive shell with job control (for Ctrl-Z and `fg`), in the repository root.
    fn shell(name: &str) -> Tmux {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let tmux = Tmux::with_command(name, dir, &["env", "PS1=$ ", "TERM=screen", "bash", "--norc", "--noprofile", "-i"]);
        // capture-pane drops trailing spaces: the prompt reads "$".
        tmux.wait_until("the shell prompt", EXIT_TIMEOUT, |s| s.lines().any(|l| l.trim_end() == "$"));
        tmux.type_text(&format!("cd '{}'", root().display()));
        tmux.key("Enter");
        tmux
    }

    fn with_command(name: &str, dir: tempfile::TempDir, command: &[&str]) -> Tmux {
        let tmux = Tmux { socket: format!("runlens-e2e-{name}-{}", std::process::id()), _dir: dir };
        let (w, h) = (WIDTH.to_string(), HEIGHT.to_string());
        let mut args = vec!["new-session", "-d", "-s", "e2e", "-x", &w, "-y", &h];
        args.extend(command);
        let out = tmux.tmux(&args);
        assert!(out.status.success(), "tmux new-session failed: {}", String::from_utf8_lossy(&out.stderr));
        tmux
    }

    /// The pid of the runlens process: the pane's shell's child.
    fn runlens_pid(&self) -> u32 {
        let shell = self.format("#{pane_pid}");
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap_or_default();
        let pids: Vec<u32> = children.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        assert_eq!(pids.len(), 1, "expected one child of the pane's shell {shell}, found {pids:?}");
        pids[0]
    }

    fn type_text(&self, text: &str) {
        assert!(self.tmux(&["send-keys", "-t", "e2e", "-l", text]).status.success());
    }

    fn key(&self, key: &str) {
        assert!(self.tmux(&["send-keys", "-t", "e2e", key]).status.success());
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "e2e"]).stdout).into_owned()
    }

    /// The screen with each wrapped line joined back into one (`-J`): a long
    /// message reads whole wherever the terminal's width broke it.
    #[cfg(feature = "eager")] // its one user, the abort test, needs eager
    fn screen_unwrapped(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-J", "-t", "e2e"]).stdout).into_owned()
    }

    /// The screen with its colours as escape sequences (tmux writes them as the cells' attributes).
    fn screen_with_colours(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-e", "-t", "e2e"]).stdout).into_owned()
    }

    fn format(&self, f: &str) -> String {
        String::from_utf8_lossy(&self.tmux(&["display-message", "-p", "-t", "e2e", f]).stdout).trim().to_string()
    }

    /// Poll the screen until `done` says yes; fail with the screen after `timeout`.
    fn wait_until(&self, what: &str, timeout: Duration, done: impl FnMut(&str) -> bool) -> String {
        self.wait_until_or_show(what, timeout, done, String::new)
    }

    /// As [`Tmux::wait_until`], with `more` (what else to show) after the screen on a timeout.
    fn wait_until_or_show(&self, what: &str, timeout: Duration, mut done: impl FnMut(&str) -> bool, more: impl Fn() -> String) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            if screen.contains("runlens exited with status") && !what.contains("exit") {
                panic!("runlens ended while waiting for {what}:\n{screen}");
            }
            if start.elapsed() > timeout {
                panic!("timed out after {timeout:?} waiting for {what}; the screen was:\n{screen}\n{}", more());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// Each thread of process `pid`: its name, state and where in the kernel it waits
/// (`/proc/PID/task/*/{comm,stat,wchan}`), for a process that does not end.
fn threads_of(pid: u32) -> String {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return format!("process {pid} is gone") };
    let mut lines = vec![format!("threads of runlens (pid {pid}): name, state, kernel wait")];
    for task in tasks.flatten() {
        let read = |f: &str| std::fs::read_to_string(task.path().join(f)).unwrap_or_default().trim().to_string();
        // The state is the field after the parenthesised name.
        let stat = read("stat");
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_string)).unwrap_or_default();
        lines.push(format!("  {} {state} {}", read("comm"), read("wchan")));
    }
    lines.join("\n")
}

/// The columns (one per title) of a 120-wide screen, as text (the layout's own geometry).
fn columns(screen: &str) -> Vec<Vec<String>> {
    let area = ratatui::layout::Rect::new(0, 0, WIDTH, HEIGHT);
    let areas = runlens::ui::column_areas(runlens::ui::areas(area).columns, TITLES.len());
    areas
        .iter()
        .map(|a| {
            screen
                .lines()
                .map(|l| {
                    let cells: Vec<char> = l.chars().chain(std::iter::repeat(' ')).take(WIDTH as usize).collect();
                    cells[a.x as usize + 1..(a.x + a.width) as usize - 1].iter().collect::<String>().trim_end().to_string()
                })
                .collect()
        })
        .collect()
}

/// What one column shows once it has a result for the current text: the
/// nearest sentence's first line and the last latency (ms).
fn result_of(column: &[String]) -> Option<(String, f64)> {
    if column.iter().any(|l| l.contains("old text")) {
        return None;
    }
    let nearest = column.iter().position(|l| l.starts_with("nearest") && l.contains("cos "))?;
    // A wide column (two columns in the lite build) holds the whole sentence and its closing quote.
    let sentence = column.get(nearest + 1)?.trim().trim_start_matches('“').trim_end_matches('”').to_string();
    let header = column.iter().position(|l| l.contains("last") && l.contains("p50") && l.contains("p99"))?;
    let last: f64 = column.get(header + 1)?.split_whitespace().next()?.trim_end_matches('s').parse().ok()?;
    (!sentence.is_empty() && last > 0.0).then_some((sentence, last))
}

/// The token strip's lines (the line starting `Tokens`, and its wrapped continuation), joined.
fn token_strip(screen: &str) -> String {
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("Tokens ")).unwrap_or_else(|| panic!("no token strip:\n{screen}"));
    let next = lines.get(at + 1).filter(|l| l.starts_with("    ")).map_or("", |l| l.trim());
    format!("{} {next}", lines[at].trim_end())
}

/// `[CLS] 101`, `word id` for each (lower-cased) word, `[SEP] 102`, the ids read
/// from MiniLM's tokenizer.json vocabulary (every word of the test sentence is one piece).
fn expected_pieces(sentence: &str) -> Vec<String> {
    let path = root().join("models/minilm/tokenizer.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let vocab = &json["model"]["vocab"];
    let mut pieces = vec!["[CLS] 101".to_string()];
    for word in sentence.to_lowercase().split_whitespace() {
        let id = vocab[word].as_u64().unwrap_or_else(|| panic!("{word:?} is not one piece of {}", path.display()));
        pieces.push(format!("{word} {id}"));
    }
    pieces.push("[SEP] 102".to_string());
    pieces
}

fn corpus() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("assets/corpus.txt")).expect("assets/corpus.txt");
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect()
}

fn check_restored(tmux: &Tmux) {
    check_restored_with_status(tmux, 0);
}

fn check_restored_with_status(tmux: &Tmux, status: i32) {
    let screen = tmux.wait_until("runlens to exit", EXIT_TIMEOUT, |s| s.contains("modes:"));
    assert!(screen.contains(&format!("runlens exited with status {status}\n")), "runlens did not exit with status {status}:\n{screen}");
    assert_eq!(tmux.format("#{alternate_on}"), "0", "the alternate screen is still on:\n{screen}");
    assert_eq!(tmux.format("#{cursor_flag}"), "1", "the cursor is still hidden");
    let modes = screen.lines().find(|l| l.starts_with("modes:")).unwrap_or_default();
    assert!(modes.contains(" icanon") && modes.contains(" echo"), "the terminal is still in raw mode: {modes:?}");
    for title in TITLES {
        assert!(!screen.contains(title), "the explorer's screen is still visible:\n{screen}");
    }
}

#[test]
fn type_a_sentence_see_a_result_in_every_column_and_quit() {
    require_setup();
    let tmux = Tmux::start("results");
    tmux.wait_until("the explorer to open", RESULTS_TIMEOUT, |s| TITLES.iter().all(|t| s.contains(t)));
    tmux.type_text(SENTENCE);
    let screen = tmux.wait_until("a result in every column", RESULTS_TIMEOUT, |s| {
        s.contains(SENTENCE) && columns(s).iter().all(|c| result_of(c).is_some())
    });
    for title in TITLES {
        assert!(screen.contains(title), "no column titled {title:?}:\n{screen}");
    }
    #[cfg(not(feature = "eager"))]
    assert!(!screen.contains("PyTorch eager"), "the lite build shows an eager column:\n{screen}");
    let results: Vec<(String, f64)> = columns(&screen).iter().map(|c| result_of(c).unwrap()).collect();
    let first = &results[0].0;
    assert!(results.iter().all(|(s, _)| s == first), "the columns name different nearest sentences: {results:?}\n{screen}");
    assert!(
        corpus().iter().any(|s| s.starts_with(first.trim_end_matches('…'))),
        "{first:?} is not from assets/corpus.txt"
    );
    assert!(screen.contains("tokens") || screen.contains("Tokens"), "no token strip:\n{screen}");
    // The strip itself: the count and every piece with the id tokenizer.json gives it.
    let strip = token_strip(&screen);
    let expected = expected_pieces(SENTENCE);
    assert!(strip.starts_with(&format!("Tokens {} ", expected.len())), "the token count: {strip:?}\n{screen}");
    for piece in &expected {
        assert!(strip.contains(piece.as_str()), "{piece:?} missing from the token strip {strip:?}\n{screen}");
    }

    // q is text while the input holds some: clear it first, then q quits.
    tmux.key("C-u");
    tmux.wait_until("the input to clear", EXIT_TIMEOUT, |s| !s.contains(SENTENCE));
    tmux.key("q");
    check_restored(&tmux);
}

/// The Pi's text console: started with `TERM=linux` and no `--glyphs`, the
/// explorer picks the console glyph set by itself. Every character on the
/// captured screen is one that all of console-setup's Lat15 / Uni2 fonts draw
/// (`tests/data/console-font-codepoints.txt`, the intersection of their tables:
/// a screen that passes it shows on each of those fonts), none is a partial
/// block `▁`-`▇`, and no colour is outside the 16 ANSI ones.
#[test]
fn under_term_linux_the_screen_uses_only_the_console_fonts_characters() {
    require_setup();
    let tmux = Tmux::start_with("console", "TERM=linux ", "");
    tmux.wait_until("the explorer to open", RESULTS_TIMEOUT, |s| TITLES.iter().all(|t| s.contains(t)));
    tmux.type_text(SENTENCE);
    let screen = tmux.wait_until("a result in every column", RESULTS_TIMEOUT, |s| {
        s.contains(SENTENCE) && columns(s).iter().all(|c| result_of(c).is_some())
    });
    let fonts = std::fs::read_to_string(root().join("tests/data/console-font-codepoints.txt")).expect("tests/data/console-font-codepoints.txt");
    let drawable: std::collections::HashSet<char> = fonts
        .lines()
        .filter_map(|l| l.strip_prefix("U+"))
        .filter_map(|h| u32::from_str_radix(h, 16).ok().and_then(char::from_u32))
        .collect();
    assert!(drawable.len() > 500 && drawable.contains(&'█'), "tests/data/console-font-codepoints.txt does not look like the fonts' table");
    let outside: std::collections::BTreeSet<char> = screen.chars().filter(|c| *c != '\n' && !drawable.contains(c)).collect();
    assert!(outside.is_empty(), "characters the console fonts cannot draw: {outside:?}\n{screen}");
    let partial: Vec<char> = screen.chars().filter(|c| ('▁'..='▇').contains(c)).collect();
    assert!(partial.is_empty(), "partial blocks on the console: {partial:?}\n{screen}");
    // The bars are still there, drawn with what the fonts have.
    assert!(screen.contains('█'), "no full block: the sparklines and strips are gone\n{screen}");
    // tmux writes the 16 colours as palette indices 0-15 (`38;5;N`), RGB as `38;2;R;G;B`.
    let coloured = tmux.screen_with_colours();
    for rgb in ["38;2;", "48;2;"] {
        assert!(!coloured.contains(rgb), "an RGB colour ({rgb}…) on the console:\n{coloured}");
    }
    for indexed in ["38;5;", "48;5;"] {
        for (at, _) in coloured.match_indices(indexed) {
            let digits: String = coloured[at + indexed.len()..].chars().take_while(char::is_ascii_digit).collect();
            let index: u32 = digits.parse().unwrap_or(u32::MAX);
            assert!(index < 16, "colour {indexed}{digits}: beyond the console's 16:\n{coloured}");
        }
    }
    tmux.key("C-u");
    tmux.wait_until("the input to clear", EXIT_TIMEOUT, |s| !s.contains(SENTENCE));
    tmux.key("q");
    check_restored(&tmux);
}

#[test]
fn escape_quits_and_restores_the_terminal() {
    require_setup();
    let tmux = Tmux::start("escape");
    tmux.wait_until("the explorer to open", RESULTS_TIMEOUT, |s| TITLES.iter().all(|t| s.contains(t)));
    tmux.type_text("a q is text here");
    tmux.wait_until("the typed text", EXIT_TIMEOUT, |s| s.contains("a q is text here"));
    tmux.key("Escape");
    check_restored(&tmux);
}

/// A damaged `xnnpack.pte` (one kernel argument pointing at a value of the wrong
/// type, which makes ExecuTorch abort the process): its column says why it
/// failed to load, the other two show results, and quitting restores the terminal.
// Drawn with eager as one of the columns: the full build.
#[cfg(feature = "eager")]
#[test]
fn a_damaged_program_fails_in_its_column_and_the_others_run() {
    require_setup();
    let (work, models, changed) = models_with_damaged_xnnpack();
    let env = format!("RUNLENS_CACHE_DIR='{}' ", work.path().join("cache").display());
    let args = format!(" --models '{}'", models.display());

    let tmux = Tmux::start_with("damaged", &env, &args);
    tmux.wait_until("the explorer to open", RESULTS_TIMEOUT, |s| TITLES.iter().all(|t| s.contains(t)));
    tmux.type_text(SENTENCE);
    let screen = tmux.wait_until("results in two columns and the error in the third", RESULTS_TIMEOUT, |s| {
        let cols = columns(s);
        s.contains(SENTENCE) && result_of(&cols[0]).is_some() && result_of(&cols[1]).is_some() && cols[2].join(" ").contains("EValue")
    });
    let xnnpack = columns(&screen)[2].join(" ");
    for part in ["failed to load", "ExecuTorch aborts on this program", "EValue is not"] {
        assert!(xnnpack.contains(part), "{part:?} missing from the XNNPACK column ({changed:?}):\n{screen}");
    }
    tmux.key("Escape");
    check_restored(&tmux);
}

/// The probe turned off, so the damaged program reaches ExecuTorch in the
/// explorer's own process and aborts it: the terminal is restored and the
/// report (file, method, reason) is on it, status 134.
// Drawn with eager as one of the columns: the full build.
#[cfg(feature = "eager")]
#[test]
fn an_abort_in_the_explorer_restores_the_terminal_and_says_why() {
    require_setup();
    let (work, models, changed) = models_with_damaged_xnnpack();
    let env = format!("RUNLENS_PROBE=0 RUNLENS_CACHE_DIR='{}' ", work.path().join("cache").display());
    let args = format!(" --models '{}' --backends eager,xnnpack", models.display());

    let tmux = Tmux::start_with("abort", &env, &args);
    tmux.wait_until("the explorer to open", RESULTS_TIMEOUT, |s| s.contains(TITLES[0]) || s.contains("exited"));
    tmux.type_text(SENTENCE);
    let screen = tmux.wait_until("runlens to exit after the abort", RESULTS_TIMEOUT, |s| s.contains("modes:"));
    assert!(screen.contains("runlens exited with status 134"), "{changed:?}:\n{screen}");
    // The report is one long line: the terminal wraps it wherever its width falls.
    let text = tmux.screen_unwrapped().split_whitespace().collect::<Vec<_>>().join(" ");
    for part in ["ExecuTorch aborted runlens while running", "xnnpack.pte", "method 'forward'", "EValue is not a"] {
        assert!(text.contains(part), "{part:?} missing from the terminal after the abort:\n{screen}");
    }
    assert_eq!(tmux.format("#{alternate_on}"), "0", "the alternate screen is still on:\n{screen}");
    assert_eq!(tmux.format("#{cursor_flag}"), "1", "the cursor is still hidden");
    let modes = screen.lines().find(|l| l.starts_with("modes:")).unwrap_or_default();
    assert!(modes.contains(" icanon") && modes.contains(" echo"), "the terminal is still in raw mode: {modes:?}");
}

#[cfg(feature = "eager")]
/// A models directory linking every file of `models/minilm` but `xnnpack.pte`,
/// which is a copy with one kernel argument pointing at a value of the wrong
/// type (ExecuTorch aborts the process on it).
fn models_with_damaged_xnnpack() -> (tempfile::TempDir, PathBuf, common::damage::Redirected) {
    let work = tempfile::tempdir().expect("a temporary directory");
    let models = work.path().join("models");
    std::fs::create_dir(&models).unwrap();
    let real = root().join("models/minilm");
    for entry in std::fs::read_dir(&real).unwrap() {
        let name = entry.unwrap().file_name();
        if name != "xnnpack.pte" {
            std::os::unix::fs::symlink(real.join(&name), models.join(&name)).unwrap();
        }
    }
    let mut bytes = std::fs::read(real.join("xnnpack.pte")).unwrap();
    let changed = common::damage::int_argument_to_tensor(&mut bytes, 2).expect("a kernel call to damage in xnnpack.pte");
    std::fs::write(models.join("xnnpack.pte"), &bytes).unwrap();
    (work, models, changed)
}

/// F8 on the Pi's console (`TERM=linux`): the model list opens over the
/// columns, drawn with the console fonts' characters only; choosing
/// tiny-bert-cls unloads MiniLM and opens it on the same screen, its
/// classification columns replacing MiniLM's, the typed text kept and run on it.
#[test]
fn f8_switches_to_another_model_and_keeps_the_text() {
    require_setup();
    let target = root().join("models/tiny-bert-cls");
    assert!(target.join("manifest.json").is_file(), "{} is missing: run `make test-models` first", target.display());
    let tmux = Tmux::start_with("switch", "TERM=linux ", "");
    tmux.wait_until("the explorer to open", RESULTS_TIMEOUT, |s| TITLES.iter().all(|t| s.contains(t)));
    tmux.type_text(SENTENCE);
    tmux.wait_until("a result in every column", RESULTS_TIMEOUT, |s| s.contains(SENTENCE) && columns(s).iter().all(|c| result_of(c).is_some()));

    tmux.key("F8");
    let list = tmux.wait_until("the model list", EXIT_TIMEOUT, |s| s.contains("model directories (") && s.contains("Enter switch"));
    let open = list.lines().find(|l| l.contains(" minilm ")).unwrap_or_else(|| panic!("no MiniLM in the list:\n{list}"));
    assert!(open.contains("all-MiniLM-L6-v2 · feature-extraction  ● open"), "MiniLM is not marked as open: {open}");
    assert!(list.contains("tiny-bert-cls") && list.contains("text-classification"), "{list}");
    assert!(!list.contains("checkpoints"), "the checkpoints are not model directories:\n{list}");
    let fonts = std::fs::read_to_string(root().join("tests/data/console-font-codepoints.txt")).expect("tests/data/console-font-codepoints.txt");
    let drawable: std::collections::HashSet<char> =
        fonts.lines().filter_map(|l| l.strip_prefix("U+")).filter_map(|h| u32::from_str_radix(h, 16).ok().and_then(char::from_u32)).collect();
    let outside: std::collections::BTreeSet<char> = list.chars().filter(|c| *c != '\n' && !drawable.contains(c)).collect();
    assert!(outside.is_empty(), "the list has characters the console fonts cannot draw: {outside:?}\n{list}");

    // Down to tiny-bert-cls (the cursor's line starts with `›`), then Enter.
    let mut screen = list;
    for _ in 0..40 {
        if screen.contains("› tiny-bert-cls ") {
            break;
        }
        tmux.key("Down");
        std::thread::sleep(Duration::from_millis(150));
        screen = tmux.screen();
    }
    assert!(screen.contains("› tiny-bert-cls "), "the cursor never reached tiny-bert-cls:\n{screen}");
    tmux.key("Enter");
    let screen = tmux.wait_until("tiny-bert-cls's columns with a label each and the text kept", RESULTS_TIMEOUT, |s| {
        !s.contains("model directories (") && s.contains("tiny-bert-cls") && s.contains(SENTENCE) && s.matches("3 labels").count() >= 2
    });
    assert!(screen.contains("ExecuTorch XNNPACK") && screen.contains("ExecuTorch portable"), "{screen}");
    assert!(!screen.contains("llama.cpp f32"), "MiniLM's llama.cpp column is still there:\n{screen}");
    assert!(!screen.contains("nearest"), "a MiniLM panel is still there:\n{screen}");
    assert!(screen.lines().next().is_some_and(|l| l.contains(SENTENCE)), "the text is not in the input line:\n{screen}");

    tmux.key("C-u");
    tmux.wait_until("the input to clear", EXIT_TIMEOUT, |s| !s.contains(SENTENCE));
    tmux.key("q");
    check_restored(&tmux);
}

fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().expect("run kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

#[test]
fn sigterm_restores_the_terminal_and_exits_with_143() {
    require_setup();
    let tmux = Tmux::start("sigterm");
    tmux.wait_until("the explorer to open", RESULTS_TIMEOUT, |s| TITLES.iter().all(|t| s.contains(t)));
    tmux.type_text("a signal ends this");
    tmux.wait_until("the typed text", EXIT_TIMEOUT, |s| s.contains("a signal ends this"));
    send_signal(tmux.runlens_pid(), "TERM");
    check_restored_with_status(&tmux, 128 + 15);
}

#[test]
fn sighup_and_sigquit_restore_the_terminal_too() {
    require_setup();
    for (signal, number) in [("HUP", 1), ("QUIT", 3)] {
        let tmux = Tmux::start(&format!("sig{signal}"));
        tmux.wait_until("the explorer to open", RESULTS_TIMEOUT, |s| TITLES.iter().all(|t| s.contains(t)));
        send_signal(tmux.runlens_pid(), signal);
        check_restored_with_status(&tmux, 128 + number);
    }
}

#[test]
fn ctrl_z_suspends_with_the_terminal_restored_and_fg_redraws_everything() {
    require_setup();
    let tmux = Tmux::shell("suspend");
    // Alone on its line: in a list (`runlens; echo`) bash would go on with the list when it stops.
    tmux.type_text(&format!("'{}'", env!("CARGO_BIN_EXE_runlens")));
    tmux.key("Enter");
    tmux.wait_until("the explorer to open", RESULTS_TIMEOUT, |s| TITLES.iter().all(|t| s.contains(t)));
    tmux.type_text("kept over a suspend");
    tmux.wait_until("the typed text", EXIT_TIMEOUT, |s| s.contains("kept over a suspend"));

    tmux.key("C-z");
    // The stop goes through the event loop (the SIGTSTP comes back as an event), which a
    // machine loaded by parallel tests and exports has been seen to hold past 20 s while
    // the columns still load (each file probed in a child first): a longer wait, the same check.
    let stopped = tmux.wait_until("the shell to report the stopped job", RESULTS_TIMEOUT, |s| s.contains("Stopped"));
    assert_eq!(tmux.format("#{alternate_on}"), "0", "suspended with the alternate screen on:\n{stopped}");
    assert_eq!(tmux.format("#{cursor_flag}"), "1", "suspended with the cursor hidden");
    for title in TITLES {
        assert!(!stopped.contains(title), "the explorer's screen is still visible while suspended:\n{stopped}");
    }
    // The shell is usable: it echoes what is typed and runs it.
    tmux.type_text("echo shell-works");
    tmux.key("Enter");
    tmux.wait_until("the shell to run a command", EXIT_TIMEOUT, |s| s.lines().any(|l| l.trim() == "shell-works"));

    tmux.type_text("fg");
    tmux.key("Enter");
    // A full redraw: the alternate screen starts blank, so every part must be drawn again.
    let screen = tmux.wait_until("the explorer to come back whole", RESULTS_TIMEOUT, |s| {
        TITLES.iter().all(|t| s.contains(t)) && s.contains("kept over a suspend") && s.contains("help")
    });
    assert_eq!(tmux.format("#{alternate_on}"), "1", "resumed without the alternate screen:\n{screen}");
    // Still live after the resume: keys are read in raw mode again.
    tmux.key("C-u");
    tmux.wait_until("the input to clear after the resume", EXIT_TIMEOUT, |s| !s.contains("kept over a suspend"));
    let pid = tmux.runlens_pid();
    tmux.key("Escape");
    tmux.wait_until("the explorer to close", EXIT_TIMEOUT, |s| !s.contains(TITLES[0]));
    // The quotes split the phrase so that the echoed command line does not contain it.
    tmux.type_text("echo \"runlens \"\"exited with status $?\"");
    tmux.key("Enter");
    // The process ends once every thread has left the kernel: CI once saw that take over
    // 20 s on a loaded machine (columns still loading). A longer wait, and on a timeout
    // where each thread of runlens was.
    let screen = tmux.wait_until_or_show("runlens to exit", RESULTS_TIMEOUT, |s| s.contains("runlens exited with status"), || threads_of(pid));
    assert!(screen.contains("runlens exited with status 0"), "runlens did not exit cleanly after the resume:\n{screen}");
    assert_eq!(tmux.format("#{alternate_on}"), "0");
}
