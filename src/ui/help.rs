//! The help overlay: the keys, what each runtime path is, and what the numbers mean.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Widget};

use super::format;
use crate::app::DEBOUNCE;

/// Every key, as the help overlay and the README list them.
pub const KEYS: &[(&str, &str)] = &[
    ("typing, paste", "edit the text; it runs when you pause"),
    ("Enter", "run the text now"),
    ("← → Home End", "move   Backspace Delete: erase   Ctrl-U: clear"),
    ("Ctrl-S or F2", "parallel / serial (one backend at a time)"),
    ("Ctrl-R or F3", "repeat on/off (re-run to fill the percentiles)"),
    ("F4", "operator profile (traced run)   F5: next program of a column"),
    ("F6", "time per module (layers)   F7: chat template / raw prompt"),
    ("F8", "switch to another model directory (the text carries over)"),
    ("Esc, Ctrl-C", "quit (q on empty text)   Ctrl-Z: suspend   F1, ?: help"),
];

/// The three paths and the numbers, two or three lines each.
pub const PATHS: [(&str, &str); 4] = [
    ("PyTorch eager", "libtorch (through tch) runs the model one operator at a time, as PyTorch in Python does."),
    (
        "ExecuTorch portable",
        "the exported program with no delegate, on the wheel's default CPU kernels: every operator is covered, few are fast.",
    ),
    (
        "ExecuTorch XNNPACK",
        "the subgraphs XNNPACK supports run in its optimized delegate; the rest stays on the default kernels (the gauge shows the split).",
    ),
    (
        "Numbers",
        "latency: each run on its own thread; p50/p90/p99 this session. Parity vs eager: cosine, same top-1 token or label, max |diff|.",
    ),
];

pub struct HelpOverlay;

impl HelpOverlay {
    fn lines(width: usize) -> Vec<Line<'static>> {
        let head = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
        let key = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);
        let mut lines = vec![Line::styled("Keys", head)];
        let key_w = KEYS.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0) + 2;
        for &(k, what) in KEYS {
            let what = if k == "typing, paste" { format!("{what} ({} ms)", DEBOUNCE.as_millis()) } else { what.to_string() };
            lines.push(Line::from(vec![
                Span::styled(format!(" {k:<key_w$}"), key),
                Span::raw(format::fit(&what, width.saturating_sub(key_w + 1))),
            ]));
        }
        lines.push(Line::default());
        lines.push(Line::styled("What runs", head));
        for (name, text) in PATHS {
            let first_w = width.saturating_sub(name.len() + 3);
            let wrapped = format::wrap(text, first_w.max(10), 3);
            for (i, l) in wrapped.into_iter().enumerate() {
                if i == 0 {
                    lines.push(Line::from(vec![Span::styled(format!(" {name}: "), key), Span::raw(l)]));
                } else {
                    lines.push(Line::raw(format!("{}{l}", " ".repeat(name.len() + 3))));
                }
            }
        }
        lines
    }
}

impl Widget for HelpOverlay {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let width = area.width.saturating_sub(2).min(96);
        let content_w = width.saturating_sub(4) as usize;
        let lines = Self::lines(content_w);
        let height = (lines.len() as u16 + 2).min(area.height);
        let popup = Rect {
            x: area.x + (area.width - width) / 2,
            y: area.y + (area.height - height) / 2,
            width,
            height,
        };
        Clear.render(popup, buf);
        let block = Block::bordered()
            .border_type(BorderType::Double)
            .border_style(Style::new().fg(Color::Cyan))
            .title(Span::styled(" runlens help · any key closes ", Style::new().add_modifier(Modifier::BOLD)));
        let inner = block.inner(popup);
        block.render(popup, buf);
        for (i, line) in lines.iter().enumerate().take(inner.height as usize) {
            buf.set_line(inner.x + 1, inner.y + i as u16, line, inner.width.saturating_sub(2));
        }
    }
}
