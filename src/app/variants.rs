//! F5: a column switched to the next program of its `column` (an export variant).

use super::{App, Column, CorpusState};
use crate::backend::BackendSpec;
use crate::schedule::{Job, Request};

impl App {
    /// Can F5 switch a column to another program of its column?
    pub fn can_switch_variant(&self) -> bool {
        self.next_variant().is_some()
    }

    /// Does column `index` have other programs F5 can switch it to?
    pub fn has_variants(&self, index: usize) -> bool {
        let kind = &self.columns[index].kind;
        self.variants.iter().filter(|v| v.column == kind.column).count() > 1
    }

    /// The first column with other programs of its `column`, and the program F5
    /// would show in it: the next one present and not already shown in another column.
    pub(super) fn next_variant(&self) -> Option<(usize, BackendSpec)> {
        self.columns.iter().enumerate().find_map(|(index, c)| {
            let group: Vec<&BackendSpec> = self.variants.iter().filter(|v| v.column == c.kind.column).collect();
            let at = group.iter().position(|v| **v == c.kind)?;
            (1..group.len()).map(|step| group[(at + step) % group.len()]).find(|v| self.index_of(v).is_none()).map(|v| (index, v.clone()))
        })
    }

    /// F5: the XNNPACK column starts over with the next variant: it loads, its
    /// latency history starts empty (another program, other numbers), and the
    /// current text runs on it once it has loaded.
    pub(super) fn switch_variant(&mut self) {
        let Some((index, to)) = self.next_variant() else { return };
        let from = self.columns[index].kind.clone();
        self.columns[index] = Column::loading(to.clone());
        self.columns[index].since = Some(self.now);
        let job = self.encoded.clone().map(|input| Job { generation: self.generation, input });
        if let Some(job) = &job {
            self.columns[index].pending = Some(job.generation);
        }
        let embedding_corpus = self.corpus.state == CorpusState::Embedding(from.clone());
        self.requests.push(Request::Switch { from, to, job });
        // The column shows the new program's delegation coverage.
        self.request_coverage();
        if embedding_corpus {
            // The old worker is closed before it could finish the corpus.
            self.assign_corpus();
        }
    }
}
