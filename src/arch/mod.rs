//! The architectures runlens knows, as one table ([`ARCHITECTURES`]): what a
//! `config.json` is (its `model_type` and `architectures[0]` classes), and how
//! its module paths group into the rows of `runlens layers`. Nothing outside
//! this table and the architecture's own files knows which one a checkpoint is.
//!
//! Each architecture is a peer, in two files of its own: `src/arch/<name>.rs`
//! (this layer: names and layer rows, in every build) and its eager model,
//! `src/backend/eager/<name>.rs` (config fields, weights, forward on tch; the
//! `eager` feature), which its row names in [`Architecture::eager`] (an
//! [`EagerModel`]; the backend imports this layer, never the reverse).
//! Adding an architecture is those two files, one line in [`ARCHITECTURES`],
//! and, for a new eager model, a variant of [`EagerModel`] (the compiler then
//! asks for its line in `backend::eager::parser`).

pub mod bert;
pub mod distilbert;
pub mod gpt2;
pub mod llama;
pub mod rows;

/// One architecture runlens implements.
pub struct Architecture {
    /// `config.json`'s `model_type`.
    pub model_type: &'static str,
    /// For people: "BERT", "GPT-2".
    pub name: &'static str,
    /// The `architectures[0]` classes it implements; the first is what a
    /// config that names no class is read as (`model_type` alone).
    pub classes: &'static [&'static str],
    /// A decoder (text-generation) rather than an encoder with a task head.
    pub decoder: bool,
    /// The attribute names its checkpoint keeps the model under
    /// (`bert.encoder...`, `transformer.h...`): stripped before [`Architecture::row`].
    pub prefixes: &'static [&'static str],
    /// The row of `runlens layers` a module path (below the prefix) counts in;
    /// `None` when the path is not this architecture's.
    pub row: fn(&[&str]) -> Option<String>,
    /// Where a row goes in the table; `None` when it is not this architecture's.
    pub order: fn(&str) -> Option<(u8, usize, u8)>,
    /// Its eager model (the `eager` feature): the file of `src/backend/eager/`
    /// that parses its `config.json` fields and runs it.
    pub eager: EagerModel,
}

/// The eager models, one a file of `src/backend/eager/` (`bert.rs`, ...):
/// named here, so that the row of [`ARCHITECTURES`] says which one runs it
/// and eager, below this layer, needs no table of its own (it matches on this,
/// and the compiler checks that every model has its file's `parse_config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EagerModel {
    Bert,
    DistilBert,
    Gpt2,
    /// Llama, Qwen2 and Qwen3: one model with a few switches.
    Llama,
}

/// Every architecture runlens implements, one line each.
pub const ARCHITECTURES: &[Architecture] = &[
    bert::ARCHITECTURE,
    distilbert::ARCHITECTURE,
    gpt2::ARCHITECTURE,
    llama::LLAMA,
    llama::QWEN2,
    llama::QWEN3,
];

/// The architecture of a config.json's header: `architectures[0]` when it
/// names one (it must be a class of the table), else the bare class of `model_type`.
pub fn of_config(model_type: Option<&str>, class: Option<&str>) -> Option<(&'static Architecture, String)> {
    match class {
        Some(class) => ARCHITECTURES.iter().find(|a| a.classes.contains(&class)).map(|a| (a, class.to_string())),
        None => ARCHITECTURES.iter().find(|a| Some(a.model_type) == model_type).map(|a| (a, a.classes[0].to_string())),
    }
}

/// Every class runlens implements, in table order (for messages).
pub fn supported_classes() -> Vec<&'static str> {
    ARCHITECTURES.iter().flat_map(|a| a.classes.iter().copied()).collect()
}

/// The architecture whose `model_type` or class this is, for messages about
/// checkpoints (`None`: runlens does not implement it).
pub fn named(model_type: &str) -> Option<&'static Architecture> {
    ARCHITECTURES.iter().find(|a| a.model_type == model_type)
}
