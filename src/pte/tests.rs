//! Unit tests for the `.pte` reader: synthetic programs built with the
//! generated planus builders, small files written by ExecuTorch itself
//! (`testdata/`, made by `testdata/make_testdata.py`, with the counts its
//! Python deserializer gives), and damaged copies of both.

use planus::{Builder, WriteAsOffset};

use super::generated::program::executorch_flatbuffer as et;
use super::generated::xnnpack::fb_xnnpack as xnn;
use super::*;

// ---------------------------------------------------------------- builders

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

// ---------------------------------------------------------------- counting

#[test]
fn counts_a_program_with_every_kind_of_delegate() {
    let (program, segments) = full_program();
    let xnn_segment_len = segments[1].len() as u64;
    let bytes = pte(program, &segments);
    let r = read(&bytes).unwrap();

    assert_eq!(r.size_bytes, bytes.len() as u64);
    assert_eq!(r.segment_count, 3);
    assert!(r.program_bytes > 40 && r.program_bytes < r.size_bytes);
    // inline buffer 24 + constant segment 48 + named data 200
    assert_eq!(r.constant_bytes, 24 + 48 + 200);
    assert_eq!(r.inline_constant_bytes, 24);
    let inline_blobs: u64 = r.plans[0]
        .blobs
        .iter()
        .filter(|b| b.location == BlobLocation::Inline)
        .map(|b| b.bytes)
        .sum();
    assert_eq!(r.delegate_blob_bytes, xnn_segment_len + inline_blobs);
    assert_eq!(r.inline_delegate_bytes, inline_blobs);

    let f = r.plan("forward").unwrap();
    assert_eq!((f.inputs, f.outputs), (2, 1));
    assert_eq!(
        (f.instructions, f.kernel_calls, f.delegate_calls),
        (7, 3, 3)
    );
    assert_eq!(
        f.operators_by_count(),
        vec![
            ("aten::native_layer_norm.out", 2),
            ("aten::embedding.out", 1)
        ]
    );
    assert_eq!(f.delegates.get(XNNPACK_BACKEND_ID), Some(&2));
    assert_eq!(f.delegates.get("FooBackend"), Some(&1));
    assert_eq!(
        f.xnnpack_nodes_by_count(),
        vec![("XNNAdd", 2), ("XNNFullyConnected", 2)]
    );
    assert_eq!(f.coverage, 4.0 / 7.0);
    assert_eq!(f.blobs.len(), 4);
    assert_eq!(
        f.blobs[0].contents,
        BlobContents::Xnnpack {
            nodes: 3,
            constant_bytes: 40
        }
    );
    assert!(
        matches!(&f.blobs[2].contents, BlobContents::Opaque { reason } if reason.contains("FooBackend"))
    );
    assert!(
        matches!(&f.blobs[3].contents, BlobContents::Opaque { reason } if reason.contains("XH00"))
    );

    let a = r.plan("aux").unwrap();
    assert_eq!(
        (a.instructions, a.kernel_calls, a.delegate_calls),
        (2, 2, 0)
    );
    assert_eq!(a.operators_by_count(), vec![("aten::sym_size", 2)]);
    assert!(a.delegates.is_empty() && a.xnnpack_nodes.is_empty());
    assert_eq!(a.coverage, 0.0);
}

#[test]
fn json_has_exactly_the_documented_fields() {
    let r = read(&full_file()).unwrap();
    let v = serde_json::to_value(&r).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        keys(&v),
        [
            "constant_bytes",
            "delegate_blob_bytes",
            "file",
            "plans",
            "program_bytes",
            "segment_count",
            "size_bytes"
        ]
    );
    assert_eq!(
        keys(&v["plans"][0]),
        [
            "coverage",
            "delegate_calls",
            "delegates",
            "inputs",
            "instructions",
            "kernel_calls",
            "name",
            "operators",
            "outputs",
            "xnnpack_nodes"
        ]
    );
    assert_eq!(v["plans"][0]["operators"]["aten::embedding.out"], 1);
}

#[test]
fn table_names_what_the_issue_asks_for() {
    let text = read(&full_file()).unwrap().to_string();
    for needle in [
        "test.pte",
        "program",
        "constants",
        "delegate blobs",
        "method \"forward\": 2 inputs, 1 outputs, 7 instructions",
        "kernel calls        3",
        "delegate calls      3",
        "XNNPACK nodes       4",
        "coverage        57.1%",
        "aten::native_layer_norm.out      2",
        "XnnpackBackend      2",
        "XNNFullyConnected      2",
        "opaque FooBackend blob, 100 B",
        "method \"aux\"",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}

#[test]
fn program_without_plans_or_delegates_is_empty_not_an_error() {
    let r = read(&pte(et::Program::default(), &[])).unwrap();
    assert!(r.plans.is_empty());
    assert_eq!(
        (r.segment_count, r.constant_bytes, r.delegate_blob_bytes),
        (0, 0, 0)
    );
    let r = read(&pte(
        et::Program {
            execution_plan: Some(vec![plan("m", vec![], vec![], vec![])]),
            ..Default::default()
        },
        &[],
    ))
    .unwrap();
    assert_eq!(r.plans[0].coverage, 0.0);
}

#[test]
fn bare_xnnpack_flatbuffer_without_xh00_decodes() {
    let program = et::Program {
        execution_plan: Some(vec![plan(
            "forward",
            vec![delegate_call(0)],
            vec![],
            vec![delegate(XNNPACK_BACKEND_ID, et::DataLocation::Inline, 0)],
        )]),
        backend_delegate_data: Some(vec![et::BackendDelegateInlineData {
            data: Some(xnn_graph(vec![
                node(add()),
                node(xnn::XNodeUnion::Xnnelu(Box::default())),
            ])),
        }]),
        ..Default::default()
    };
    let r = read(&pte(program, &[])).unwrap();
    assert_eq!(
        r.plans[0].xnnpack_nodes_by_count(),
        vec![("XNNAdd", 1), ("XNNELU", 1)]
    );
    assert_eq!(r.plans[0].coverage, 1.0);
}

#[test]
fn xnode_names_are_the_schema_names() {
    use super::generated::xnode_names::xnode_name;
    let graph = xnn_graph(vec![
        node(xnn::XNodeUnion::XnnpReLu(Box::default())),
        node(xnn::XNodeUnion::XnnLeakyReLu(Box::default())),
        node(xnn::XNodeUnion::XnnStaticResizeBilinear2D(Box::default())),
        node(xnn::XNodeUnion::XnnCos(Box::default())),
    ]);
    let root = <xnn::XnnGraphRef as planus::ReadAsRoot>::read_as_root(&graph).unwrap();
    let names: Vec<&str> = root
        .xnodes()
        .unwrap()
        .unwrap()
        .iter()
        .map(|n| xnode_name(&n.unwrap().xnode_union().unwrap().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            "XNNPReLU",
            "XNNLeakyReLU",
            "XNNStaticResizeBilinear2D",
            "XNNCos"
        ]
    );
}

#[test]
fn unknown_xnode_tag_is_counted_not_fatal() {
    let mut graph = xnn_graph(vec![node(add())]);
    // The only byte 1 in the graph that is a union tag: patch every candidate
    // and keep the copy whose node became unknown.
    let found = (0..graph.len()).filter(|&i| graph[i] == 1).find_map(|i| {
        let mut g = graph.clone();
        g[i] = 200;
        let s = xnnpack::summarize(&g).ok()?;
        s.nodes.contains_key("(unknown tag 200)").then_some(g)
    });
    graph = found.expect("a tag byte");
    assert_eq!(
        xnnpack::summarize(&graph)
            .unwrap()
            .nodes
            .get("(unknown tag 200)"),
        Some(&1)
    );
}

#[test]
fn a_segment_shared_by_delegates_and_named_data_counts_once() {
    let blob = xnn_blob(&xnn_graph(vec![node(add())]), &[]);
    let program = et::Program {
        execution_plan: Some(vec![plan(
            "forward",
            vec![delegate_call(0), delegate_call(1)],
            vec![],
            vec![
                delegate(XNNPACK_BACKEND_ID, et::DataLocation::Segment, 0),
                delegate(XNNPACK_BACKEND_ID, et::DataLocation::Segment, 0),
            ],
        )]),
        named_data: Some(vec![et::NamedData {
            key: Some("k".into()),
            segment_index: 0,
        }]),
        ..Default::default()
    };
    let r = read(&pte(program, std::slice::from_ref(&blob))).unwrap();
    assert_eq!(
        (r.delegate_blob_bytes, r.constant_bytes),
        (blob.len() as u64, 0)
    );
    assert_eq!(r.plans[0].xnnpack_nodes.get("XNNAdd"), Some(&2));
    assert!(
        r.other_bytes() < 16,
        "only the alignment before the segments"
    );
}

// ------------------------------------------------- files ExecuTorch wrote

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
            .join("testdata")
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

#[test]
fn executorch_files_match_executorchs_python_counts() {
    for name in TESTDATA {
        let report = read(&testdata(&format!("{name}.pte"))).unwrap();
        let mut ours = serde_json::to_value(&report).unwrap();
        let mut theirs: serde_json::Value =
            serde_json::from_slice(&testdata(&format!("{name}.counts.json"))).unwrap();
        ours["file"] = "".into();
        theirs["file"] = "".into();
        assert_eq!(ours, theirs, "{name}");
    }
}

#[test]
fn executorch_files_cover_the_cases() {
    let multi = read(&testdata("multi_xnnpack.pte")).unwrap();
    assert_eq!(multi.plans.len(), 2);
    assert!(multi.segment_count > 0 && multi.plans[0].xnnpack_node_total() > 0);
    let flat = read(&testdata("flat_portable.pte")).unwrap();
    assert_eq!(
        (flat.segment_count, flat.program_bytes),
        (0, flat.size_bytes)
    );
    assert!(flat.inline_constant_bytes > 0);
    let foo = read(&testdata("foo_backend.pte")).unwrap();
    assert!(foo.plans[0].delegates.contains_key("FooBackend"));
    assert!(foo.plans[0].xnnpack_nodes.is_empty());
}

// ---------------------------------------------------------------- bad input

#[test]
fn too_short_and_wrong_magic() {
    for len in 0..8 {
        assert!(
            matches!(read(&vec![0; len]), Err(PteError::TooShort { .. })),
            "{len}"
        );
    }
    let mut bytes = full_file();
    bytes[4..8].copy_from_slice(b"ET11");
    let err = read(&bytes).unwrap_err();
    assert!(matches!(err, PteError::NotAProgram { .. }));
    assert!(err.to_string().contains("\"ET11\""), "{err}");
    assert!(read(b"PK\x03\x04\0\0\0\0 a zip, say").is_err());
}

#[test]
fn truncated_at_every_length_is_an_error() {
    let bytes = full_file();
    for len in 0..bytes.len() {
        assert!(
            read(&bytes[..len]).is_err(),
            "a {len}-byte prefix was accepted"
        );
    }
    // ... and the header boundaries say what is wrong.
    for len in [12, 16, 24, 31] {
        assert!(
            matches!(read(&bytes[..len]), Err(PteError::TooShort { .. })),
            "{len}"
        );
    }
    let flat = pte(full_program().0, &[]);
    for len in 0..flat.len() {
        let _ = read(&flat[..len]);
    }
}

fn patch_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn extended_header_values_past_the_end() {
    let good = full_file();
    let len = good.len() as u64;
    for (at, v) in [
        (16, len + 1),
        (16, 0),
        (16, u64::MAX),
        (24, len + 1),
        (24, 1),
        (24, u64::MAX),
        (32, len),
        (32, u64::MAX),
    ] {
        let mut bytes = good.clone();
        patch_u64(&mut bytes, at, v);
        assert!(
            matches!(read(&bytes), Err(PteError::BadHeader(_))),
            "field at {at} = {v}"
        );
    }
    let mut bytes = good.clone();
    bytes[12..16].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(read(&bytes), Err(PteError::BadHeader(_))));
    let mut bytes = good;
    bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(read(&bytes).is_err());
}

#[test]
fn offsets_and_indices_past_the_end() {
    let (program, segments) = full_program();
    type Edit = Box<dyn Fn(&mut et::Program)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "operator index",
            Box::new(|p| {
                p.execution_plan.as_mut().unwrap()[0]
                    .chains
                    .as_mut()
                    .unwrap()[0]
                    .instructions
                    .as_mut()
                    .unwrap()[0] = kernel(9)
            }),
        ),
        (
            "negative operator",
            Box::new(|p| {
                p.execution_plan.as_mut().unwrap()[0]
                    .chains
                    .as_mut()
                    .unwrap()[0]
                    .instructions
                    .as_mut()
                    .unwrap()[0] = kernel(-1)
            }),
        ),
        (
            "delegate index",
            Box::new(|p| {
                p.execution_plan.as_mut().unwrap()[0]
                    .chains
                    .as_mut()
                    .unwrap()[0]
                    .instructions
                    .as_mut()
                    .unwrap()[0] = delegate_call(4)
            }),
        ),
        (
            "delegate segment",
            Box::new(|p| {
                p.execution_plan.as_mut().unwrap()[0]
                    .delegates
                    .as_mut()
                    .unwrap()[0] = delegate(XNNPACK_BACKEND_ID, et::DataLocation::Segment, 3)
            }),
        ),
        (
            "inline data",
            Box::new(|p| {
                p.execution_plan.as_mut().unwrap()[0]
                    .delegates
                    .as_mut()
                    .unwrap()[1] = delegate(XNNPACK_BACKEND_ID, et::DataLocation::Inline, 3)
            }),
        ),
        (
            "named data segment",
            Box::new(|p| p.named_data.as_mut().unwrap()[0].segment_index = 7),
        ),
        (
            "constant segment",
            Box::new(|p| p.constant_segment.as_mut().unwrap().segment_index = 3),
        ),
    ];
    for (what, edit) in cases {
        let mut p = program.clone();
        edit(&mut p);
        let err = read(&pte(p, &segments)).unwrap_err();
        assert!(matches!(err, PteError::Inconsistent(_)), "{what}: {err}");
    }

    // A segment whose offset or size runs past the file.
    for (offset, size) in [(0, u64::MAX), (u64::MAX, 1), (10_000, 16), (0, 10_000)] {
        let mut p = program.clone();
        p.segments = Some(vec![et::DataSegment { offset, size }]);
        let err = read(&pte(p, &segments)).unwrap_err();
        assert!(
            matches!(err, PteError::Inconsistent(_)),
            "segment {offset}+{size}: {err}"
        );
    }

    // Segments listed but no extended header to say where they start.
    let mut p = program;
    p.segments = Some(vec![et::DataSegment { offset: 0, size: 1 }]);
    let bytes = finish(&mut Builder::new(), &p, b"ET12");
    assert!(matches!(read(&bytes), Err(PteError::Inconsistent(_))));
}

#[test]
fn damaged_xnnpack_blobs_are_opaque_not_errors() {
    let graph = xnn_graph(vec![node(add())]);
    let good = xnn_blob(&graph, &[1; 8]);
    let mut wrong_id = good.clone();
    wrong_id[32 + 4..32 + 8].copy_from_slice(b"XN99");
    let mut short_header = good.clone();
    short_header[8..10].copy_from_slice(&12u16.to_le_bytes());
    let mut huge_size = good.clone();
    huge_size[14..18].copy_from_slice(&u32::MAX.to_le_bytes());
    let blobs: Vec<Vec<u8>> = vec![
        good[..20].to_vec(),
        good[..40].to_vec(),
        wrong_id,
        short_header,
        huge_size,
        vec![],
        b"\0\0\0\0XH00".to_vec(),
    ];
    for blob in blobs {
        let program = et::Program {
            execution_plan: Some(vec![plan(
                "forward",
                vec![delegate_call(0)],
                vec![],
                vec![delegate(XNNPACK_BACKEND_ID, et::DataLocation::Inline, 0)],
            )]),
            backend_delegate_data: Some(vec![et::BackendDelegateInlineData {
                data: Some(blob.clone()),
            }]),
            ..Default::default()
        };
        let r = read(&pte(program, &[])).unwrap();
        let b = &r.plans[0].blobs[0];
        assert_eq!(b.bytes, blob.len() as u64);
        assert!(
            matches!(b.contents, BlobContents::Opaque { .. }),
            "{:?}",
            b.contents
        );
        assert_eq!(r.plans[0].coverage, 0.0);
    }
}

/// Flips bytes of `bytes` one at a time with each mask; none may panic.
fn flip_everywhere(bytes: &[u8], masks: &[u8]) -> (usize, usize) {
    let (mut ok, mut err) = (0, 0);
    let mut copy = bytes.to_vec();
    for i in 0..bytes.len() {
        for &m in masks {
            copy[i] ^= m;
            match read(&copy) {
                Ok(_) => ok += 1,
                Err(_) => err += 1,
            }
            copy[i] ^= m;
        }
    }
    (ok, err)
}

#[test]
fn flipped_bytes_give_a_report_or_an_error() {
    let (ok, err) = flip_everywhere(&full_file(), &[0x01, 0x80, 0xff]);
    assert!(ok > 0 && err > 0, "ok {ok}, err {err}");
    for name in TESTDATA {
        flip_everywhere(&testdata(&format!("{name}.pte")), &[0x04, 0xff]);
    }
}

#[test]
fn shared_tables_cannot_cost_quadratic_time() {
    // One chain of 2 000 instructions, listed 50 000 times: 10^8 visits if
    // followed naively, from a file of a few hundred kilobytes.
    let mut b = Builder::new();
    let instructions: Vec<et::Instruction> = (0..2000).map(|_| kernel(0)).collect();
    let chain = et::Chain {
        instructions: Some(instructions),
        ..Default::default()
    }
    .prepare(&mut b);
    let chains = vec![chain; 50_000];
    let ops = vec![operator("aten::add", "out").prepare(&mut b)];
    let name = b.create_string("forward");
    let plan = et::ExecutionPlan::create(
        &mut b,
        name,
        (),
        (),
        (),
        (),
        chains.as_slice(),
        ops.as_slice(),
        (),
        (),
        (),
    );
    let plans = vec![plan];
    let program = et::Program::create(&mut b, 0u32, plans.as_slice(), (), (), (), (), (), ());
    let bytes = finish(&mut b, program, b"ET12");
    let start = std::time::Instant::now();
    let err = read(&bytes).unwrap_err();
    assert!(matches!(err, PteError::Inconsistent(_)), "{err}");
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn shared_names_cannot_cost_quadratic_memory() {
    // 20 000 operators all naming one 100 kB string; every one is called.
    let mut b = Builder::new();
    let long = b.create_string("x".repeat(100_000).as_str());
    let overload = b.create_string("out");
    let op = et::Operator::create(&mut b, long, overload);
    let ops = vec![op; 20_000];
    let instructions: Vec<et::Instruction> = (0..20_000).map(kernel).collect();
    let chain = et::Chain {
        instructions: Some(instructions),
        ..Default::default()
    }
    .prepare(&mut b);
    let chains = vec![chain];
    let plan = et::ExecutionPlan::create(
        &mut b,
        (),
        (),
        (),
        (),
        (),
        chains.as_slice(),
        ops.as_slice(),
        (),
        (),
        (),
    );
    let plans = vec![plan];
    let program = et::Program::create(&mut b, 0u32, plans.as_slice(), (), (), (), (), (), ());
    let bytes = finish(&mut b, program, b"ET12");
    let err = read(&bytes).unwrap_err();
    assert!(matches!(err, PteError::Inconsistent(_)), "{err}");
}

// ------------------------------------------- regressions found by fuzzing
