//! [`read_sizes`]: what a program will hold, from its headers and flatbuffer
//! alone, agreeing with the whole-file reader; damaged files are errors.

use super::*;

fn sizes_of(bytes: &[u8]) -> Result<ProgramSizes, PteError> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), bytes).unwrap();
    read_sizes(file.path())
}

#[test]
fn splits_a_program_by_what_the_runtime_does_with_its_bytes() {
    let (mut program, segments) = full_program();
    program.execution_plan.as_mut().unwrap()[0].non_const_buffer_sizes = Some(vec![0, 1000, 24]);
    let bytes = pte(program, &segments);
    let s = sizes_of(&bytes).unwrap();
    assert_eq!(s.file_bytes, bytes.len() as u64);
    // The inline buffer (24) and the constant segment (48).
    assert_eq!(s.constants_in_place, 24 + 48);
    // Named data (200) and the constants inside the XNNPACK blob of segment 1 (40).
    assert_eq!(s.delegate_weights, 200 + 40);
    assert_eq!(s.delegate_graphs, (segments[1].len() - 40) as u64 + xnn_blob(&xnn_graph(vec![node(fully_connected())]), &[]).len() as u64 + 100 /* FooBackend */ + 18 /* the broken XNNPACK blob */);
    assert_eq!((s.planned, s.mutable_data), (1024, 0));
    // The whole-file reader counts the same constants.
    let report = read(&bytes).unwrap();
    assert_eq!(report.constant_bytes, s.constants_in_place + 200 + s.mutable_data);
}

#[test]
fn agrees_with_the_whole_file_reader_on_programs_executorch_wrote() {
    for name in TESTDATA {
        let bytes = testdata(&format!("{name}.pte"));
        let s = sizes_of(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let report = read(&bytes).unwrap();
        let forward = report.plans.iter().find(|p| p.name == "forward").unwrap_or(&report.plans[0]);
        let in_blobs: u64 = forward
            .blobs
            .iter()
            .map(|b| match b.contents {
                BlobContents::Xnnpack { constant_bytes, .. } => constant_bytes,
                BlobContents::Opaque { .. } => 0,
            })
            .sum();
        assert_eq!(s.constants_in_place + s.delegate_weights + s.mutable_data, report.constant_bytes + in_blobs, "{name}");
        assert!(s.planned > 0, "{name}: no planned memory");
    }
}

#[test]
fn damaged_files_are_errors_never_panics() {
    let bytes = full_file();
    for len in 0..bytes.len() {
        // A prefix that ends inside the segments still has the whole flatbuffer: its
        // segments then lie outside the file.
        assert!(sizes_of(&bytes[..len]).is_err(), "a {len}-byte prefix was accepted");
    }
    // Mutated programs (the reader's own mutation loop, fewer rounds: each is a file).
    let mut rng = super::mutations::Rng(0x5eed_5123_abcd_0002);
    let seeds: Vec<Vec<u8>> = TESTDATA.iter().map(|n| testdata(&format!("{n}.pte"))).chain([bytes]).collect();
    for round in 0..600 {
        let mut damaged = seeds[round % seeds.len()].clone();
        for _ in 0..=rng.below(3) {
            super::mutations::mutate(&mut rng, &mut damaged);
        }
        let _ = sizes_of(&damaged);
    }
}
