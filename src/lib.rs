//! runlens: one sentence-embedding model run through three CPU runtimes side by side.
//!
//! Layers, in the order data flows through them:
//! - [`model`]: model files, tokenizer ([`model::Encoded`]), embeddings and parity;
//! - [`backend`]: the inference paths behind one [`backend::Backend`] trait
//!   (PyTorch eager on tch, ExecuTorch portable and XNNPACK through [`ffi`]);
//! - [`pte`]: a reader for `.pte` files (delegation coverage, no runtime needed);
//! - [`cli`]: the headless subcommands.

pub mod backend;
pub mod cli;
pub mod ffi;
pub mod model;
pub mod pte;
