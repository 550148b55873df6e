//! A small, deterministic mutation loop over valid files, run with every
//! `cargo test`; the open-ended search is the cargo-fuzz target
//! `gguf_reader` in `fuzz/`.

use super::bad_input::{patch_u32, patch_u64};
use super::*;

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Lengths, counts, offsets and type ids at their edges.
const EDGES_U64: [u64; 12] =
    [0, 1, 0xff, 64, 1 << 30, (1 << 30) + 1, 1 << 31, 0xffff_ffff, 1 << 32, 1 << 63, i64::MAX as u64, u64::MAX];
const EDGES_U32: [u32; 12] = [0, 1, 3, 4, 5, 9, 13, 0xff, 0xffff, 1 << 31, 0x0300_0000, u32::MAX];

fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>, header_end: usize) {
    let len = bytes.len();
    match rng.below(7) {
        // Random bytes anywhere.
        0 => {
            for _ in 0..=rng.below(8) {
                let i = rng.below(len);
                if let Some(b) = bytes.get_mut(i) {
                    *b = rng.next() as u8;
                }
            }
        }
        // A header field set to an edge value (at any byte, aligned or not).
        1 => {
            let at = rng.below(header_end.min(len).saturating_sub(8));
            if at + 8 <= len {
                patch_u64(bytes, at, EDGES_U64[rng.below(EDGES_U64.len())]);
            }
        }
        2 => {
            let at = rng.below(header_end.min(len).saturating_sub(4));
            if at + 4 <= len {
                patch_u32(bytes, at, EDGES_U32[rng.below(EDGES_U32.len())]);
            }
        }
        // Cut the tail.
        3 => bytes.truncate(rng.below(len)),
        // A chunk copied over another place.
        4 => {
            let (from, to) = (rng.below(len), rng.below(len));
            let n = rng.below(64).min(len - from.max(to));
            let chunk = bytes[from..from + n].to_vec();
            bytes[to..to + n].copy_from_slice(&chunk);
        }
        // A chunk copied in, shifting what follows.
        5 => {
            let (from, to) = (rng.below(len), rng.below(len));
            let end = (from + rng.below(64)).min(len);
            let chunk = bytes[from..end].to_vec();
            bytes.splice(to..to, chunk);
        }
        // A chunk removed.
        _ => {
            let at = rng.below(len);
            let n = rng.below(64).min(len - at.min(len));
            bytes.drain(at..at + n);
        }
    }
}

/// What every header read must satisfy.
fn check(g: &GgufFile) {
    assert!(g.version == 2 || g.version == 3);
    assert!(g.alignment.is_power_of_two() && g.alignment <= u64::from(u32::MAX));
    assert!(g.data_start <= g.file_len);
    let mut keys: Vec<&str> = g.metadata.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    assert!(keys.windows(2).all(|w| w[0] != w[1]) && !keys.contains(&""));
    let mut expected = 0;
    for t in &g.tensors {
        assert!(!t.name.is_empty() && (1..=4).contains(&t.dims.len()) && t.ggml_type.is_known());
        assert_eq!((t.offset, t.offset % g.alignment), (expected, 0));
        assert!(g.data_start + t.offset + t.nbytes <= g.file_len);
        expected = t.offset + t.nbytes.div_ceil(g.alignment) * g.alignment;
    }
    for (_, v) in &g.metadata {
        let _ = v.to_string();
    }
    let _ = (g.tensor_bytes(), g.type_summary(), g.main_type(), g.vocab_size(), g.block_count());
    if let Err(e) = g.check_runnable(Some(VOCAB as u64)) {
        let _ = e.to_string();
    }
}

fn seeds() -> Vec<(Vec<u8>, usize)> {
    let (a, la) = spec().write();
    let mut other = spec();
    other.version = 2;
    other.kvs.retain(|(k, _)| k != b"general.alignment");
    other.alignment = 32;
    let (b, lb) = other.write();
    vec![(a, la.header_end), (b, lb.header_end)]
}

#[test]
fn mutated_files_give_a_header_or_an_error() {
    let mut rng = Rng(0x5eed_9a7f_0001_2345);
    let seeds = seeds();
    let (mut ok, mut err) = (0, 0);
    for round in 0..4000 {
        let (seed, header_end) = &seeds[round % seeds.len()];
        let mut bytes = seed.clone();
        for _ in 0..=rng.below(3) {
            mutate(&mut rng, &mut bytes, *header_end);
        }
        match read(&bytes) {
            Ok(g) => {
                ok += 1;
                assert_eq!(g.file_len, bytes.len() as u64);
                check(&g);
            }
            Err(e) => {
                err += 1;
                assert!(!e.to_string().is_empty());
            }
        }
    }
    // Flips in the data section (most of the file) leave the header whole.
    assert!(ok >= 500 && err >= 500, "ok {ok}, err {err}");
}

#[test]
fn flips_in_the_data_section_leave_the_header_as_it_was() {
    let (good, layout) = spec().write();
    let header = read(&good).unwrap();
    let mut rng = Rng(7);
    for _ in 0..300 {
        let mut bytes = good.clone();
        for _ in 0..=rng.below(16) {
            let i = layout.data_start + rng.below(good.len() - layout.data_start);
            bytes[i] ^= 1 << rng.below(8);
        }
        assert_eq!(read(&bytes).unwrap(), header);
    }
}

#[test]
fn every_header_position_set_to_every_edge_value() {
    let (good, layout) = spec().write();
    let mut bytes = good.clone();
    let (mut ok, mut err) = (0, 0);
    let mut try_read = |bytes: &[u8]| match read(bytes) {
        Ok(g) => {
            ok += 1;
            check(&g);
        }
        Err(e) => {
            err += 1;
            assert!(!e.to_string().is_empty());
        }
    };
    for at in 0..layout.header_end {
        for v in EDGES_U64 {
            let n = 8.min(bytes.len() - at);
            bytes[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
            try_read(&bytes);
            bytes[at..at + n].copy_from_slice(&good[at..at + n]);
        }
        for v in EDGES_U32 {
            patch_u32(&mut bytes, at, v);
            try_read(&bytes);
            bytes[at..at + 4].copy_from_slice(&good[at..at + 4]);
        }
    }
    // Token text and values can take any bytes; lengths and counts cannot.
    assert!(ok > 0 && err > 0, "ok {ok}, err {err}");
}
