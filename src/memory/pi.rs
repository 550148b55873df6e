//! Which columns fit a Raspberry Pi 5 of each memory size, after what the
//! operating system keeps (an assumption, stated: [`OS_ASSUMPTION`]).

use serde::Serialize;

use super::{nearest, ColumnNeed, Holding};

/// The Pi 5's memory sizes, GiB.
pub const PI5_RAM_GIB: [u64; 4] = [2, 4, 8, 16];

/// What a Pi 5 keeps before runlens starts, unless `--os-reserve` says otherwise.
pub const OS_RESERVE: u64 = 512 << 20;

/// The assumption behind [`OS_RESERVE`], for the table and the JSON.
pub const OS_ASSUMPTION: &str = "Raspberry Pi OS Lite (64-bit, no desktop), nothing else running: the firmware and kernel \
    keep about 0.15 GiB of the RAM (MemTotal is that much below it), the system's services use about 0.2 GiB after boot, \
    and the rest of 0.5 GiB is a margin for the page cache; with the desktop add about 0.5 GiB (--os-reserve 1G)";

/// One Pi 5: what fits it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PiFit {
    pub ram_gib: u64,
    /// What runlens may hold in all there: the RAM less the operating system.
    pub for_runlens: u64,
    /// The columns that fit alone (`run`, `bench`, `profile`, `layers` hold one at a time).
    pub alone: Vec<String>,
    /// Whether the default columns fit together (the explorer without `--backends`).
    pub defaults_fit: bool,
    /// The set nearest to the defaults that fits together (the defaults when they fit).
    pub together: Vec<String>,
    /// What that set needs with runlens itself.
    pub together_bytes: u64,
}

/// What fits each Pi 5: `held` is runlens itself before loading, `os` what the system keeps.
pub fn fits(catalog: &[ColumnNeed], defaults: &[&ColumnNeed], held: u64, os: u64) -> Vec<PiFit> {
    PI5_RAM_GIB
        .iter()
        .map(|&gib| {
            let for_runlens = (gib << 30).saturating_sub(os);
            let room = for_runlens.saturating_sub(held);
            let together = nearest(defaults, catalog, room, Holding::Together);
            PiFit {
                ram_gib: gib,
                for_runlens,
                alone: catalog.iter().filter(|n| n.peak <= room).map(|n| n.name.clone()).collect(),
                defaults_fit: Holding::Together.need(defaults) <= room,
                together_bytes: held + Holding::Together.need(&together),
                together: together.into_iter().map(|n| n.name.clone()).collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pi_gets_the_columns_its_memory_holds() {
        let n = |name: &str, column: &str, gib10: u64| ColumnNeed {
            name: name.into(),
            column: column.into(),
            quantized: false,
            steady: 0,
            peak: (gib10 << 30) / 10,
            estimated_peak: (gib10 << 30) / 10,
            measured_peak: None,
            parts: vec![],
            transient: None,
        };
        let catalog = vec![n("eager", "eager", 30), n("portable", "portable", 20), n("xnnpack", "xnnpack", 26), n("xnnpack-8da4w", "xnnpack", 5)];
        let defaults: Vec<&ColumnNeed> = catalog[..3].iter().collect();
        let pis = fits(&catalog, &defaults, 128 << 20, OS_RESERVE);
        assert_eq!(pis.len(), 4);
        assert_eq!(pis[0].alone, ["xnnpack-8da4w"]);
        assert_eq!(pis[0].together, ["xnnpack-8da4w"]);
        assert_eq!(pis[1].alone, ["eager", "portable", "xnnpack", "xnnpack-8da4w"]);
        // 4 GiB: xnnpack becomes its 4-bit variant, then eager, the largest, goes.
        assert_eq!((pis[1].defaults_fit, pis[1].together.clone()), (false, vec!["portable".to_string(), "xnnpack-8da4w".to_string()]));
        assert_eq!((pis[2].defaults_fit, pis[2].together.clone()), (false, vec!["eager".into(), "portable".into(), "xnnpack-8da4w".into()]));
        assert!(pis[3].defaults_fit, "{pis:?}");
        assert_eq!(pis[3].together, ["eager", "portable", "xnnpack"]);
        assert_eq!(pis[3].for_runlens, (16 << 30) - OS_RESERVE);
    }
}
