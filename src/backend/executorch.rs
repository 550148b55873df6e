//! The ExecuTorch paths: the same exported program, lowered without a
//! delegate (`portable.pte`, run on the wheel's default CPU kernels) or with
//! XNNPACK (`xnnpack.pte`, and the export variants `xnnpack-int8.pte` and
//! `xnnpack-static.pte`). All run through ExecuTorch's C++ `Module` via
//! [`crate::ffi`].
//!
//! A program exported for a fixed sequence length (its input shape is stored
//! as static in the file) gets its input padded ([`Encoded::padded_to`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{Backend, BackendKind};
use crate::ffi::EtModule;
use crate::pte::CoverageReport;
use crate::model::{Embedding, Encoded, ModelDir};

pub struct ExecutorchBackend {
    kind: BackendKind,
    module: EtModule,
    path: PathBuf,
    load_time: Duration,
    coverage: CoverageReport,
    /// `Some(n)`: the program takes exactly `n` tokens (read from the file).
    fixed_len: Option<usize>,
}

impl ExecutorchBackend {
    /// Load the `.pte` of `kind` from the models directory.
    pub fn load(kind: BackendKind, dir: &ModelDir) -> anyhow::Result<ExecutorchBackend> {
        let file = kind.pte_file().with_context(|| format!("{kind} is not an ExecuTorch backend"))?;
        let path = dir.require(file)?;
        Self::load_file(kind, &path)
    }

    /// Load a `.pte` from any path; the file is checked by runlens' own reader
    /// first, so that bytes ExecuTorch might abort on never reach it.
    pub fn load_file(kind: BackendKind, path: &Path) -> anyhow::Result<ExecutorchBackend> {
        let coverage = crate::pte::inspect_file(path)
            .with_context(|| format!("{}: not a readable ExecuTorch program (re-export it with `make models`)", path.display()))?;
        // ExecuTorch aborts the process on some damaged programs: try it in a child first.
        super::probe::check(path)?;
        let fixed_len = coverage.plan("forward").or_else(|| coverage.plans.first()).and_then(|p| p.fixed_seq_len());
        let start = Instant::now();
        let module = EtModule::load(path, false)?;
        Ok(ExecutorchBackend {
            kind,
            module,
            path: path.to_path_buf(),
            load_time: start.elapsed(),
            coverage,
            fixed_len,
        })
    }

    /// The sequence length a fixed-shape program needs; `None` when it takes any length.
    pub fn fixed_len(&self) -> Option<usize> {
        self.fixed_len
    }

    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// What runlens' own reader found in the file (read before ExecuTorch saw it).
    pub fn coverage(&self) -> &CoverageReport {
        &self.coverage
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The ExecuTorch module, for the bench's in-shim loop.
    pub fn module_mut(&mut self) -> &mut EtModule {
        &mut self.module
    }
}

impl Backend for ExecutorchBackend {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    fn describe(&self) -> String {
        let what = match self.kind {
            BackendKind::Portable => "the program without a delegate, on the wheel's default CPU kernels",
            BackendKind::XnnpackInt8 => "XNNPACK delegate with int8 dynamically quantized linear layers, the rest on the default kernels",
            _ => "XNNPACK delegate for the subgraphs it supports, the rest on the default kernels",
        };
        let shape = match self.fixed_len {
            Some(n) => format!(", fixed length {n} (input padded)"),
            None => String::new(),
        };
        format!("ExecuTorch {} ({what}), {}{shape}, {} pool threads", self.kind, self.path.display(), crate::ffi::threads())
    }

    fn run(&mut self, input: &Encoded) -> anyhow::Result<Embedding> {
        let padded;
        let input = match self.fixed_len {
            Some(len) => {
                padded = input.padded_to(len).with_context(|| self.path.display().to_string())?;
                &padded
            }
            None => input,
        };
        let values = self.module.forward(&input.ids, &input.attention_mask)?;
        Ok(Embedding(values.to_vec()))
    }
}
