//! The one way runlens opens and drives an ExecuTorch program, for the
//! columns ([`super::ExecutorchBackend`]), `runlens profile` and `runlens
//! layers` alike: the file is read by runlens' own `.pte` reader (so that
//! bytes ExecuTorch might abort on never reach it, and so that its inputs and
//! output are known before it runs), its input convention is read from it
//! ([`InputConvention`]), it is tried in a child process, then loaded, with
//! ExecuTorch's ETDump tracer when asked. [`Program::forward`] runs one input
//! the way the convention says (padded, masked, or a decoder's prefill).

use std::path::{Path, PathBuf};

use super::decoder::Decoding;
use super::kernels::MissingKernels;
use super::InputConvention;
use crate::backend::OutputKind;
use crate::ffi::{EtError, EtModule};
use crate::pte::{CoverageReport, PlanInstructions, PteError};
use crate::tensor::{Encoded, OutputTensor};

/// Why a program cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{file}: not a readable ExecuTorch program (re-export it)")]
    Unreadable {
        file: String,
        #[source]
        source: Box<PteError>,
    },
    #[error("{0}: the program has no method \"forward\"; runlens runs forward")]
    NoForward(String),
    /// It calls operators or delegates this runtime has no kernel for (named before loading).
    #[error("{file}: runlens cannot run this program: {missing}; {advice}", advice = missing.advice())]
    MissingKernels { file: String, missing: MissingKernels },
    #[error("{file}: runlens cannot drive this program: {why}")]
    CannotDrive { file: String, why: String },
    /// runlens' probe saw ExecuTorch abort on it (the message names the file).
    #[error("{0}")]
    Aborts(String),
    #[error(transparent)]
    Runtime(#[from] EtError),
}

/// A loaded program and what runlens read of it.
pub struct Program {
    path: PathBuf,
    /// Its delegation coverage, inputs and outputs, as runlens' reader found them.
    pub coverage: CoverageReport,
    /// `forward`'s instructions (what an ETDump's events map back to).
    pub instructions: PlanInstructions,
    /// `prefill`'s, for a program taking its KV cache as inputs: a prompt runs that method.
    pub prefill_instructions: Option<PlanInstructions>,
    pub convention: InputConvention,
    pub output: OutputKind,
    module: EtModule,
    /// A decoder: the sequence so far, and what a window is padded with.
    decoding: Decoding,
}

impl Program {
    /// Open the program at `path` to return `output`; with `traced`, ExecuTorch's
    /// ETDump tracer is attached (profile, layers: never the timed columns).
    pub fn open(path: &Path, output: OutputKind, traced: bool) -> Result<Program, OpenError> {
        let file = path.display().to_string();
        let (coverage, table) =
            crate::pte::read_program_file(path).map_err(|source| OpenError::Unreadable { file: file.clone(), source: Box::new(source) })?;
        let plan = coverage.plan("forward").ok_or_else(|| OpenError::NoForward(file.clone()))?;
        let instructions = table.plan("forward").ok_or_else(|| OpenError::NoForward(file.clone()))?.clone();
        let missing = MissingKernels::of(plan);
        if !missing.is_empty() {
            return Err(OpenError::MissingKernels { file, missing });
        }
        let convention = InputConvention::of(plan, coverage.plan("prefill"), output).map_err(|why| OpenError::CannotDrive { file: file.clone(), why })?;
        // ExecuTorch aborts the process on some damaged programs: try it in a child first.
        crate::backend::probe::check(path, &crate::backend::probe::Load::Executorch).map_err(|e| OpenError::Aborts(format!("{e:#}")))?;
        let prefill_instructions = convention.caller_cache.and_then(|_| table.plan("prefill").cloned());
        let module = EtModule::load(path, traced)?;
        Ok(Program { path: path.to_path_buf(), coverage, instructions, prefill_instructions, convention, output, module, decoding: Decoding::default() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A decoder: pad a fixed window with `pad_id` (the manifest's `pad_token_id`; 0 unless set).
    pub fn set_pad_id(&mut self, pad_id: i64) {
        self.decoding.pad_id = pad_id;
    }

    /// One forward on `input`, as the program takes it: an encoder's input padded
    /// to a fixed length (or checked against its bound), with the mask when it
    /// takes one, and only the real positions kept of a per-position output; a
    /// decoder's prefill of the input, the next token's logits `[1, V]`.
    pub fn forward(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
        if self.output == OutputKind::NextToken {
            let logits = self.prefill(&input.ids)?;
            return Ok(OutputTensor::new(vec![1, logits.len()], logits));
        }
        let prepared = self.prepare(input)?;
        self.run_prepared(&prepared, input.len())
    }

    /// An encoder's input as this program takes it: padded to a fixed length, checked against its bound.
    pub fn prepare(&self, input: &Encoded) -> anyhow::Result<Encoded> {
        use anyhow::Context;
        let name = || self.path.display().to_string();
        anyhow::ensure!(
            !self.convention.cache_position,
            "{}: a KV-cache program takes input_ids and cache_position; drive it as a decoder (Backend::as_decoder)",
            name()
        );
        match self.convention.fixed_len {
            Some(len) => input.padded_to(len).with_context(name),
            None => {
                anyhow::ensure!(
                    input.len() <= self.convention.max_len,
                    "{}: the program takes at most {} tokens and this input has {}",
                    name(),
                    self.convention.max_len,
                    input.len()
                );
                Ok(input.clone())
            }
        }
    }

    /// Run a prepared input ([`prepare`](Self::prepare)) and keep only the real
    /// positions of a per-position output.
    pub fn run_prepared(&mut self, prepared: &Encoded, real_len: usize) -> anyhow::Result<OutputTensor> {
        let mask = self.convention.with_mask.then_some(prepared.attention_mask.as_slice());
        let mut data = self.module.forward(&prepared.ids, mask)?.to_vec();
        let mut shape = self.module.output_shape();
        if shape.len() == 3 && shape[1] > real_len && shape.iter().product::<usize>() == data.len() {
            data.truncate(real_len * shape[2]);
            shape[1] = real_len;
        }
        Ok(OutputTensor::new(shape, data))
    }

    /// A decoder: forget the sequence, run `prompt`; the next token's logits.
    pub fn prefill(&mut self, prompt: &[i64]) -> anyhow::Result<Vec<f32>> {
        self.decoding.prefill(&mut self.module, &self.convention, prompt)
    }

    /// A decoder: append `token`; the next token's logits.
    pub fn step(&mut self, token: i64) -> anyhow::Result<Vec<f32>> {
        self.decoding.step(&mut self.module, &self.convention, token)
    }

    /// The ExecuTorch module (the bench's in-shim loop, the tracer's dump and debug buffer).
    pub fn module_mut(&mut self) -> &mut EtModule {
        &mut self.module
    }
}
