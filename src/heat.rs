//! Heat and clock: the SoC temperature, the CPU clock and throttling, as a Pi 5
//! without a cooler drifts under sustained load. Read from sysfs
//! (`/sys/class/thermal/thermal_zone*`, `/sys/devices/system/cpu/cpu*/cpufreq`)
//! and, where it exists, `vcgencmd get_throttled`. Whatever is missing (a VM,
//! a PC without cpufreq) is `None` and shown as unavailable, never an error.
//!
//! Tests point [`SYSFS_ROOT_ENV`] at a fake tree and [`VCGENCMD_ENV`] at a fake
//! program.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// A directory standing in for `/` when reading `sys/...` (tests).
pub const SYSFS_ROOT_ENV: &str = "RUNLENS_SYSFS_ROOT";
/// The `vcgencmd` program to run (tests); by default `vcgencmd` from `PATH`,
/// and none when [`SYSFS_ROOT_ENV`] is set.
pub const VCGENCMD_ENV: &str = "RUNLENS_VCGENCMD";

/// `vcgencmd get_throttled` bits that mean "now": under-voltage, ARM clock
/// capped, throttled, soft temperature limit.
pub const THROTTLED_NOW: u32 = 0xF;
/// The same four as "has occurred since boot".
pub const THROTTLED_SINCE_BOOT: u32 = 0xF_0000;

/// One reading. Every field is `None` where this machine does not expose it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HeatSample {
    /// SoC (or CPU package) temperature, °C.
    pub temp_c: Option<f64>,
    /// Current CPU clock, MHz (the highest of the cores).
    pub cpu_mhz: Option<f64>,
    /// The clock's maximum, MHz.
    pub max_mhz: Option<f64>,
    /// `vcgencmd get_throttled`'s bits.
    pub throttled: Option<u32>,
}

/// Where to read from.
#[derive(Debug, Clone)]
pub struct HeatSource {
    root: PathBuf,
    vcgencmd: Option<PathBuf>,
}

impl HeatSource {
    /// `/` and `vcgencmd`, or what the environment variables name.
    pub fn from_env() -> HeatSource {
        let root = std::env::var_os(SYSFS_ROOT_ENV).filter(|r| !r.is_empty()).map(PathBuf::from);
        let vcgencmd = match std::env::var_os(VCGENCMD_ENV).filter(|v| !v.is_empty()) {
            Some(program) => Some(PathBuf::from(program)),
            None if root.is_none() => Some(PathBuf::from("vcgencmd")),
            None => None,
        };
        HeatSource { root: root.unwrap_or_else(|| PathBuf::from("/")), vcgencmd }
    }

    pub fn new(root: &Path, vcgencmd: Option<&Path>) -> HeatSource {
        HeatSource { root: root.to_path_buf(), vcgencmd: vcgencmd.map(Path::to_path_buf) }
    }

    pub fn sample(&self) -> HeatSample {
        let (cpu_mhz, max_mhz) = self.clock();
        HeatSample { temp_c: self.temperature(), cpu_mhz, max_mhz, throttled: self.throttled() }
    }

    /// The CPU's zone (`cpu-thermal` on a Pi, `x86_pkg_temp` on a PC), else the first zone.
    fn temperature(&self) -> Option<f64> {
        let dir = self.root.join("sys/class/thermal");
        let mut zones: Vec<PathBuf> = std::fs::read_dir(&dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("thermal_zone")))
            .collect();
        zones.sort();
        let kind = |zone: &Path| std::fs::read_to_string(zone.join("type")).unwrap_or_default().trim().to_string();
        let zone = zones
            .iter()
            .find(|z| matches!(kind(z).as_str(), "cpu-thermal" | "x86_pkg_temp" | "soc_thermal"))
            .or_else(|| zones.first())?;
        let millideg: f64 = read_number(&zone.join("temp"))?;
        Some(millideg / 1000.0)
    }

    fn clock(&self) -> (Option<f64>, Option<f64>) {
        let dir = self.root.join("sys/devices/system/cpu");
        let Ok(entries) = std::fs::read_dir(&dir) else { return (None, None) };
        let cpus: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().strip_prefix("cpu").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))))
            .collect();
        let khz = |file: &str| cpus.iter().filter_map(|c| read_number(&c.join("cpufreq").join(file))).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        (khz("scaling_cur_freq").map(|k| k / 1000.0), khz("cpuinfo_max_freq").map(|k| k / 1000.0))
    }

    /// `throttled=0x50005` from `vcgencmd get_throttled`.
    fn throttled(&self) -> Option<u32> {
        let out = Command::new(self.vcgencmd.as_ref()?).arg("get_throttled").output().ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let hex = text.trim().strip_prefix("throttled=")?.trim_start_matches("0x");
        u32::from_str_radix(hex, 16).ok()
    }
}

fn read_number(path: &Path) -> Option<f64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl HeatSample {
    /// Nothing could be read.
    pub fn is_unavailable(&self) -> bool {
        self.temp_c.is_none() && self.cpu_mhz.is_none() && self.throttled.is_none()
    }

    /// For the status bar: `61.2°C 2400 MHz`, `throttled`, or `heat n/a`.
    pub fn short(&self) -> String {
        if self.is_unavailable() {
            return "heat n/a".to_string();
        }
        let mut parts = Vec::new();
        if let Some(t) = self.temp_c {
            parts.push(format!("{t:.0}°C"));
        }
        if let Some(mhz) = self.cpu_mhz {
            parts.push(format!("{mhz:.0} MHz"));
        }
        if self.throttled.is_some_and(|t| t & THROTTLED_NOW != 0) {
            parts.push("THROTTLED".to_string());
        }
        parts.join(" ")
    }
}

/// What changed between the start and the end of a measurement that makes its
/// numbers suspect: the clock dropped (more than 5%), or throttling was
/// flagged (now, or newly since boot). `None`: nothing seen.
pub fn drift_warning(start: &HeatSample, end: &HeatSample) -> Option<String> {
    let mut why = Vec::new();
    if let (Some(a), Some(b)) = (start.cpu_mhz, end.cpu_mhz) {
        if b < a * 0.95 {
            why.push(format!("the CPU clock dropped from {a:.0} to {b:.0} MHz"));
        }
    }
    if let Some(t) = end.throttled {
        let new_since_boot = t & THROTTLED_SINCE_BOOT & !start.throttled.unwrap_or(0);
        if t & THROTTLED_NOW != 0 || new_since_boot != 0 {
            why.push(format!("throttling was flagged (get_throttled 0x{t:x})"));
        }
    }
    if let (Some(a), Some(b)) = (start.temp_c, end.temp_c) {
        if !why.is_empty() {
            why.push(format!("{a:.0} to {b:.0}°C"));
        }
    }
    (!why.is_empty()).then(|| why.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A Pi 5 as sysfs shows it: two zones, four cores at 2.4 GHz.
    fn pi(root: &Path, mhz: u32) {
        write(root, "sys/class/thermal/thermal_zone0/type", "cpu-thermal\n");
        write(root, "sys/class/thermal/thermal_zone0/temp", "61250\n");
        write(root, "sys/class/thermal/thermal_zone1/type", "other\n");
        write(root, "sys/class/thermal/thermal_zone1/temp", "30000\n");
        for cpu in 0..4 {
            write(root, &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"), &format!("{}\n", mhz * 1000));
            write(root, &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq"), "2400000\n");
        }
        write(root, "sys/devices/system/cpu/cpufreq/policy0/scaling_cur_freq", "1\n");
    }

    #[test]
    fn reads_a_fake_pi_tree() {
        let dir = tempfile::tempdir().unwrap();
        pi(dir.path(), 2400);
        let vc = dir.path().join("vcgencmd");
        write(dir.path(), "vcgencmd", "#!/bin/sh\necho throttled=0x50005\n");
        std::fs::set_permissions(&vc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let s = HeatSource::new(dir.path(), Some(&vc)).sample();
        assert_eq!(s, HeatSample { temp_c: Some(61.25), cpu_mhz: Some(2400.0), max_mhz: Some(2400.0), throttled: Some(0x50005) });
        assert_eq!(s.short(), "61°C 2400 MHz THROTTLED");
    }

    #[test]
    fn a_machine_without_the_files_is_unavailable_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let s = HeatSource::new(dir.path(), Some(&dir.path().join("no-such-vcgencmd"))).sample();
        assert!(s.is_unavailable());
        assert_eq!(s.short(), "heat n/a");
        // A garbled file is unavailable too.
        write(dir.path(), "sys/class/thermal/thermal_zone0/temp", "hot\n");
        assert_eq!(HeatSource::new(dir.path(), None).sample().temp_c, None);
    }

    #[test]
    fn warns_when_the_clock_drops_or_throttling_is_flagged() {
        let at = |mhz: f64, throttled: u32| HeatSample { temp_c: Some(70.0), cpu_mhz: Some(mhz), max_mhz: Some(2400.0), throttled: Some(throttled) };
        assert_eq!(drift_warning(&at(2400.0, 0), &at(2400.0, 0)), None);
        assert_eq!(drift_warning(&at(2400.0, 0), &at(2350.0, 0)), None, "within 5%");
        assert!(drift_warning(&at(2400.0, 0), &at(1500.0, 0)).unwrap().contains("dropped from 2400 to 1500 MHz"));
        assert!(drift_warning(&at(2400.0, 0), &at(2400.0, 0x4)).unwrap().contains("throttling"));
        assert!(drift_warning(&at(2400.0, 0), &at(2400.0, 0x40000)).unwrap().contains("0x40000"), "newly since boot");
        assert_eq!(drift_warning(&at(2400.0, 0x40000), &at(2400.0, 0x40000)), None, "flagged before this measurement");
        assert_eq!(drift_warning(&HeatSample::default(), &HeatSample::default()), None);
    }
}
