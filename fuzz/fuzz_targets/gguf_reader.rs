//! Any bytes must give a GGUF header or an error: no panic, abort, or
//! allocation beyond what the input's length allows. A header that reads
//! holds what llama.cpp relies on: packed, aligned offsets and every
//! tensor's data inside the input. Run from `fuzz/` with
//! `cargo +nightly fuzz run gguf_reader` (seeds: small `.gguf` files, e.g.
//! the test models' `llamacpp-*.gguf`, in `corpus/gguf_reader/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code, unused_imports)]
#[path = "../../src/gguf/mod.rs"]
mod gguf;

fuzz_target!(|data: &[u8]| {
    let Ok(g) = gguf::read_bytes(data) else { return };
    assert_eq!(g.file_len, data.len() as u64);
    assert!(g.alignment.is_power_of_two() && g.data_start <= g.file_len);
    let mut expected = 0u64;
    for t in &g.tensors {
        assert!(t.ggml_type.is_known() && (1..=4).contains(&t.dims.len()));
        assert_eq!(t.offset, expected);
        assert!(g.data_start + t.offset + t.nbytes <= g.file_len);
        expected = t.offset + t.nbytes.div_ceil(g.alignment) * g.alignment;
    }
    for (_, value) in &g.metadata {
        let _ = value.to_string();
    }
    let _ = (g.tensor_bytes(), g.type_summary(), g.main_type(), g.vocab_size());
    let _ = (g.block_count(), g.embedding_length(), g.context_length());
    for expected_vocab in [None, Some(0), Some(32000)] {
        if let Err(e) = g.check_runnable(expected_vocab) {
            let _ = e.to_string();
        }
    }
});
