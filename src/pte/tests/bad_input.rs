//! Bytes that are not a well-formed program: errors or opaque blobs, never a panic.

use super::*;

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
