//! Serial mode: one backend runs at a time, taking turns in the order they
//! asked (first come, first served), so a backend that re-runs at once in
//! repeat mode goes behind the others. In parallel mode the gate is open.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
struct State {
    serial: bool,
    closed: bool,
    running: Option<usize>,
    queue: VecDeque<usize>,
}

#[derive(Default)]
pub struct Gate {
    state: Mutex<State>,
    changed: Condvar,
}

/// A worker's permission to run; in serial mode the next one waits until it is dropped.
pub struct Turn<'a> {
    gate: &'a Gate,
    held: bool,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_serial(&self, serial: bool) {
        self.lock().serial = serial;
        self.changed.notify_all();
    }

    pub fn is_serial(&self) -> bool {
        self.lock().serial
    }

    /// Let every waiting worker through (shutting down).
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// Wait for worker `who`'s turn (immediately in parallel mode).
    pub fn enter(&self, who: usize) -> Turn<'_> {
        let mut state = self.lock();
        if !state.serial || state.closed {
            return Turn { gate: self, held: false };
        }
        state.queue.push_back(who);
        loop {
            if !state.serial || state.closed {
                state.queue.retain(|&w| w != who);
                drop(state);
                self.changed.notify_all();
                return Turn { gate: self, held: false };
            }
            if state.running.is_none() && state.queue.front() == Some(&who) {
                state.queue.pop_front();
                state.running = Some(who);
                return Turn { gate: self, held: true };
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if self.held {
            self.gate.lock().running = None;
            self.gate.changed.notify_all();
        }
    }
}
