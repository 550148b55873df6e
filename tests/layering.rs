//! The layers of `src/` stay layers (docs/architecture.md): every top-level
//! module sits in one layer of [`LAYERS`] and imports only from its own layer
//! or those below, and no import circle joins two modules. Read from the
//! `crate::` paths of the source itself (comments and `#[cfg(test)]` modules
//! left out). The export package, `python/runlens_export/`, the same way
//! ([`PYTHON_LAYERS`], from its files' import statements).

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

/// Fails on the first import circle of `graph` (module -> the modules it imports,
/// with where), naming its modules and each import's place.
fn assert_no_circle(graph: &BTreeMap<String, BTreeMap<String, String>>) {
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
        visit(node, graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn no_top_level_module_imports_one_that_imports_it_back() {
    assert_no_circle(&imports());
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

// The export package, python/runlens_export/: its modules are its top-level .py
// files (but __init__.py) and archs/ (one module: the table and its architectures).

fn python_package() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join("runlens_export")
}

/// The package's modules, each with its files.
fn python_modules() -> BTreeMap<String, Vec<PathBuf>> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(python_package()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() && path.join("__init__.py").is_file() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "py"))
                .collect();
            files.sort();
            modules.insert(name, files);
        } else if let Some(stem) = name.strip_suffix(".py") {
            if stem != "__init__" {
                modules.insert(stem.to_string(), vec![path]);
            }
        }
    }
    modules
}

/// Python source with its comments and string literals (docstrings included)
/// blanked to spaces, newlines kept so that line numbers hold: what is left is code.
fn python_code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '"' || c == '\'' {
            let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
            let quotes = if triple { 3 } else { 1 };
            let closes = |at: usize| chars[at] == c && (!triple || (chars.get(at + 1) == Some(&c) && chars.get(at + 2) == Some(&c)));
            out.extend(std::iter::repeat_n(' ', quotes));
            i += quotes;
            while i < chars.len() {
                if chars[i] == '\\' {
                    out.push(' ');
                    if let Some(&next) = chars.get(i + 1) {
                        out.push(blank(next));
                    }
                    i += 2;
                } else if closes(i) {
                    out.extend(std::iter::repeat_n(' ', quotes));
                    i += quotes;
                    break;
                } else if chars[i] == '\n' && !triple {
                    break; // not Python; the line ends the string
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The statements of `code` (from [`python_code`]) with the line each starts on:
/// a statement in brackets or after a backslash goes on over its lines; `;` parts apart.
fn python_statements(code: &str) -> Vec<(usize, String)> {
    let mut statements = Vec::new();
    let (mut current, mut start, mut depth) = (String::new(), 0, 0i32);
    for (n, line) in code.lines().enumerate() {
        if current.is_empty() {
            start = n + 1;
        }
        let line = line.trim_end();
        let (line, continued) = match line.strip_suffix('\\') {
            Some(rest) => (rest, true),
            None => (line, false),
        };
        for c in line.chars() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                _ => {}
            }
        }
        current.push(' ');
        current.push_str(line);
        if depth <= 0 && !continued {
            for part in current.split(';') {
                if !part.trim().is_empty() {
                    statements.push((start, part.trim().to_string()));
                }
            }
            current.clear();
            depth = 0;
        }
    }
    statements
}

/// What one import statement names, as absolute dotted paths: `import a.b, c as d`
/// gives a.b and c; `from X import y, z` gives X.y and X.z (a name may be a module or
/// a name in X). `package` is the importing file's package (its dotted path), against
/// which `from .x` and `from ..x` resolve.
fn python_imported(statement: &str, package: &[&str]) -> Vec<Vec<String>> {
    let words = |s: &str| -> Vec<String> {
        s.trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
            .split(',')
            .filter_map(|item| item.split_whitespace().next().map(str::to_string))
            .collect()
    };
    if let Some(rest) = statement.strip_prefix("import ") {
        return words(rest).iter().map(|m| m.split('.').map(str::to_string).collect()).collect();
    }
    let Some(rest) = statement.strip_prefix("from ") else { return Vec::new() };
    let Some((from, names)) = rest.split_once(" import ") else { return Vec::new() };
    let from = from.trim();
    let dots = from.chars().take_while(|&c| c == '.').count();
    let mut base: Vec<String> = if dots == 0 {
        Vec::new()
    } else if dots - 1 <= package.len() {
        package[..package.len() - (dots - 1)].iter().map(|s| s.to_string()).collect()
    } else {
        return Vec::new();
    };
    base.extend(from[dots..].split('.').filter(|s| !s.is_empty()).map(str::to_string));
    words(names).into_iter().map(|name| base.iter().cloned().chain([name]).collect()).collect()
}

/// Module -> the package's modules it imports (imports inside functions included),
/// with where; and every top-level name imported from outside the package, with where.
fn python_imports() -> (BTreeMap<String, BTreeMap<String, String>>, BTreeMap<String, String>) {
    let modules = python_modules();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut outside: BTreeMap<String, String> = BTreeMap::new();
    for (module, files) in &modules {
        for file in files {
            let package: Vec<&str> = if file.parent().unwrap() == python_package() {
                vec!["runlens_export"]
            } else {
                vec!["runlens_export", module]
            };
            let text = std::fs::read_to_string(file).unwrap();
            for (line, statement) in python_statements(&python_code(&text)) {
                let site = format!("{}:{line}", file.strip_prefix(root).unwrap().display());
                for path in python_imported(&statement, &package) {
                    if path[0] != "runlens_export" {
                        if !statement.starts_with("from .") {
                            outside.entry(path[0].clone()).or_insert_with(|| site.clone());
                        }
                        continue;
                    }
                    // runlens_export.x.y...: module x (`from runlens_export import x`: x when it is one).
                    if let Some(used) = path.get(1).filter(|used| modules.contains_key(*used) && *used != module) {
                        graph.entry(module.clone()).or_default().entry(used.clone()).or_insert_with(|| site.clone());
                    }
                }
            }
        }
    }
    (graph, outside)
}

/// The export package's layers, bottom first. A module may import from its own
/// layer (no circle: the test below) and from any layer under it, never from one
/// above; python/README.md says the same.
const PYTHON_LAYERS: &[(&str, &[&str])] = &[
    ("helpers: files, progress lines, memory, disk, comparisons, manifest entries", &["files", "progress", "memory", "disk", "compare", "manifest"]),
    ("the checkpoint and its architectures", &["archs", "from_gguf", "checkpoint"]),
    ("lowering and what it is made of", &["modules", "model_explorer", "static_cache", "cache_inputs", "quantize", "lowering"]),
    ("ExecuTorch's programs", &["programs", "decoder"]),
    ("the other runtimes' files", &["onnx_decoder", "onnx_files", "gguf_files", "gguf_convert"]),
    ("the check against transformers", &["verify"]),
    ("the tasks", &["tasks"]),
    ("the course's programs", &["course"]),
    ("each program's step in a process of its own", &["apart"]),
];

fn python_layer_of(module: &str) -> Option<usize> {
    PYTHON_LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

#[test]
fn every_python_module_is_in_the_table_and_the_table_names_only_modules() {
    let modules = python_modules();
    for module in modules.keys() {
        assert!(python_layer_of(module).is_some(), "python/runlens_export/{module} is in no layer of tests/layering.rs' PYTHON_LAYERS: add it");
    }
    for (layer, names) in PYTHON_LAYERS {
        for name in *names {
            assert!(modules.contains_key(*name), "PYTHON_LAYERS' layer {layer:?} names {name}, which python/runlens_export/ does not hold");
        }
    }
}

#[test]
fn every_python_module_imports_only_its_own_layer_and_those_below() {
    let (graph, _) = python_imports();
    let mut upward = Vec::new();
    for (module, uses) in &graph {
        let at = python_layer_of(module).unwrap_or_else(|| panic!("python/runlens_export/{module} is in no layer of PYTHON_LAYERS"));
        for (used, site) in uses {
            let below = python_layer_of(used).unwrap_or_else(|| panic!("python/runlens_export/{used} is in no layer of PYTHON_LAYERS"));
            if below > at {
                upward.push(format!("{module} ({}) imports {used} ({}) at {site}", PYTHON_LAYERS[at].0, PYTHON_LAYERS[below].0));
            }
        }
    }
    assert!(upward.is_empty(), "python/runlens_export: imports from a layer above:\n{}", upward.join("\n"));
}

#[test]
fn no_python_module_imports_one_that_imports_it_back() {
    assert_no_circle(&python_imports().0);
}

#[test]
fn the_python_import_reader_sees_what_python_sees() {
    // The forms the package uses, and text that only looks like an import.
    let code = python_code(concat!(
        "\"\"\"from .tasks import TASKS (a docstring)\"\"\"\n",
        "from .files import say  # from .verify import verify\n",
        "from . import memory, onnx_decoder\n",
        "def f():\n",
        "    from .decoder import (\n",
        "        greedy,\n",
        "    )\n",
        "    import runlens_export.quantize as q; from runlens_export import disk\n",
        "    s = 'import runlens_export.course'\n",
        "from ..files import ExportError\n",
        "import gguf as gguf_py\n",
    ));
    let statements = python_statements(&code);
    let lines: Vec<usize> = statements.iter().map(|(n, _)| *n).collect();
    assert_eq!(lines, [2, 3, 4, 5, 8, 8, 9, 10, 11], "{statements:?}");
    let all: Vec<String> = statements.iter().flat_map(|(_, s)| python_imported(s, &["runlens_export", "archs"])).map(|p| p.join(".")).collect();
    assert_eq!(
        all,
        [
            "runlens_export.archs.files.say",
            "runlens_export.archs.memory",
            "runlens_export.archs.onnx_decoder",
            "runlens_export.archs.decoder.greedy",
            "runlens_export.quantize",
            "runlens_export.disk",
            "runlens_export.files.ExportError",
            "gguf",
        ]
    );
}

#[test]
fn no_python_module_shadows_a_package_the_export_imports() {
    // A module named like one imported from outside (runlens_export/gguf.py and the
    // registry's gguf) is what a script run from the package's folder (gguf_convert.py:
    // that folder is first on its sys.path) imports instead. model_explorer.py wraps the
    // registry package of its name; the converter's process imports neither.
    const KNOWN: &[&str] = &["model_explorer"];
    let (_, outside) = python_imports();
    let shadowing: Vec<String> = python_modules()
        .keys()
        .filter(|m| !KNOWN.contains(&m.as_str()))
        .filter_map(|m| outside.get(m).map(|site| format!("python/runlens_export/{m} is named like the package imported at {site}")))
        .collect();
    assert!(shadowing.is_empty(), "{}", shadowing.join("\n"));
}
