//! The machine a bench ran on: CPU, cores, OS and the runtime versions.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    pub cpu: String,
    /// Cores this process may use.
    pub cores: usize,
    pub os: String,
    pub arch: String,
    pub runlens: String,
    /// torch, executorch (and, with `--python`, transformers and python), from the venv.
    pub versions: BTreeMap<String, String>,
    /// Read bandwidth measured at the bench's thread count, GB/s (text-generation benches).
    #[serde(default)]
    pub memory_read_gbps: Option<f64>,
    /// How it was measured.
    #[serde(default)]
    pub memory_read: Option<super::bandwidth::ReadBandwidth>,
}

impl Machine {
    /// Describe this machine; versions are read from the venv's `site-packages`.
    pub fn probe(venv: Option<&Path>) -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| s.lines().find(|l| l.starts_with("model name") || l.starts_with("Model")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string()))
            .unwrap_or_else(|| "unknown".to_string());
        let pretty = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string())))
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default();
        let os = if kernel.is_empty() { pretty } else { format!("{pretty}, Linux {kernel}") };
        let mut versions = BTreeMap::new();
        if let Some(venv) = venv {
            // onnxruntime: its wheel's library is the one the ONNX Runtime column loads (ort's load-dynamic).
            for package in ["torch", "executorch", "transformers", "onnxruntime"] {
                if let Some(v) = dist_version(venv, package) {
                    versions.insert(package.to_string(), v);
                }
            }
        }
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            os,
            arch: std::env::consts::ARCH.to_string(),
            runlens: env!("CARGO_PKG_VERSION").to_string(),
            versions,
            memory_read_gbps: None,
            memory_read: None,
        }
    }

    /// Measure the read bandwidth with `threads` threads ([`super::bandwidth`]) and keep it.
    pub fn measure_read_bandwidth(&mut self, threads: usize) {
        let probe = super::bandwidth::measure(threads, super::bandwidth::default_buffer_bytes(), 5);
        self.memory_read_gbps = Some(probe.gbps);
        self.memory_read = Some(probe);
    }

    /// One line for the table header and the README.
    pub fn summary(&self) -> String {
        let v: Vec<String> = self.versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
        format!("{} ({} cores, {}), {}; {}", self.cpu, self.cores, self.arch, self.os, v.join(", "))
    }
}

/// The version of `package` from its `NAME-VERSION.dist-info` folder in the venv.
fn dist_version(venv: &Path, package: &str) -> Option<String> {
    let lib = std::fs::read_dir(venv.join("lib")).ok()?;
    for py in lib.flatten() {
        let site = py.path().join("site-packages");
        let Ok(entries) = std::fs::read_dir(&site) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(rest) = name.strip_suffix(".dist-info").and_then(|n| n.strip_prefix(&format!("{package}-"))) {
                if rest.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                    return Some(rest.to_string());
                }
            }
        }
    }
    None
}
