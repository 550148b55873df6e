//! A reader for ExecuTorch `.pte` files: how much of each method is delegated,
//! read from the file itself, without the ExecuTorch runtime.
//!
//! Layout (see `shared/DESIGN.md`, ".pte layout"): the program flatbuffer with
//! file identifier `ET12`, an optional `eh00` extended header at byte 8 that
//! says where the segments start, then the segments (constants, named data,
//! delegate blobs). XNNPACK blobs carry their own `XH00` header and a second
//! flatbuffer (`XN01`).
//!
//! Every byte string gives a [`CoverageReport`] or a [`PteError`]: all table
//! reads go through planus (bounds-checked, fallible), the fixed headers are
//! parsed with checked arithmetic, and nothing is allocated from a size read
//! out of the file.

mod coverage;
#[allow(
    clippy::all,
    clippy::pedantic,
    dead_code,
    unused_imports,
    missing_docs,
    non_camel_case_types,
    rustdoc::all
)]
pub mod generated;
mod header;
mod instructions;
mod limits;
mod partition;
mod reader;
mod sizes;
mod xnnpack;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use coverage::{BlobContents, BlobLocation, CoverageReport, DelegateBlob, InputShape, PlanCoverage};
pub use header::{ExtendedHeader, FILE_IDENTIFIER};
pub use instructions::{element_bytes, Instruction, InstructionTable, PlanInstructions};
pub use partition::{squeeze, PartitionMap, PartitionRun, RunKind};
pub use sizes::{read_delegate_ids, read_sizes, ProgramSizes};
pub use xnnpack::{XnnHeader, XnnNode, XNNPACK_BACKEND_ID};

/// Why a byte string is not a readable `.pte` program.
#[derive(Debug, thiserror::Error)]
pub enum PteError {
    #[error("cannot read the file")]
    Io(#[from] std::io::Error),
    #[error("too short for a .pte file: {len} bytes, at least {need} are needed")]
    TooShort { len: usize, need: usize },
    #[error("not an ExecuTorch program: bytes 4..8 are {found}, expected \"ET12\"")]
    NotAProgram { found: String },
    #[error("bad extended header (eh00): {0}")]
    BadHeader(String),
    #[error("malformed program flatbuffer while reading {what}")]
    Flatbuffer {
        what: String,
        #[source]
        source: planus::Error,
    },
    #[error("inconsistent program: {0}")]
    Inconsistent(String),
}

/// Reads `path` and reports its delegation coverage.
pub fn inspect_file(path: &Path) -> Result<CoverageReport, PteError> {
    let bytes = std::fs::read(path)?;
    inspect_bytes(&path.display().to_string(), &bytes)
}

/// Reports the delegation coverage of the `.pte` program in `bytes`;
/// `file` is only copied into the report.
pub fn inspect_bytes(file: &str, bytes: &[u8]) -> Result<CoverageReport, PteError> {
    reader::read_report(file, bytes)
}

/// Reads `path` once and gives both its coverage report and its instruction
/// table (what each chain's instructions call), for mapping runtime events
/// back to operators.
pub fn read_program_file(path: &Path) -> Result<(CoverageReport, InstructionTable), PteError> {
    let bytes = std::fs::read(path)?;
    let report = inspect_bytes(&path.display().to_string(), &bytes)?;
    Ok((report, instructions_bytes(&bytes)?))
}

/// The instruction table of the `.pte` program in `bytes`.
pub fn instructions_bytes(bytes: &[u8]) -> Result<InstructionTable, PteError> {
    instructions::read_instructions(bytes)
}
