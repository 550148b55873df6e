//! A table's spec, as a marker in a markdown file writes it (or `runlens
//! report`'s flags): its bench JSON files on the first line, then one
//! `key: value` line each (a line starting with `|` continues the list above):
//!
//! ```text
//! <!-- report: assets/bench-generation-smollm2-135m-llamacpp.json
//! cols: xnnpack = XNNPACK fp32 | llamacpp-f32 = llama.cpp f32
//! rows: decode_tokens_per_s@8 = decode after 8 tokens, tokens/s
//!     | ttft_ms@128 = time to first token of 128, ms
//! bold: xnnpack, llamacpp-f32
//! -->
//! ```
//!
//! One of `rows` and `cols` lists backends, the other metrics; an item is
//! `NAME [in SOURCE] [as FORMAT] [= TITLE]` (a metric's name is `metric@length`,
//! a load's metric has no length).

use std::path::PathBuf;

use super::format::Format;
use super::metric::{self, Metric, METRICS};

/// A bench JSON a table reads: its path as written (relative to the markdown
/// file's folder), with an alias when the table reads more than one.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub alias: Option<String>,
    pub path: PathBuf,
}

/// What one row or column of the table is.
#[derive(Debug, Clone)]
pub enum What {
    Backend(String),
    Metric { metric: &'static Metric, len: Option<usize> },
}

/// One row or column: what it is, which source it reads, its format and title.
#[derive(Debug, Clone)]
pub struct Item {
    pub what: What,
    /// `in ALIAS`: the source of every cell on this row or column.
    pub source: Option<String>,
    /// `as FORMAT`.
    pub format: Option<Format>,
    /// `= TITLE`; without it, the backend's name or the metric's title.
    pub title: Option<String>,
}

impl Item {
    pub fn is_backend(&self) -> bool {
        matches!(self.what, What::Backend(_))
    }

    /// The text its row or column is headed with.
    pub fn title(&self) -> String {
        if let Some(title) = &self.title {
            return title.clone();
        }
        match &self.what {
            What::Backend(name) => name.clone(),
            What::Metric { metric, len: Some(n) } => format!("{} @{n}", metric.title),
            What::Metric { metric, len: None } => metric.title.to_string(),
        }
    }

    /// The item as the spec writes it (`decode_tokens_per_s@8 as .1 = title`).
    pub fn spec_text(&self) -> String {
        let mut text = match &self.what {
            What::Backend(name) => name.clone(),
            What::Metric { metric, len: Some(n) } => format!("{}@{n}", metric.name),
            What::Metric { metric, len: None } => metric.name.to_string(),
        };
        if let Some(alias) = &self.source {
            text += &format!(" in {alias}");
        }
        if let Some(format) = self.format {
            text += &format!(" as {format}");
        }
        if let Some(title) = &self.title {
            text += &format!(" = {title}");
        }
        text
    }
}

/// A table's spec.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    pub sources: Vec<Source>,
    /// None: the default of their kind (every backend; the bench's usual metrics at each length).
    pub rows: Option<Vec<Item>>,
    pub cols: Option<Vec<Item>>,
    /// The top-left cell.
    pub corner: String,
    /// Groups of backends; in each, the best cell of every metric that has a
    /// better direction (speed, latency) is bold.
    pub bold: Vec<Vec<String>>,
    /// The format of every cell whose item names none [default: each metric's own].
    pub format: Option<Format>,
    /// In a thread sweep, the rows of this thread count.
    pub threads: Option<usize>,
}

/// The keys a spec line may have.
pub const KEYS: &[&str] = &["rows", "cols", "corner", "bold", "format", "threads"];

impl Spec {
    /// The text of a marker after `report:` (up to `-->`).
    pub fn parse(text: &str) -> Result<Spec, String> {
        let mut lines = text.lines();
        let mut spec = Spec { sources: parse_sources(lines.next().unwrap_or(""))?, ..Spec::default() };
        let mut fields: Vec<(String, String)> = Vec::new();
        for line in lines.map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(rest) = line.strip_prefix('|') {
                let (_, value) = fields.last_mut().ok_or("a line starting with `|` continues the list above it, and there is none")?;
                value.push_str(" |");
                value.push_str(rest);
            } else {
                let (key, value) = line.split_once(':').ok_or_else(|| format!("`{line}`: expected `key: value`, the keys: {}", KEYS.join(", ")))?;
                fields.push((key.trim().to_string(), value.trim().to_string()));
            }
        }
        for (i, (key, value)) in fields.iter().enumerate() {
            if fields[..i].iter().any(|(k, _)| k == key) {
                return Err(format!("`{key}:` is given twice"));
            }
            spec.set(key, value).map_err(|why| format!("{key}: {why}"))?;
        }
        Ok(spec)
    }

    /// One `key: value`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "rows" => self.rows = Some(parse_items(value)?),
            "cols" => self.cols = Some(parse_items(value)?),
            "corner" => self.corner = value.to_string(),
            "bold" => {
                self.bold = value
                    .split('|')
                    .map(|group| group.split(',').map(|b| b.trim().to_string()).filter(|b| !b.is_empty()).collect::<Vec<_>>())
                    .filter(|g| !g.is_empty())
                    .collect();
                if let Some(group) = self.bold.iter().find(|g| g.len() < 2) {
                    return Err(format!("`{}` alone: a group names two backends or more, `a, b | c, d`", group[0]));
                }
            }
            "format" => self.format = Some(Format::parse(value)?),
            "threads" => self.threads = Some(value.parse().map_err(|_| format!("`{value}` is not a thread count"))?),
            _ => return Err(format!("unknown key; the keys: {}", KEYS.join(", "))),
        }
        Ok(())
    }

    /// The spec as a marker writes it (the CLI's `--marker`).
    pub fn text(&self) -> String {
        let mut out = self
            .sources
            .iter()
            .map(|s| match &s.alias {
                Some(a) => format!("{a}={}", s.path.display()),
                None => s.path.display().to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ");
        let items = |items: &[Item]| items.iter().map(Item::spec_text).collect::<Vec<_>>().join("\n    | ");
        if let Some(rows) = &self.rows {
            out += &format!("\nrows: {}", items(rows));
        }
        if let Some(cols) = &self.cols {
            out += &format!("\ncols: {}", items(cols));
        }
        if !self.corner.is_empty() {
            out += &format!("\ncorner: {}", self.corner);
        }
        if !self.bold.is_empty() {
            out += &format!("\nbold: {}", self.bold.iter().map(|g| g.join(", ")).collect::<Vec<_>>().join(" | "));
        }
        if let Some(format) = self.format {
            out += &format!("\nformat: {format}");
        }
        if let Some(threads) = self.threads {
            out += &format!("\nthreads: {threads}");
        }
        out
    }
}

/// `FILE.json`, or `ALIAS=FILE.json ...`: at most one without an alias (the default).
pub fn parse_sources(line: &str) -> Result<Vec<Source>, String> {
    let mut sources: Vec<Source> = Vec::new();
    for word in line.split_whitespace() {
        let source = match word.split_once('=') {
            Some((alias, path)) if !alias.is_empty() && !path.is_empty() => Source { alias: Some(alias.to_string()), path: PathBuf::from(path) },
            Some(_) => return Err(format!("`{word}`: a source is FILE.json or ALIAS=FILE.json")),
            None => Source { alias: None, path: PathBuf::from(word) },
        };
        if sources.iter().any(|s| s.alias.is_some() && s.alias == source.alias) {
            return Err(format!("the alias `{}` is given twice", word.split('=').next().unwrap_or(word)));
        }
        sources.push(source);
    }
    if sources.is_empty() {
        return Err("no bench JSON named: `report: FILE.json` (relative to the markdown file's folder)".to_string());
    }
    if sources.iter().filter(|s| s.alias.is_none()).count() > 1 {
        return Err("more than one bench JSON without an alias: name them `ALIAS=FILE.json` (one may go without)".to_string());
    }
    Ok(sources)
}

/// `item | item | ...`.
fn parse_items(value: &str) -> Result<Vec<Item>, String> {
    let items = value.split('|').map(str::trim).filter(|t| !t.is_empty()).map(parse_item).collect::<Result<Vec<_>, _>>()?;
    if items.is_empty() {
        return Err("an empty list: `name = title | name = title`".to_string());
    }
    Ok(items)
}

/// `NAME [in SOURCE] [as FORMAT] [= TITLE]`.
fn parse_item(text: &str) -> Result<Item, String> {
    let (key, title) = match text.split_once('=') {
        Some((key, title)) => (key, Some(title.trim().to_string())),
        None => (text, None),
    };
    let mut words = key.split_whitespace();
    let name = words.next().ok_or_else(|| format!("`{text}`: no name before `=`"))?;
    let what = match name.split_once('@') {
        Some((m, len)) => {
            let len = len.parse().map_err(|_| format!("`{name}`: `{len}` is not a length (`metric@128`)"))?;
            What::Metric { metric: metric::metric(m)?, len: Some(len) }
        }
        None => match METRICS.iter().find(|m| m.name == name) {
            Some(metric) => What::Metric { metric, len: None },
            None => What::Backend(name.to_string()),
        },
    };
    let mut item = Item { what, source: None, format: None, title };
    while let Some(word) = words.next() {
        let value = words.next();
        match (word, value) {
            ("in", Some(alias)) => item.source = Some(alias.to_string()),
            ("as", Some(format)) => item.format = Some(Format::parse(format)?),
            _ => return Err(format!("`{text}`: after the name come `in SOURCE` and `as FORMAT`, then `= title`")),
        }
    }
    Ok(item)
}
