//! Headers that are not a GGUF ggml reads: the fixed header, the counts, the
//! key-value pairs and the lengths in them, each refused with its own error.

use super::*;

pub(super) fn patch_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

pub(super) fn patch_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn get_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// Where the value of key-value pair `i` starts (after its key and type).
fn value_at(bytes: &[u8], layout: &Layout, i: usize) -> usize {
    let at = layout.kv_at[i];
    at + 8 + get_u64(bytes, at) as usize + 4
}

fn kv_index(key: &str) -> usize {
    spec().kvs.iter().position(|(k, _)| k == key.as_bytes()).unwrap()
}

#[test]
fn too_short_and_not_gguf() {
    let bytes = valid();
    for len in 0..24 {
        let err = read(&bytes[..len]).unwrap_err();
        assert!(matches!(err, GgufError::TooShort { len: l, .. } if l == len as u64), "{len}: {err}");
    }
    let err = read(b"PK\x03\x04\0\0\0\0 a zip, say, of a model").unwrap_err();
    assert!(matches!(err, GgufError::NotGguf { .. }), "{err}");
    assert!(err.to_string().contains("\"PK\\u{3}\\u{4}\""), "{err}");
    let mut bytes = valid();
    bytes[..4].copy_from_slice(b"gguf");
    assert!(matches!(read(&bytes), Err(GgufError::NotGguf { .. })));
    assert!(matches!(read(b"GGML"), Err(GgufError::NotGguf { .. })));
    assert!(matches!(read(b"GGUF\x03\0\0\0"), Err(GgufError::TooShort { len: 8, .. })));
}

#[test]
fn versions_other_than_2_and_3_and_byte_swapped_files() {
    for version in [0, 1, 4, 0xffff] {
        let mut bytes = valid();
        patch_u32(&mut bytes, 4, version);
        let err = read(&bytes).unwrap_err();
        assert!(matches!(err, GgufError::UnsupportedVersion { version: v, .. } if v == version), "{version}: {err}");
    }
    for version in [3u32.swap_bytes(), 2u32.swap_bytes(), 0x0001_0000] {
        let mut bytes = valid();
        patch_u32(&mut bytes, 4, version);
        let err = read(&bytes).unwrap_err();
        assert!(matches!(err, GgufError::ByteSwapped { .. }), "{version:#x}: {err}");
        assert!(err.to_string().contains("big-endian"), "{err}");
    }
}

#[test]
fn truncated_at_every_length_is_an_error() {
    let (bytes, layout) = spec().write();
    for len in 0..bytes.len() {
        let err = read(&bytes[..len]).expect_err(&format!("a {len}-byte prefix was accepted"));
        let _ = err.to_string();
        if len >= layout.header_end {
            // Past the header: llama.cpp's bounds check, with what is missing.
            match err {
                GgufError::Truncated { missing, file_len, .. } => {
                    assert_eq!((missing, file_len), ((bytes.len() - len) as u64, len as u64), "{len}")
                }
                other => panic!("{len}: {other}"),
            }
        } else {
            assert!(
                matches!(err, GgufError::TooShort { .. } | GgufError::CountTooLarge { .. } | GgufError::PastEnd { .. }),
                "{len}: {err}"
            );
        }
    }
    let err = read(&bytes[..layout.data_start + 1000]).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("token_embd.weight") && text.contains("bytes are missing") && text.contains("again"), "{text}");
    let err = read(&bytes[..layout.header_end + 1]).unwrap_err();
    assert!(err.to_string().contains("the padding before the data section"), "{err}");
}

#[test]
fn counts_larger_than_the_file_holds() {
    for at in [8, 16] {
        for count in [u64::MAX, 1 << 63, 1 << 40, 1 << 21, valid().len() as u64] {
            let mut bytes = valid();
            patch_u64(&mut bytes, at, count);
            let err = read(&bytes).unwrap_err();
            assert!(matches!(err, GgufError::CountTooLarge { count: c, .. } if c == count), "{at} = {count}: {err}");
        }
    }
    // One pair too many: the first tensor info is read as a pair.
    let mut s = spec();
    s.kv_count = Some(s.kvs.len() as u64 + 1);
    assert!(read(&s.bytes()).is_err());
    // One too few: the last pair is read as a tensor info.
    s.kv_count = Some(s.kvs.len() as u64 - 1);
    let err = read(&s.bytes()).unwrap_err();
    assert!(matches!(err, GgufError::BadDimCount { .. }), "{err}");
    // One tensor too many: its info is read from the padding.
    let mut s = spec();
    s.tensor_count = Some(6);
    assert!(matches!(read(&s.bytes()), Err(GgufError::EmptyTensorName { index: 5, .. })));
    // One too few is what ggml reads too (llama.cpp's loader then misses
    // the tensor): the offsets before it still hold.
    s.tensor_count = Some(4);
    assert_eq!(read(&s.bytes()).unwrap().tensors.len(), 4);
}

#[test]
fn string_and_array_lengths_past_the_limit_or_the_end() {
    let (good, layout) = spec().write();
    let name = kv_index("general.name");
    let tokens = kv_index("tokenizer.ggml.tokens");
    let cases: Vec<(&str, usize)> = vec![
        ("a key", layout.kv_at[0]),
        ("a string value", value_at(&good, &layout, name)),
        ("a token", value_at(&good, &layout, tokens) + 4 + 8),
        ("a tensor name", layout.tensor_infos[1]),
    ];
    for (what, at) in cases {
        for len in [u64::MAX, 1 << 63, 1 << 40, (1 << 30) + 1] {
            let mut bytes = good.clone();
            patch_u64(&mut bytes, at, len);
            let err = read(&bytes).unwrap_err();
            assert!(matches!(err, GgufError::StringTooLong { len: l, at: a, .. } if l == len && a == at as u64), "{what} {len}: {err}");
        }
        for len in [1 << 30, good.len() as u64] {
            let mut bytes = good.clone();
            patch_u64(&mut bytes, at, len);
            let err = read(&bytes).unwrap_err();
            assert!(matches!(err, GgufError::PastEnd { need, .. } if need == len), "{what} {len}: {err}");
        }
    }
    let mut bytes = good.clone();
    patch_u64(&mut bytes, value_at(&good, &layout, tokens) + 4 + 8, 1 << 40);
    let err = read(&bytes).unwrap_err().to_string();
    assert!(err.contains("an element of key 'tokenizer.ggml.tokens'") && err.contains("2^30"), "{err}");

    // Array lengths: over ggml's limit, or more elements than bytes left.
    for key in ["tokenizer.ggml.tokens", "tokenizer.ggml.scores", "test.numbers"] {
        let at = value_at(&good, &layout, kv_index(key)) + 4;
        for len in [u64::MAX, 1 << 40, (1 << 30) + 1] {
            let mut bytes = good.clone();
            patch_u64(&mut bytes, at, len);
            let err = read(&bytes).unwrap_err();
            assert!(matches!(err, GgufError::ArrayTooLong { len: l, .. } if l == len), "{key} {len}: {err}");
        }
        for len in [1 << 30, 1 << 20] {
            let mut bytes = good.clone();
            patch_u64(&mut bytes, at, len);
            let err = read(&bytes).unwrap_err();
            assert!(matches!(err, GgufError::PastEnd { .. }), "{key} {len}: {err}");
        }
    }
}

#[test]
fn empty_duplicate_and_non_utf8_keys() {
    let last = spec().kvs.len() as u64;
    let err = read(&spec().kv("general.name", Val::str("again")).bytes()).unwrap_err();
    assert!(matches!(&err, GgufError::DuplicateKey { key, index, .. } if key == "general.name" && *index == last), "{err}");
    let err = read(&spec().kv("", Val::U8(1)).bytes()).unwrap_err();
    assert!(matches!(err, GgufError::EmptyKey { index, .. } if index == last), "{err}");
    let mut s = spec();
    s.kvs.push((b"bad.\xff\xfe".to_vec(), Val::U8(1)));
    let err = read(&s.bytes()).unwrap_err();
    assert!(matches!(err, GgufError::KeyNotUtf8 { index, .. } if index == last), "{err}");
    // Values are not checked (ggml does not): replaced.
    let g = read(&spec().kv("test.latin1", Val::Str(b"caf\xe9".to_vec())).bytes()).unwrap();
    assert_eq!(g.get_str("test.latin1"), Some("caf\u{fffd}"));
}

#[test]
fn unknown_value_types_and_arrays_of_arrays() {
    for id in [13, 99, u32::MAX] {
        let err = read(&spec().kv("test.odd", Val::Raw(id, vec![0; 8])).bytes()).unwrap_err();
        assert!(matches!(&err, GgufError::UnknownValueType { type_id, key, .. } if *type_id == id && key == "test.odd"), "{err}");
        // ... as an array's element type too.
        let err = read(&spec().kv("test.odd", Val::Array(id, vec![])).bytes()).unwrap_err();
        assert!(matches!(err, GgufError::UnknownValueType { .. }), "{err}");
    }
    for inner in [vec![], vec![Val::Array(0, vec![Val::U8(1)])]] {
        let err = read(&spec().kv("test.nested", Val::Array(9, inner)).bytes()).unwrap_err();
        assert!(matches!(&err, GgufError::NestedArray { key, .. } if key == "test.nested"), "{err}");
    }
    // Every element type ggml reads, kept and counted.
    let mut s = spec();
    for id in (0..13).filter(|&id| id != 9) {
        let one = match id {
            8 => Val::str("x"),
            _ => Val::Raw(id, vec![1; ValueType::from_id(id).unwrap().fixed_size().unwrap() as usize]),
        };
        s = s.kv(&format!("test.short{id}"), Val::Array(id, vec![one.clone(); 3]));
        s = s.kv(&format!("test.long{id}"), Val::Array(id, vec![one; 65]));
    }
    let g = read(&s.bytes()).unwrap();
    for id in (0..13).filter(|&id| id != 9) {
        let short = g.get(&format!("test.short{id}")).unwrap();
        let long = g.get(&format!("test.long{id}")).unwrap();
        assert!(matches!(short, Value::Array { len: 3, strings, numbers, .. } if strings.is_some() != numbers.is_some()), "{id}");
        assert!(matches!(long, Value::Array { len: 65, strings: None, numbers: None, .. }), "{id}");
    }
    assert_eq!(g.get("test.short7"), Some(&Value::Array { elem: ValueType::Bool, len: 3, strings: None, numbers: Some(vec![1.0; 3]) }));
}

#[test]
fn alignment_must_be_a_u32_power_of_two() {
    for (v, found) in [
        (Val::U32(3), "3"),
        (Val::U32(0), "0"),
        (Val::U32(96), "96"),
        (Val::U64(32), "a u64 (32)"),
        (Val::I32(32), "a i32 (32)"),
        (Val::str("32"), "a str (\"32\")"),
    ] {
        let mut s = spec();
        s.kvs[2].1 = v;
        let err = read(&s.bytes()).unwrap_err();
        assert!(matches!(&err, GgufError::BadAlignment { found: f, .. } if f == found), "{found}: {err}");
    }
    for a in [1, 2, 8, 4096] {
        let mut s = spec();
        s.kvs[2].1 = Val::U32(a);
        s.alignment = u64::from(a);
        let g = read(&s.bytes()).unwrap();
        assert_eq!((g.alignment, g.data_start % u64::from(a)), (u64::from(a), 0));
    }
}

#[test]
fn a_terabyte_claimed_by_a_short_file_is_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.gguf");
    let started = std::time::Instant::now();

    // A tensor of 2^38 f32 (1 TiB) in a file of a few kilobytes.
    let mut s = spec();
    s.tensors.push(t("huge.weight", 0, &[1 << 18, 1 << 20]));
    std::fs::write(&path, s.bytes()).unwrap();
    let err = read_path(&path).unwrap_err();
    match &err {
        GgufError::Truncated { missing, what, .. } => {
            assert!(*missing >= 1 << 40 && what.contains("huge.weight"), "{err}")
        }
        other => panic!("{other}"),
    }

    // Counts, string and array lengths at their largest.
    let (good, layout) = spec().write();
    let tokens = value_at(&good, &layout, kv_index("tokenizer.ggml.tokens"));
    for (at, v) in [(8, u64::MAX), (16, u64::MAX), (layout.kv_at[0], 1 << 30), (tokens + 4, 1 << 30), (tokens + 12, 1 << 30)] {
        let mut bytes = good.clone();
        patch_u64(&mut bytes, at, v);
        std::fs::write(&path, &bytes).unwrap();
        let err = read_path(&path).unwrap_err();
        assert!(matches!(err, GgufError::CountTooLarge { .. } | GgufError::PastEnd { .. }), "{at}: {err}");
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
}

#[test]
fn a_vocabulary_with_a_token_twice() {
    // llama.cpp aborts on it (GGML_ASSERT in llama_vocab::load).
    let with_tokens = |tokens: Vec<&str>| {
        let mut s = spec();
        let at = kv_index("tokenizer.ggml.tokens");
        s.kvs[at].1 = Val::Array(8, tokens.into_iter().map(Val::str).collect());
        read(&s.bytes())
    };
    let mut long: Vec<String> = (0..VOCAB).map(|i| format!("tok{i}")).collect();
    long[70] = "tok3".into();
    let err = with_tokens(long.iter().map(String::as_str).collect()).unwrap_err();
    assert!(matches!(err, GgufError::DuplicateToken { index: 70, .. }), "{err}");
    assert!(err.to_string().contains("token 70") && err.to_string().contains("aborts"), "{err}");
    let err = with_tokens(vec!["a", "b", "a"]).unwrap_err();
    assert!(matches!(err, GgufError::DuplicateToken { index: 2, .. }), "{err}");
    // Empty tokens are renamed "[EMPTY_i]" by llama.cpp, so two are distinct...
    let g = with_tokens(vec!["a", "", ""]).unwrap();
    assert_eq!(g.vocab_size(), Some(3));
    // ... unless a token has that name.
    let err = with_tokens(vec!["a", "", "[EMPTY_1]"]).unwrap_err();
    assert!(matches!(err, GgufError::DuplicateToken { index: 2, .. }), "{err}");
    // llama.cpp reads a token up to its first NUL byte: "ab\0c" is "ab" (found by tests/corrupt_gguf.rs).
    let err = with_tokens(vec!["ab", "x", "ab\0c"]).unwrap_err();
    assert!(matches!(err, GgufError::DuplicateToken { index: 2, .. }), "{err}");
    // Other string arrays may repeat themselves.
    assert!(read(&spec().kv("test.same", Val::Array(8, vec![Val::str("x"); 70])).bytes()).is_ok());
}
