//! What runlens hands to llama.cpp: architectures, tensor types, vocabulary.

use super::*;

fn with_arch(arch: Option<&str>) -> GgufFile {
    let mut s = spec();
    match arch {
        Some(a) => s.kvs[0].1 = Val::str(a),
        None => {
            s.kvs.remove(0);
        }
    }
    read(&s.bytes()).unwrap()
}

#[test]
fn architectures_runlens_runs() {
    for arch in ARCHITECTURES {
        with_arch(Some(arch)).check_runnable(None).unwrap();
    }
    let err = with_arch(Some("mamba")).check_runnable(None).unwrap_err();
    assert!(matches!(&err, GgufError::UnsupportedArchitecture { arch, .. } if arch == "mamba"), "{err}");
    assert!(err.to_string().contains("llama, qwen2, qwen3, gpt2, bert"), "{err}");
    let err = with_arch(None).check_runnable(None).unwrap_err();
    assert!(matches!(err, GgufError::NoArchitecture { .. }), "{err}");
    // The architecture's own keys follow it.
    assert_eq!(with_arch(Some("qwen2")).block_count(), None);
}

#[test]
fn tensor_types_the_cpu_backend_is_not_given() {
    for (id, dims) in [(16, [256, 2]), (23, [256, 2]), (15, [256, 2]), (24, [64, 2]), (35, [256, 2])] {
        let mut s = spec();
        s.tensors[2] = t("blk.0.attn_q.weight", id, &dims);
        let g = read(&s.bytes()).unwrap();
        let err = g.check_runnable(None).unwrap_err();
        let ty = GgmlType(id);
        assert!(matches!(&err, GgufError::UnsupportedType { tensor, ty: t, .. } if tensor == "blk.0.attn_q.weight" && *t == ty), "{err}");
        assert!(err.to_string().contains(&format!("is {}", ty.name())) && err.to_string().contains("q8_0"), "{err}");
    }
    for name in RUNNABLE_TYPES {
        let mut s = spec();
        s.tensors[2] = t("blk.0.attn_q.weight", GgmlType::from_name(name).unwrap().0, &[256, 2]);
        read(&s.bytes()).unwrap().check_runnable(None).unwrap();
    }
}

#[test]
fn the_vocabulary_must_be_the_model_directory_s() {
    let g = read(&valid()).unwrap();
    g.check_runnable(Some(VOCAB as u64)).unwrap();
    let err = g.check_runnable(Some(32000)).unwrap_err();
    assert!(matches!(err, GgufError::VocabMismatch { gguf: 100, expected: 32000, .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "the GGUF data: the GGUF's vocabulary has 100 tokens, the model directory's tokenizer 32000: a GGUF of another model?"
    );
    // Without the token list, {arch}.vocab_size; without either, no check.
    let mut s = spec();
    s.kvs.retain(|(k, _)| k != b"tokenizer.ggml.tokens");
    let g = read(&s.bytes()).unwrap();
    assert_eq!(g.vocab_size(), None);
    assert!(matches!(g.check_runnable(Some(100)), Err(GgufError::NoVocabulary { expected: 100, .. })));
    g.check_runnable(None).unwrap();
    let g = read(&s.kv("llama.vocab_size", Val::U32(100)).bytes()).unwrap();
    assert_eq!(g.vocab_size(), Some(100));
    g.check_runnable(Some(100)).unwrap();
}

#[test]
fn the_main_type_is_that_of_the_most_matrix_bytes() {
    let mut s = spec();
    // A large f32 vector does not make an f32 file.
    s.tensors[1] = t("blk.0.attn_norm.weight", 0, &[1 << 14]);
    let g = read(&s.bytes()).unwrap();
    assert_eq!(g.main_type(), Some(GgmlType::Q4_0));
    assert_eq!(g.type_summary()[0].0, GgmlType::F32);
    // Only vectors: the largest of them.
    s.tensors = vec![t("a", 0, &[64]), t("b", 1, &[256])];
    assert_eq!(read(&s.bytes()).unwrap().main_type(), Some(GgmlType::F16));
    // Ties go to the lower type id.
    s.tensors = vec![t("a", 1, &[64, 2]), t("b", 30, &[64, 2])];
    assert_eq!(read(&s.bytes()).unwrap().main_type(), Some(GgmlType::F16));
}
