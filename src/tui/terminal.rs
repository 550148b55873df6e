//! The terminal while the explorer owns it, and the ways it is given back:
//! set-up and restore, the panic hook, ExecuTorch's abort handler, signals,
//! suspend and resume; and the terminal's input as [`Event`]s.

use anyhow::Context;
use crossterm::cursor::Show;
use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste, EventStream};
use crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};
use futures::StreamExt;
use ratatui::DefaultTerminal;
use tokio::sync::mpsc::UnboundedSender;

use super::Event;
use crate::app::App;
use crate::schedule::WORKER_THREAD_PREFIX;
use crate::ui;

/// The signals the explorer handles: the first four end it (terminal
/// restored, exit status 128 + the signal), SIGTSTP suspends it, SIGCONT
/// resumes it.
pub const SIGNALS: [i32; 6] = [libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGINT, libc::SIGTSTP, libc::SIGCONT];

/// The terminal while the explorer owns it: raw mode, the alternate screen,
/// bracketed paste, the cursor drawn by ratatui. Left on quit, on a signal and
/// for a suspend; taken back on resume.
pub struct Screen {
    terminal: DefaultTerminal,
    active: bool,
}

impl Screen {
    /// Take the terminal; from here on a panic (on the UI thread) and an
    /// ExecuTorch abort restore it before their message prints.
    pub(super) fn enter() -> anyhow::Result<Screen> {
        let terminal = ratatui::try_init().context("cannot set up the terminal (is this an interactive terminal?)")?;
        let _ = crossterm::execute!(std::io::stdout(), EnableBracketedPaste);
        quiet_background_panics();
        crate::ffi::set_abort_handler(restore_then_report_abort);
        Ok(Screen { terminal, active: true })
    }

    /// Give the terminal back as it was: raw mode off, main screen, cursor
    /// shown. Each step on its own (after a SIGHUP the terminal may be gone).
    pub(super) fn leave(&mut self) {
        if !self.active {
            return;
        }
        self.active = false;
        let _ = disable_raw_mode();
        let _ = crossterm::execute!(std::io::stdout(), DisableBracketedPaste, LeaveAlternateScreen, Show);
    }

    /// Take the terminal again after a stop and make the next frame a full
    /// redraw. Raw mode is set afresh: the shell may have changed the modes
    /// while runlens was stopped.
    pub(super) fn resume(&mut self) -> anyhow::Result<()> {
        let _ = disable_raw_mode();
        enable_raw_mode().context("cannot set the terminal to raw mode again")?;
        crossterm::execute!(std::io::stdout(), EnterAlternateScreen, EnableBracketedPaste).context("cannot take the terminal again")?;
        // `Terminal::clear` would ask the terminal for the cursor position, an answer that
        // the event reader takes; a resize to the current size clears without asking.
        let size = self.terminal.size().context("cannot read the terminal size")?;
        self.terminal.resize(ratatui::layout::Rect::new(0, 0, size.width, size.height)).context("cannot clear the terminal")?;
        self.active = true;
        Ok(())
    }

    /// Make the next frame a full redraw on a blank screen (a new session, F8).
    pub(super) fn clear(&mut self) -> anyhow::Result<()> {
        // As in `resume`: a resize to the current size clears without asking for the cursor position.
        let size = self.terminal.size().context("cannot read the terminal size")?;
        self.terminal.resize(ratatui::layout::Rect::new(0, 0, size.width, size.height)).context("cannot clear the terminal")?;
        Ok(())
    }

    /// SIGTSTP: restore the terminal, then stop until `fg` (SIGCONT, which
    /// comes back as [`Event::Signal`] and calls [`Screen::resume`]).
    pub(super) fn suspend(&mut self) {
        self.leave();
        // Nothing is drawn until the SIGCONT; if stopping fails, that resumes at once.
        if crate::ffi::process::stop_self().is_err() {
            let _ = self.resume();
        }
    }

    /// Ctrl-Z: restore first, then stop the job as the terminal would (the
    /// SIGTSTP comes back to runlens as an event and stops it).
    pub(super) fn suspend_job(&mut self) {
        self.leave();
        if crate::ffi::process::suspend_process_group().is_err() {
            self.suspend();
        }
    }

    /// While suspended (between Ctrl-Z and the stop taking effect) nothing is drawn.
    pub(super) fn is_active(&self) -> bool {
        self.active
    }

    pub(super) fn draw(&mut self, app: &App, theme: &ui::Theme) -> anyhow::Result<()> {
        self.terminal.draw(|frame| ui::draw_with(frame, app, theme)).context("cannot draw")?;
        Ok(())
    }
}

/// An ExecuTorch abort that runlens' probe could not foresee ends the process
/// (status 134): the terminal is restored first, so the report is readable.
fn restore_then_report_abort(report: &crate::ffi::AbortReport) {
    let _ = crossterm::execute!(std::io::stdout(), DisableBracketedPaste);
    ratatui::restore();
    crate::backend::probe::report_abort(report);
}

/// Panics on worker threads are caught there and shown in their column; keep
/// the default hook (ratatui's, which restores the terminal) for all others.
/// Installed after `ratatui::init`, so it runs first.
fn quiet_background_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let background = std::thread::current().name().is_some_and(|n| n.starts_with(WORKER_THREAD_PREFIX));
        if !background {
            let _ = crossterm::execute!(std::io::stdout(), DisableBracketedPaste);
            previous(info);
        }
    }));
}

/// Each of [`SIGNALS`] becomes an [`Event::Signal`]. From here on they no
/// longer have their default effect (ending or stopping the process): the
/// event loop restores the terminal first.
pub(super) fn listen_for_signals(tx: &UnboundedSender<Event>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    for sig in SIGNALS {
        let mut stream = signal(SignalKind::from_raw(sig)).with_context(|| format!("cannot handle signal {sig}"))?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if tx.send(Event::Signal(sig)).is_err() {
                    return;
                }
            }
        });
    }
    Ok(())
}

/// Keys, pastes and resizes as [`Event`]s (crossterm's `EventStream` on the
/// tokio runtime), until the loop ends or reading fails.
pub(super) async fn read_terminal(tx: UnboundedSender<Event>) {
    let mut events = EventStream::new();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(crossterm::event::Event::Key(key)) => Event::Key(key),
            Ok(crossterm::event::Event::Paste(text)) => Event::Paste(text),
            Ok(crossterm::event::Event::Resize(w, h)) => Event::Resize(w, h),
            Ok(_) => continue,
            Err(e) => Event::TerminalError(e.to_string()),
        };
        let fatal = matches!(event, Event::TerminalError(_));
        if tx.send(event).is_err() || fatal {
            return;
        }
    }
}
