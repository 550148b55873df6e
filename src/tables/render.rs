//! A spec rendered into a markdown table from its bench JSON files.

use std::path::Path;

use super::metric::{Bench, Better, Getter};
use super::spec::{Item, Source, Spec, What};

/// The sources read, by alias (None: the default).
struct Sources<'a> {
    read: Vec<(&'a Source, Bench)>,
}

impl Sources<'_> {
    /// The source a cell reads: its row's or column's `in ALIAS`, else the one without an alias, else the only one.
    fn pick(&self, row: &Item, col: &Item) -> Result<(&Source, &Bench), String> {
        let alias = match (&row.source, &col.source) {
            (Some(a), Some(b)) if a != b => return Err(format!("the cell of `{}` and `{}` is `in {a}` and `in {b}`", row.spec_text(), col.spec_text())),
            (Some(a), _) | (None, Some(a)) => Some(a),
            (None, None) => None,
        };
        let found = match alias {
            Some(a) => self.read.iter().find(|(s, _)| s.alias.as_deref() == Some(a.as_str())),
            None => self.read.iter().find(|(s, _)| s.alias.is_none()).or(if self.read.len() == 1 { self.read.first() } else { None }),
        };
        found.map(|(s, b)| (*s, b)).ok_or_else(|| match alias {
            Some(a) => format!("no source `{a}` (the sources: {})", self.aliases()),
            None => format!("the cell of `{}` and `{}` names no source: add `in ALIAS` (the sources: {})", row.spec_text(), col.spec_text(), self.aliases()),
        })
    }

    fn aliases(&self) -> String {
        self.read.iter().map(|(s, _)| s.alias.clone().unwrap_or_else(|| s.path.display().to_string())).collect::<Vec<_>>().join(", ")
    }
}

/// The table `spec` describes, its paths relative to `base`: a header, the
/// `| --- |` line and one line per row, each ending in a newline.
pub fn render(spec: &Spec, base: &Path) -> Result<String, String> {
    let read = spec.sources.iter().map(|s| Bench::read(&base.join(&s.path)).map(|b| (s, b))).collect::<Result<Vec<_>, _>>()?;
    let sources = Sources { read };
    let (rows, cols) = axes(spec, &sources.read[0].1)?;
    let backends_across = cols[0].is_backend();

    // The figures, row by row.
    let mut figures: Vec<Vec<(f64, String)>> = Vec::new();
    for row in &rows {
        let mut line = Vec::new();
        for col in &cols {
            let (backend, metric) = if backends_across { (col, row) } else { (row, col) };
            let (What::Backend(name), What::Metric { metric: m, len }) = (&backend.what, &metric.what) else { unreachable!("axes() checked the kinds") };
            let (source, bench) = sources.pick(row, col)?;
            let format = metric.format.or(backend.format).or(spec.format).unwrap_or(m.format);
            match bench.cell(&source.path.display().to_string(), name, m, *len, spec.threads)? {
                Ok(value) => {
                    let mark = if m.marks_llc && bench.in_llc(name, *len) { " (in LLC)" } else { "" };
                    line.push((value, format!("{}{mark}", m.show(value, format))));
                }
                // A null with a meaning ("none", or "–" on an eval's reference): never bold.
                Err(text) => line.push((f64::NAN, text.to_string())),
            }
        }
        figures.push(line);
    }

    // Bold: the best of each group, for each metric with a direction.
    let backend_items = if backends_across { &cols } else { &rows };
    let metric_items = if backends_across { &rows } else { &cols };
    let backend_name = |item: &Item| match &item.what {
        What::Backend(name) => name.clone(),
        What::Metric { .. } => unreachable!("axes() checked the kinds"),
    };
    for group in &spec.bold {
        let members = group
            .iter()
            .map(|name| backend_items.iter().position(|b| backend_name(b) == *name).ok_or_else(|| format!("bold: `{name}` is not one of the table's backends ({})", backend_items.iter().map(backend_name).collect::<Vec<_>>().join(", "))))
            .collect::<Result<Vec<usize>, _>>()?;
        for (m, item) in metric_items.iter().enumerate() {
            let What::Metric { metric, .. } = &item.what else { unreachable!("axes() checked the kinds") };
            let cell = |b: usize| if backends_across { (m, b) } else { (b, m) };
            let value = |b: usize| {
                let (r, c) = cell(b);
                figures[r][c].0
            };
            let figures_of = members.iter().copied().filter(|&b| !value(b).is_nan());
            let best = match metric.better {
                Better::Higher => figures_of.max_by(|a, b| value(*a).total_cmp(&value(*b))),
                Better::Lower => figures_of.min_by(|a, b| value(*a).total_cmp(&value(*b))),
                Better::Neither => None,
            };
            // A tie bolds nothing.
            if let Some(best) = best.filter(|&best| members.iter().filter(|&&b| value(b) == value(best)).count() == 1) {
                let (r, c) = cell(best);
                figures[r][c].1 = format!("**{}**", figures[r][c].1);
            }
        }
    }

    let mut out = String::new();
    out += &line(std::iter::once(spec.corner.clone()).chain(cols.iter().map(Item::title)));
    out += &line(std::iter::repeat_n("---".to_string(), cols.len() + 1));
    for (row, cells) in rows.iter().zip(figures) {
        out += &line(std::iter::once(row.title()).chain(cells.into_iter().map(|(_, text)| text)));
    }
    Ok(out)
}

/// `| a | b |` and a newline; an empty cell is `| |`.
fn line(cells: impl Iterator<Item = String>) -> String {
    let mut out = String::from("|");
    for cell in cells {
        if cell.is_empty() {
            out += " |";
        } else {
            out += &format!(" {cell} |");
        }
    }
    out + "\n"
}

/// The rows and columns: as the spec gives them (one axis backends, the other
/// metrics), the missing ones filled from the bench.
fn axes(spec: &Spec, bench: &Bench) -> Result<(Vec<Item>, Vec<Item>), String> {
    let kind = |items: &Option<Vec<Item>>, axis: &str| -> Result<Option<bool>, String> {
        let Some(items) = items else { return Ok(None) };
        let backends: Vec<String> = items.iter().filter(|i| i.is_backend()).map(Item::spec_text).collect();
        let metrics: Vec<String> = items.iter().filter(|i| !i.is_backend()).map(Item::spec_text).collect();
        if !backends.is_empty() && !metrics.is_empty() {
            return Err(format!("{axis}: backends ({}) and metrics ({}) mixed: one of rows and cols lists backends, the other metrics (`metric@length`)", backends.join(", "), metrics.join(", ")));
        }
        Ok(Some(metrics.is_empty()))
    };
    let generation = matches!(bench, Bench::Generation(_));
    let eval = matches!(bench, Bench::Eval(_));
    let (rows_are_backends, cols_are_backends) = (kind(&spec.rows, "rows")?, kind(&spec.cols, "cols")?);
    let backends_in_rows = match (rows_are_backends, cols_are_backends) {
        (Some(r), Some(c)) if r == c => {
            return Err(if r { "rows and cols both list backends: one lists metrics (`metric@length`)".to_string() } else { "rows and cols both list metrics: one lists backends".to_string() });
        }
        (Some(r), _) => r,
        (None, Some(c)) => !c,
        (None, None) => generation || eval,
    };
    let backends = || -> Vec<Item> { bench.backends().into_iter().map(|b| Item { what: What::Backend(b.to_string()), source: None, format: None, title: None }).collect() };
    // The usual metrics at each length, and the load's RSS when every backend of the table has a load.
    let metrics = |backends: &[Item]| -> Vec<Item> {
        if eval {
            return bench.metrics().map(|metric| Item { what: What::Metric { metric, len: None }, source: None, format: None, title: None }).collect();
        }
        let names: &[&str] = if generation { &["decode_tokens_per_s", "prompt_tokens_per_s", "ttft_ms"] } else { &["p50_ms"] };
        let mut items: Vec<Item> = bench
            .lengths()
            .into_iter()
            .flat_map(|len| names.iter().map(move |&n| Item { what: What::Metric { metric: super::metric::metric(n).expect("a known metric"), len: Some(len) }, source: None, format: None, title: None }))
            .collect();
        let loaded = backends.iter().all(|b| matches!(&b.what, What::Backend(name) if bench.has_load(name)));
        if loaded {
            items.extend(bench.metrics().filter(|m| m.name == "rss_mb" && matches!(m.get, Getter::Load(_))).map(|metric| Item { what: What::Metric { metric, len: None }, source: None, format: None, title: None }));
        }
        items
    };
    let given_backends = if backends_in_rows { &spec.rows } else { &spec.cols };
    let backend_items = given_backends.clone().unwrap_or_else(backends);
    let metric_items = (if backends_in_rows { &spec.cols } else { &spec.rows }).clone().unwrap_or_else(|| metrics(&backend_items));
    let (rows, cols) = if backends_in_rows { (backend_items, metric_items) } else { (metric_items, backend_items) };
    if rows.is_empty() || cols.is_empty() {
        return Err("the table has no rows or no columns".to_string());
    }
    Ok((rows, cols))
}
