//! Memory that fits: before any column loads, what each will hold
//! ([`estimate`]), what the process may use ([`limit`]), and whether the set
//! asked for fits, held as the command holds it (`fit`). A set that does not
//! fit is refused before anything loads ([`NotEnoughMemory`], exit 2), with the
//! figures and the nearest set that fits, instead of the kernel's OOM killer
//! ending runlens with no word. `--memory-budget SIZE` (or
//! `RUNLENS_MEMORY_BUDGET`) replaces the measured limit. docs/memory.md.

pub mod estimate;
mod fit;
pub mod limit;
pub mod measured;
pub mod pi;
pub mod size;

pub use estimate::{ColumnNeed, Geometry, Part};
pub use fit::{nearest, Holding};
pub use limit::{Bound, Measured};

use crate::backend::BackendSpec;
use crate::model::ModelDir;

/// What this process may still take, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Bytes the process may take on top of what it holds now.
    pub room: u64,
    /// What it holds now (`VmRSS`), before any column loads: runlens itself.
    pub held: u64,
    /// "MemAvailable 3.28 GiB", "--memory-budget 900 MiB less the 124 MiB runlens holds".
    pub why: String,
}

impl Limit {
    /// `--memory-budget` (what runlens may hold in all) when given, else the
    /// tightest measured bound; `Err` with what could not be read when nothing could.
    pub fn find(budget: Option<u64>) -> Result<Limit, String> {
        let held = resident_now().unwrap_or(0);
        if let Some(total) = budget {
            let why = format!("--memory-budget {} less the {} runlens holds", size::show(total), size::show(held));
            return Ok(Limit { room: total.saturating_sub(held), held, why });
        }
        let measured = Measured::read(std::path::Path::new("/"));
        match measured.tightest() {
            Some(bound) => Ok(Limit { room: bound.headroom(), held, why: bound.describe() }),
            None => Err(measured.notes.join("; ")),
        }
    }
}

/// What this process holds now (`VmRSS`), in bytes.
pub fn resident_now() -> Option<u64> {
    crate::footprint::process::Resident::of(std::process::id()).ok().map(|r| (r.rss_mb * 1048576.0) as u64)
}

/// The set asked for does not fit: exit code 2, before anything loaded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotEnoughMemory(pub String);

/// Each spec's need; a spec whose files cannot be read is left out (its load says what is wrong).
pub fn needs(specs: &[BackendSpec], dir: &ModelDir) -> Vec<ColumnNeed> {
    specs.iter().filter_map(|s| need_of(s, dir).ok()).collect()
}

/// One spec's need: the estimate, raised to a measured peak plus its margin
/// when an earlier load of the same file(s) measured more ([`measured`]).
pub fn need_of(spec: &BackendSpec, dir: &ModelDir) -> anyhow::Result<ColumnNeed> {
    Ok(estimate::of_spec(spec, dir)?.with_measured(measured::recall(spec, dir).map(|m| m.peak)))
}

/// Refuse `asked` ([`NotEnoughMemory`]) when, held as `holding`, it needs more
/// than the process may use; `catalog` gives the sets to suggest instead. When
/// no limit can be read, say so on stderr and let it load.
pub fn check(asked: &[BackendSpec], catalog: &[BackendSpec], dir: &ModelDir, holding: Holding, budget: Option<u64>) -> Result<(), NotEnoughMemory> {
    let limit = match Limit::find(budget) {
        Ok(limit) => limit,
        Err(why) => {
            eprintln!("note: no memory check: cannot tell what memory is free ({why}); --memory-budget SIZE sets a limit");
            return Ok(());
        }
    };
    let present: Vec<BackendSpec> = catalog.iter().filter(|s| crate::backend::files_present(s, dir).is_ok()).cloned().collect();
    let all = needs(&present, dir);
    let mine = needs(asked, dir);
    let asked_needs: Vec<&ColumnNeed> = mine.iter().collect();
    if holding.need(&asked_needs) <= limit.room {
        return Ok(());
    }
    Err(NotEnoughMemory(refusal(&asked_needs, &all, &limit, holding)))
}

/// The message of a refusal: the figures, what may be taken, and the nearest set that fits.
pub fn refusal(asked: &[&ColumnNeed], catalog: &[ColumnNeed], limit: &Limit, holding: Holding) -> String {
    use size::show;
    let listed = |set: &[&ColumnNeed]| set.iter().map(|n| format!("{} {}", n.name, show(n.peak))).collect::<Vec<_>>().join(", ");
    let what = match holding {
        Holding::Together => {
            let names: Vec<&str> = asked.iter().map(|n| n.name.as_str()).collect();
            format!("{} together: they need about {} ({})", names.join(", "), show(holding.need(asked)), listed(asked))
        }
        Holding::OneAtATime => {
            let too_big: Vec<&ColumnNeed> = asked.iter().copied().filter(|n| n.peak > limit.room).collect();
            let names: Vec<&str> = too_big.iter().map(|n| n.name.as_str()).collect();
            let one = if too_big.len() == 1 { "it needs" } else { "the largest needs" };
            format!("{} (one at a time): {one} about {} ({})", names.join(", "), show(holding.need(&too_big)), listed(&too_big))
        }
    };
    let fits = nearest(asked, catalog, limit.room, holding);
    let suggestion = if fits.is_empty() {
        match catalog.iter().min_by_key(|n| n.peak) {
            Some(n) => format!("No column of this model directory fits: the smallest, {}, needs {}.", n.name, show(n.peak)),
            None => String::new(),
        }
    } else {
        let list: Vec<&str> = fits.iter().map(|n| n.name.as_str()).collect();
        format!("These fit {}: --backends {} (about {}).", holding.words(), list.join(","), show(holding.need(&fits)))
    };
    format!(
        "not enough memory to load {what} on top of runlens' own {}, and this process may take {} more ({}). Nothing was loaded.\n\
         {suggestion}\n`runlens memory` shows what each column needs; --memory-budget SIZE overrides the limit (docs/memory.md).",
        show(limit.held),
        show(limit.room),
        limit.why
    )
}

/// The explorer's loads: the first load of each column was checked as a set
/// before the explorer opened ([`check`]); a later one (F5 switches a column
/// to another variant while the others hold their memory) is checked alone
/// against what is free at that moment, and refused with a message in its
/// column rather than by the OOM killer.
pub struct Admission {
    /// The columns of the opening set not loaded yet: admitted once each.
    first: std::sync::Mutex<Vec<String>>,
    dir: ModelDir,
    budget: Option<u64>,
}

impl Admission {
    pub fn new(first: &[BackendSpec], dir: ModelDir, budget: Option<u64>) -> Admission {
        Admission { first: std::sync::Mutex::new(first.iter().map(|s| s.name.clone()).collect()), dir, budget }
    }

    /// Whether `spec` may load now.
    pub fn admit(&self, spec: &BackendSpec) -> Result<(), NotEnoughMemory> {
        {
            let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(at) = first.iter().position(|n| *n == spec.name) {
                first.remove(at);
                return Ok(());
            }
        }
        let (Ok(need), Ok(limit)) = (need_of(spec, &self.dir), Limit::find(self.budget)) else { return Ok(()) };
        if need.peak <= limit.room {
            return Ok(());
        }
        Err(NotEnoughMemory(format!(
            "not enough memory to load {} now: it needs about {}, and this process may take {} more ({}; the other columns hold what they loaded). \
             Switch back with F5, or start the explorer with fewer columns (--backends); `runlens memory` shows what each needs.",
            spec.name,
            size::show(need.peak),
            size::show(limit.room),
            limit.why
        )))
    }
}
