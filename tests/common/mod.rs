//! Helpers the integration tests share (`mod common;` in each test file).
#![allow(dead_code)] // each test crate uses a different part

pub mod damage;

use std::path::{Path, PathBuf};

use runlens::model::ModelDir;

/// `$RUNLENS_MODELS`, else `models/` of this checkout (`make models` fills it).
pub fn models_root() -> PathBuf {
    match std::env::var_os("RUNLENS_MODELS") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("models"),
    }
}

pub fn models() -> ModelDir {
    ModelDir::new(&models_root())
}

/// Damaged versions of a real `.pte`: a third of it, 200 kB of xorshift noise, and
/// the first 4 kB with every seventh byte flipped (headers and tables).
pub fn corrupted_copies(real: &[u8]) -> [(&'static str, Vec<u8>); 3] {
    let truncated = real[..real.len() / 3].to_vec();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..200_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let mut flipped = real.to_vec();
    for i in (64..4096.min(real.len())).step_by(7) {
        flipped[i] ^= 0xff;
    }
    [("truncated", truncated), ("random bytes", random), ("flipped bytes", flipped)]
}
