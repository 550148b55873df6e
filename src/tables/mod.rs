//! Markdown tables rendered from bench and eval JSON (`runlens report`): a
//! figure in the docs is read from the file `runlens bench --json` or `runlens
//! eval --json` wrote, never copied by hand. Its own module, above `bench` and
//! `eval`, which it reads. A table is a marked block in a markdown file ([`markdown`]); its
//! marker is a spec ([`spec`]): the JSON files, which backends and which
//! metrics at which lengths make the rows and columns, their titles, the
//! number format ([`format`]: three significant figures unless told), which
//! cells are bold. [`metric`] reads the figures; [`render`] draws the table.
//! `check_file` compares every block of a file with its rendering,
//! `write_file` rewrites them.

pub mod format;
pub mod markdown;
pub mod metric;
pub mod render;
pub mod spec;

pub use format::Format;
pub use markdown::{blocks, check_file, first_difference, write_file, Block, Checked, Stale, CLOSE, OPEN};
pub use metric::{Bench, Metric, METRICS};
pub use render::render;
pub use spec::{Item, Source, Spec, What};

/// A table that cannot be rendered or a file that cannot be read: where
/// (`file:line`, with the block's JSON, or the command line) and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{at}: {why}")]
pub struct TableError {
    pub at: String,
    pub why: String,
}

#[cfg(test)]
mod tests;
