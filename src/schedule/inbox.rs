//! A worker's inbox: one slot for the input to run ("latest wins": a new input
//! replaces the one still waiting, so nothing queues up behind a slow backend)
//! and one for the start-up chore of embedding the corpus.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::Job;
use crate::model::Encoded;

/// What a worker does next.
#[derive(Debug)]
pub enum Work {
    /// Embed the corpus sentences (once, at start-up).
    Corpus(Arc<Vec<Encoded>>),
    /// Run one input.
    Run(Job),
}

#[derive(Default)]
struct Slots {
    job: Option<Job>,
    corpus: Option<Arc<Vec<Encoded>>>,
    closed: bool,
}

#[derive(Default)]
pub struct Inbox {
    slots: Mutex<Slots>,
    ready: Condvar,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, Slots> {
        // A poisoned lock only means a thread panicked while holding it; the slots are still valid.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Put `job` in the slot; the job it replaces, if one was waiting, is returned (and never run).
    pub fn put(&self, job: Job) -> Option<Job> {
        let replaced = self.lock().job.replace(job);
        self.ready.notify_all();
        replaced
    }

    /// Put `job` in the slot only if it is empty (repeat mode: a new input wins over a re-run).
    pub fn offer(&self, job: Job) -> bool {
        let mut slots = self.lock();
        if slots.job.is_some() || slots.closed {
            return false;
        }
        slots.job = Some(job);
        drop(slots);
        self.ready.notify_all();
        true
    }

    /// Drop the waiting job, if any.
    pub fn clear(&self) -> Option<Job> {
        self.lock().job.take()
    }

    pub fn put_corpus(&self, sentences: Arc<Vec<Encoded>>) {
        self.lock().corpus = Some(sentences);
        self.ready.notify_all();
    }

    /// No more work: the worker ends after its current run.
    pub fn close(&self) {
        let mut slots = self.lock();
        slots.closed = true;
        slots.job = None;
        slots.corpus = None;
        drop(slots);
        self.ready.notify_all();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Block until there is work; `false` once the inbox is closed.
    pub fn wait(&self) -> bool {
        let mut slots = self.lock();
        loop {
            if slots.closed {
                return false;
            }
            if slots.job.is_some() || slots.corpus.is_some() {
                return true;
            }
            slots = self.ready.wait(slots).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The next work without blocking: the corpus chore first, then the latest job.
    pub fn take(&self) -> Option<Work> {
        let mut slots = self.lock();
        if slots.closed {
            return None;
        }
        if let Some(corpus) = slots.corpus.take() {
            return Some(Work::Corpus(corpus));
        }
        slots.job.take().map(Work::Run)
    }

    /// The generation of the job waiting, if any.
    pub fn waiting(&self) -> Option<u64> {
        self.lock().job.as_ref().map(|j| j.generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(generation: u64) -> Job {
        let input = Encoded {
            text: format!("text {generation}"),
            tokens: vec!["[CLS]".into(), "[SEP]".into()],
            ids: vec![101, 102],
            attention_mask: vec![1, 1],
            truncated: false,
        };
        Job { generation, input: Arc::new(input) }
    }

    #[test]
    fn a_new_job_replaces_the_waiting_one() {
        let inbox = Inbox::default();
        assert!(inbox.put(job(1)).is_none());
        assert_eq!(inbox.put(job(2)).map(|j| j.generation), Some(1));
        assert!(!inbox.offer(job(3)), "a re-run never replaces a waiting input");
        assert_eq!(inbox.waiting(), Some(2));
        assert!(matches!(inbox.take(), Some(Work::Run(j)) if j.generation == 2));
        assert!(inbox.take().is_none());
        assert!(inbox.offer(job(4)));
        inbox.close();
        assert!(!inbox.wait() && inbox.take().is_none());
    }
}
