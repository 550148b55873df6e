//! The model list (F8): one line per model directory (its folder, the model
//! and task its manifest names, or why it cannot be opened), the one open
//! marked `● open`, the cursor's line highlighted; under the list, the cursor's
//! path and error in full, or why the last choice did not switch; at the
//! bottom the keys, or the switch under way. Drawn over the columns.
//!
//! ```text
//! ╭ model directories (3) · F8 closes ──────────────────────────────────────╮
//! │   minilm                 all-MiniLM-L6-v2 · feature-extraction  ● open │
//! │ › smollm2-135m-instruct  SmolLM2-135M-Instruct · text-generation       │
//! │   broken                 ✖ models/broken/manifest.json is not a rea… │
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::draw::{self, line_at};
use super::format;
use crate::app::{App, ModelsView};
use crate::model::MODELS_ROOT;

/// Lines kept for the cursor's path and error (or a refusal) under the list.
const DETAIL_LINES: usize = 6;

pub struct ModelsPanel<'a> {
    pub app: &'a App,
}

impl ModelsPanel<'_> {
    fn entry_line(view: &ModelsView, index: usize, name_w: usize, width: usize) -> Line<'static> {
        let entry = &view.entries[index];
        let selected = index == view.cursor;
        let head = format!("{} {:<name_w$}  ", if selected { "›" } else { " " }, format::fit(&entry.name, name_w));
        let open = if view.current == Some(index) { "  ● open" } else { "" };
        let room = width.saturating_sub(head.chars().count() + open.chars().count());
        let (about, about_style) = match &entry.opened {
            Ok((model, task)) => (format!("{model} · {task}"), Style::new()),
            Err(error) => (format!("✖ {}", error.lines().next().unwrap_or_default()), Style::new().fg(Color::Red)),
        };
        let about = format::fit(&about, room);
        let pad = " ".repeat(room.saturating_sub(about.chars().count()));
        let line = Line::from(vec![
            Span::styled(head, Style::new().add_modifier(Modifier::BOLD)),
            Span::styled(about, about_style),
            Span::styled(open, Style::new().fg(Color::Green).add_modifier(Modifier::BOLD)),
            Span::raw(pad),
        ]);
        if selected {
            line.style(Style::new().bg(Color::Blue).fg(Color::White))
        } else {
            line
        }
    }

    /// The cursor's path and error, or the last choice's refusal, wrapped.
    fn detail(view: &ModelsView, width: usize) -> Vec<Line<'static>> {
        let mut lines = Vec::new();
        if let Some(message) = &view.message {
            let style = Style::new().fg(Color::Yellow);
            for paragraph in message.lines().filter(|l| !l.trim().is_empty()) {
                let room = DETAIL_LINES.saturating_sub(lines.len());
                lines.extend(format::wrap(paragraph, width, room).into_iter().map(|l| Line::styled(l, style)));
            }
            return lines;
        }
        let Some(entry) = view.selected() else { return lines };
        lines.push(Line::styled(format::fit(&entry.path.display().to_string(), width), Style::new().fg(Color::DarkGray)));
        if let Err(error) = &entry.opened {
            let style = Style::new().fg(Color::Red);
            lines.extend(format::wrap(&format!("✖ {error}"), width, DETAIL_LINES - 1).into_iter().map(|l| Line::styled(l, style)));
        }
        lines
    }

    fn footer(&self, view: &ModelsView, width: usize) -> Line<'static> {
        let key = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);
        if let Some((to, since)) = view.switching {
            let to = view.entries.get(to).map_or("", |e| e.name.as_str());
            let text = if view.unloaded {
                format!("opening {to}…")
            } else {
                let elapsed = format::secs(self.app.now().saturating_duration_since(since));
                format!("unloading {}… {elapsed}, then {to} loads", self.app.model())
            };
            return Line::styled(format::fit(&text, width), key);
        }
        let hints = [("↑↓", " move  "), ("Enter", " switch to it (the text carries over)  "), ("Esc", " close")];
        let mut spans = Vec::new();
        let mut used = 0;
        for (k, what) in hints {
            let w = k.chars().count() + what.chars().count();
            if used + w > width {
                break;
            }
            used += w;
            spans.push(Span::styled(k, key));
            spans.push(Span::raw(what));
        }
        Line::from(spans)
    }
}

impl Widget for ModelsPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let Some(view) = self.app.models() else { return };
        let title = format!(" model directories ({}) · F8 closes ", view.entries.len());
        let inner = draw::overlay(&title, area, buf);
        let width = inner.width as usize;
        if inner.height == 0 || width == 0 {
            return;
        }
        let footer_row = inner.height - 1;
        line_at(buf, inner, footer_row, &self.footer(view, width));
        if view.entries.is_empty() {
            let text = format!("No model directories under {MODELS_ROOT}/: python/export.py writes them (docs/models.md).");
            for (i, l) in format::wrap(&text, width, footer_row as usize).into_iter().enumerate() {
                line_at(buf, inner, i as u16, &Line::raw(l));
            }
            return;
        }
        // The list above, the detail under it (a blank line between), the footer last.
        let detail = Self::detail(view, width);
        let rows = (footer_row as usize).saturating_sub(detail.len() + 1).max(1).min(footer_row as usize);
        let top = (view.cursor + 1).saturating_sub(rows);
        let name_w = view.entries.iter().map(|e| e.name.chars().count()).max().unwrap_or(0).min(28).min(width / 2);
        for (row, index) in (top..view.entries.len()).take(rows).enumerate() {
            line_at(buf, inner, row as u16, &Self::entry_line(view, index, name_w, width));
        }
        let shown = rows.min(view.entries.len());
        for (i, line) in detail.iter().enumerate() {
            let row = shown + 1 + i;
            if row < footer_row as usize {
                line_at(buf, inner, row as u16, line);
            }
        }
    }
}
