//! The XNNPACK delegate blob: a 30-byte `XH00` header, then the XNNPACK graph
//! flatbuffer (`XN01`), then constant data. Older blobs are the bare flatbuffer.

use std::collections::BTreeMap;

use planus::ReadAsRoot;

use super::generated::xnnpack::fb_xnnpack::XnnGraphRef;
use super::generated::xnode_names::xnode_name;
use super::header::{show_magic, u16_at, u32_at, u64_at};

/// The backend id ExecuTorch's XNNPACK partitioner writes into `BackendDelegate.id`.
pub const XNNPACK_BACKEND_ID: &str = "XnnpackBackend";

const HEADER_MAGIC: &[u8; 4] = b"XH00";
const HEADER_LEN: usize = 30;
/// Identifiers of the XNNPACK graph schema (`schema.fbs` and the runtime's copy);
/// their `XNodeUnion`s are identical.
const GRAPH_IDENTIFIERS: [&[u8; 4]; 2] = [b"XN01", b"XN00"];

/// The `XH00` header at the start of an XNNPACK blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XnnHeader {
    pub header_length: u16,
    pub flatbuffer_offset: u32,
    pub flatbuffer_size: u32,
    pub constant_data_offset: u32,
    pub constant_data_size: u64,
}

/// What an XNNPACK blob holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct XnnGraphSummary {
    /// Node counts by `XNodeUnion` member name.
    pub nodes: BTreeMap<String, u64>,
    /// Constant data carried inside the blob (0 when weights are in named data).
    pub constant_bytes: u64,
    /// The nodes in graph order.
    pub order: Vec<XnnNode>,
}

/// One node of an XNNPACK graph: its `XNodeUnion` member and the debug handle
/// of the node of the edge program it was made from (`XNode.debug_handle`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XnnNode {
    pub kind: String,
    pub debug_handle: u32,
}

impl XnnHeader {
    /// `Ok(None)` when the blob has no `XH00` header; `Err` when it has a broken one.
    pub fn parse(blob: &[u8]) -> Result<Option<XnnHeader>, String> {
        if blob.get(4..8) != Some(HEADER_MAGIC.as_slice()) {
            return Ok(None);
        }
        let short = || {
            format!(
                "blob of {} bytes is too short for its XH00 header",
                blob.len()
            )
        };
        let header_length = u16_at(blob, 8).ok_or_else(short)?;
        if usize::from(header_length) < HEADER_LEN {
            return Err(format!("XH00 header length {header_length} < {HEADER_LEN}"));
        }
        if blob.len() < usize::from(header_length) {
            return Err(short());
        }
        Ok(Some(XnnHeader {
            header_length,
            flatbuffer_offset: u32_at(blob, 10).ok_or_else(short)?,
            flatbuffer_size: u32_at(blob, 14).ok_or_else(short)?,
            constant_data_offset: u32_at(blob, 18).ok_or_else(short)?,
            constant_data_size: u64_at(blob, 22).ok_or_else(short)?,
        }))
    }
}

/// Decodes an XNNPACK blob; `Err` says why it is opaque.
pub(crate) fn summarize(blob: &[u8]) -> Result<XnnGraphSummary, String> {
    let (graph, constant_bytes) = match XnnHeader::parse(blob)? {
        None => (blob, 0),
        Some(h) => {
            let start = h.flatbuffer_offset as usize;
            let graph = start
                .checked_add(h.flatbuffer_size as usize)
                .and_then(|end| blob.get(start..end))
                .ok_or_else(|| {
                    format!(
                        "XNNPACK graph ({} bytes at {}) runs past the blob ({} bytes)",
                        h.flatbuffer_size,
                        h.flatbuffer_offset,
                        blob.len()
                    )
                })?;
            let in_blob = (blob.len() as u64).saturating_sub(u64::from(h.constant_data_offset));
            (graph, h.constant_data_size.min(in_blob))
        }
    };
    let id = graph
        .get(4..8)
        .ok_or("XNNPACK graph is shorter than 8 bytes")?;
    if !GRAPH_IDENTIFIERS.iter().any(|known| id == known.as_slice()) {
        return Err(format!(
            "XNNPACK graph identifier is {}, expected \"XN01\"",
            show_magic(id)
        ));
    }
    let fail = |e: planus::Error| format!("malformed XNNPACK graph: {e}");
    let root = XnnGraphRef::read_as_root(graph).map_err(fail)?;
    let mut nodes = BTreeMap::new();
    let mut order = Vec::new();
    if let Some(xnodes) = root.xnodes().map_err(fail)? {
        for node in xnodes.iter() {
            let node = node.map_err(fail)?;
            let name = match node.xnode_union() {
                Ok(Some(member)) => xnode_name(&member).to_owned(),
                Ok(None) => "(none)".to_owned(),
                // A newer schema's node type: count it rather than give up.
                Err(planus::Error {
                    error_kind: planus::errors::ErrorKind::UnknownUnionTag { tag },
                    ..
                }) => format!("(unknown tag {tag})"),
                Err(e) => return Err(fail(e)),
            };
            *nodes.entry(name.clone()).or_insert(0) += 1;
            order.push(XnnNode { kind: name, debug_handle: node.debug_handle().map_err(fail)? });
        }
    }
    Ok(XnnGraphSummary {
        nodes,
        constant_bytes,
        order,
    })
}
