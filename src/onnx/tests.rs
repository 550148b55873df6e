//! The reader on a file the onnx package wrote (testdata/make_tiny.py), and on
//! every truncation and single-bit flip of it.

use super::*;

const TINY: &[u8] = include_bytes!("testdata/tiny.onnx");

#[test]
fn reads_what_the_onnx_package_wrote() {
    let m = read_bytes(TINY).unwrap();
    assert_eq!((m.ir_version, m.opset(), m.producer.as_str()), (8, 17, "runlens-test 1"));
    assert_eq!(m.opsets, [("ai.onnx".to_string(), 17)]);
    // The initializers are not inputs a caller feeds.
    assert_eq!(m.inputs.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["input_ids", "attention_mask"]);
    assert_eq!(m.inputs[0].elem_type, Some(ElemType::INT64));
    assert_eq!(m.inputs[0].shape, Some(vec![Dim::Named("batch".into()), Dim::Named("sequence".into())]));
    assert_eq!(m.describe_outputs(), "last_hidden_state float32 [batch, sequence, 4]");
    assert_eq!((m.nodes, m.initializers), (4, 2));
    assert_eq!(m.operators, [("Cast".to_string(), 1), ("Gather".into(), 1), ("Mul".into(), 1), ("Unsqueeze".into(), 1)]);
    assert_eq!(m.rows_gathered_by("input_ids"), Some(50));
    assert_eq!(m.rows_gathered_by("attention_mask"), None);
}

#[test]
fn what_is_not_a_model_is_refused_with_the_reason() {
    assert_eq!(read_bytes(b"").unwrap_err(), "the file is empty");
    assert!(read_bytes(b"\xff\xff\xff\xff").unwrap_err().starts_with("not a protobuf ModelProto"));
    // Valid protobuf, but no model: a lone field 1 (ir_version) and nothing else.
    assert_eq!(read_bytes(&[0x08, 0x08]).unwrap_err(), "imports no version of the standard operator set ai.onnx (its opsets: none)");
    // A GGUF's magic is not a ModelProto either.
    assert!(read_bytes(b"GGUF\x03\0\0\0\0\0\0\0\0\0\0\0").is_err());
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("cut.onnx");
    std::fs::write(&file, &TINY[..TINY.len() / 2]).unwrap();
    let e = read_path(&file).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}: not an ONNX model: ", file.display())), "{e}");
    let e = read_path(&work.path().join("gone.onnx")).unwrap_err().to_string();
    assert!(e.contains("gone.onnx: cannot read"), "{e}");
}

/// Every prefix and every one-bit flip gives a model or a reason, never a panic;
/// most prefixes are refused (a cut length-delimited field).
#[test]
fn truncations_and_bit_flips_never_panic() {
    let mut refused = 0;
    for len in 0..TINY.len() {
        refused += read_bytes(&TINY[..len]).is_err() as usize;
    }
    assert!(refused > TINY.len() / 2, "{refused} of {} prefixes refused", TINY.len());
    let mut copy = TINY.to_vec();
    let (mut read, mut errors) = (0, 0);
    for at in 0..copy.len() {
        for bit in 0..8 {
            copy[at] ^= 1 << bit;
            match read_bytes(&copy) {
                Ok(m) => {
                    read += 1;
                    let _ = (m.describe_inputs(), m.describe_outputs(), m.opset());
                }
                Err(e) => {
                    errors += 1;
                    assert!(!e.is_empty());
                }
            }
            copy[at] ^= 1 << bit;
        }
    }
    assert!(read > 0 && errors > 0, "{read} read, {errors} refused");
}
