//! The docs' tables are what their bench JSON gives (`runlens report`, issue
//! 42): every marked block of README.md and docs/*.md equals its rendering; a
//! figure edited by hand is reported with its file, line, JSON and cell, and
//! `--write` puts it back; a table that cannot be rendered is an error naming
//! why. Needs no model (the full and the lite build alike).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use runlens::tables;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md.
fn markdown_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "md")).collect();
    files.sort();
    files.insert(0, root().join("README.md"));
    files
}

fn runlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlens")).args(args).output().expect("runlens starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_marked_table_is_what_its_json_gives() {
    let mut stale = Vec::new();
    let mut blocks = Vec::new();
    for file in markdown_files() {
        let checked = tables::check_file(&file).unwrap_or_else(|e| panic!("{e}"));
        blocks.push((file.file_name().unwrap().to_string_lossy().into_owned(), checked.blocks));
        stale.extend(checked.stale);
    }
    let report: Vec<String> = stale.iter().map(ToString::to_string).collect();
    assert!(stale.is_empty(), "tables that differ from their JSON (rewrite them with `runlens report --write README.md docs/*.md`):\n{}", report.join("\n"));
    // The tables issue 42 turned into blocks stay blocks (the README's ONNX Runtime decoder
    // table moved to onnxruntime.md, beside that runtime's other one).
    let count = |name: &str| blocks.iter().find(|(n, _)| n == name).map_or(0, |(_, c)| *c);
    assert!(count("README.md") >= 2, "{blocks:?}");
    assert!(count("onnxruntime.md") >= 2, "{blocks:?}");
    assert!(count("llama-cpp.md") >= 2, "{blocks:?}");
}

/// README.md and the bench JSON files in a temporary folder, as in the repository.
fn readme_copy() -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("assets")).unwrap();
    for entry in std::fs::read_dir(root().join("assets")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            std::fs::copy(&path, dir.path().join("assets").join(path.file_name().unwrap())).unwrap();
        }
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let copy = dir.path().join("README.md");
    std::fs::write(&copy, &readme).unwrap();
    (dir, copy, readme)
}

#[test]
fn a_figure_edited_by_hand_is_reported_and_rewritten() {
    let (_dir, copy, readme) = readme_copy();
    assert!(runlens(&["report", "--check", copy.to_str().unwrap()]).status.success(), "the copy starts as the JSON gives it");

    // llama.cpp f32's prefill of 128 tokens: 294 tokens/s in the JSON; 435 is its TTFT in ms.
    let mut lines: Vec<String> = readme.split('\n').map(str::to_string).collect();
    let at = lines.iter().position(|l| l.starts_with("| prefill of 128 tokens")).expect("README has the prefill row");
    let cells: Vec<&str> = lines[at].split(" | ").collect();
    assert_eq!(cells[2], "294", "the row's llama.cpp f32 cell: {}", lines[at]);
    lines[at] = lines[at].replacen(" | 294 | ", " | 435 | ", 1);
    std::fs::write(&copy, lines.join("\n")).unwrap();
    let block = tables::blocks(&lines.join("\n")).unwrap().into_iter().find(|b| b.body.contains(&at)).expect("the row is in a block");

    let out = runlens(&["report", "--check", copy.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("README.md:{}: the table of assets/bench-generation-smollm2-135m-instruct.json differs from its JSON", block.line)), "{err}");
    assert!(err.contains(&format!("README.md:{}: row \"prefill of 128 tokens", at + 1)) && err.contains("column \"llama.cpp f32\""), "{err}");
    assert!(err.contains("- 435") && err.contains("+ 294"), "{err}");
    assert!(text(&out.stdout).contains("1 differ"), "{}", text(&out.stdout));

    let out = runlens(&["report", "--write", copy.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("1 rewritten"), "{}", text(&out.stdout));
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), readme, "--write gives back the committed README");
    assert!(runlens(&["report", "--check", copy.to_str().unwrap()]).status.success());
}

#[test]
fn a_table_that_cannot_render_is_an_error_naming_why() {
    let (dir, copy, readme) = readme_copy();
    let five = "assets/bench-minilm-five-runtimes.json";
    std::fs::remove_file(dir.path().join(five)).unwrap();
    let out = runlens(&["report", "--check", copy.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("README.md:") && err.contains(five), "{err}");

    std::fs::write(&copy, readme.replacen("decode_tokens_per_s@8", "decode_tokens_per_sec@8", 1)).unwrap();
    std::fs::copy(root().join(five), dir.path().join(five)).unwrap();
    let out = runlens(&["report", "--check", copy.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown metric `decode_tokens_per_sec`"), "{err}");

    let json = root().join("assets/bench-minilm-llamacpp.json");
    let json = json.to_str().unwrap();
    let out = runlens(&["report", json, "--cols", "eager | tflite", "--rows", "p50_ms@8"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no backend `tflite`"), "{}", text(&out.stderr));
    let out = runlens(&["report", json, "--cols", "eager", "--rows", "p50_ms@8", "--write"]);
    assert_eq!(out.status.code(), Some(2), "--write is for markdown");
}

#[test]
fn one_table_from_a_json_on_the_command_line() {
    let json = root().join("assets/bench-minilm-llamacpp.json");
    let out = runlens(&["report", json.to_str().unwrap(), "--cols", "xnnpack-int8 = XNNPACK int8 | llamacpp-q4_0", "--rows", "p50_ms@8 = 8 | p50_ms@128 = 128", "--corner", "tokens"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "| tokens | XNNPACK int8 | llamacpp-q4_0 |\n| --- | --- | --- |\n| 8 | 0.923 | 1.99 |\n| 128 | 6.46 | 27.0 |\n");
    let out = runlens(&["report", json.to_str().unwrap(), "--cols", "eager", "--rows", "p50_ms@8", "--marker"]);
    let marked = text(&out.stdout);
    assert!(marked.starts_with(&format!("<!-- report: {}\nrows: p50_ms@8\ncols: eager\n-->\n\n| | eager |", json.display())), "{marked}");
    assert!(marked.ends_with("\n\n<!-- /report -->\n"), "{marked}");
}
