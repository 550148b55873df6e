//! F8: the model list. The model directories (`models/*` and `--model`'s),
//! the one open marked; choosing another asks the event loop to switch the
//! explorer to it ([`SwitchRequest`]): the current model's workers stop, the
//! chosen one loads as at start, and the typed text carries over.

use std::path::PathBuf;
use std::time::Instant;

use super::App;
use crate::model::DirEntry;
use crate::schedule::Request;

/// Lists the model directories when F8 opens the list (real: [`crate::model::list_with`]; tests: fakes).
pub type ListModels = Box<dyn Fn() -> Vec<DirEntry> + Send>;

/// The list as shown.
#[derive(Clone, Debug)]
pub struct ModelsView {
    pub entries: Vec<DirEntry>,
    /// The entry Enter opens.
    pub cursor: usize,
    /// The entry of the model now open, when it is listed.
    pub current: Option<usize>,
    /// Why the last choice did not switch (a memory check's refusal, a set-up error).
    pub message: Option<String>,
    /// The switch under way: the entry chosen, and since when the current model unloads.
    pub switching: Option<(usize, Instant)>,
    /// The current model's workers have ended: the chosen one is being set up.
    pub unloaded: bool,
}

impl ModelsView {
    /// The entry under the cursor.
    pub fn selected(&self) -> Option<&DirEntry> {
        self.entries.get(self.cursor)
    }
}

/// What the event loop carries out once the list's choice is made: stop this
/// model's workers, then set up `dir` and start again there with `text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchRequest {
    pub dir: PathBuf,
    /// The text of the input line, put back once the new model is open.
    pub text: String,
}

impl App {
    /// How F8 lists the model directories, and the directory now open (marked in the list).
    pub fn with_model_list(mut self, list: ListModels, current: PathBuf) -> App {
        self.list_models = Some(list);
        self.model_dir = Some(current);
        self
    }

    /// The model list, when shown.
    pub fn models(&self) -> Option<&ModelsView> {
        self.models.as_ref()
    }

    /// The switch the list asked for, once chosen (the event loop carries it out).
    pub fn switch_request(&self) -> Option<&SwitchRequest> {
        self.switch.as_ref()
    }

    /// A short word for the status bar (a column set that fell back to the defaults, a switch refused); the next key clears it.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    pub fn set_note(&mut self, note: String) {
        self.note = Some(note);
    }

    /// Put `text` in the input line as if typed (the text a switch carried over).
    pub fn set_text(&mut self, text: &str) {
        if !text.is_empty() {
            self.input.clear();
            self.input.insert_str(text);
            self.text_changed();
        }
    }

    /// A switch to `dir` did not happen (its set-up failed or the memory check
    /// refused it): the list opens on that entry with `message`.
    pub fn switch_refused(&mut self, dir: &std::path::Path, message: String) {
        self.open_models();
        if let Some(view) = self.models.as_mut() {
            if let Some(at) = view.entries.iter().position(|e| e.is(dir)) {
                view.cursor = at;
            }
            view.message = Some(message);
        }
    }

    /// The switch's old workers have ended (the event loop's word): the list says the next model opens.
    pub fn set_unloaded(&mut self) {
        if let Some(view) = self.models.as_mut() {
            view.unloaded = true;
        }
    }

    /// F8: show the list, read afresh, the cursor on the model now open.
    pub(super) fn open_models(&mut self) {
        let entries = self.list_models.as_ref().map(|list| list()).unwrap_or_default();
        let current = self.model_dir.as_ref().and_then(|dir| entries.iter().position(|e| e.is(dir)));
        self.show_help = false;
        self.profile = None;
        self.layers = None;
        self.models = Some(ModelsView { entries, cursor: current.unwrap_or(0), current, message: None, switching: None, unloaded: false });
    }

    /// Esc or F8 again: close the list, unless a switch is under way.
    pub(super) fn close_models(&mut self) {
        if self.models.as_ref().is_some_and(|v| v.switching.is_none()) {
            self.models = None;
        }
    }

    /// Up / Down: move the cursor by `by` entries, stopping at the ends.
    pub(super) fn move_model(&mut self, by: isize) {
        if let Some(view) = self.models.as_mut().filter(|v| v.switching.is_none() && !v.entries.is_empty()) {
            view.cursor = view.cursor.saturating_add_signed(by).min(view.entries.len() - 1);
            view.message = None;
        }
    }

    /// Enter: switch to the entry under the cursor. A directory that cannot be
    /// opened says why and stays; the model already open just closes the list.
    pub(super) fn choose_model(&mut self) {
        let Some(view) = self.models.as_mut().filter(|v| v.switching.is_none()) else { return };
        let Some(entry) = view.entries.get(view.cursor) else { return };
        if let Err(error) = &entry.opened {
            view.message = Some(format!("{} cannot be opened: {error}", entry.path.display()));
            return;
        }
        if view.current == Some(view.cursor) {
            self.models = None;
            return;
        }
        self.switch = Some(SwitchRequest { dir: entry.path.clone(), text: self.input.text().to_string() });
        view.switching = Some((view.cursor, self.now));
        view.message = None;
        // Nothing new starts on this model: what waits is dropped, a generation stops at its next token.
        self.run_due = None;
        self.requests.push(Request::Cancel);
    }
}
