//! Drawing: a pure function of `&App` (`impl Widget for &App`), so tests render
//! whole screens into a buffer. Top to bottom: input line, token strip, one
//! column per backend, status bar; the profile view (F4), the layers view
//! (F6) or the model list (F8) over the columns and
//! the help overlay on top when asked for; a
//! short notice instead when the terminal is too small.

pub mod column;
pub mod coverage;
pub mod draw;
pub mod format;
pub mod help;
pub mod latency;
pub mod layers;
pub mod models;
pub mod profile;
pub mod status;
pub mod task;
pub mod theme;
pub mod tokens;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use ratatui::Frame;

use crate::app::App;
pub use theme::{GlyphSet, Theme};

/// The smallest terminal the layout is made for.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// Where the parts of the screen go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Areas {
    pub input: Rect,
    pub tokens: Rect,
    pub columns: Rect,
    pub status: Rect,
}

/// Token rows: more on taller terminals, but fixed for a given height so the
/// columns don't jump while typing.
fn token_rows(height: u16) -> u16 {
    if height < 32 {
        2
    } else {
        3
    }
}

pub fn areas(area: Rect) -> Areas {
    let [input, tokens, columns, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(token_rows(area.height)),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    Areas { input, tokens, columns, status }
}

/// Columns of equal width (so text wraps the same in each), centred.
pub fn column_areas(area: Rect, n: usize) -> Vec<Rect> {
    let n = n.max(1) as u16;
    let width = area.width / n;
    let left = area.x + (area.width - width * n) / 2;
    (0..n).map(|i| Rect { x: left + i * width, width, ..area }).collect()
}

pub fn too_small(area: Rect) -> bool {
    area.width < MIN_WIDTH || area.height < MIN_HEIGHT
}

const PROMPT: &str = "Text › ";

/// First character of the text shown, so that the cursor stays in view.
fn input_scroll(app: &App, width: u16) -> usize {
    let room = (width as usize).saturating_sub(PROMPT.chars().count() + 1).max(1);
    app.input().cursor().saturating_sub(room)
}

fn render_input(app: &App, area: Rect, buf: &mut Buffer) {
    let prompt = Span::styled(PROMPT, Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD));
    let line = if app.input().is_empty() {
        Line::from(vec![prompt, Span::styled("type a sentence (F1 help)", Style::new().fg(Color::DarkGray))])
    } else {
        let text: String = app.input().text().chars().skip(input_scroll(app, area.width)).collect();
        Line::from(vec![prompt, Span::styled(text, Style::new().add_modifier(Modifier::BOLD))])
    };
    buf.set_line(area.x, area.y, &line, area.width);
}

/// Where the terminal cursor goes: in the input line, unless an overlay hides it
/// or the model list takes the keys.
pub fn cursor_position(app: &App, area: Rect) -> Option<Position> {
    if too_small(area) || app.show_help() || app.models().is_some() {
        return None;
    }
    let input = areas(area).input;
    let col = app.input().cursor() - input_scroll(app, input.width) + PROMPT.chars().count();
    Some(Position { x: input.x + (col as u16).min(input.width.saturating_sub(1)), y: input.y })
}

/// Draw the whole screen with the Unicode set and place the cursor.
pub fn draw(frame: &mut Frame, app: &App) {
    draw_with(frame, app, &Theme::default());
}

/// Draw the whole screen in `theme`'s glyphs and colours and place the cursor.
pub fn draw_with(frame: &mut Frame, app: &App, theme: &Theme) {
    let area = frame.area();
    frame.render_widget(app, area);
    theme.apply(frame.buffer_mut());
    if let Some(p) = cursor_position(app, area) {
        frame.set_cursor_position(p);
    }
}

fn render_too_small(area: Rect, buf: &mut Buffer) {
    let text = format!(
        "runlens needs a terminal of at least {MIN_WIDTH}x{MIN_HEIGHT}; this one is {}x{}. Enlarge it, or press Esc to quit.",
        area.width, area.height
    );
    let lines = format::wrap(&text, area.width.saturating_sub(2).max(1) as usize, area.height as usize);
    let top = area.y + area.height.saturating_sub(lines.len() as u16) / 2;
    for (i, l) in lines.iter().enumerate() {
        let x = area.x + area.width.saturating_sub(l.chars().count() as u16) / 2;
        let y = top + i as u16;
        if y < area.bottom() {
            buf.set_line(x, y, &Line::styled(l.clone(), Style::new().fg(Color::Yellow)), area.width);
        }
    }
}

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if too_small(area) {
            render_too_small(area, buf);
            return;
        }
        let a = areas(area);
        render_input(self, a.input, buf);
        tokens::TokenStrip { encoded: self.encoded(), error: self.encode_error() }.render(a.tokens, buf);
        for (index, rect) in column_areas(a.columns, self.columns().len()).into_iter().enumerate() {
            column::BackendColumn { app: self, index }.render(rect, buf);
        }
        status::StatusBar { app: self }.render(a.status, buf);
        if let Some(view) = self.profile() {
            profile::ProfilePanel { view, now: self.now() }.render(a.columns, buf);
        }
        if let Some(view) = self.layers() {
            layers::LayersPanel { view, now: self.now() }.render(a.columns, buf);
        }
        if self.models().is_some() {
            models::ModelsPanel { app: self }.render(a.columns, buf);
        }
        if self.show_help() {
            help::HelpOverlay.render(area, buf);
        }
    }
}
