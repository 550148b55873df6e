//! ONNX Runtime's log, kept off the terminal: its messages of warning level
//! and worse go to a small buffer (the explorer draws the screen itself, and a
//! line printed by a library would tear it). A column's load or run error
//! quotes that session's last message ([`last_words`]); the session's log id
//! is its column name, so columns that load at once do not mix their lines.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use ort::logging::{LogLevel, LoggerFunction};

/// The messages kept (the oldest go first).
const KEPT: usize = 64;

static LINES: Mutex<VecDeque<(String, String)>> = Mutex::new(VecDeque::new());

/// The logger the environment is made with.
pub fn logger() -> LoggerFunction {
    Arc::new(|level: LogLevel, _category: &str, id: &str, _location: &str, message: &str| {
        if level < LogLevel::Warning {
            return;
        }
        let mut lines = LINES.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == KEPT {
            lines.pop_front();
        }
        lines.push_back((id.to_string(), format!("{level:?}: {message}").to_lowercase_first()));
    })
}

/// Every message kept, as `(log id, line)`, oldest first.
pub fn lines() -> Vec<(String, String)> {
    LINES.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
}

/// `"; ONNX Runtime said: ..."` with the last message of session `id` (or of
/// the environment, whose id is empty), or nothing.
pub fn last_words(id: &str) -> String {
    let lines = LINES.lock().unwrap_or_else(|p| p.into_inner());
    lines.iter().rev().find(|(of, _)| of == id || of.is_empty()).map_or_else(String::new, |(_, line)| format!("; ONNX Runtime said: {line}"))
}

trait LowerFirst {
    fn to_lowercase_first(self) -> String;
}

impl LowerFirst for String {
    /// `Error: ...` -> `error: ...`, as runlens' own messages read.
    fn to_lowercase_first(self) -> String {
        let mut chars = self.chars();
        match chars.next() {
            Some(first) => first.to_lowercase().chain(chars).collect(),
            None => self,
        }
    }
}
