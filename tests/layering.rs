//! The layers of `src/` stay layers (docs/architecture.md): every top-level
//! module sits in one layer of [`LAYERS`] and imports only from its own layer
//! or those below, and no import circle joins two modules. Read from the
//! `crate::` paths of the source itself (comments and `#[cfg(test)]` modules
//! left out).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "generated" && name != "tests" && name != "testdata" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// `text` without its inline `#[cfg(test)] mod name { ... }` blocks (braces
/// counted; line numbers kept by leaving their newlines).
fn without_test_modules(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]\nmod ") {
        out.push_str(&rest[..at]);
        let block = &rest[at..];
        let Some(open) = block.find(['{', ';']) else { break };
        if block.as_bytes()[open] == b';' {
            // `mod tests;`: a file of its own (tests.rs is skipped).
            out.push_str(&"\n".repeat(block[..=open].matches('\n').count()));
            rest = &block[open + 1..];
            continue;
        }
        let mut depth = 0;
        let mut end = block.len();
        for (i, c) in block.char_indices().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push_str(&"\n".repeat(block[..end].matches('\n').count()));
        rest = &block[end..];
    }
    out.push_str(rest);
    out
}

/// Top-level module -> the top-level modules its code names, with where.
fn imports() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let name = name.trim_end_matches(".rs").to_string();
        if name != "lib" && name != "main" {
            modules.insert(name);
        }
    }
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for module in &modules {
        let mut files = Vec::new();
        let dir = src.join(module);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src.join(format!("{module}.rs")));
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            // Unit tests may reach anywhere.
            let code = without_test_modules(&text);
            for (n, line) in code.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if name != *module && modules.contains(&name) {
                        graph.entry(module.clone()).or_default().entry(name).or_insert_with(|| format!("{}:{}", file.display(), n + 1));
                    }
                }
            }
        }
    }
    graph
}

/// The layers, bottom first: docs/architecture.md's table, in the same order.
/// A module may import from its own layer (no circle: the test below) and
/// from any layer under it, never from one above.
const LAYERS: &[(&str, &[&str])] = &[
    ("plain data and file readers", &["tensor", "timeline", "ffi", "pte", "gguf", "onnx", "heat", "stats"]),
    ("the model directory", &["model"]),
    ("architectures", &["arch"]),
    ("backends", &["backend"]),
    ("tasks", &["task"]),
    ("reading runs, measuring", &["profile", "layers", "corpus_cache", "footprint", "memory", "bench", "eval", "tables"]),
    ("scheduling", &["schedule"]),
    ("background jobs", &["jobs"]),
    ("the explorer's state", &["app"]),
    ("drawing", &["ui"]),
    ("the terminal", &["tui"]),
    ("the command line", &["cli"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

#[test]
fn every_module_imports_only_its_own_layer_and_those_below() {
    let graph = imports();
    let mut upward = Vec::new();
    for (module, uses) in &graph {
        let Some(at) = layer_of(module) else {
            panic!("src/{module} is in no layer of tests/layering.rs' LAYERS: add it where docs/architecture.md puts it");
        };
        for (used, site) in uses {
            let below = layer_of(used).unwrap_or_else(|| panic!("src/{used} is in no layer of LAYERS"));
            if below > at {
                upward.push(format!("{module} ({}) imports {used} ({}) at {site}", LAYERS[at].0, LAYERS[below].0));
            }
        }
    }
    assert!(upward.is_empty(), "imports from a layer above:\n{}", upward.join("\n"));
}

#[test]
fn every_module_of_src_is_in_the_table() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().trim_end_matches(".rs").to_string();
        if name != "lib" && name != "main" {
            assert!(layer_of(&name).is_some(), "src/{name} is in no layer of tests/layering.rs' LAYERS");
        }
    }
}

#[test]
fn no_top_level_module_imports_one_that_imports_it_back() {
    let graph = imports();
    // Depth-first search for a cycle, reporting its path.
    fn visit(node: &str, graph: &BTreeMap<String, BTreeMap<String, String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
        if let Some(at) = path.iter().position(|p| p == node) {
            let cycle: Vec<String> = path[at..].iter().cloned().chain([node.to_string()]).collect();
            let wheres: Vec<String> = cycle.windows(2).map(|w| format!("{} -> {} at {}", w[0], w[1], graph[&w[0]][&w[1]])).collect();
            panic!("an import circle: {}\n{}", cycle.join(" -> "), wheres.join("\n"));
        }
        if done.contains(node) {
            return;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flat_map(|m| m.keys()) {
            visit(next, graph, path, done);
        }
        path.pop();
        done.insert(node.to_string());
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, &graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_bottom_layers_import_only_what_is_below_them() {
    let graph = imports();
    let uses = |m: &str| graph.get(m).map(|i| i.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    assert!(uses("tensor").is_empty(), "tensor imports {:?}", graph.get("tensor"));
    assert!(uses("timeline").is_empty(), "timeline (plain data) imports {:?}", graph.get("timeline"));
    assert_eq!(uses("model"), ["tensor"], "model imports {:?}", graph.get("model"));
    for above in ["task", "schedule", "jobs", "app", "ui", "tui", "cli"] {
        assert!(!graph.get("backend").is_some_and(|i| i.contains_key(above)), "backend imports {above}: {:?}", graph.get("backend"));
        assert!(!graph.get("arch").is_some_and(|i| i.contains_key(above)), "arch imports {above}: {:?}", graph.get("arch"));
    }
}
