//! Measured peaks: what a column really took at its load and first run,
//! remembered so that the check uses it next time. The estimate
//! ([`super::estimate`]) is read from headers and can be under what a runtime
//! really allocates (libtorch's start-up, a quantizer's scratch copies, a
//! runtime's own buffers); a measurement cannot be, for that input. Once one
//! exists the check uses the larger of the estimate and the measurement plus
//! [`MARGIN_PERCENT`] ([`figure`]).
//!
//! Two places measure, with one [`Watch`]: the probe's child around its load
//! and run of a `.pte`, a GGUF or an `.onnx` (`crate::backend::probe`), and the
//! commands that load one column at a time around each eager column's load and
//! runs in this process (a file's too when the probe is off): `run` and `bench` over their
//! runs, `layers` over its first run, `eval` over its first prompt (its text
//! pass, windows as long as the context, is its own workload). A watch resets the kernel's high-water mark (`echo 5 >
//! /proc/self/clear_refs`), reads `VmRSS` before the load and `VmHWM` after:
//! the peak above what the process held before.
//!
//! Kept in the probe's cache directory (`memory/`), keyed by the SHA-256 of the
//! column's file(s) (the probe's digest memo: a start reads no file to find a
//! measurement), what the runtime makes of them, and runlens' version; the
//! largest measurement is kept. docs/memory.md.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::backend::probe::cache;
use crate::backend::{BackendSpec, Source};
use crate::model::ModelDir;

/// A measured peak counts this much more (10%) in the check: one measurement is
/// one input and one thread count, and the next run may differ by the page
/// cache's and the allocator's timing (the same command's peak moved by up to 3%
/// between runs here), by a longer prompt (the estimate's full-length parts cover that)
/// or by more threads (each a scratch buffer). 10% also covers the gap between
/// a measurement taken after another column (what the allocator kept of it) and
/// one taken first.
pub const MARGIN_PERCENT: u64 = 10;

/// Bump when what a measurement means changes, so old ones are not read
/// (2: eval measures over the load and its first prompt, not its text pass).
const FORMAT: u32 = 2;

/// What the check uses for a column: its estimate, or its measured peak plus
/// [`MARGIN_PERCENT`] when that is larger.
pub fn figure(estimate: u64, measured: Option<u64>) -> u64 {
    measured.map_or(estimate, |m| estimate.max(with_margin(m)))
}

/// `bytes` plus [`MARGIN_PERCENT`].
pub fn with_margin(bytes: u64) -> u64 {
    bytes.saturating_add(bytes / 100 * MARGIN_PERCENT)
}

/// One remembered measurement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measurement {
    /// The most the column held above what the process held before its load, in bytes.
    pub peak: u64,
    /// Where it was measured: "the probe's child", "runlens run", ...
    pub by: String,
}

pub use crate::ffi::process::{status_bytes, Watch};

/// A watch around `spec`'s load and first runs in this process, when this
/// process is where it is measured: eager columns always, a file's (`.pte`,
/// GGUF, `.onnx`) when the probe is off (else the probe's child measures it).
pub fn watch(spec: &BackendSpec) -> Option<Watch> {
    match spec.source {
        Source::Program(_) | Source::Gguf(_) | Source::Onnx(_) if crate::backend::probe::enabled() => None,
        Source::Program(_) | Source::Gguf(_) | Source::Onnx(_) | Source::Eager(_) => Watch::start(),
    }
}

/// End `watch` (from [`watch`]) after `spec` loaded and ran: remember its peak.
/// Best effort: a measurement that cannot be kept costs only the next estimate.
pub fn finish(watch: Option<Watch>, spec: &BackendSpec, dir: &ModelDir, by: &str) {
    let (Some(watch), Some(dir_cache)) = (watch, cache::cache_dir()) else { return };
    let Some(peak) = watch.peak() else { return };
    if let Some(key) = key_of(spec, dir, |p| cache::digest_of(p, Some(&dir_cache)).ok()) {
        remember_in(&dir_cache, &key, Measurement { peak, by: by.to_string() });
    }
}

/// The measurement remembered for `spec`, if any. Reads no model file: a file
/// whose digest is not remembered (never loaded, or changed since) has none.
pub fn recall(spec: &BackendSpec, dir: &ModelDir) -> Option<Measurement> {
    let dir_cache = cache::cache_dir()?;
    let key = key_of(spec, dir, |p| cache::remembered_digest_of(p, &dir_cache))?;
    let own = recall_in(&dir_cache, &key);
    // A file's figure is the probe's child's, kept in its verdict (the backend layer does
    // not call up into this one), under the load the column makes: the larger of the two when both exist.
    let probed = spec
        .model_file()
        .zip(crate::backend::probe::Load::of_spec(spec, dir))
        .and_then(|(path, load)| crate::backend::probe::measured_peak(path, &load))
        .map(|peak| Measurement { peak, by: "the probe's child".into() });
    match (own, probed) {
        (Some(a), Some(b)) => Some(if a.peak >= b.peak { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The key of `spec`'s measurement: what the runtime makes of which files
/// (a program; a GGUF at the directory's context length, which sizes its KV
/// cache; eager's checkpoint in a weight format), with each file's digest.
fn key_of(spec: &BackendSpec, dir: &ModelDir, digest: impl Fn(&Path) -> Option<String>) -> Option<String> {
    let (what, files): (String, Vec<PathBuf>) = match &spec.source {
        Source::Program(path) => ("program".into(), vec![path.clone()]),
        Source::Gguf(path) => (format!("gguf at {} positions", dir.max_seq_len()), vec![path.clone()]),
        Source::Onnx(path) => ("onnx".into(), vec![path.clone()]),
        Source::Eager(format) => (format!("eager {format:?}"), dir.weight_files().ok()?),
    };
    let digests = files.iter().map(|f| digest(f)).collect::<Option<Vec<String>>>()?;
    Some(key(&what, &digests))
}

fn key(what: &str, digests: &[String]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(what.as_bytes());
    for d in digests {
        hasher.update(b"\0");
        hasher.update(d.as_bytes());
    }
    format!("{}-{}-{FORMAT}", cache::hex(&hasher.finalize()), env!("CARGO_PKG_VERSION"))
}

fn path_in(dir_cache: &Path, key: &str) -> PathBuf {
    dir_cache.join("memory").join(format!("{key}.json"))
}

fn recall_in(dir_cache: &Path, key: &str) -> Option<Measurement> {
    serde_json::from_slice(&std::fs::read(path_in(dir_cache, key)).ok()?).ok()
}

/// Keep the larger of `m` and what is remembered under `key`.
fn remember_in(dir_cache: &Path, key: &str, m: Measurement) {
    if recall_in(dir_cache, key).is_some_and(|old| old.peak >= m.peak) {
        return;
    }
    if let Ok(json) = serde_json::to_vec(&m) {
        cache::write_atomically(&path_in(dir_cache, key), &json);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_check_takes_the_larger_of_the_estimate_and_the_measurement_with_its_margin() {
        assert_eq!(figure(700 * MIB, None), 700 * MIB);
        // Measured under the estimate, even with the margin: the estimate stands.
        assert_eq!(figure(700 * MIB, Some(600 * MIB)), 700 * MIB);
        // Measured 650: with 10% it is 715, over the estimate.
        assert_eq!(figure(700 * MIB, Some(650 * MIB)), 715 * MIB);
        assert_eq!(with_margin(100), 110);
        assert_eq!(with_margin(u64::MAX), u64::MAX);
    }

    #[test]
    fn reads_the_status_fields_in_bytes() {
        let status = "Name:\trunlens\nVmHWM:\t  892020 kB\nVmRSS:\t  125024 kB\nRssAnon:\t 1 kB\n";
        assert_eq!(status_bytes(status, "VmHWM"), Some(892020 * 1024));
        assert_eq!(status_bytes(status, "VmRSS"), Some(125024 * 1024));
        assert_eq!(status_bytes(status, "VmSwap"), None);
        assert_eq!(status_bytes("VmRSS: 12", "VmRSS"), None);
        assert_eq!(status_bytes("VmRSS: x kB", "VmRSS"), None);
    }

    #[test]
    fn a_watch_sees_what_was_allocated_after_it_started() {
        let Some(watch) = Watch::start() else { return eprintln!("no /proc/self/clear_refs here: not measured") };
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        drop(block);
        let peak = watch.peak().unwrap();
        assert!(peak >= 60 * MIB, "64 MiB touched, a peak of {peak} bytes seen");
        // A new watch starts from what is resident now, the block gone.
        let again = Watch::start().unwrap();
        assert!(again.peak().unwrap() < 32 * MIB);
    }

    #[test]
    fn measurements_round_trip_and_the_largest_is_kept() {
        let work = tempfile::tempdir().unwrap();
        let k = key("gguf at 2048 positions", &["ab".repeat(32)]);
        assert_eq!(recall_in(work.path(), &k), None);
        let first = Measurement { peak: 300 * MIB, by: "runlens run".into() };
        remember_in(work.path(), &k, first.clone());
        assert_eq!(recall_in(work.path(), &k), Some(first.clone()));
        // A smaller one does not replace it; a larger one does.
        remember_in(work.path(), &k, Measurement { peak: 200 * MIB, by: "runlens bench".into() });
        assert_eq!(recall_in(work.path(), &k), Some(first));
        let larger = Measurement { peak: 320 * MIB, by: "runlens eval".into() };
        remember_in(work.path(), &k, larger.clone());
        assert_eq!(recall_in(work.path(), &k), Some(larger));
        // Another file, another runtime use of the same file, or a damaged entry: none.
        assert_eq!(recall_in(work.path(), &key("gguf at 2048 positions", &["cd".repeat(32)])), None);
        assert_eq!(recall_in(work.path(), &key("gguf at 256 positions", &["ab".repeat(32)])), None);
        std::fs::write(path_in(work.path(), &k), "{not json").unwrap();
        assert_eq!(recall_in(work.path(), &k), None);
        assert!(k.ends_with(&format!("-{}-{FORMAT}", env!("CARGO_PKG_VERSION"))), "{k}");
    }
}
