//! The explorer's background jobs: the F4 profile, the F6 per-module times and
//! each program's delegation coverage are asked for here as [`JobRequest`]s, which the
//! event loop hands to [`crate::jobs`]; their results come back through [`App::on_job`].

use super::{App, CoverageRequest, CoverageView, JobDone, JobRequest, LayersRequest, LayersState, LayersView, Phase, ProfileRequest};
use super::{ProfileState, ProfileView};
use crate::backend::BackendSpec;
use crate::layers::LayersReport;
use crate::profile::ProfileReport;

impl App {
    /// The background jobs asked for since the last call, oldest first, for [`crate::jobs::Jobs`].
    pub fn drain_jobs(&mut self) -> Vec<JobRequest> {
        std::mem::take(&mut self.jobs)
    }

    /// The newest traced run waiting among the jobs, taken out of them (tests look at one kind).
    pub fn take_profile_request(&mut self) -> Option<ProfileRequest> {
        self.take_newest_job(|job| match job {
            JobRequest::Profile(request) => Some(request),
            _ => None,
        })
    }

    /// The newest per-module measurement waiting among the jobs, taken out of them.
    pub fn take_layers_request(&mut self) -> Option<LayersRequest> {
        self.take_newest_job(|job| match job {
            JobRequest::Layers(request) => Some(request),
            _ => None,
        })
    }

    /// Take every waiting job that `pick` picks; the newest of them.
    pub(super) fn take_newest_job<T: Clone>(&mut self, pick: impl Fn(&JobRequest) -> Option<&T>) -> Option<T> {
        let newest = self.jobs.iter().rev().find_map(&pick).cloned();
        self.jobs.retain(|job| pick(job).is_none());
        newest
    }

    /// Show the profile view and ask for a traced run of the current text.
    pub(super) fn open_profile(&mut self) {
        self.profile_requests += 1;
        let id = self.profile_requests;
        let text = self.input.text().to_string();
        let kinds: Vec<BackendSpec> = self
            .columns
            .iter()
            .filter(|c| c.kind.per_operator_times().is_available() && !matches!(c.phase, Phase::Failed(_)))
            .map(|c| c.kind.clone())
            .collect();
        let state = match (&self.encoded, kinds.is_empty()) {
            (None, _) => ProfileState::Failed("type a sentence first: F4 profiles the text in the input line".to_string()),
            (Some(_), true) => ProfileState::Failed("no ExecuTorch column to profile".to_string()),
            (Some(input), false) => {
                self.jobs.push(JobRequest::Profile(ProfileRequest { id, input: input.clone(), kinds, output: self.task.output() }));
                ProfileState::Running { since: self.now }
            }
        };
        self.profile = Some(ProfileView { id, text, state });
    }

    /// A traced run finished; dropped unless its view is still shown.
    pub fn on_profile(&mut self, id: u64, outcome: Result<ProfileReport, String>) {
        if let Some(view) = self.profile.as_mut().filter(|v| v.id == id) {
            view.state = match outcome {
                Ok(report) => ProfileState::Ready(report),
                Err(message) => ProfileState::Failed(message),
            };
        }
    }

    /// Show the layers view and ask for a per-module measurement of the current
    /// text on every column that did not fail and can be timed so (not llama.cpp's).
    pub(super) fn open_layers(&mut self) {
        self.layers_requests += 1;
        let id = self.layers_requests;
        let text = self.input.text().to_string();
        let kinds: Vec<BackendSpec> = self
            .columns
            .iter()
            .filter(|c| c.kind.per_module_times().is_available() && !matches!(c.phase, Phase::Failed(_)))
            .map(|c| c.kind.clone())
            .collect();
        let state = match (&self.encoded, kinds.is_empty()) {
            (None, _) => LayersState::Failed("type a sentence first: F6 times the text in the input line per module".to_string()),
            (Some(_), true) => LayersState::Failed("no column loaded to time per module".to_string()),
            (Some(input), false) => {
                self.jobs.push(JobRequest::Layers(LayersRequest { id, input: input.clone(), kinds }));
                LayersState::Running { since: self.now }
            }
        };
        self.layers = Some(LayersView { id, text, state });
    }

    /// A per-module measurement finished; dropped unless its view is still shown.
    pub fn on_layers(&mut self, id: u64, outcome: Result<LayersReport, String>) {
        if let Some(view) = self.layers.as_mut().filter(|v| v.id == id) {
            view.state = match outcome {
                Ok(report) => LayersState::Ready(report),
                Err(message) => LayersState::Failed(message),
            };
        }
    }

    /// A background job finished.
    pub fn on_job(&mut self, done: JobDone) {
        match done {
            JobDone::Profile(id, outcome) => self.on_profile(id, outcome),
            JobDone::Layers(id, outcome) => self.on_layers(id, outcome),
            JobDone::Coverage(read) => {
                for (kind, coverage) in read {
                    self.set_coverage(&kind, coverage);
                }
            }
        }
    }

    /// Ask for the delegation coverage of every `.pte` column not read yet
    /// (at start, and for the program F5 switched a column to).
    pub(super) fn request_coverage(&mut self) {
        let kinds: Vec<BackendSpec> =
            self.columns.iter().filter(|c| c.kind.delegation_coverage().is_available() && c.coverage.is_none()).map(|c| c.kind.clone()).collect();
        if !kinds.is_empty() {
            self.jobs.push(JobRequest::Coverage(CoverageRequest { kinds }));
        }
    }

    /// The delegation coverage of a `.pte` column was read (or could not be).
    pub fn set_coverage(&mut self, kind: &BackendSpec, coverage: Result<CoverageView, String>) {
        if let Some(i) = self.index_of(kind) {
            self.columns[i].coverage = Some(coverage);
        }
    }
}
