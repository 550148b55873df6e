//! The marked tables of a markdown file: found, checked against their
//! rendering, rewritten. A block is the marker (an HTML comment, so nothing
//! shows), the table, and `<!-- /report -->`:
//!
//! ```text
//! <!-- report: ../assets/bench.json
//! cols: eager | xnnpack = XNNPACK
//! rows: p50_ms@8 = 8 | p50_ms@128 = 128
//! corner: tokens
//! -->
//!
//! | tokens | eager | XNNPACK |
//! ...
//!
//! <!-- /report -->
//! ```
//!
//! Markers inside fenced code blocks (as above) are text, not blocks.

use std::fmt;
use std::path::{Path, PathBuf};

use super::render::render;
use super::spec::Spec;
use super::TableError;

/// What opens a block, at the start of a line.
pub const OPEN: &str = "<!-- report:";
/// What closes it, a line of its own.
pub const CLOSE: &str = "<!-- /report -->";

/// One marked block of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The marker's first line, 1-based.
    pub line: usize,
    /// The marker's text after `report:`, up to `-->`.
    pub spec: String,
    /// The table's lines: 0-based, from the line after the marker up to the closing line (excluded).
    pub body: std::ops::Range<usize>,
}

impl Block {
    /// The JSON files the marker names, as written (for messages).
    pub fn sources(&self) -> String {
        self.spec.lines().next().unwrap_or("").trim().to_string()
    }
}

/// The blocks of `text`, or the line and reason of a marker left open.
pub fn blocks(text: &str) -> Result<Vec<Block>, (usize, String)> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut found = Vec::new();
    let mut fence: Option<&str> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        // Fenced code: ``` or ~~~ opens, the same closes.
        if let Some(open) = fence {
            if line.starts_with(open) {
                fence = None;
            }
            i += 1;
            continue;
        }
        if line.starts_with("```") || line.starts_with("~~~") {
            fence = Some(&line[..3]);
            i += 1;
            continue;
        }
        if line.starts_with(CLOSE) {
            return Err((i + 1, format!("`{CLOSE}` without a `{OPEN}` above it")));
        }
        let Some(rest) = line.strip_prefix(OPEN) else {
            i += 1;
            continue;
        };
        let start = i;
        // The marker runs to the line holding `-->`.
        let mut spec = String::new();
        let mut part = rest;
        loop {
            if let Some(end) = part.find("-->") {
                spec += &part[..end];
                break;
            }
            spec += part;
            spec += "\n";
            i += 1;
            if i == lines.len() {
                return Err((start + 1, "the marker is not closed with `-->`".to_string()));
            }
            part = lines[i];
        }
        let body_start = i + 1;
        let close = (body_start..lines.len()).find(|&j| {
            let l = lines[j].trim_start();
            l.starts_with(CLOSE) || l.starts_with(OPEN)
        });
        match close {
            Some(j) if lines[j].trim_start().starts_with(CLOSE) => {
                found.push(Block { line: start + 1, spec, body: body_start..j });
                i = j + 1;
            }
            _ => return Err((start + 1, format!("the table is not closed with `{CLOSE}`"))),
        }
    }
    Ok(found)
}

/// A block whose table is not what its JSON gives: where, and the first cell that differs.
#[derive(Debug, Clone, PartialEq)]
pub struct Stale {
    pub file: PathBuf,
    /// The marker's line.
    pub line: usize,
    /// The JSON files it names.
    pub sources: String,
    /// The first table line that differs (1-based).
    pub at: usize,
    /// That line's row (its first cell, as rendered), and the column.
    pub row: String,
    pub col: String,
    /// The file's cell and the rendered one.
    pub found: String,
    pub expected: String,
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display();
        writeln!(f, "{file}:{}: the table of {} differs from its JSON", self.line, self.sources)?;
        writeln!(f, "  {file}:{}: row \"{}\", column \"{}\"", self.at, self.row, self.col)?;
        writeln!(f, "  - {}", self.found)?;
        writeln!(f, "  + {}", self.expected)?;
        write!(f, "  `runlens report --write {file}` rewrites it from the JSON")
    }
}

/// The cells of a table line, trimmed (`| a | b |` is `[a, b]`).
fn cells(line: &str) -> Vec<String> {
    let line = line.trim();
    let inner = line.strip_prefix('|').unwrap_or(line);
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// The first difference between a block's table (`lines`, starting at file
/// line `first`, 1-based) and its rendering, cell by cell (spacing aside).
pub fn first_difference(lines: &[&str], first: usize, rendered: &str) -> Option<(usize, String, String, String, String)> {
    let table: Vec<(usize, &str)> = lines.iter().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(k, l)| (first + k, *l)).collect();
    let want: Vec<&str> = rendered.lines().collect();
    let header = cells(want[0]);
    let last = table.last().map_or(first, |(n, _)| n + 1);
    for k in 0..table.len().max(want.len()) {
        let row_of = |w: &[String]| match k {
            0 => "(header)".to_string(),
            1 => "(the --- line)".to_string(),
            _ => w.first().cloned().unwrap_or_default(),
        };
        match (table.get(k), want.get(k)) {
            (Some(&(n, have)), Some(want)) => {
                let (h, w) = (cells(have), cells(want));
                if h != w {
                    let j = (0..h.len().max(w.len())).find(|&j| h.get(j) != w.get(j)).unwrap_or(0);
                    let col = if j == 0 { "(row title)".to_string() } else { header.get(j).cloned().unwrap_or_else(|| format!("{}", j + 1)) };
                    let cell = |c: &[String]| c.get(j).map_or("(no cell)".to_string(), |s| if s.is_empty() { "(empty)".to_string() } else { s.clone() });
                    return Some((n, row_of(&w[..]), col, cell(&h[..]), cell(&w[..])));
                }
            }
            (Some(&(n, have)), None) => return Some((n, cells(have).first().cloned().unwrap_or_default(), "(the whole line)".to_string(), have.trim().to_string(), "(no such line)".to_string())),
            (None, Some(want)) => return Some((last, row_of(&cells(want)[..]), "(the whole line)".to_string(), "(no such line)".to_string(), want.to_string())),
            (None, None) => unreachable!("k < the longer of the two"),
        }
    }
    None
}

fn read(path: &Path) -> Result<(String, Vec<Block>), TableError> {
    let text = std::fs::read_to_string(path).map_err(|e| TableError { at: path.display().to_string(), why: format!("cannot read it: {e}") })?;
    let found = blocks(&text).map_err(|(line, why)| TableError { at: format!("{}:{line}", path.display()), why })?;
    Ok((text, found))
}

/// A block's table as its JSON gives it.
fn rendered(path: &Path, block: &Block) -> Result<String, TableError> {
    let at = || format!("{}:{} ({})", path.display(), block.line, block.sources());
    let spec = Spec::parse(&block.spec).map_err(|why| TableError { at: at(), why })?;
    let base = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    render(&spec, base).map_err(|why| TableError { at: at(), why })
}

/// What `check` found in one file: how many blocks, and the stale ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub blocks: usize,
    pub stale: Vec<Stale>,
}

/// Every block of the markdown file at `path`, rendered and compared; an
/// error when one cannot be rendered (a bad spec, a missing JSON, backend or metric).
pub fn check_file(path: &Path) -> Result<Checked, TableError> {
    let (text, found) = read(path)?;
    let lines: Vec<&str> = text.split('\n').collect();
    let mut stale = Vec::new();
    for block in &found {
        let want = rendered(path, block)?;
        if let Some((at, row, col, have, want)) = first_difference(&lines[block.body.clone()], block.body.start + 1, &want) {
            stale.push(Stale { file: path.to_path_buf(), line: block.line, sources: block.sources(), at, row, col, found: have, expected: want });
        }
    }
    Ok(Checked { blocks: found.len(), stale })
}

/// Every block of the file rewritten from its JSON (the file is written only
/// when one changed); how many blocks it has and how many changed.
pub fn write_file(path: &Path) -> Result<(usize, usize), TableError> {
    let (text, found) = read(path)?;
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut next = 0;
    let mut changed = 0;
    for block in &found {
        let want = rendered(path, block)?;
        out.extend(lines[next..block.body.start].iter().map(|l| l.to_string()));
        let body: Vec<String> = std::iter::once(String::new()).chain(want.lines().map(str::to_string)).chain(std::iter::once(String::new())).collect();
        if lines[block.body.clone()] != body.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            changed += 1;
        }
        out.extend(body);
        next = block.body.end;
    }
    out.extend(lines[next..].iter().map(|l| l.to_string()));
    if changed > 0 {
        std::fs::write(path, out.join("\n")).map_err(|e| TableError { at: path.display().to_string(), why: format!("cannot write it: {e}") })?;
    }
    Ok((found.len(), changed))
}
