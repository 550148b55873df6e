//! runlens: a text model run through three CPU runtimes side by side.
//!
//! Layers, in the order data flows through them:
//! - [`tensor`]: the encoded input and the output tensor, plain data (imports nothing of runlens);
//! - [`model`]: the model directory (manifest, files), tokenizer (text -> [`tensor::Encoded`]), Python's reference;
//! - [`backend`]: the inference paths, tensor in and tensor out, behind one [`backend::Backend`]
//!   trait and listed by the manifest (PyTorch eager on tch, any `.pte` through [`ffi`]);
//! - [`task`]: what an output means (embedding, fill-mask, classification, generation), the one
//!   driver that runs a backend for a task ([`task::run`], generation's greedy loop included) and
//!   how two outputs compare;
//! - [`pte`]: a reader for `.pte` files (delegation coverage, no runtime needed);
//! - [`gguf`]: a reader for GGUF files' headers (llama.cpp's format), no runtime needed;
//! - [`onnx`]: a reader for ONNX files (opsets, the graph's inputs, outputs and operators), with prost, no runtime needed;
//! - [`profile`]: per-operator time of the ExecuTorch paths, from a separate
//!   run with ExecuTorch's ETDump tracer (`runlens profile`, F4 in the explorer);
//! - [`layers`]: time per module of every backend, through the export's module sidecar (`runlens layers`);
//! - [`bench`](mod@bench): `runlens bench`'s measurements, Python comparison and outputs;
//! - [`eval`]: `runlens eval`'s quantization error on the model's own weights (top-1, KL, perplexity);
//! - [`footprint`]: what each stack costs (disk, memory, time to the first result), `runlens footprint`;
//! - [`memory`]: what each column will hold and what the process may use, checked before anything loads, `runlens memory`;
//! - [`heat`]: SoC temperature, CPU clock and throttling (status bar, bench rows);
//! - [`corpus_cache`]: the nearest-sentence corpus's embeddings kept between starts;
//! - [`schedule`]: one worker thread per backend, latest input wins;
//! - [`jobs`]: the explorer's other background work (profile, layers, coverage), one job of a kind at a time, newest request wins;
//! - [`app`] (state), [`ui`] (drawing from `&App`), [`tui`] (terminal and event loop): the explorer;
//! - [`timeline`]: Chrome trace-event JSON of what a command timed (`--trace FILE`), plain data;
//! - [`cli`]: the headless subcommands.

pub mod app;
pub mod arch;
pub mod backend;
pub mod bench;
pub mod cli;
pub mod corpus_cache;
pub mod eval;
pub mod ffi;
pub mod footprint;
pub mod gguf;
pub mod heat;
pub mod jobs;
pub mod layers;
pub mod memory;
pub mod model;
pub mod onnx;
pub mod profile;
pub mod pte;
pub mod schedule;
pub mod stats;
pub mod tables;
pub mod task;
pub mod tensor;
pub mod timeline;
pub mod tui;
pub mod ui;
