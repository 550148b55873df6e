//! The inference paths runlens compares. Every path implements [`Backend`];
//! [`BackendKind`] names them on the command line, in JSON and in the TUI.
//!
//! The eager path is the cargo feature `eager` (on by default): without it
//! (`make lite`) the binary is ExecuTorch alone, with no tch and no libtorch;
//! [`BackendKind::Eager`] still exists as a name, and asking for it is
//! [`NotBuilt`].

#[cfg(feature = "eager")]
pub mod eager;
/// Built without the eager path: only its `config.json` reader (no tch in it),
/// which `bench` uses to count FLOPs.
#[cfg(not(feature = "eager"))]
pub mod eager {
    #[path = "config.rs"]
    pub mod config;
    pub use config::{BertConfig, ConfigError, HiddenAct};
}
pub mod executorch;

use std::fmt;
use std::str::FromStr;

use crate::model::{Embedding, Encoded, ModelDir};

/// One CPU inference path with its model loaded, ready to run.
///
/// A backend is owned by one thread at a time (`Send`, not `Sync`): the TUI
/// gives each its own worker thread, `run` and `bench` call it directly.
pub trait Backend: Send {
    /// Which path this is.
    fn kind(&self) -> BackendKind;
    /// One line for humans: what runs, from which file, with how many threads.
    fn describe(&self) -> String;
    /// Run the sentence embedder on one tokenized input.
    fn run(&mut self, input: &Encoded) -> anyhow::Result<Embedding>;
}

/// The names of the inference paths, as the user types them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// PyTorch eager: libtorch through tch, one operator at a time.
    Eager,
    /// ExecuTorch, the program lowered with no delegate, on the wheel's default CPU kernels.
    Portable,
    /// ExecuTorch with the XNNPACK delegate for the subgraphs it supports.
    Xnnpack,
    /// The XNNPACK program with its linear layers dynamically quantized to int8.
    XnnpackInt8,
    /// The XNNPACK program exported for a fixed sequence length (input padded and masked).
    XnnpackStatic,
}

impl BackendKind {
    /// The three paths runlens compares: the default columns and backends.
    pub const ALL: [BackendKind; 3] = [BackendKind::Eager, BackendKind::Portable, BackendKind::Xnnpack];
    /// Every kind, the export variants included (named with `--backends`).
    pub const EVERY: [BackendKind; 5] =
        [BackendKind::Eager, BackendKind::Portable, BackendKind::Xnnpack, BackendKind::XnnpackInt8, BackendKind::XnnpackStatic];
    /// The XNNPACK programs, in the order the explorer's F5 cycles through them.
    pub const XNNPACK_VARIANTS: [BackendKind; 3] = [BackendKind::Xnnpack, BackendKind::XnnpackInt8, BackendKind::XnnpackStatic];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Eager => "eager",
            BackendKind::Portable => "portable",
            BackendKind::Xnnpack => "xnnpack",
            BackendKind::XnnpackInt8 => "xnnpack-int8",
            BackendKind::XnnpackStatic => "xnnpack-static",
        }
    }

    /// The column title in the TUI.
    pub fn title(self) -> &'static str {
        match self {
            BackendKind::Eager => "PyTorch eager",
            BackendKind::Portable => "ExecuTorch portable",
            BackendKind::Xnnpack => "ExecuTorch XNNPACK",
            BackendKind::XnnpackInt8 => "ExecuTorch XNNPACK int8",
            BackendKind::XnnpackStatic => "ExecuTorch XNNPACK static",
        }
    }

    /// The `.pte` file of an ExecuTorch path, relative to the model directory.
    pub fn pte_file(self) -> Option<&'static str> {
        match self {
            BackendKind::Eager => None,
            BackendKind::Portable => Some("portable.pte"),
            BackendKind::Xnnpack => Some("xnnpack.pte"),
            BackendKind::XnnpackInt8 => Some("xnnpack-int8.pte"),
            BackendKind::XnnpackStatic => Some("xnnpack-static.pte"),
        }
    }

    /// One of the XNNPACK programs (the plain one or an export variant).
    pub fn is_xnnpack(self) -> bool {
        Self::XNNPACK_VARIANTS.contains(&self)
    }

    /// The XNNPACK variant after this one (F5 in the explorer); other kinds stay.
    pub fn next_xnnpack_variant(self) -> BackendKind {
        match Self::XNNPACK_VARIANTS.iter().position(|&k| k == self) {
            Some(i) => Self::XNNPACK_VARIANTS[(i + 1) % Self::XNNPACK_VARIANTS.len()],
            None => self,
        }
    }

    /// Whether this binary can run this path: all of them, except eager in a
    /// build without the `eager` feature.
    pub fn is_built(self) -> bool {
        self != BackendKind::Eager || HAS_EAGER
    }

    pub fn valid_names() -> String {
        Self::EVERY.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::EVERY
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| format!("unknown backend '{s}'; valid names: {}", Self::valid_names()))
    }
}

/// Whether this binary has the PyTorch eager path (the `eager` cargo feature, libtorch).
pub const HAS_EAGER: bool = cfg!(feature = "eager");

/// A path this binary was built without (eager in the lite build).
#[derive(Debug, thiserror::Error)]
#[error(
    "{0}: this runlens was built without the PyTorch eager path (the lite build: ExecuTorch only, no libtorch); \
     `make build` builds the full binary, target/release/runlens"
)]
pub struct NotBuilt(pub BackendKind);

/// Load one backend from the models directory (slow: hundreds of ms).
pub fn load(kind: BackendKind, dir: &ModelDir) -> anyhow::Result<Box<dyn Backend>> {
    Ok(match kind {
        #[cfg(feature = "eager")]
        BackendKind::Eager => Box::new(eager::EagerBackend::load(dir)?),
        #[cfg(not(feature = "eager"))]
        BackendKind::Eager => return Err(NotBuilt(kind).into()),
        _ => Box::new(executorch::ExecutorchBackend::load(kind, dir)?),
    })
}

/// The files `kind` needs, or [`crate::model::ModelsMissing`] naming the first one absent.
pub fn files_present(kind: BackendKind, dir: &ModelDir) -> Result<(), crate::model::ModelsMissing> {
    match kind.pte_file() {
        Some(file) => dir.require(file).map(drop),
        None => dir.config().and_then(|_| dir.weights()).map(drop),
    }
}

/// Set the thread count of every runtime: libtorch's intra-op threads and
/// ExecuTorch's shared pool (XNNPACK). Call before loading.
pub fn set_threads(threads: usize) -> anyhow::Result<()> {
    anyhow::ensure!(threads >= 1, "--threads must be at least 1");
    #[cfg(feature = "eager")]
    tch::set_num_threads(threads as i32);
    crate::ffi::set_threads(threads as u32)?;
    Ok(())
}

/// The threads each runtime uses now: (libtorch intra-op, ExecuTorch pool);
/// libtorch's is 0 in a build without the eager path.
pub fn threads() -> (usize, usize) {
    #[cfg(feature = "eager")]
    let libtorch = tch::get_num_threads().max(0) as usize;
    #[cfg(not(feature = "eager"))]
    let libtorch = 0;
    (libtorch, crate::ffi::threads() as usize)
}

/// Parse a comma list such as `eager,xnnpack`; duplicates are dropped, order kept.
pub fn parse_list(list: &str) -> Result<Vec<BackendKind>, String> {
    let mut kinds = Vec::new();
    for part in list.split(',').filter(|p| !p.trim().is_empty()) {
        let kind: BackendKind = part.parse()?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        return Err(format!("no backend named; valid names: {}", BackendKind::valid_names()));
    }
    Ok(kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_rejects_unknown_names() {
        assert_eq!(parse_list("xnnpack, eager,xnnpack").unwrap(), vec![BackendKind::Xnnpack, BackendKind::Eager]);
        let err = parse_list("eager,tflite").unwrap_err();
        assert!(err.contains("tflite") && err.contains("portable"), "{err}");
        assert!(parse_list(" , ").is_err());
        assert_eq!(parse_list("xnnpack-int8,xnnpack-static").unwrap(), vec![BackendKind::XnnpackInt8, BackendKind::XnnpackStatic]);
    }

    #[test]
    fn f5_cycles_through_the_xnnpack_variants_only() {
        let mut kind = BackendKind::Xnnpack;
        let mut seen = Vec::new();
        for _ in 0..3 {
            kind = kind.next_xnnpack_variant();
            seen.push(kind);
        }
        assert_eq!(seen, vec![BackendKind::XnnpackInt8, BackendKind::XnnpackStatic, BackendKind::Xnnpack]);
        assert_eq!(BackendKind::Portable.next_xnnpack_variant(), BackendKind::Portable);
        assert!(BackendKind::EVERY.iter().all(|k| k.name().parse::<BackendKind>() == Ok(*k)));
    }

    #[cfg(not(feature = "eager"))]
    #[test]
    fn the_lite_build_refuses_eager_and_says_how_to_get_it() {
        assert!(!BackendKind::Eager.is_built() && BackendKind::Xnnpack.is_built());
        let err = load(BackendKind::Eager, &ModelDir::new(std::path::Path::new("models"))).err().expect("eager is not built");
        let msg = err.to_string();
        assert!(msg.contains("built without the PyTorch eager path") && msg.contains("make build"), "{msg}");
    }
}
