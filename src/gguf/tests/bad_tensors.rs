//! Tensor infos ggml refuses: names, shapes, types, block sizes, offsets.

use super::bad_input::patch_u64;
use super::*;

/// The spec with tensor `i` replaced by `tensor`.
fn with_tensor(i: usize, tensor: T) -> Vec<u8> {
    let mut s = spec();
    s.tensors[i] = tensor;
    s.bytes()
}

#[test]
fn tensor_names_empty_too_long_or_twice() {
    let err = read(&with_tensor(1, t("", 0, &[64]))).unwrap_err();
    assert!(matches!(err, GgufError::EmptyTensorName { index: 1, .. }), "{err}");
    let long = "x".repeat(64);
    let err = read(&with_tensor(1, t(&long, 0, &[64]))).unwrap_err();
    assert!(matches!(err, GgufError::TensorNameTooLong { index: 1, len: 64, .. }), "{err}");
    assert!(err.to_string().contains("at most 63"), "{err}");
    let g = read(&with_tensor(1, t(&long[..63], 0, &[64]))).unwrap();
    assert_eq!(g.tensors[1].name.len(), 63);
    let err = read(&with_tensor(4, t("blk.0.attn_norm.weight", 0, &[64]))).unwrap_err();
    assert!(matches!(&err, GgufError::DuplicateTensor { name, index: 4, .. } if name == "blk.0.attn_norm.weight"), "{err}");
}

#[test]
fn dimension_counts_outside_1_to_4() {
    for dims in [&[][..], &[64, 1, 1, 1, 1][..], &[64, 1, 1, 1, 1, 1, 1, 1][..]] {
        let err = read(&with_tensor(1, t("w", 0, dims))).unwrap_err();
        assert!(matches!(err, GgufError::BadDimCount { n_dims, .. } if n_dims as usize == dims.len()), "{dims:?}: {err}");
    }
    let g = read(&with_tensor(1, t("w", 0, &[16, 2, 2, 2]))).unwrap();
    assert_eq!((g.tensors[1].dims.len(), g.tensors[1].nbytes), (4, 512));
    // n_dims at its largest, in the bytes.
    let (mut bytes, layout) = spec().write();
    let at = layout.tensor_infos[0] + 8 + "token_embd.weight".len();
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(read(&bytes), Err(GgufError::BadDimCount { n_dims: u32::MAX, .. })));
}

#[test]
fn dimensions_past_int64_or_whose_product_overflows() {
    for (dims, dim) in [(&[1 << 63][..], 0), (&[64, u64::MAX][..], 1), (&[64, 1, 1, (1 << 63) + 5][..], 3)] {
        let err = read(&with_tensor(1, t("w", 0, dims))).unwrap_err();
        assert!(matches!(err, GgufError::DimTooLarge { dim: d, .. } if d == dim), "{dims:?}: {err}");
    }
    for (ty, dims) in [
        (0, &[1 << 32, 1 << 32][..]),
        (0, &[1 << 31, 1 << 31, 2][..]),
        (0, &[i64::MAX as u64, 2][..]),
        // Elements fit an int64, bytes do not fit a u64: 2^62 f64.
        (28, &[1 << 62][..]),
    ] {
        let err = read(&with_tensor(1, t("w", ty, dims))).unwrap_err();
        assert!(matches!(err, GgufError::TooManyElements { .. }), "{dims:?}: {err}");
    }
    // A zero dimension is a tensor without data (ggml takes it).
    let g = read(&with_tensor(1, t("w", 0, &[64, 0]))).unwrap();
    assert_eq!(g.tensors[1].nbytes, 0);
}

#[test]
fn types_ggml_does_not_have() {
    // 4 and 5 were Q4_2 and Q4_3, 31 to 33 the repacked Q4_0 layouts.
    for id in [4, 5, 31, 33, 36, 38, 43, 99, u32::MAX] {
        let err = read(&with_tensor(2, t("w", id, &[256, 4]))).unwrap_err();
        assert!(matches!(err, GgufError::UnknownGgmlType { type_id, .. } if type_id == id), "{id}: {err}");
        assert!(err.to_string().contains(&format!("ggml type {id}")), "{err}");
    }
    // Every type ggml has reads, its size from the table.
    for id in (0..43).filter(|&id| GgmlType(id).is_known()) {
        let g = read(&with_tensor(2, t("w", id, &[256 * 2, 3]))).unwrap();
        let ty = GgmlType(id);
        assert_eq!(g.tensors[2].nbytes, 2 * 3 * 256 / ty.block_size() * ty.type_size(), "{ty}");
    }
}

#[test]
fn rows_not_a_multiple_of_the_block() {
    for (ty, ne0, block) in [(2, 48, 32), (8, 16, 32), (12, 128, 256), (16, 255, 256)] {
        let err = read(&with_tensor(2, t("w", ty, &[ne0, 2]))).unwrap_err();
        assert!(
            matches!(err, GgufError::BlockSize { ne0: n, block: b, .. } if n == ne0 && b == block),
            "{ty} {ne0}: {err}"
        );
    }
    // Only the row counts: 32 rows of one q4_0 block each.
    assert!(read(&with_tensor(2, t("w", 2, &[32, 3]))).is_ok());
}

#[test]
fn offsets_misaligned_out_of_order_or_past_the_end() {
    let (good, layout) = spec().write();
    let offset_at = |i: usize| {
        let info = layout.tensor_infos[i];
        let name_len = u64::from_le_bytes(good[info..info + 8].try_into().unwrap()) as usize;
        let n_dims = u32::from_le_bytes(good[info + 8 + name_len..][..4].try_into().unwrap()) as usize;
        info + 8 + name_len + 4 + 8 * n_dims + 4
    };
    let offsets: Vec<u64> = read(&good).unwrap().tensors.iter().map(|t| t.offset).collect();
    let patched = |edits: &[(usize, u64)]| {
        let mut bytes = good.clone();
        for &(i, v) in edits {
            patch_u64(&mut bytes, offset_at(i), v);
        }
        read(&bytes)
    };
    for (i, offset) in [(2, offsets[2] + 1), (0, 32), (4, offsets[4] + 16), (1, u64::MAX)] {
        let err = patched(&[(i, offset)]).unwrap_err();
        assert!(matches!(err, GgufError::MisalignedOffset { offset: o, alignment: 64, .. } if o == offset), "{i}: {err}");
    }
    // Aligned, but not where the tensors before end: ggml packs in order.
    let swapped = [(1, offsets[2]), (2, offsets[1])];
    for edits in [&[(0, 64)][..], &[(2, offsets[2] + 64)][..], &swapped[..], &[(4, 1 << 40)][..], &[(4, u64::MAX - 63)][..]] {
        let err = patched(edits).unwrap_err();
        assert!(matches!(err, GgufError::OffsetMismatch { .. }), "{edits:?}: {err}");
    }
    let err = patched(&swapped).unwrap_err().to_string();
    assert!(err.contains("blk.0.attn_norm.weight") && err.contains(&format!("end at {}", offsets[1])), "{err}");
    // Each offset as the writer put it: fine.
    assert!(patched(&offsets.iter().copied().enumerate().collect::<Vec<_>>()).is_ok());
}

#[test]
fn sizes_whose_padding_overflows() {
    // Each fits a u64 alone, their padded sum does not.
    let mut s = spec();
    s.tensors = vec![t("a", 24, &[1 << 62, 1]), t("b", 24, &[1 << 62, 1]), t("c", 24, &[1 << 62, 1]), t("d", 24, &[1 << 62])];
    s.tensors[1].offset = Some(1 << 62);
    s.tensors[2].offset = Some(2 << 62);
    s.tensors[3].offset = Some(3 << 62);
    let err = read(&s.bytes()).unwrap_err();
    assert!(matches!(&err, GgufError::TooManyElements { name, .. } if name == "d"), "{err}");
    // One whose padding alone overflows: 2^64 - 8 bytes of f64.
    s.tensors = vec![t("a", 28, &[(1 << 61) - 1])];
    let err = read(&s.bytes()).unwrap_err();
    assert!(matches!(&err, GgufError::TooManyElements { name, .. } if name == "a"), "{err}");
}
