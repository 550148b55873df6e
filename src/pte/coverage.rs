//! What `runlens inspect` reports, and its table.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::partition::PartitionMap;

/// Delegation coverage of one `.pte` file. Serializes to exactly the JSON of
/// `runlens inspect --json`; the fields marked `serde(skip)` are extras for
/// the table and the TUI.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageReport {
    pub file: String,
    /// Length of the whole file.
    pub size_bytes: u64,
    /// The program flatbuffer with its headers (the whole file when it has no
    /// extended header); includes any inline constants and delegate data.
    pub program_bytes: u64,
    /// Entries of `Program.segments`.
    pub segment_count: u64,
    /// Tensor data, wherever it is: inline constant buffers, the constant
    /// segment, mutable-data segments and named-data segments (where XNNPACK
    /// keeps its weights). A segment that is also a delegate blob counts there.
    pub constant_bytes: u64,
    /// Delegate blobs (`BackendDelegate.processed`), inline or in segments,
    /// each distinct blob once.
    pub delegate_blob_bytes: u64,
    pub plans: Vec<PlanCoverage>,
    /// The part of `constant_bytes` inside the program flatbuffer.
    #[serde(skip)]
    pub inline_constant_bytes: u64,
    /// The part of `delegate_blob_bytes` inside the program flatbuffer.
    #[serde(skip)]
    pub inline_delegate_bytes: u64,
    /// The part of `constant_bytes` in mutable-data segments: the initial
    /// values of state the program keeps (a KV cache), not weights.
    #[serde(skip)]
    pub mutable_data_bytes: u64,
}

impl CoverageReport {
    /// The bytes of weights one decode step of method `plan` reads: the stored
    /// constants (the program's and those inside XNNPACK blobs), less the
    /// mutable data (the KV cache's initial values) and the tables only an
    /// embedding kernel reads (one row of each is gathered; that row is not counted).
    pub fn weight_bytes_per_token(&self, plan: &super::PlanInstructions) -> u64 {
        let in_blobs: u64 = self
            .plans
            .iter()
            .filter(|p| p.name == plan.name)
            .flat_map(|p| &p.blobs)
            .map(|b| match b.contents {
                BlobContents::Xnnpack { constant_bytes, .. } => constant_bytes,
                BlobContents::Opaque { .. } => 0,
            })
            .sum();
        (self.constant_bytes + in_blobs).saturating_sub(self.mutable_data_bytes + plan.gathered_table_bytes)
    }
}

/// One execution plan (a method such as `forward`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanCoverage {
    pub name: String,
    pub inputs: u64,
    pub outputs: u64,
    /// Instructions in all chains, of every kind.
    pub instructions: u64,
    /// `KernelCall` instructions: operators left on the default CPU kernels.
    pub kernel_calls: u64,
    /// `DelegateCall` instructions.
    pub delegate_calls: u64,
    /// `KernelCall` instructions by operator, `name[.overload]`.
    pub operators: BTreeMap<String, u64>,
    /// `DelegateCall` instructions by backend id.
    pub delegates: BTreeMap<String, u64>,
    /// Nodes in all XNNPACK blobs of this plan, by `XNodeUnion` member.
    pub xnnpack_nodes: BTreeMap<String, u64>,
    /// xnnpack nodes / (xnnpack nodes + kernel calls); 0 when both are 0.
    pub coverage: f64,
    /// The tensor inputs' sizes as stored (upper bounds where dynamic); in the
    /// table, not in the JSON (whose fields are checked against Python's counts).
    #[serde(skip)]
    pub input_shapes: Vec<InputShape>,
    /// The shape of each tensor output, as stored (dynamic dimensions at their
    /// bound); like the inputs, in the table, not in the JSON.
    #[serde(skip)]
    pub output_shapes: Vec<InputShape>,
    /// Each entry of the plan's `delegates` table and what its blob holds.
    #[serde(skip)]
    pub blobs: Vec<DelegateBlob>,
    /// The instructions in order as runs of kernel calls and delegate calls.
    pub partition: PartitionMap,
}

/// One tensor input (or output) of a plan: its sizes, whether they may vary
/// at run time, and its element type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputShape {
    /// The stored sizes; for a dynamic input, the largest it accepts.
    pub sizes: Vec<i64>,
    /// `false` when the program was exported for exactly these sizes
    /// (`TensorShapeDynamism::STATIC`).
    pub dynamic: bool,
    /// ExecuTorch's scalar type, lower case: `long`, `float`, ...
    pub dtype: String,
}

/// The data of one `BackendDelegate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegateBlob {
    pub backend: String,
    pub location: BlobLocation,
    pub bytes: u64,
    pub contents: BlobContents,
    /// An XNNPACK graph's nodes in order (empty for an opaque blob).
    pub xnodes: Vec<super::xnnpack::XnnNode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobLocation {
    /// In `Program.backend_delegate_data` (inside the flatbuffer).
    Inline,
    /// In a segment after the flatbuffer.
    Segment,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobContents {
    /// An XNNPACK graph with this many nodes and constant bytes of its own.
    Xnnpack { nodes: u64, constant_bytes: u64 },
    /// Not decoded: another backend, or a blob that did not parse.
    Opaque { reason: String },
}

/// Sorts a count map by count (largest first), then by name.
fn by_count(map: &BTreeMap<String, u64>) -> Vec<(&str, u64)> {
    let mut v: Vec<(&str, u64)> = map.iter().map(|(k, n)| (k.as_str(), *n)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v
}

pub(crate) fn coverage_of(xnnpack_nodes: u64, kernel_calls: u64) -> f64 {
    let total = xnnpack_nodes + kernel_calls;
    if total == 0 {
        0.0
    } else {
        xnnpack_nodes as f64 / total as f64
    }
}

impl PlanCoverage {
    /// A plan with nothing in it, for unit tests to fill in.
    #[cfg(test)]
    pub fn empty(name: &str) -> PlanCoverage {
        PlanCoverage {
            name: name.into(),
            inputs: 0,
            outputs: 0,
            instructions: 0,
            kernel_calls: 0,
            delegate_calls: 0,
            operators: BTreeMap::new(),
            delegates: BTreeMap::new(),
            xnnpack_nodes: BTreeMap::new(),
            coverage: 0.0,
            input_shapes: Vec::new(),
            output_shapes: Vec::new(),
            blobs: Vec::new(),
            partition: PartitionMap::default(),
        }
    }

    /// The sequence length a program was exported for, when its first input
    /// (`input_ids`, `[1, seq]`) has a fixed shape: the caller must pad to it.
    pub fn fixed_seq_len(&self) -> Option<usize> {
        let first = self.input_shapes.first().filter(|s| !s.dynamic)?;
        usize::try_from(*first.sizes.last()?).ok()
    }

    /// Operators left on the default kernels, most called first.
    pub fn operators_by_count(&self) -> Vec<(&str, u64)> {
        by_count(&self.operators)
    }

    /// XNNPACK node types, most frequent first.
    pub fn xnnpack_nodes_by_count(&self) -> Vec<(&str, u64)> {
        by_count(&self.xnnpack_nodes)
    }

    /// All nodes inside this plan's XNNPACK blobs.
    pub fn xnnpack_node_total(&self) -> u64 {
        self.xnnpack_nodes.values().sum()
    }
}

impl CoverageReport {
    /// The plan called `name` (usually `forward`).
    pub fn plan(&self, name: &str) -> Option<&PlanCoverage> {
        self.plans.iter().find(|p| p.name == name)
    }

    /// Bytes that are neither program, constants in segments nor delegate
    /// blobs in segments: padding between segments, mostly.
    pub fn other_bytes(&self) -> u64 {
        let in_segments = (self
            .constant_bytes
            .saturating_sub(self.inline_constant_bytes))
        .saturating_add(
            self.delegate_blob_bytes
                .saturating_sub(self.inline_delegate_bytes),
        );
        self.size_bytes
            .saturating_sub(self.program_bytes)
            .saturating_sub(in_segments)
    }
}

/// `59.0 KiB`-style sizes (the JSON has exact bytes).
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

fn write_counts(f: &mut fmt::Formatter<'_>, title: &str, rows: &[(&str, u64)]) -> fmt::Result {
    if rows.is_empty() {
        return writeln!(f, "  {title}: none");
    }
    writeln!(f, "  {title}:")?;
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, n) in rows {
        writeln!(f, "    {name:<width$}  {n:>5}")?;
    }
    Ok(())
}

impl fmt::Display for CoverageReport {
    /// The human table of `runlens inspect`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.size_bytes;
        writeln!(
            f,
            "{}: {} ({total} bytes), {} segments",
            self.file,
            size(total),
            self.segment_count
        )?;
        let seg_const = self
            .constant_bytes
            .saturating_sub(self.inline_constant_bytes);
        let seg_blobs = self
            .delegate_blob_bytes
            .saturating_sub(self.inline_delegate_bytes);
        let program_note = if self.inline_constant_bytes + self.inline_delegate_bytes == 0 {
            "flatbuffer".to_owned()
        } else {
            format!(
                "flatbuffer, holding {} of constants and {} of delegate blobs",
                size(self.inline_constant_bytes),
                size(self.inline_delegate_bytes)
            )
        };
        let rows = [
            ("program", self.program_bytes, program_note.as_str()),
            ("constants", seg_const, "in segments"),
            ("delegate blobs", seg_blobs, "in segments"),
            ("padding", self.other_bytes(), ""),
        ];
        for (label, bytes, note) in rows {
            let line = format!(
                "  {label:<15}{:>10} {:>6}  {note}",
                size(bytes),
                percent(bytes, total)
            );
            writeln!(f, "{}", line.trim_end())?;
        }
        for plan in &self.plans {
            let nodes = plan.xnnpack_node_total();
            writeln!(f)?;
            writeln!(
                f,
                "method {:?}: {} inputs, {} outputs, {} instructions",
                plan.name, plan.inputs, plan.outputs, plan.instructions
            )?;
            for (i, shape) in plan.input_shapes.iter().enumerate() {
                let dims: Vec<String> = shape.sizes.iter().map(i64::to_string).collect();
                let how = if shape.dynamic { "dynamic, at most" } else { "static, exactly" };
                writeln!(f, "  input {i}        {} {how} [{}]", shape.dtype, dims.join(", "))?;
            }
            for (i, shape) in plan.output_shapes.iter().enumerate() {
                let dims: Vec<String> = shape.sizes.iter().map(i64::to_string).collect();
                let how = if shape.dynamic { "dynamic, at most" } else { "static, exactly" };
                writeln!(f, "  output {i}       {} {how} [{}]", shape.dtype, dims.join(", "))?;
            }
            writeln!(
                f,
                "  kernel calls   {:>6}  operators on the default CPU kernels",
                plan.kernel_calls
            )?;
            writeln!(f, "  delegate calls {:>6}", plan.delegate_calls)?;
            writeln!(f, "  XNNPACK nodes  {nodes:>6}  inside the delegate blobs")?;
            writeln!(
                f,
                "  coverage       {:>5.1}%  XNNPACK nodes / (XNNPACK nodes + kernel calls)",
                100.0 * plan.coverage
            )?;
            write_counts(
                f,
                "operators left on the default kernels",
                &plan.operators_by_count(),
            )?;
            write_counts(f, "delegate calls by backend", &by_count(&plan.delegates))?;
            write_counts(f, "XNNPACK node types", &plan.xnnpack_nodes_by_count())?;
            write!(f, "{}", plan.partition)?;
            for blob in &plan.blobs {
                if let BlobContents::Opaque { reason } = &blob.contents {
                    writeln!(
                        f,
                        "  opaque {} blob, {}: {reason}",
                        blob.backend,
                        size(blob.bytes)
                    )?;
                }
            }
        }
        Ok(())
    }
}
