//! The status bar: run mode and repeat (each with the key that toggles it),
//! threads, model, corpus, the SoC's temperature and clock (and THROTTLED when
//! the firmware says so); key hints on the right, as many as fit. A note (what
//! a switch of model with F8 fell back to, or why it did not happen) takes the
//! place of threads, model, corpus and heat until the next key.
//!
//! ```text
//!  ^S PARALLEL  ^R repeat off  2 threads · all-MiniLM-L6-v2 · 61°C 2400 MHz   F1 help  Esc quit
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::app::{App, CorpusState};

pub struct StatusBar<'a> {
    pub app: &'a App,
}

fn width_of(spans: &[Span]) -> usize {
    spans.iter().map(|s| s.content.chars().count()).sum()
}

impl Widget for StatusBar<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.app;
        let bar = Style::new().bg(Color::DarkGray).fg(Color::White);
        let key = bar.fg(Color::Yellow).add_modifier(Modifier::BOLD);
        buf.set_style(area, bar);
        let (mode, mode_style) = if app.is_serial() {
            (" SERIAL ", Style::new().bg(Color::Yellow).fg(Color::Black))
        } else {
            (" PARALLEL ", Style::new().bg(Color::Blue).fg(Color::White))
        };
        let (repeat, repeat_style) = if app.is_repeat() {
            (" REPEAT ", Style::new().bg(Color::Magenta).fg(Color::White))
        } else {
            (" repeat off ", bar)
        };
        let threads = if app.threads() == 1 { "1 thread".to_string() } else { format!("{} threads", app.threads()) };
        let mut left = vec![
            Span::styled(" ^S", key),
            Span::styled(mode, mode_style.add_modifier(Modifier::BOLD)),
            Span::styled(" ^R", key),
            Span::styled(repeat, repeat_style.add_modifier(Modifier::BOLD)),
        ];
        let help = vec![Span::styled(" F1", key), Span::styled(" help ", bar), Span::styled(" Esc", key), Span::styled(" quit ", bar)];
        if let Some(note) = app.note() {
            let room = (area.width as usize).saturating_sub(width_of(&left) + width_of(&help) + 1);
            left.push(Span::styled(format!(" {}", super::format::fit(note, room)), bar.fg(Color::Yellow).add_modifier(Modifier::BOLD)));
            let gap = (area.width as usize).saturating_sub(width_of(&left) + width_of(&help));
            left.push(Span::styled(" ".repeat(gap), bar));
            left.extend(help);
            buf.set_line(area.x, area.y, &Line::from(left), area.width);
            return;
        }
        left.push(Span::styled(format!(" {threads} · {}", app.model()), bar));
        if let Some(format) = app.prompt_format() {
            left.push(Span::styled(" · F7", key));
            left.push(Span::styled(format!(" {format}"), bar));
        }
        // Optional parts, in the order they are given up when the bar is narrow.
        let corpus = match &app.corpus().state {
            CorpusState::Ready { .. } => Some(format!(" · corpus {}", app.corpus().sentences.len())),
            CorpusState::Embedding(_) => Some(" · corpus …".to_string()),
            CorpusState::Failed(_) => Some(" · no corpus".to_string()),
            CorpusState::Empty => None,
        };
        let enter = vec![Span::styled(" Enter", key), Span::styled(" run ", bar)];
        let heat = app.heat().map(|heat| {
            let throttled = heat.throttled.is_some_and(|t| t & crate::heat::THROTTLED_NOW != 0);
            let style = if throttled { bar.fg(Color::LightRed).add_modifier(Modifier::BOLD) } else { bar };
            Span::styled(format!(" · {}", heat.short()), style)
        });
        let width = area.width as usize;
        // Optional parts, kept in this order while they fit: help, heat, corpus, Enter.
        let mut used = width_of(&left);
        let mut right = Vec::new();
        if used + width_of(&help) <= width {
            used += width_of(&help);
            right = help;
        }
        let heat = heat.filter(|h| used + h.content.chars().count() <= width);
        used += heat.as_ref().map_or(0, |h| h.content.chars().count());
        let corpus = corpus.filter(|c| used + c.chars().count() <= width);
        used += corpus.as_ref().map_or(0, |c| c.chars().count());
        if used + width_of(&enter) <= width {
            let mut with_enter = enter;
            with_enter.extend(right);
            right = with_enter;
        }
        left.extend(corpus.map(|c| Span::styled(c, bar)));
        left.extend(heat);
        let gap = width.saturating_sub(width_of(&left) + width_of(&right));
        let mut spans = left;
        spans.push(Span::styled(" ".repeat(gap), bar));
        spans.extend(right);
        buf.set_line(area.x, area.y, &Line::from(spans), area.width);
    }
}
