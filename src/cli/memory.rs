//! `runlens memory [--json] [--os-reserve SIZE]`: what each column of a model
//! directory will hold, whether the columns asked for (or the defaults) fit
//! this process, and which fit a 2, 4, 8 and 16 GB Raspberry Pi 5, estimated
//! from the files without loading anything. A command of its own, not a part
//! of `footprint`: footprint measures stacks by starting processes (seconds to
//! minutes, both binaries and Python); this reads headers in milliseconds, and
//! is the very estimate the memory check refuses a set with.

use std::fmt::Write as _;

use clap::Args;
use serde::Serialize;

use super::Common;
use crate::memory::pi::{self, PiFit};
use crate::memory::size::show;
use crate::memory::{self, ColumnNeed, Holding, Limit};

#[derive(Debug, Args)]
pub struct MemoryArgs {
    /// Print one JSON object instead of the tables (sizes in bytes).
    #[arg(long)]
    pub json: bool,
    /// What a Pi 5's operating system keeps before runlens starts [default: 512M: Raspberry Pi OS Lite, no desktop]
    #[arg(long, value_name = "SIZE", value_parser = memory::size::parse)]
    pub os_reserve: Option<u64>,
}

/// `runlens memory --json`.
#[derive(Debug, Serialize)]
pub struct MemoryReport {
    pub model: String,
    pub task: String,
    /// Every column whose files are present, in catalog order.
    pub columns: Vec<ColumnNeed>,
    /// `--backends`, else the default columns: the set checked.
    pub asked: Vec<String>,
    /// What runlens holds before any column loads (this process now).
    pub runlens_itself: u64,
    /// This machine: null when no limit could be read.
    pub here: Option<Here>,
    pub os_reserve: u64,
    pub os_assumption: &'static str,
    pub pi5: Vec<PiFit>,
}

/// The set asked for on this machine.
#[derive(Debug, Serialize)]
pub struct Here {
    /// What this process may take on top of runlens itself, and why.
    pub room: u64,
    pub room_from: String,
    /// The set together (the explorer), besides runlens itself.
    pub together: u64,
    pub together_fits: bool,
    /// One at a time (`run`, `bench`, `profile`, `layers`): the largest.
    pub one_at_a_time: u64,
    pub one_at_a_time_fits: bool,
    /// The nearest set that fits together.
    pub nearest_together: Vec<String>,
}

pub fn run(common: &Common, args: &MemoryArgs) -> anyhow::Result<()> {
    let dir = common.model_dir()?;
    let catalog = common.catalog(&dir)?;
    let present: Vec<_> = catalog.into_iter().filter(|s| crate::backend::files_present(s, &dir).is_ok()).collect();
    let columns = memory::needs(&present, &dir);
    let asked_specs = common.backends(&dir)?;
    let asked: Vec<&ColumnNeed> = asked_specs.iter().filter_map(|s| columns.iter().find(|n| n.name == s.name)).collect();
    // runlens itself as the commands hold it before their first load: with the model's
    // tokenizer, chat template and detokenizer (SmolLM2-135M's: 47 MiB more than without).
    let _setup = common.setup().ok();
    let limit = Limit::find(common.memory_budget);
    let held = match &limit {
        Ok(l) => l.held,
        Err(_) => memory::resident_now().unwrap_or(0),
    };
    let here = limit.as_ref().ok().map(|l| Here {
        room: l.room,
        room_from: l.why.clone(),
        together: Holding::Together.need(&asked),
        together_fits: Holding::Together.need(&asked) <= l.room,
        one_at_a_time: Holding::OneAtATime.need(&asked),
        one_at_a_time_fits: Holding::OneAtATime.need(&asked) <= l.room,
        nearest_together: memory::nearest(&asked, &columns, l.room, Holding::Together).iter().map(|n| n.name.clone()).collect(),
    });
    let os_reserve = args.os_reserve.unwrap_or(pi::OS_RESERVE);
    let report = MemoryReport {
        model: dir.model_name().to_string(),
        task: dir.task().to_string(),
        pi5: pi::fits(&columns, &asked, held, os_reserve),
        asked: asked.iter().map(|n| n.name.clone()).collect(),
        columns: columns.clone(),
        runlens_itself: held,
        here,
        os_reserve,
        os_assumption: pi::OS_ASSUMPTION,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report, limit.err()));
    }
    Ok(())
}

/// The report for people.
pub fn table(r: &MemoryReport, no_limit: Option<String>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} · {} · estimated from the files, nothing loaded (docs/memory.md)\n", r.model, r.task);
    let width = r.columns.iter().map(|n| n.name.len()).max().unwrap_or(6).max(6);
    let _ = writeln!(
        out,
        "{:<width$}  {:>9}  {:>9}  {:>9}  {:>9}  what it holds once loaded; what peaks while it loads",
        "column", "peak", "estimated", "measured", "loaded"
    );
    for n in &r.columns {
        let parts: Vec<String> = n.parts.iter().filter(|p| p.bytes > 0).map(|p| format!("{} {}", p.what, show(p.bytes))).collect();
        let peak = n.transient.as_ref().map(|t| format!("; {}", t.what)).unwrap_or_default();
        let mark = if n.peak_is_measured() { "*" } else { " " };
        let measured = n.measured_peak.map_or("-".to_string(), show);
        let _ = writeln!(
            out,
            "{:<width$} {mark}{:>9}  {:>9}  {:>9}  {:>9}  {}{peak}",
            n.name,
            show(n.peak),
            show(n.estimated_peak),
            measured,
            show(n.steady),
            parts.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "peak: what the check uses, the estimate or (*) the measured peak + {}% when larger; measured: at an earlier load of the same file(s), '-' when none was",
        memory::measured::MARGIN_PERCENT
    );
    let _ = writeln!(out, "\nrunlens itself before loading: {} (this process now)", show(r.runlens_itself));
    let yes = |fits: bool| if fits { "fits" } else { "does NOT fit" };
    match (&r.here, no_limit) {
        (Some(h), _) => {
            let _ = writeln!(out, "here: this process may take {} more ({})", show(h.room), h.room_from);
            let _ = writeln!(out, "  {} together (the explorer): {}, {}", r.asked.join(", "), show(h.together), yes(h.together_fits));
            let _ = writeln!(out, "  one at a time (run, bench, profile, layers): {} for the largest, {}", show(h.one_at_a_time), yes(h.one_at_a_time_fits));
            if !h.together_fits {
                let _ = writeln!(out, "  nearest set that fits together: --backends {}", h.nearest_together.join(","));
            }
        }
        (None, why) => {
            let _ = writeln!(out, "here: cannot tell what memory is free ({}); --memory-budget SIZE sets a limit", why.unwrap_or_default());
        }
    }
    let _ = writeln!(out, "\nRaspberry Pi 5, after {} for the OS (assumed: {})", show(r.os_reserve), r.os_assumption);
    let _ = write!(out, "{:<width$}", "");
    for p in &r.pi5 {
        let _ = write!(out, "  {:>9}", format!("{} GB", p.ram_gib));
    }
    let _ = write!(out, "\n{:<width$}", "for runlens");
    for p in &r.pi5 {
        let _ = write!(out, "  {:>9}", show(p.for_runlens));
    }
    let _ = writeln!(out);
    for n in &r.columns {
        let _ = write!(out, "{:<width$}", n.name);
        for p in &r.pi5 {
            let _ = write!(out, "  {:>9}", if p.alone.contains(&n.name) { "fits" } else { "-" });
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "(a column fits alone: run, bench, profile and layers hold one at a time)");
    for p in &r.pi5 {
        let set = match (p.defaults_fit, p.together.is_empty()) {
            (true, _) => format!("{} (all asked): {}", r.asked.join(","), show(p.together_bytes)),
            (false, true) => "no column fits".to_string(),
            (false, false) => format!("{}: {}", p.together.join(","), show(p.together_bytes)),
        };
        let _ = writeln!(out, "{:>2} GB, together (the explorer): {set}", p.ram_gib);
    }
    out
}
