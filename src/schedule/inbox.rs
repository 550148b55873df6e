//! A worker's inbox: one slot for the input to run ("latest wins": a new input
//! replaces the one still waiting, so nothing queues up behind a slow backend),
//! one for the start-up chore of embedding the corpus, and one for a
//! teacher-forced pass (text-generation parity), taken only when no input waits.
//!
//! A run in progress can ask whether it has been superseded (a newer input
//! came in, the waiting one was cancelled, or the inbox closed): a generation
//! stops between two tokens when it has.

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
    /// Feed an input's prompt and the reference column's new ids (text-generation).
    TeacherForce(TeacherJob),
}

/// A teacher-forced pass: `job`'s prompt, then `reference`'s new ids one by
/// one ([`crate::task::generation::parity::teacher_forced`]).
#[derive(Clone, Debug)]
pub struct TeacherJob {
    pub job: Job,
    pub reference: Arc<Vec<i64>>,
}

#[derive(Default)]
struct Slots {
    job: Option<Job>,
    corpus: Option<Arc<Vec<Encoded>>>,
    teacher: Option<TeacherJob>,
    closed: bool,
    /// Set by `put`, `clear` and `close`; reset when a job is taken.
    superseded: bool,
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
        let mut slots = self.lock();
        let replaced = slots.job.replace(job);
        slots.superseded = true;
        drop(slots);
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

    /// Drop the waiting job (and teacher-forced pass), if any, and tell the run in progress it is superseded.
    pub fn clear(&self) -> Option<Job> {
        let mut slots = self.lock();
        slots.superseded = true;
        slots.teacher = None;
        slots.job.take()
    }

    /// A teacher-forced pass to run once no input waits (it replaces one still waiting).
    pub fn put_teacher(&self, work: TeacherJob) {
        let mut slots = self.lock();
        if slots.closed {
            return;
        }
        slots.teacher = Some(work);
        drop(slots);
        self.ready.notify_all();
    }

    /// Has a newer input, a cancel or the close come since the current job was taken?
    pub fn is_superseded(&self) -> bool {
        self.lock().superseded
    }

    pub fn put_corpus(&self, sentences: Arc<Vec<Encoded>>) {
        self.lock().corpus = Some(sentences);
        self.ready.notify_all();
    }

    /// No more work: the worker ends after its current run.
    pub fn close(&self) {
        let mut slots = self.lock();
        slots.closed = true;
        slots.superseded = true;
        slots.job = None;
        slots.corpus = None;
        slots.teacher = None;
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
            if slots.job.is_some() || slots.corpus.is_some() || slots.teacher.is_some() {
                return true;
            }
            slots = self.ready.wait(slots).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The next work without blocking: the corpus chore first, then the latest
    /// job, then a teacher-forced pass.
    pub fn take(&self) -> Option<Work> {
        let mut slots = self.lock();
        if slots.closed {
            return None;
        }
        if let Some(corpus) = slots.corpus.take() {
            return Some(Work::Corpus(corpus));
        }
        if let Some(job) = slots.job.take() {
            slots.superseded = false;
            return Some(Work::Run(job));
        }
        slots.teacher.take().map(Work::TeacherForce)
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
        assert!(!inbox.is_superseded(), "taking a job starts it afresh");
        assert!(inbox.offer(job(4)));
        assert!(!inbox.is_superseded(), "a re-run supersedes nothing");
        inbox.clear();
        assert!(inbox.is_superseded(), "a cancel supersedes the run in progress");
        inbox.put(job(5));
        assert!(matches!(inbox.take(), Some(Work::Run(j)) if j.generation == 5));
        inbox.put(job(6));
        assert!(inbox.is_superseded(), "a newer input supersedes it");
        inbox.close();
        assert!(!inbox.wait() && inbox.take().is_none());
    }

    #[test]
    fn a_teacher_forced_pass_waits_for_the_inputs_and_a_cancel_drops_it() {
        let inbox = Inbox::default();
        let teacher = |g| TeacherJob { job: job(g), reference: Arc::new(vec![5, 6]) };
        inbox.put_teacher(teacher(1));
        inbox.put(job(2));
        assert!(matches!(inbox.take(), Some(Work::Run(j)) if j.generation == 2), "an input first");
        assert!(matches!(inbox.take(), Some(Work::TeacherForce(t)) if t.job.generation == 1 && *t.reference == [5, 6]));
        assert!(inbox.take().is_none());
        inbox.put_teacher(teacher(3));
        assert!(!inbox.is_superseded(), "a pass supersedes no run");
        inbox.clear();
        assert!(inbox.take().is_none(), "a new text drops the pass for the old one");
    }
}
