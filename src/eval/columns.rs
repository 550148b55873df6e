//! Which columns `runlens eval` measures: the reference (float32 eager, else
//! the first float32 column present), the columns compared with it, and the
//! ones left out by default with the reason.

use serde::{Deserialize, Serialize};

use crate::backend::{self, BackendSpec};
use crate::model::ModelDir;

/// A column present but not measured, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub name: String,
    pub why: String,
}

/// The reference, the columns compared with it, the ones left out.
#[derive(Clone, Debug)]
pub struct Selection {
    pub reference: BackendSpec,
    /// Why this one is the reference, in words.
    pub reference_why: String,
    pub compared: Vec<BackendSpec>,
    pub skipped: Vec<Skipped>,
}

/// Why a column is left out unless named (`BackendSpec::left_out_of_eval`).
fn left_out_by_default(spec: &BackendSpec) -> Option<String> {
    spec.left_out_of_eval()
}

/// Choose from `catalog` (every column the directory offers): `named` is
/// `--backends`' list when given. The reference is float32 eager when it is
/// present, else the first float32 column of `named`, else of the defaults.
/// Compared: `named` without the reference, else every column present but the
/// reference and those [`left_out_by_default`]. An error when no float32
/// column is there to be the reference.
pub fn choose(catalog: &[BackendSpec], named: Option<&[BackendSpec]>, dir: &ModelDir) -> anyhow::Result<Selection> {
    let present = |s: &&BackendSpec| s.given || backend::files_present(s, dir).is_ok();
    let mut skipped = Vec::new();
    let mut defaults = Vec::new();
    for spec in catalog.iter().filter(present) {
        match left_out_by_default(spec) {
            Some(why) => skipped.push(Skipped { name: spec.name.clone(), why }),
            None => defaults.push(spec.clone()),
        }
    }
    let pool: Vec<BackendSpec> = named.map_or_else(|| defaults.clone(), <[BackendSpec]>::to_vec);
    if named.is_some() {
        skipped.clear();
    }
    let (reference, reference_why) = if let Some(eager) = catalog.iter().filter(present).find(|s| s.is_float_eager()) {
        (eager.clone(), "float32 eager: the checkpoint's weights on libtorch".to_string())
    } else if let Some(first) = pool.iter().find(|s| !s.is_quantized()) {
        let why = if backend::HAS_EAGER { "no float32 eager in this directory" } else { "this build has no eager (the lite build)" };
        (first.clone(), format!("the first float32 column ({why})"))
    } else if let Some(first) = defaults.iter().find(|s| !s.is_quantized()) {
        (first.clone(), "the first float32 column present (none of --backends is float32)".to_string())
    } else {
        let names: Vec<&str> = catalog.iter().filter(present).map(|s| s.name.as_str()).collect();
        anyhow::bail!(
            "no float32 column to measure against: {} has {}; eval compares every column with a float32 one (eager, xnnpack, llamacpp-f32)",
            dir.root().display(),
            names.join(", ")
        );
    };
    let compared = pool.into_iter().filter(|s| *s != reference).collect();
    Ok(Selection { reference, reference_why, compared, skipped })
}
