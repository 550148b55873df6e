//! How fast this machine reads memory, measured by runlens itself: decoding
//! one token reads every weight of the model once, so `bandwidth / weight
//! bytes per token` is the ceiling of a decode step, and a bench row's
//! achieved GB/s says how near a runtime gets to it.
//!
//! The probe sums a buffer of 64-bit words well past the last-level cache
//! (four times its size, 512 MiB at least, 2 GiB at most), split evenly over
//! the bench's threads, each pass timed from the threads' start to the last
//! one's end; the best of the passes after one warm-up is the figure (as
//! STREAM and llama.cpp's discussions report it), with the median beside it
//! to show how stable it was.

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// One measurement of the read bandwidth.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReadBandwidth {
    /// The best pass, GB/s (10^9 bytes a second).
    pub gbps: f64,
    /// The median pass, GB/s.
    pub median_gbps: f64,
    /// Timed passes (after one warm-up pass).
    pub passes: usize,
    pub buffer_bytes: u64,
    pub threads: usize,
    /// The last-level cache the buffer was sized against, when sysfs says.
    pub llc_bytes: Option<u64>,
}

/// The largest cache of cpu0 in sysfs (`index*/size`, e.g. `32768K`).
pub fn last_level_cache_bytes() -> Option<u64> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok())
        .filter_map(|s| parse_size(s.trim()))
        .max()
}

/// `32768K`, `2M`, `1G` or a plain number of bytes.
fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits.parse().ok()?;
    let scale = match unit.trim() {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// Four times the last-level cache, within 512 MiB..2 GiB.
pub fn default_buffer_bytes() -> u64 {
    let llc = last_level_cache_bytes().unwrap_or(0);
    llc.saturating_mul(4).clamp(512 << 20, 2 << 30)
}

/// Reads `buffer_bytes` with `threads` threads, `passes` timed passes.
pub fn measure(threads: usize, buffer_bytes: u64, passes: usize) -> ReadBandwidth {
    let threads = threads.max(1);
    let words = usize::try_from(buffer_bytes / 8).unwrap_or(usize::MAX / 8).max(threads * 1024);
    // Written once so every page is really there (a zero page would read from one shared frame).
    let buffer: Vec<u64> = (0..words as u64).collect();
    let chunk = words.div_ceil(threads);
    let pass = || {
        let start = Instant::now();
        let sum = std::thread::scope(|s| {
            let handles: Vec<_> = buffer.chunks(chunk).map(|part| s.spawn(move || sum_words(part))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).fold(0u64, u64::wrapping_add)
        });
        std::hint::black_box(sum);
        start.elapsed().as_secs_f64()
    };
    pass();
    let mut rates: Vec<f64> = (0..passes.max(1)).map(|_| (words * 8) as f64 / pass() / 1e9).collect();
    rates.sort_by(f64::total_cmp);
    ReadBandwidth {
        gbps: *rates.last().unwrap_or(&0.0),
        median_gbps: rates[rates.len() / 2],
        passes: rates.len(),
        buffer_bytes: (words * 8) as u64,
        threads,
        llc_bytes: last_level_cache_bytes(),
    }
}

/// Four independent sums, so the compiler keeps several loads in flight.
fn sum_words(words: &[u64]) -> u64 {
    let mut acc = [0u64; 4];
    let mut quads = words.chunks_exact(4);
    for q in &mut quads {
        for (a, w) in acc.iter_mut().zip(q) {
            *a = a.wrapping_add(*w);
        }
    }
    let tail = quads.remainder().iter().fold(0u64, |a, w| a.wrapping_add(*w));
    acc.iter().fold(tail, |a, w| a.wrapping_add(*w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_sysfs_writes_them() {
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("lots"), None);
        let b = default_buffer_bytes();
        assert!((512 << 20..=2 << 30).contains(&b), "{b}");
    }

    #[test]
    fn the_sum_reads_every_word() {
        let words: Vec<u64> = (1..=1003).collect();
        assert_eq!(sum_words(&words), 1003 * 1004 / 2);
    }

    #[test]
    fn a_small_probe_gives_a_positive_figure() {
        // 16 MiB: a figure of the cache, not of memory; it only has to be a real, positive rate.
        let r = measure(2, 16 << 20, 3);
        assert!(r.gbps > 0.0 && r.gbps.is_finite(), "{r:?}");
        assert!(r.median_gbps <= r.gbps, "{r:?}");
        assert_eq!((r.passes, r.threads, r.buffer_bytes), (3, 2, 16 << 20));
        let json = serde_json::to_value(&r).unwrap();
        for field in ["gbps", "median_gbps", "passes", "buffer_bytes", "threads", "llc_bytes"] {
            assert!(json.get(field).is_some(), "{field} in {json}");
        }
    }
}
