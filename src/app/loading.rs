//! While columns load: what each will hold (`crate::memory`'s estimate) and how
//! far the process's resident memory has come towards it.

use super::{App, Phase};

impl App {
    /// What each backend will hold at its peak, by name, and what the process held before any loaded.
    pub fn with_needs(mut self, needs: std::collections::HashMap<String, u64>, base: Option<u64>) -> App {
        self.needs = needs;
        self.base = base;
        self
    }

    /// The estimated peak of column `index`'s backend, when known.
    pub fn need(&self, index: usize) -> Option<u64> {
        self.needs.get(&self.columns[index].kind.name).copied()
    }

    /// While columns load: (what the process holds now, what it should hold once every column has loaded).
    pub fn load_progress(&self) -> Option<(u64, u64)> {
        let expected: Option<u64> = self.columns.iter().enumerate().map(|(i, _)| self.need(i)).sum();
        Some((self.resident?, self.base? + expected?))
    }

    /// A column is loading.
    pub fn is_loading(&self) -> bool {
        self.columns.iter().any(|c| c.phase == Phase::Loading)
    }

    /// The process's resident memory now (sampled by the event loop while columns load).
    pub fn set_resident(&mut self, bytes: Option<u64>) {
        self.resident = bytes;
    }
}
