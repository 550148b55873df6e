//! `runlens inspect [--json] FILE.pte`: delegation coverage read from the file,
//! and what of it the runtime linked into runlens has no kernel for.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::backend::executorch::MissingKernels;
use crate::pte::{self, CoverageReport};

/// `inspect --json`: the coverage report's fields, and `missing_kernels`.
#[derive(Serialize)]
struct Inspection<'a> {
    #[serde(flatten)]
    report: &'a CoverageReport,
    /// One entry per method that calls something this runlens lacks (empty: it can run every method).
    missing_kernels: Vec<MissingJson>,
}

#[derive(Serialize)]
struct MissingJson {
    method: String,
    operators: Vec<String>,
    backends: Vec<String>,
}

/// Prints the coverage table of `file`, or with `json` exactly one JSON object.
pub fn run(file: &Path, json: bool) -> anyhow::Result<()> {
    let report =
        pte::inspect_file(file).with_context(|| format!("cannot inspect {}", file.display()))?;
    let missing: Vec<(String, MissingKernels)> = report
        .plans
        .iter()
        .map(|plan| (plan.name.clone(), MissingKernels::of(plan)))
        .filter(|(_, m)| !m.is_empty())
        .collect();
    if json {
        let missing_kernels = missing
            .into_iter()
            .map(|(method, m)| MissingJson { method, operators: m.operators, backends: m.backends })
            .collect();
        println!("{}", serde_json::to_string(&Inspection { report: &report, missing_kernels })?);
    } else {
        print!("{report}");
        for (method, m) in &missing {
            println!("\nrunlens cannot run method {method} of this program: {m}.\n  {}", m.advice());
        }
    }
    Ok(())
}
