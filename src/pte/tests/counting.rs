//! Counts on synthetic programs and on files ExecuTorch wrote.

use super::*;

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
            "partition",
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

#[test]
fn executorch_files_match_executorchs_python_counts() {
    for name in TESTDATA {
        let report = read(&testdata(&format!("{name}.pte"))).unwrap();
        let mut ours = serde_json::to_value(&report).unwrap();
        let mut theirs: serde_json::Value =
            serde_json::from_slice(&testdata(&format!("{name}.counts.json"))).unwrap();
        ours["file"] = "".into();
        theirs["file"] = "".into();
        // The partition map is runlens' own (its counts are checked in tests/inspect.rs).
        for plan in ours["plans"].as_array_mut().unwrap() {
            plan.as_object_mut().unwrap().remove("partition");
        }
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
