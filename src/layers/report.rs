//! What `runlens layers` prints: one row per module, one column per backend
//! (ms per run and share of its run), and its JSON:
//! `{"text", "model", "backends": [{"name", "total_ms", ...}], "rows": [{"module",
//! "times_ms": {backend: ms}, "gap": {backend: {"cosine", "max_abs_diff"}}}],
//! "unmapped": {backend: {"count", "ms"}}}`.

use std::collections::BTreeMap;
use std::fmt;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

/// One backend's time per module.
#[derive(Clone, Debug, PartialEq)]
pub struct BackendLayers {
    pub name: String,
    /// ms per run: eager's timed forward, or a program's instruction events.
    pub total_ms: f64,
    /// (row, ms per run) in the order the rows first ran.
    pub rows: Vec<(String, f64)>,
    /// Events that map to no module, per run, and their time.
    pub unmapped_count: u64,
    pub unmapped_ms: f64,
    pub runs: usize,
    /// Said when the rows are instructions (no sidecar).
    pub note: Option<String>,
}

impl BackendLayers {
    pub fn row_ms(&self, row: &str) -> Option<f64> {
        self.rows.iter().find(|(r, _)| r == row).map(|(_, ms)| *ms)
    }

    fn share(&self, ms: f64) -> f64 {
        if self.total_ms > 0.0 { ms / self.total_ms } else { 0.0 }
    }
}

/// Numeric gap of one module's output against eager's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Gap {
    pub cosine: f64,
    pub max_abs_diff: f64,
    /// Where the output was taken: `kernel`, `delegate call` (a module inside
    /// an XNNPACK subgraph: the call's output) or `module` (an eager column's own).
    pub at: &'static str,
}

impl Gap {
    /// A NaN on either side: shown as NaN, and a drift, the largest.
    pub fn is_nan(&self) -> bool {
        self.cosine.is_nan() || self.max_abs_diff.is_nan()
    }

    /// Both figures finite. A gap that is not (a NaN, an infinity) is a drift,
    /// the largest, wherever it was taken.
    pub fn is_finite(&self) -> bool {
        self.cosine.is_finite() && self.max_abs_diff.is_finite()
    }
}

/// A module drifts when its output's cosine to eager's is below `1 - DRIFT`:
/// float programs stay within 1e-5 (tests/layers.rs), int8 ones do not.
pub const DRIFT: f64 = 1e-4;

/// `1 - cosine` past [`DRIFT`] (a NaN distance too).
fn drifts(distance: f64) -> bool {
    distance.is_nan() || distance > DRIFT
}

/// Where a drift begins ([`LayersReport::drift_begins`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriftStart<'a> {
    /// The last row measured within the threshold before the first drifting one.
    pub clean_until: Option<&'a str>,
    /// The rows in between (in table order), not measured on their own.
    pub between: Vec<&'a str>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LayersReport {
    pub text: String,
    pub model: String,
    pub backends: Vec<BackendLayers>,
    /// Every backend's rows, in the order they first appear (the first backend's order first).
    pub rows: Vec<String>,
    /// Gap per (row, backend), where measured.
    pub gaps: BTreeMap<(String, String), Gap>,
}

impl LayersReport {
    pub fn new(text: String, model: String, backends: Vec<BackendLayers>) -> LayersReport {
        let mut rows: Vec<String> = Vec::new();
        for b in &backends {
            for (row, _) in &b.rows {
                if !rows.contains(row) {
                    rows.push(row.clone());
                }
            }
        }
        rows.sort_by_key(|r| super::rows::order_key(r));
        LayersReport { text, model, backends, rows, gaps: BTreeMap::new() }
    }

    /// The first row (in table order) whose output drifts on `backend`, and
    /// the row that drifts most: `(first, largest)`. Only a module's own output
    /// counts (a kernel call's, or an eager module's): a delegate call's output is its subgraph's, which need not
    /// be the output of the module its last node belongs to (DistilBERT's
    /// attention subgraphs end in a projection, not the attention's output).
    /// A NaN (or infinite) gap is a drift, the largest, even at a delegate
    /// call: the NaN is in the call's subgraph, whichever module made it.
    pub fn drift(&self, backend: &str) -> (Option<&str>, Option<&str>) {
        let gaps = self.own_distances(backend);
        let first = gaps.iter().find(|(_, d)| drifts(*d)).map(|(r, _)| *r);
        let largest = gaps.iter().filter(|(_, d)| drifts(*d)).max_by(|a, b| a.1.total_cmp(&b.1)).map(|(r, _)| *r);
        (first, largest)
    }

    /// Where the drift of `backend` begins: the last row before the first
    /// drifting one whose own output is still within [`DRIFT`], and the
    /// rows between the two, whose own outputs were not measured (a quantized
    /// XNNPACK program's linear layers are inside delegate calls): the drift
    /// comes from one of those. `None` when nothing drifts.
    pub fn drift_begins(&self, backend: &str) -> Option<DriftStart<'_>> {
        let gaps = self.own_distances(backend);
        let first = gaps.iter().position(|(_, d)| drifts(*d))?;
        let clean_until = first.checked_sub(1).map(|i| gaps[i].0);
        let rows: Vec<&str> = self.rows.iter().map(String::as_str).collect();
        let to = rows.iter().position(|r| *r == gaps[first].0).unwrap_or(0);
        let from = clean_until.and_then(|c| rows.iter().position(|r| *r == c)).map_or(0, |i| i + 1);
        Some(DriftStart { clean_until, between: rows[from.min(to)..to].to_vec() })
    }

    /// `(row, 1 - cosine)` of every row of `backend` measured on its own (at a
    /// kernel call, or an eager module's output; a delegate call's only when
    /// its gap is not finite), in table order; infinite when the gap is not finite.
    fn own_distances(&self, backend: &str) -> Vec<(&str, f64)> {
        self.rows
            .iter()
            .filter_map(|r| self.gaps.get(&(r.clone(), backend.to_owned())).map(|g| (r.as_str(), g)))
            .filter(|(_, g)| g.at != "delegate call" || !g.is_finite())
            .map(|(r, g)| (r, if g.is_finite() { 1.0 - g.cosine } else { f64::INFINITY }))
            .collect()
    }

    /// The backend named `name`.
    pub fn backend(&self, name: &str) -> Option<&BackendLayers> {
        self.backends.iter().find(|b| b.name == name)
    }
}

struct Backends<'a>(&'a [BackendLayers]);
struct Rows<'a>(&'a LayersReport);
struct Row<'a>(&'a LayersReport, &'a str);
struct Times<'a>(&'a LayersReport, &'a str);
struct Gaps<'a>(&'a LayersReport, &'a str);
struct Unmapped<'a>(&'a [BackendLayers]);
struct Drift<'a>(&'a LayersReport);

impl Serialize for Drift<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct D<'a> {
            first: Option<&'a str>,
            largest: Option<&'a str>,
            threshold: f64,
            /// The last row within the threshold before `first`.
            clean_until: Option<&'a str>,
            /// The rows between `clean_until` and `first`: where the drift begins.
            begins_in: Vec<&'a str>,
        }
        let mut m = s.serialize_map(None)?;
        for b in &self.0.backends {
            if self.0.gaps.keys().any(|(_, name)| *name == b.name) {
                let (first, largest) = self.0.drift(&b.name);
                let start = self.0.drift_begins(&b.name);
                let clean_until = start.as_ref().and_then(|s| s.clean_until);
                let begins_in = start.map(|s| s.between).unwrap_or_default();
                m.serialize_entry(&b.name, &D { first, largest, threshold: DRIFT, clean_until, begins_in })?;
            }
        }
        m.end()
    }
}

impl Serialize for Backends<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct B<'a> {
            name: &'a str,
            total_ms: f64,
            runs: usize,
            rows_are: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            note: Option<&'a str>,
        }
        s.collect_seq(self.0.iter().map(|b| B {
            name: &b.name,
            total_ms: b.total_ms,
            runs: b.runs,
            rows_are: if b.note.is_some() { "instructions" } else { "modules" },
            note: b.note.as_deref(),
        }))
    }
}

impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.rows.iter().map(|r| Row(self.0, r)))
    }
}

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Row", 3)?;
        st.serialize_field("module", self.1)?;
        st.serialize_field("times_ms", &Times(self.0, self.1))?;
        st.serialize_field("gap", &Gaps(self.0, self.1))?;
        st.end()
    }
}

impl Serialize for Times<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for b in &self.0.backends {
            if let Some(ms) = b.row_ms(self.1) {
                m.serialize_entry(&b.name, &ms)?;
            }
        }
        m.end()
    }
}

impl Serialize for Gaps<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for b in &self.0.backends {
            if let Some(gap) = self.0.gaps.get(&(self.1.to_owned(), b.name.clone())) {
                m.serialize_entry(&b.name, gap)?;
            }
        }
        m.end()
    }
}

impl Serialize for Unmapped<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct U {
            count: u64,
            ms: f64,
        }
        let mut m = s.serialize_map(None)?;
        for b in self.0 {
            m.serialize_entry(&b.name, &U { count: b.unmapped_count, ms: b.unmapped_ms })?;
        }
        m.end()
    }
}

impl Serialize for LayersReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("LayersReport", 5)?;
        st.serialize_field("text", &self.text)?;
        st.serialize_field("model", &self.model)?;
        st.serialize_field("backends", &Backends(&self.backends))?;
        st.serialize_field("rows", &Rows(self))?;
        st.serialize_field("unmapped", &Unmapped(&self.backends))?;
        st.serialize_field("drift", &Drift(self))?;
        st.end()
    }
}

impl fmt::Display for LayersReport {
    /// The table: one line per row, `ms share` per backend.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: \"{}\", ms per run and share of each backend's run", self.model, self.text)?;
        let width = self.rows.iter().map(String::len).chain([8]).max().unwrap_or(8);
        write!(f, "{:<width$}", "module")?;
        for b in &self.backends {
            write!(f, "  {:>16}", b.name)?;
        }
        writeln!(f)?;
        let cell = |b: &BackendLayers, ms: Option<f64>| match ms {
            Some(ms) => format!("{ms:>9.3} {:>5.1}%", 100.0 * b.share(ms)),
            None => format!("{:>16}", "-"),
        };
        for row in &self.rows {
            write!(f, "{row:<width$}")?;
            for b in &self.backends {
                write!(f, "  {}", cell(b, b.row_ms(row)))?;
            }
            writeln!(f)?;
        }
        write!(f, "{:<width$}", "unmapped")?;
        for b in &self.backends {
            write!(f, "  {}", cell(b, Some(b.unmapped_ms)))?;
        }
        writeln!(f)?;
        write!(f, "{:<width$}", "total")?;
        for b in &self.backends {
            write!(f, "  {:>9.3} {:>5}", b.total_ms, format!("x{}", b.runs))?;
        }
        writeln!(f)?;
        if !self.gaps.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "numeric gap against eager: 1 - cosine (max abs diff); * = a delegate call's output, which may not be the module's own (not used for the drift)"
            )?;
            write!(f, "{:<width$}", "module")?;
            for b in self.backends.iter().filter(|b| self.gaps.keys().any(|(_, n)| *n == b.name)) {
                write!(f, "  {:>18}", b.name)?;
            }
            writeln!(f)?;
            for row in &self.rows {
                if !self.gaps.keys().any(|(r, _)| r == row) {
                    continue;
                }
                write!(f, "{row:<width$}")?;
                for b in self.backends.iter().filter(|b| self.gaps.keys().any(|(_, n)| *n == b.name)) {
                    match self.gaps.get(&(row.clone(), b.name.clone())) {
                        Some(g) if g.is_nan() => write!(f, "  {:>18}", "NaN")?,
                        Some(g) => {
                            let star = if g.at == "delegate call" { "*" } else { " " };
                            write!(f, "  {:>8.1e} ({:>7.1e}){star}", (1.0 - g.cosine).max(0.0), g.max_abs_diff)?
                        }
                        None => write!(f, "  {:>18}", "-")?,
                    }
                }
                writeln!(f)?;
            }
            for b in &self.backends {
                match self.drift(&b.name) {
                    (Some(first), Some(largest)) => {
                        let begins = match self.drift_begins(&b.name) {
                            Some(DriftStart { clean_until: Some(clean), between }) if !between.is_empty() => {
                                format!("; within it at {clean}, so it begins in {}", between.join(", "))
                            }
                            _ => String::new(),
                        };
                        writeln!(f, "{}: first drifts at {first} (1 - cosine > {DRIFT:.0e}{begins}), most at {largest}", b.name)?
                    }
                    _ if self.gaps.keys().any(|(_, n)| *n == b.name) => {
                        writeln!(f, "{}: every module within 1 - cosine {DRIFT:.0e} of eager", b.name)?
                    }
                    _ => {}
                }
            }
        }
        for b in &self.backends {
            let unmapped = format!("{} unmapped events per run", b.unmapped_count);
            match &b.note {
                Some(note) => writeln!(f, "{}: {note}", b.name)?,
                None if b.unmapped_count > 0 => writeln!(f, "{}: {unmapped}", b.name)?,
                None => {}
            }
        }
        writeln!(
            f,
            "eager: each module's own forward in runlens' tch code, wall time; ExecuTorch: the traced run's \
             instruction events (kernel calls, delegate calls split by XNNPACK's per-operator events)"
        )
    }
}

/// Reports built by hand, for the report's tests and the panel's.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub fn backend(name: &str, rows: &[(&str, f64)], unmapped: (u64, f64)) -> BackendLayers {
        BackendLayers {
            name: name.into(),
            total_ms: rows.iter().map(|r| r.1).sum::<f64>() + unmapped.1,
            rows: rows.iter().map(|(r, ms)| ((*r).to_owned(), *ms)).collect(),
            unmapped_count: unmapped.0,
            unmapped_ms: unmapped.1,
            runs: 3,
            note: None,
        }
    }

    pub fn gap(cosine: f64, at: &'static str) -> Gap {
        Gap { cosine, max_abs_diff: 1.0 - cosine, at }
    }

    /// A decoder's rows: clean up to ln_1, the attention measured only inside a
    /// delegate call, drifting from ln_2 on.
    pub fn decoder_report(ln_2: Gap) -> LayersReport {
        let rows = [("h.0.ln_1", 1.0), ("h.0.attn", 1.0), ("h.0.ln_2", 1.0), ("h.0.mlp", 1.0), ("head", 1.0)];
        let mut report = LayersReport::new("hi".into(), "m".into(), vec![backend("eager", &rows, (0, 0.0)), backend("q", &rows, (0, 0.0))]);
        for (row, g) in [("h.0.ln_1", gap(1.0 - 1e-9, "kernel")), ("h.0.attn", gap(0.06, "delegate call")), ("h.0.ln_2", ln_2), ("head", gap(0.95, "kernel"))] {
            report.gaps.insert((row.to_owned(), "q".to_owned()), g);
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;


    #[test]
    fn json_has_the_issues_fields() {
        let report = LayersReport::new(
            "hi".into(),
            "m".into(),
            vec![
                backend("eager", &[("embeddings", 1.0), ("head", 2.0)], (0, 0.0)),
                backend("xnnpack", &[("embeddings", 0.5), ("model", 0.25)], (2, 0.25)),
            ],
        );
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(v["text"], "hi");
        assert_eq!(v["backends"][1]["name"], "xnnpack");
        assert_eq!(v["backends"][1]["total_ms"], 1.0);
        let modules: Vec<&str> = v["rows"].as_array().unwrap().iter().map(|r| r["module"].as_str().unwrap()).collect();
        assert_eq!(modules, ["model", "embeddings", "head"]);
        assert_eq!(v["rows"][1]["times_ms"]["xnnpack"], 0.5);
        assert!(v["rows"][2]["times_ms"].get("xnnpack").is_none());
        assert!(v["rows"][0]["gap"].as_object().unwrap().is_empty());
        assert_eq!(v["unmapped"]["xnnpack"]["count"], 2);
        let text = report.to_string();
        assert!(text.contains("unmapped") && text.contains("embeddings"), "{text}");
    }


    #[test]
    fn names_the_first_module_that_drifts_and_where_the_drift_begins() {
        let report = decoder_report(gap(0.99, "kernel"));
        assert_eq!(report.drift("q"), (Some("h.0.ln_2"), Some("head")));
        assert_eq!(report.drift_begins("q"), Some(DriftStart { clean_until: Some("h.0.ln_1"), between: vec!["h.0.attn"] }));
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(v["drift"]["q"]["first"], "h.0.ln_2");
        assert_eq!(v["drift"]["q"]["clean_until"], "h.0.ln_1");
        assert_eq!(v["drift"]["q"]["begins_in"], serde_json::json!(["h.0.attn"]));
        let text = report.to_string();
        assert!(text.contains("q: first drifts at h.0.ln_2") && text.contains("begins in h.0.attn"), "{text}");
    }

    #[test]
    fn a_nan_gap_is_a_drift_and_the_largest() {
        let mut report = decoder_report(Gap { cosine: f64::NAN, max_abs_diff: f64::NAN, at: "kernel" });
        assert_eq!(report.drift("q"), (Some("h.0.ln_2"), Some("h.0.ln_2")));
        // A NaN max|diff| beside a cosine that looks clean is a drift too.
        report.gaps.insert(("h.0.ln_2".to_owned(), "q".to_owned()), Gap { cosine: 1.0, max_abs_diff: f64::NAN, at: "kernel" });
        assert_eq!(report.drift("q").0, Some("h.0.ln_2"));
        assert!(report.to_string().contains("NaN"), "the table shows it");
        // An infinite max|diff| beside a clean cosine is a drift too.
        report.gaps.insert(("h.0.ln_2".to_owned(), "q".to_owned()), Gap { cosine: 1.0, max_abs_diff: f64::INFINITY, at: "kernel" });
        assert_eq!(report.drift("q").0, Some("h.0.ln_2"));
        // Nothing drifts: nothing begins.
        let mut clean = decoder_report(gap(1.0, "kernel"));
        clean.gaps.insert(("head".to_owned(), "q".to_owned()), gap(1.0, "kernel"));
        assert_eq!((clean.drift("q"), clean.drift_begins("q")), ((None, None), None));
    }

    #[test]
    fn a_nan_in_a_delegate_calls_output_is_a_drift_too() {
        // Every module's own output clean; the attention's delegate call NaN. It
        // was left out of the drift ("every module within ..."), as a delegate
        // call's finite gap is (it may not be its module's own output).
        let mut report = decoder_report(gap(1.0, "kernel"));
        report.gaps.insert(("head".to_owned(), "q".to_owned()), gap(1.0, "kernel"));
        assert_eq!(report.drift("q"), (None, None), "a finite delegate call's gap is not used");
        report.gaps.insert(("h.0.attn".to_owned(), "q".to_owned()), Gap { cosine: f64::NAN, max_abs_diff: f64::NAN, at: "delegate call" });
        assert_eq!(report.drift("q"), (Some("h.0.attn"), Some("h.0.attn")));
        assert_eq!(report.drift_begins("q"), Some(DriftStart { clean_until: Some("h.0.ln_1"), between: vec![] }));
        let text = report.to_string();
        assert!(text.contains("q: first drifts at h.0.attn") && !text.contains("every module within"), "{text}");
    }
}
