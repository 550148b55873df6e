//! Unit tests for the `.pte` reader: synthetic programs built with the
//! generated planus builders, small files written by ExecuTorch itself
//! (`testdata/`, made by `testdata/make_testdata.py`, with the counts its
//! Python deserializer gives), and damaged copies of both.

use planus::{Builder, WriteAsOffset};

use super::generated::program::executorch_flatbuffer as et;
use super::generated::xnnpack::fb_xnnpack as xnn;
use super::*;

mod bad_input;
mod counting;
mod instructions;
mod mutations;
mod sizes;

/// planus 1.3's `Builder::finish` writes the file identifier before the root
/// offset (planus-org/planus#377); put them in flatbuffers' order.
fn finish<T>(b: &mut Builder, root: impl WriteAsOffset<T>, id: &[u8; 4]) -> Vec<u8> {
    let mut out = b.finish(root, Some(*id)).to_vec();
    let root = u32::from_le_bytes(out[4..8].try_into().unwrap()) + 4;
    out[0..4].copy_from_slice(&root.to_le_bytes());
    out[4..8].copy_from_slice(id);
    out
}

fn kernel(op_index: i32) -> et::Instruction {
    et::Instruction {
        instr_args: Some(et::InstructionArguments::KernelCall(Box::new(
            et::KernelCall {
                op_index,
                args: Some(vec![0, 1]),
            },
        ))),
    }
}

fn delegate_call(delegate_index: i32) -> et::Instruction {
    et::Instruction {
        instr_args: Some(et::InstructionArguments::DelegateCall(Box::new(
            et::DelegateCall {
                delegate_index,
                args: Some(vec![0, 1]),
            },
        ))),
    }
}

fn free_call() -> et::Instruction {
    et::Instruction {
        instr_args: Some(et::InstructionArguments::FreeCall(Box::new(et::FreeCall {
            value_index: 0,
        }))),
    }
}

fn operator(name: &str, overload: &str) -> et::Operator {
    et::Operator {
        name: Some(name.into()),
        overload: Some(overload.into()),
    }
}

fn delegate(id: &str, location: et::DataLocation, index: u32) -> et::BackendDelegate {
    et::BackendDelegate {
        id: Some(id.into()),
        processed: Some(Box::new(et::BackendDelegateDataReference {
            location,
            index,
        })),
        compile_specs: None,
    }
}

fn plan(
    name: &str,
    instructions: Vec<et::Instruction>,
    operators: Vec<et::Operator>,
    delegates: Vec<et::BackendDelegate>,
) -> et::ExecutionPlan {
    et::ExecutionPlan {
        name: Some(name.into()),
        inputs: Some(vec![0, 1]),
        outputs: Some(vec![2]),
        chains: Some(vec![et::Chain {
            instructions: Some(instructions),
            ..Default::default()
        }]),
        operators: Some(operators),
        delegates: Some(delegates),
        ..Default::default()
    }
}

fn node(member: xnn::XNodeUnion) -> xnn::XNode {
    xnn::XNode {
        xnode_union: Some(member),
        debug_handle: 0,
        output_min_max: None,
    }
}

fn add() -> xnn::XNodeUnion {
    xnn::XNodeUnion::XnnAdd(Box::default())
}

fn fully_connected() -> xnn::XNodeUnion {
    xnn::XNodeUnion::XnnFullyConnected(Box::default())
}

fn xnn_graph(nodes: Vec<xnn::XNode>) -> Vec<u8> {
    let graph = xnn::XnnGraph {
        version: Some("0".into()),
        xnodes: Some(nodes),
        ..Default::default()
    };
    finish(&mut Builder::new(), &graph, b"XN01")
}

/// An XNNPACK blob: the 30-byte `XH00` header, the graph, then `constants`.
fn xnn_blob(graph: &[u8], constants: &[u8]) -> Vec<u8> {
    let fb_offset = 32u32;
    let const_offset = fb_offset + graph.len() as u32;
    let mut out = vec![0u8; 4];
    out.extend_from_slice(b"XH00");
    out.extend_from_slice(&30u16.to_le_bytes());
    out.extend_from_slice(&fb_offset.to_le_bytes());
    out.extend_from_slice(&(graph.len() as u32).to_le_bytes());
    out.extend_from_slice(&const_offset.to_le_bytes());
    out.extend_from_slice(&(constants.len() as u64).to_le_bytes());
    out.resize(fb_offset as usize, 0);
    out.extend_from_slice(graph);
    out.extend_from_slice(constants);
    out
}

fn align16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

/// Lays out a `.pte` the way ExecuTorch does: the program flatbuffer with an
/// `eh00` header spliced in at byte 8, then the 16-aligned segments. With no
/// segments the bare flatbuffer is returned. Keeps `program.segments` if set.
fn pte(mut program: et::Program, segments: &[Vec<u8>]) -> Vec<u8> {
    if segments.is_empty() {
        return finish(&mut Builder::new(), &program, b"ET12");
    }
    let mut offsets = Vec::new();
    let mut at = 0usize;
    for s in segments {
        offsets.push(et::DataSegment {
            offset: at as u64,
            size: s.len() as u64,
        });
        at = align16(at + s.len());
    }
    // A test may have put (wrong) segment entries in already.
    program.segments.get_or_insert(offsets);
    let fb = finish(&mut Builder::new(), &program, b"ET12");
    let root = u32::from_le_bytes(fb[0..4].try_into().unwrap());
    let program_size = fb.len() + 32;
    let base = align16(program_size);
    let data_size = at - (align16(segments.last().unwrap().len()) - segments.last().unwrap().len());
    let mut out = Vec::new();
    out.extend_from_slice(&(root + 32).to_le_bytes());
    out.extend_from_slice(b"ET12");
    out.extend_from_slice(b"eh00");
    out.extend_from_slice(&32u32.to_le_bytes());
    out.extend_from_slice(&(program_size as u64).to_le_bytes());
    out.extend_from_slice(&(base as u64).to_le_bytes());
    out.extend_from_slice(&(data_size as u64).to_le_bytes());
    out.extend_from_slice(&fb[8..]);
    for (s, o) in segments.iter().zip(0..) {
        let start = base + offsets_at(segments, o);
        out.resize(start, 0);
        out.extend_from_slice(s);
    }
    out
}

fn offsets_at(segments: &[Vec<u8>], i: usize) -> usize {
    segments[..i].iter().fold(0, |at, s| align16(at + s.len()))
}

/// Two methods with everything the reader handles:
/// - `forward`: 3 kernel calls, 3 delegate calls (XNNPACK in a segment, XNNPACK
///   inline, another backend inline), a free call, a broken XNNPACK blob;
/// - `aux`: no delegates, an operator without overload.
///
/// Segments: 0 constants (constant_segment), 1 XNNPACK blob, 2 named data.
fn full_program() -> (et::Program, Vec<Vec<u8>>) {
    let xnn_in_segment = xnn_blob(
        &xnn_graph(vec![node(add()), node(fully_connected()), node(add())]),
        &[7; 40],
    );
    let xnn_inline = xnn_blob(&xnn_graph(vec![node(fully_connected())]), &[]);
    let broken = b"\0\0\0\0XH00\x1e\0\xff\xff\0\0\x10\0\0\0".to_vec();
    let forward = plan(
        "forward",
        vec![
            kernel(0),
            delegate_call(0),
            kernel(1),
            delegate_call(1),
            delegate_call(2),
            kernel(0),
            free_call(),
        ],
        vec![
            operator("aten::native_layer_norm", "out"),
            operator("aten::embedding", "out"),
        ],
        vec![
            delegate(XNNPACK_BACKEND_ID, et::DataLocation::Segment, 1),
            delegate(XNNPACK_BACKEND_ID, et::DataLocation::Inline, 0),
            delegate("FooBackend", et::DataLocation::Inline, 1),
            delegate(XNNPACK_BACKEND_ID, et::DataLocation::Inline, 2),
        ],
    );
    let aux = plan(
        "aux",
        vec![kernel(0), kernel(0)],
        vec![operator("aten::sym_size", "")],
        vec![],
    );
    let program = et::Program {
        version: 0,
        execution_plan: Some(vec![forward, aux]),
        constant_buffer: Some(vec![et::Buffer {
            storage: Some(vec![1; 24]),
        }]),
        backend_delegate_data: Some(vec![
            et::BackendDelegateInlineData {
                data: Some(xnn_inline),
            },
            et::BackendDelegateInlineData {
                data: Some(vec![9; 100]),
            },
            et::BackendDelegateInlineData { data: Some(broken) },
        ]),
        constant_segment: Some(Box::new(et::SubsegmentOffsets {
            segment_index: 0,
            offsets: Some(vec![0, 16]),
        })),
        named_data: Some(vec![et::NamedData {
            key: Some("w".into()),
            segment_index: 2,
        }]),
        ..Default::default()
    };
    let segments = vec![vec![3; 48], xnn_in_segment, vec![5; 200]];
    (program, segments)
}

fn full_file() -> Vec<u8> {
    let (program, segments) = full_program();
    pte(program, &segments)
}

fn read(bytes: &[u8]) -> Result<CoverageReport, PteError> {
    inspect_bytes("test.pte", bytes)
}

fn testdata(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/pte/testdata")
        .join(name);
    let path = if path.exists() {
        path
    } else {
        // Compiled from outside the crate (a scratch crate using #[path]).
        std::path::Path::new(file!())
            .parent()
            .unwrap()
            .join("../testdata")
            .join(name)
    };
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const TESTDATA: [&str; 5] = [
    "multi_xnnpack",
    "multi_portable",
    "flat_xnnpack",
    "flat_portable",
    "foo_backend",
];
