//! The delegation coverage of the `.pte` columns, from runlens' own reader
//! ([`crate::pte`]): no runtime needed.

use anyhow::Context;

use super::{BackgroundJob, Failure, JobDone};
use crate::backend::BackendSpec;

/// Delegation coverage of one `.pte`, as the TUI shows it: the `forward`
/// plan (else the first) of [`crate::pte`]'s report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CoverageView {
    /// Share of the program's work handed to the delegate, 0..=1.
    pub coverage: f64,
    /// Instructions that call a kernel of the default CPU library.
    pub kernel_calls: usize,
    /// Instructions that call a delegate (XNNPACK subgraphs).
    pub delegate_calls: usize,
    /// Operators left on the default kernels, most calls first.
    pub top_operators: Vec<(String, usize)>,
    pub file_bytes: u64,
    /// The partition map: kernel and delegate calls in execution order, `true`
    /// for a delegate call (empty: not shown).
    pub strip: Vec<bool>,
    /// Changes between runs of the strip.
    pub boundaries: usize,
    /// Operators between two delegate calls, most calls first.
    pub breaks: Vec<(String, usize)>,
    /// text-generation: the weights one decode step reads (the GB/s beside tokens/s).
    pub weight_bytes_per_token: Option<u64>,
}

/// The columns whose coverage to read. The app asks for every `.pte` column
/// not read yet, so the newest request covers whatever an older one that it
/// replaced would have.
#[derive(Clone, Debug, PartialEq)]
pub struct CoverageRequest {
    pub kinds: Vec<BackendSpec>,
}

impl BackgroundJob for CoverageRequest {
    type Output = JobDone;

    fn run(&mut self) -> JobDone {
        let read = |kind: &BackendSpec| {
            let coverage = std::panic::catch_unwind(|| read_coverage(kind))
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the .pte reader panicked")))
                .map_err(|e| format!("{e:#}"));
            (kind.clone(), coverage)
        };
        JobDone::Coverage(self.kinds.iter().map(read).collect())
    }

    /// Each read catches its own panics; without a thread there is just no
    /// coverage panel (nothing else depends on it).
    fn failed(&self, _: Failure) -> JobDone {
        JobDone::Coverage(Vec::new())
    }
}

/// The coverage of `kind`'s `.pte`.
fn read_coverage(kind: &BackendSpec) -> anyhow::Result<CoverageView> {
    kind.delegation_coverage().check()?;
    let path = kind.pte_file().context("not an ExecuTorch path")?;
    let (report, table) = crate::pte::read_program_file(path).with_context(|| format!("cannot read {}", path.display()))?;
    let weight_bytes_per_token = table.plan("forward").map(|p| report.weight_bytes_per_token(p));
    let plan = report
        .plan("forward")
        .or_else(|| report.plans.first())
        .with_context(|| format!("{} has no execution plan", path.display()))?;
    Ok(CoverageView {
        coverage: plan.coverage,
        kernel_calls: plan.kernel_calls as usize,
        delegate_calls: plan.delegate_calls as usize,
        top_operators: plan.operators_by_count().into_iter().map(|(name, n)| (name.to_string(), n as usize)).collect(),
        file_bytes: report.size_bytes,
        strip: plan.partition.cells(usize::MAX),
        boundaries: plan.partition.boundaries as usize,
        breaks: plan.partition.breaks_by_count().into_iter().map(|(name, n)| (name.to_string(), n as usize)).collect(),
        weight_bytes_per_token,
    })
}
