//! `runlens inspect [--json] FILE.pte`: delegation coverage read from the file.

use std::path::Path;

use anyhow::Context;

use crate::pte;

/// Prints the coverage table of `file`, or with `json` exactly one JSON object.
pub fn run(file: &Path, json: bool) -> anyhow::Result<()> {
    let report =
        pte::inspect_file(file).with_context(|| format!("cannot inspect {}", file.display()))?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}
