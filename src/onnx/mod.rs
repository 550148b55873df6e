//! A reader for ONNX files: the model's header (IR version, opsets, producer)
//! and its graph's inputs, outputs, operators and initializers, read in pure
//! Rust before ONNX Runtime sees the file.
//!
//! An ONNX file is one protobuf message, onnx.proto's `ModelProto`. runlens
//! declares the subset of the schema it reads as `#[derive(prost::Message)]`
//! structs ([`proto`], field numbers from onnx.proto) and lets `prost` decode
//! them: no `protoc`, no generated code, no parser of runlens' own. Fields it
//! does not declare, above all each initializer's `raw_data` (the weights), are
//! skipped where they lie: the file is read into memory once and nothing of it
//! is copied but names and shapes. Why prost and not `onnx-protobuf` /
//! `protobuf` (rust-protobuf) with the whole generated schema: those decode
//! every weight into an owned buffer (a second copy of a 90 MB file), and
//! runlens needs a dozen fields.
//!
//! [`read_path`] refuses what is not a `ModelProto` (any bytes prost cannot
//! decode as one) and what decodes but is not a model: no IR version, no
//! graph, no opset of the standard domain, a graph without outputs. Bytes of
//! any kind give an [`OnnxModel`] or an [`OnnxError`] naming the file, never a panic.

mod proto;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use prost::Message;
use serde::Serialize;

/// protobuf's limit on one message: a larger model keeps its weights in external data files.
pub const MAX_FILE_BYTES: u64 = 2 << 30;

/// What runlens read of an ONNX file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OnnxModel {
    /// The file read, set by [`read_path`].
    pub path: Option<PathBuf>,
    pub ir_version: i64,
    /// The operator sets imported: (domain, version); the standard one's domain is `ai.onnx`.
    pub opsets: Vec<(String, i64)>,
    /// `producer_name` and `producer_version` ("pytorch 2.9.0"), empty when not said.
    pub producer: String,
    /// The graph's inputs a caller feeds (those that are not also initializers), in file order.
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
    /// Nodes by operator (`Gather`, or `com.microsoft:Attention` outside the standard domain),
    /// most first; the nodes of subgraphs (an `If`'s branches) counted with the graph's.
    pub operators: Vec<(String, usize)>,
    /// Every node, those of subgraphs included.
    pub nodes: usize,
    /// Of those, the nodes inside subgraphs (each branch of an `If` counted, though a run takes one).
    pub subgraph_nodes: usize,
    pub initializers: usize,
    /// The rows of each 2-D initializer a `Gather` node reads with a graph input's
    /// values as indices: (input, rows), e.g. the vocabulary `input_ids` index.
    pub gathered_rows: Vec<(String, i64)>,
    /// The bytes of every initializer (the weights), by their dims and element types.
    pub weight_bytes: u64,
    /// Of those, what one run over one token reads: all but the tables only ever
    /// gathered from with a graph input's values (an embedding table, one row
    /// read; a table the output's product also reads, a tied head, is counted).
    pub weight_bytes_per_token: u64,
}

/// A graph input or output: its name, element type and shape as the file says them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ValueInfo {
    pub name: String,
    /// `None`: not a tensor (a sequence, a map) or no type given.
    pub elem_type: Option<ElemType>,
    /// `None`: no shape given (any rank).
    pub shape: Option<Vec<Dim>>,
}

/// One dimension of a declared shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Dim {
    Size(i64),
    /// A symbol ("batch", "sequence"): any size, the same wherever the symbol is.
    Named(String),
    Unknown,
}

/// `TensorProto.DataType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub struct ElemType(pub i32);

impl ElemType {
    pub const FLOAT32: ElemType = ElemType(1);
    pub const INT64: ElemType = ElemType(7);
    pub const BOOL: ElemType = ElemType(9);
    pub const FLOAT16: ElemType = ElemType(10);

    /// Bits of one element (`None`: not a fixed-size number: string, an unknown type).
    pub fn bits(self) -> Option<u64> {
        Some(match self.0 {
            2 | 3 | 9 => 8,
            4 | 5 | 10 | 16 => 16,
            1 | 6 | 12 => 32,
            7 | 11 | 13 | 14 => 64,
            15 => 128,
            17..=20 => 8,
            21 | 22 => 4,
            _ => return None,
        })
    }

    pub fn name(self) -> String {
        const NAMES: [&str; 17] = [
            "undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool", "float16", "float64", "uint32",
            "uint64", "complex64", "complex128", "bfloat16",
        ];
        usize::try_from(self.0).ok().and_then(|i| NAMES.get(i)).map_or_else(|| format!("element type {}", self.0), |n| n.to_string())
    }
}

impl From<ElemType> for String {
    fn from(t: ElemType) -> String {
        t.name()
    }
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Size(n) => write!(f, "{n}"),
            Dim::Named(s) => write!(f, "{s}"),
            Dim::Unknown => write!(f, "?"),
        }
    }
}

impl std::fmt::Display for ValueInfo {
    /// `input_ids int64 [batch, sequence]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.elem_type.map_or("(not a tensor)".to_string(), ElemType::name))?;
        if let Some(shape) = &self.shape {
            write!(f, " [{}]", shape.iter().map(Dim::to_string).collect::<Vec<_>>().join(", "))?;
        }
        Ok(())
    }
}

/// A file runlens refuses, named.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("{file}: cannot read: {error}")]
    Read { file: String, error: std::io::Error },
    #[error("{file}: {bytes} bytes, over protobuf's 2 GiB: a model this large keeps its weights in external data, which runlens does not read")]
    TooLarge { file: String, bytes: u64 },
    #[error("{file}: not an ONNX model: {reason}")]
    NotAModel { file: String, reason: String },
}

/// Read and check the ONNX file at `path` (read whole, once).
pub fn read_path(path: &Path) -> Result<OnnxModel, OnnxError> {
    let file = path.display().to_string();
    let bytes = std::fs::metadata(path).map_err(|error| OnnxError::Read { file: file.clone(), error })?.len();
    if bytes > MAX_FILE_BYTES {
        return Err(OnnxError::TooLarge { file, bytes });
    }
    let data = std::fs::read(path).map_err(|error| OnnxError::Read { file: file.clone(), error })?;
    let mut model = read_bytes(&data).map_err(|reason| OnnxError::NotAModel { file, reason })?;
    model.path = Some(path.to_path_buf());
    Ok(model)
}

/// Read and check an ONNX file held in memory; the reason when it is not a model.
pub fn read_bytes(data: &[u8]) -> Result<OnnxModel, String> {
    if data.is_empty() {
        return Err("the file is empty".into());
    }
    let m = proto::ModelProto::decode(data).map_err(|e| format!("not a protobuf ModelProto ({})", e.to_string().trim_start_matches("failed to decode Protobuf message: ")))?;
    let ir_version = m.ir_version.filter(|&v| v > 0).ok_or("no ir_version (every ModelProto says one)")?;
    let opsets: Vec<(String, i64)> = m
        .opset_import
        .iter()
        .map(|o| (o.domain.clone().filter(|d| !d.is_empty()).unwrap_or_else(|| "ai.onnx".into()), o.version.unwrap_or(0)))
        .collect();
    if !opsets.iter().any(|(d, v)| d == "ai.onnx" && *v > 0) {
        return Err(format!("imports no version of the standard operator set ai.onnx (its opsets: {})", show_opsets(&opsets)));
    }
    let graph = m.graph.ok_or("no graph")?;
    if graph.output.is_empty() {
        return Err("its graph has no outputs".into());
    }
    let initializer_names: std::collections::HashSet<&str> = graph.initializer.iter().filter_map(|t| t.name.as_deref()).collect();
    let inputs = graph.input.iter().filter(|v| !initializer_names.contains(v.name.as_deref().unwrap_or(""))).map(value_info).collect();
    let graph_inputs: Vec<&str> = graph.input.iter().filter_map(|v| v.name.as_deref()).collect();
    // Every node, those of subgraphs included (Optimum's merged decoder is one `If` whose
    // branches gather from the outer graph's tables): the operators, and what reads each initializer.
    let (mut nodes, mut initializers) = (Vec::new(), Vec::new());
    walk(&graph, &mut nodes, &mut initializers);
    let mut by_op: BTreeMap<String, usize> = BTreeMap::new();
    for n in &nodes {
        let op = n.op_type.as_deref().unwrap_or("?");
        let key = match n.domain.as_deref() {
            None | Some("") | Some("ai.onnx") => op.to_string(),
            Some(d) => format!("{d}:{op}"),
        };
        *by_op.entry(key).or_default() += 1;
    }
    let mut operators: Vec<(String, usize)> = by_op.into_iter().collect();
    operators.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut gathered_rows = Vec::new();
    for n in nodes.iter().copied().filter(|n| n.op_type.as_deref() == Some("Gather") && n.domain.as_deref().unwrap_or("").is_empty()) {
        let (Some(table), Some(index)) = (n.input.first(), n.input.get(1)) else { continue };
        if !graph_inputs.contains(&index.as_str()) || gathered_rows.iter().any(|(i, _)| i == index) {
            continue;
        }
        if let Some(t) = initializers.iter().find(|t| t.name.as_deref() == Some(table.as_str())).filter(|t| t.dims.len() == 2) {
            gathered_rows.push((index.clone(), t.dims[0]));
        }
    }
    // An initializer's uses: only as the table of a Gather indexed by a graph input?
    let gathered_only = |name: &str| {
        let mut uses = nodes.iter().flat_map(|n| n.input.iter().enumerate().map(move |(i, input)| (*n, i, input))).filter(|(_, _, input)| input.as_str() == name);
        let mut any = false;
        let only = uses.all(|(n, i, _)| {
            any = true;
            i == 0 && n.op_type.as_deref() == Some("Gather") && n.input.get(1).is_some_and(|index| graph_inputs.contains(&index.as_str()))
        });
        any && only
    };
    let bytes = |t: &proto::TensorProto| {
        let n: i64 = t.dims.iter().product();
        (n.max(0) as u64 * t.data_type.map(ElemType).and_then(ElemType::bits).unwrap_or(0)).div_ceil(8)
    };
    let weight_bytes: u64 = initializers.iter().copied().map(bytes).sum();
    let gathered: u64 = initializers.iter().copied().filter(|t| gathered_only(t.name.as_deref().unwrap_or(""))).map(bytes).sum();
    let producer = [m.producer_name.unwrap_or_default(), m.producer_version.unwrap_or_default()].join(" ").trim().to_string();
    Ok(OnnxModel {
        path: None,
        ir_version,
        opsets,
        producer,
        inputs,
        outputs: graph.output.iter().map(value_info).collect(),
        operators,
        nodes: nodes.len(),
        subgraph_nodes: nodes.len() - graph.node.len(),
        initializers: graph.initializer.len(),
        gathered_rows,
        weight_bytes,
        weight_bytes_per_token: weight_bytes - gathered,
    })
}

/// The nodes and initializers of `graph` and of every subgraph its nodes hold.
fn walk<'g>(graph: &'g proto::GraphProto, nodes: &mut Vec<&'g proto::NodeProto>, initializers: &mut Vec<&'g proto::TensorProto>) {
    initializers.extend(&graph.initializer);
    for n in &graph.node {
        nodes.push(n);
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                walk(sub, nodes, initializers);
            }
        }
    }
}

fn value_info(v: &proto::ValueInfoProto) -> ValueInfo {
    let tensor = v.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
    ValueInfo {
        name: v.name.clone().unwrap_or_default(),
        elem_type: tensor.and_then(|t| t.elem_type).map(ElemType),
        shape: tensor.and_then(|t| t.shape.as_ref()).map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(proto::DimensionValue::DimValue(n)) => Dim::Size(*n),
                    Some(proto::DimensionValue::DimParam(p)) => Dim::Named(p.clone()),
                    None => Dim::Unknown,
                })
                .collect()
        }),
    }
}

fn show_opsets(opsets: &[(String, i64)]) -> String {
    if opsets.is_empty() {
        return "none".into();
    }
    opsets.iter().map(|(d, v)| format!("{d} {v}")).collect::<Vec<_>>().join(", ")
}

impl OnnxModel {
    /// The standard operator set's version (`ai.onnx`).
    pub fn opset(&self) -> i64 {
        self.opsets.iter().filter(|(d, _)| d == "ai.onnx").map(|(_, v)| *v).max().unwrap_or(0)
    }

    /// The inputs, one per line's worth: `input_ids int64 [batch, sequence], ...`.
    pub fn describe_inputs(&self) -> String {
        list(&self.inputs)
    }

    pub fn describe_outputs(&self) -> String {
        list(&self.outputs)
    }

    /// The rows of the table `input` indexes (a vocabulary), when a `Gather` says it.
    pub fn rows_gathered_by(&self, input: &str) -> Option<i64> {
        self.gathered_rows.iter().find(|(i, _)| i == input).map(|(_, r)| *r)
    }
}

fn list(values: &[ValueInfo]) -> String {
    if values.is_empty() {
        return "none".into();
    }
    values.iter().map(ValueInfo::to_string).collect::<Vec<_>>().join(", ")
}

/// Graphs built in tests of the column's checks (backend/onnxruntime/): only the
/// inputs and outputs, the rest empty.
#[cfg(test)]
impl OnnxModel {
    pub fn with_io(inputs: Vec<ValueInfo>, outputs: Vec<ValueInfo>) -> OnnxModel {
        OnnxModel {
            path: None,
            ir_version: 8,
            opsets: vec![("ai.onnx".into(), 17)],
            producer: String::new(),
            inputs,
            outputs,
            operators: vec![],
            nodes: 0,
            subgraph_nodes: 0,
            initializers: 0,
            gathered_rows: vec![],
            weight_bytes: 0,
            weight_bytes_per_token: 0,
        }
    }
}

#[cfg(test)]
impl ValueInfo {
    /// `elem`: ONNX's element type number (1 float, 7 int64).
    pub fn new(name: &str, elem: i32, shape: Option<Vec<Dim>>) -> ValueInfo {
        ValueInfo { name: name.into(), elem_type: Some(ElemType(elem)), shape }
    }
}

#[cfg(test)]
mod tests;
