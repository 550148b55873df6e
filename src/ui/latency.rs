//! The latency panel: last, p50, p90, p99 over every run of one backend, and a
//! sparkline of the recent runs.
//!
//! ```text
//! latency (ms)     57 runs
//!   last   p50   p90   p99
//!   2.31  2.20  2.90  3.40
//! ▁▂▃▂▁▅▇▂▁▂▃▂
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Sparkline, Widget};

use super::format;
use crate::stats::LatencyStats;

/// Rows the panel needs without its sparkline.
pub const TEXT_ROWS: u16 = 3;

pub struct LatencyPanel<'a> {
    pub stats: &'a LatencyStats,
    /// The stats are of single tokens (text-generation), not of whole runs.
    pub per_token: bool,
}

impl Widget for LatencyPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.height == 0 || area.width == 0 {
            return;
        }
        let w = area.width as usize;
        let noun = if self.per_token { "token" } else { "run" };
        let runs = match self.stats.count() {
            1 => format!("1 {noun}"),
            n => format!("{n} {noun}s"),
        };
        let title = if self.per_token { "ms/token" } else { "latency (ms)" };
        let gap = w.saturating_sub(title.len() + runs.len()).max(1);
        let title_line = Line::from(vec![
            Span::styled(title, Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(" ".repeat(gap)),
            Span::styled(runs, Style::new().fg(Color::DarkGray)),
        ]);
        buf.set_line(area.x, area.y, &title_line, area.width);

        let cell = (w / 4).clamp(5, 8);
        // Four columns of figures where they fit (p99 goes first in a narrow column).
        let shown = (w / cell).clamp(1, 4);
        let all = [
            ("last", self.stats.last()),
            ("p50", self.stats.p50()),
            ("p90", self.stats.p90()),
            ("p99", self.stats.p99()),
        ];
        let cells = &all[..shown];
        let header: String = cells.iter().map(|(name, _)| format!("{name:>cell$}")).collect();
        let rows = [
            Line::styled(header, Style::new().fg(Color::DarkGray)),
            Line::from(
                cells
                    .iter()
                    .enumerate()
                    .map(|(i, (_, v))| {
                        let text = v.map_or_else(|| "–".to_string(), format::ms);
                        let style = if i == 0 {
                            Style::new().add_modifier(Modifier::BOLD)
                        } else {
                            Style::new().fg(Color::Cyan)
                        };
                        Span::styled(format!("{text:>cell$}"), style)
                    })
                    .collect::<Vec<_>>(),
            ),
        ];
        for (i, line) in rows.iter().enumerate() {
            let y = area.y + 1 + i as u16;
            if y < area.bottom() {
                buf.set_line(area.x, y, line, area.width);
            }
        }
        if area.height > TEXT_ROWS {
            let spark = Rect { y: area.y + TEXT_ROWS, height: area.height - TEXT_ROWS, ..area };
            let recent: Vec<u64> = self.stats.recent().map(|d| d.as_micros() as u64).collect();
            let shown = &recent[recent.len().saturating_sub(w)..];
            Sparkline::default().data(shown).style(Style::new().fg(Color::Green)).render(spark, buf);
        }
    }
}
