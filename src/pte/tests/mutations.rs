//! A small, deterministic mutation loop over real programs, run with every
//! `cargo test`; the open-ended search is the cargo-fuzz target in `fuzz/`
//! (no crash found there so far; any it finds gets a test here).

use super::*;

/// xorshift64*: reproducible without a dependency.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub(super) fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
    match rng.below(6) {
        // Random bytes here and there.
        0 => {
            for _ in 0..=rng.below(8) {
                let i = rng.below(bytes.len());
                if let Some(b) = bytes.get_mut(i) {
                    *b = rng.next() as u8;
                }
            }
        }
        // A 32-bit value set to an edge case: offsets, lengths, indices.
        1 => {
            let i = rng.below(bytes.len().saturating_sub(4));
            let v: u32 = [0, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX, bytes.len() as u32][rng.below(6)];
            if let Some(w) = bytes.get_mut(i..i + 4) {
                w.copy_from_slice(&v.to_le_bytes());
            }
        }
        // Cut the tail.
        2 => bytes.truncate(rng.below(bytes.len())),
        // Remove a chunk.
        3 => {
            let at = rng.below(bytes.len());
            let len = rng.below(64).min(bytes.len() - at.min(bytes.len()));
            bytes.drain(at..at + len);
        }
        // Duplicate a chunk in place.
        4 => {
            let at = rng.below(bytes.len());
            let end = (at + rng.below(64)).min(bytes.len());
            let chunk = bytes[at..end].to_vec();
            bytes.splice(at..at, chunk);
        }
        // Bits flipped.
        _ => {
            let i = rng.below(bytes.len());
            if let Some(b) = bytes.get_mut(i) {
                *b ^= 1 << rng.below(8);
            }
        }
    }
}

#[test]
fn mutated_programs_give_a_report_or_an_error() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut seeds: Vec<Vec<u8>> = TESTDATA.iter().map(|n| testdata(&format!("{n}.pte"))).collect();
    seeds.push(full_file());
    let (mut ok, mut err) = (0, 0);
    for round in 0..4000 {
        let mut bytes = seeds[round % seeds.len()].clone();
        for _ in 0..=rng.below(3) {
            mutate(&mut rng, &mut bytes);
        }
        match read(&bytes) {
            Ok(report) => {
                ok += 1;
                let _ = report.to_string();
                serde_json::to_string(&report).unwrap();
            }
            Err(e) => {
                err += 1;
                let _ = e.to_string();
            }
        }
    }
    assert!(ok > 0 && err > 0, "ok {ok}, err {err}");
}
