//! `runlens report`: markdown tables rendered from `runlens bench --json`
//! files (`tables`). On markdown files it checks (`--check`, the
//! default) or rewrites (`--write`) every marked block; on bench JSON files
//! it prints one table, its spec from the flags.

use std::path::{Path, PathBuf};

use clap::Args;

use super::Common;
use crate::tables::{self, Spec, TableError};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Markdown files whose marked tables to check or rewrite; or bench JSON files (`FILE.json`, or `ALIAS=FILE.json` each when there are several) to print one table from
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Markdown: render every marked block and compare it with the file; exit 1, naming the block and its first differing cell, when one differs (the default)
    #[arg(long, conflicts_with = "write")]
    pub check: bool,
    /// Markdown: rewrite every marked block from its JSON, in place
    #[arg(long)]
    pub write: bool,
    /// JSON: the rows, `ITEM | ITEM | ...`, each `NAME [in ALIAS] [as FORMAT] [= TITLE]`: backends, or metrics as `metric@length` (docs/headless.md) [default: every backend for a generation bench, else the usual metrics at each length]
    #[arg(long, value_name = "ITEMS")]
    pub rows: Option<String>,
    /// JSON: the columns, as --rows (one of the two lists backends, the other metrics)
    #[arg(long, value_name = "ITEMS")]
    pub cols: Option<String>,
    /// JSON: the top-left cell
    #[arg(long, value_name = "TEXT")]
    pub corner: Option<String>,
    /// JSON: groups of backends, `a, b | c, d`: in each, the faster cell of every speed or latency metric is bold
    #[arg(long, value_name = "GROUPS")]
    pub bold: Option<String>,
    /// JSON: the number format of every cell whose item names none: sig3 (three significant figures), int, or .N (N decimals) [default: each metric's own]
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// JSON: print the table inside its marker, ready to paste into a markdown file (make its paths relative to that file's folder)
    #[arg(long)]
    pub marker: bool,
}

fn usage(why: impl Into<String>) -> TableError {
    TableError { at: "runlens report".to_string(), why: why.into() }
}

/// `Ok(false)` when a markdown block differs from its JSON (exit 1); a
/// [`TableError`] (exit 2) when one cannot be rendered.
pub fn run(common: &Common, args: &ReportArgs) -> anyhow::Result<bool> {
    let markdown = args.files.iter().filter(|f| f.ends_with(".md")).count();
    if markdown == args.files.len() {
        if args.rows.is_some() || args.cols.is_some() || args.corner.is_some() || args.bold.is_some() || args.format.is_some() || args.marker {
            return Err(usage("--rows, --cols, --corner, --bold, --format and --marker are for a bench JSON: a markdown file's blocks carry their own spec").into());
        }
        let files: Vec<PathBuf> = args.files.iter().map(PathBuf::from).collect();
        return if args.write { write(&files).map(|()| true) } else { check(&files) };
    }
    if markdown > 0 {
        return Err(usage("give markdown files (to check or rewrite their tables) or bench JSON files (to print one table), not both").into());
    }
    if args.check || args.write {
        return Err(usage("--check and --write are for markdown files; a bench JSON prints one table").into());
    }
    let spec = spec_of(common, args)?;
    let table = tables::render(&spec, Path::new(".")).map_err(usage)?;
    if args.marker {
        println!("{} {}\n-->\n\n{table}\n{}", tables::OPEN, spec.text(), tables::CLOSE);
    } else {
        print!("{table}");
    }
    Ok(true)
}

/// The spec the flags give, on the JSON files named.
fn spec_of(common: &Common, args: &ReportArgs) -> Result<Spec, TableError> {
    let mut spec = Spec { sources: tables::spec::parse_sources(&args.files.join(" ")).map_err(usage)?, ..Spec::default() };
    let flags = [("rows", &args.rows), ("cols", &args.cols), ("corner", &args.corner), ("bold", &args.bold), ("format", &args.format)];
    for (key, value) in flags {
        if let Some(value) = value {
            spec.set(key, value).map_err(|why| usage(format!("--{key}: {why}")))?;
        }
    }
    // A thread sweep's rows of one count: the global --threads.
    spec.threads = common.threads.as_ref().and_then(|t| t.0.first().copied());
    Ok(spec)
}

fn check(files: &[PathBuf]) -> anyhow::Result<bool> {
    let mut fine = true;
    for file in files {
        let checked = tables::check_file(file)?;
        for stale in &checked.stale {
            eprintln!("{stale}");
        }
        let stale = checked.stale.len();
        println!("{}: {} table{}, {}", file.display(), checked.blocks, if checked.blocks == 1 { "" } else { "s" }, if stale == 0 { "each as its JSON gives it".to_string() } else { format!("{stale} differ from their JSON") });
        fine &= stale == 0;
    }
    Ok(fine)
}

fn write(files: &[PathBuf]) -> anyhow::Result<()> {
    for file in files {
        let (blocks, changed) = tables::write_file(file)?;
        println!("{}: {blocks} table{}, {changed} rewritten", file.display(), if blocks == 1 { "" } else { "s" });
    }
    Ok(())
}
