//! A column's worker reports ([`WorkerEvent`]): loaded or failed, a run started, a
//! token, a result, a teacher-forced pass, the corpus embedded. Results for a text
//! that is no longer current are dropped here.

use super::{App, CorpusState, LiveGeneration, Output, Phase, Top1State};
use crate::schedule::WorkerEvent;
use crate::task::TaskOutput;

impl App {
    /// A worker reported. Results for text that is no longer current are dropped.
    pub fn on_worker(&mut self, event: WorkerEvent) {
        let Some(index) = self.index_of(event.kind()) else { return };
        let current = self.generation;
        match event {
            WorkerEvent::Loaded { description, load_time, weight_bytes, .. } => {
                let c = &mut self.columns[index];
                c.phase = Phase::Ready;
                c.description = Some(description);
                c.load_time = Some(load_time);
                c.weight_bytes = weight_bytes;
            }
            WorkerEvent::LoadFailed { kind, error } => {
                let c = &mut self.columns[index];
                c.phase = Phase::Failed(error);
                c.pending = None;
                if self.corpus.state == CorpusState::Embedding(kind) {
                    self.assign_corpus();
                }
            }
            WorkerEvent::Started { generation, at, .. } => {
                let c = &mut self.columns[index];
                c.running = Some((generation, at));
                if c.pending.is_some_and(|p| p <= generation) {
                    c.pending = None;
                }
                if self.task.generates() && generation == current {
                    // A new continuation: its per-token latencies start afresh.
                    c.live = Some(LiveGeneration::new(generation));
                    c.stats.clear();
                }
            }
            WorkerEvent::Token { generation, step, .. } => {
                let c = &mut self.columns[index];
                if generation != current {
                    // A token of an earlier text: never shown.
                    return;
                }
                if step.index > 0 {
                    c.stats.record(step.latency);
                }
                let live = c.live.get_or_insert_with(|| LiveGeneration::new(generation));
                if live.generation != generation {
                    *live = LiveGeneration::new(generation);
                }
                live.tokens.push(step);
            }
            WorkerEvent::Finished { generation, input, outcome, elapsed, .. } => {
                let c = &self.columns[index];
                let embedding = outcome.as_ref().ok().and_then(TaskOutput::embedding);
                let nearest = match (embedding, &c.output) {
                    // Repeat mode brings the same output hundreds of times a second: reuse the lookup.
                    (Some(e), Some(previous)) if previous.embedding() == Some(e) && previous.nearest.is_some() => previous.nearest,
                    (Some(e), _) if generation == current => self.corpus.nearest(e),
                    _ => None,
                };
                let c = &mut self.columns[index];
                if c.running.is_some_and(|(g, _)| g == generation) {
                    c.running = None;
                }
                if generation != current {
                    c.stale_dropped += 1;
                    return;
                }
                match outcome {
                    Ok(TaskOutput::Generation(generated)) => {
                        // The tokens came one by one; the run's end says why it stopped.
                        if let Some(live) = c.live.as_mut().filter(|l| l.generation == generation) {
                            live.stop = Some(generated.stop);
                        }
                        c.run_error = None;
                        c.output = Some(Output { generation, input, output: TaskOutput::Generation(generated), elapsed, nearest });
                        self.ask_top1();
                    }
                    Ok(output) => {
                        c.stats.record(elapsed);
                        c.run_error = None;
                        c.output = Some(Output { generation, input, output, elapsed, nearest });
                    }
                    Err(message) => c.run_error = Some((generation, message)),
                }
            }
            WorkerEvent::TeacherForced { generation, outcome, .. } => {
                let c = &mut self.columns[index];
                if generation == current && c.top1.as_ref().is_some_and(|(g, _)| *g == generation) {
                    c.top1 = Some((generation, outcome.map_or_else(Top1State::Failed, Top1State::Done)));
                }
            }
            WorkerEvent::CorpusEmbedded { kind, outcome, elapsed } => match outcome {
                Ok(embeddings) if embeddings.len() == self.corpus.sentences.len() => {
                    self.corpus.embeddings = embeddings;
                    self.corpus.state = CorpusState::Ready { kind, elapsed };
                    for i in 0..self.columns.len() {
                        if let Some(embedding) = self.columns[i].output.as_ref().and_then(Output::embedding) {
                            let nearest = self.corpus.nearest(embedding);
                            if let Some(o) = self.columns[i].output.as_mut() {
                                o.nearest = nearest;
                            }
                        }
                    }
                }
                Ok(_) | Err(_) => self.assign_corpus(),
            },
        }
    }
}
