//! The delegation panel of a `.pte` column: a gauge of the share delegated,
//! kernel vs delegate calls, the operators left on the default kernels, file
//! size and load time.
//!
//! ```text
//! delegated ███░░░░░░░ 28%
//! delegate 53 · kernel 136
//! kernels: native_layer_n…
//! 90.4 MB · load 210 ms
//! ```
//! With more rows, the partition map (the calls in order, `█` delegated, `░`
//! on the default kernels) and its boundaries, then the operators, one line each.

use std::time::Duration;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::format;
use crate::app::CoverageView;

/// Rows the compact panel uses.
pub const ROWS: u16 = 4;

pub struct CoveragePanel<'a> {
    /// `None` while the file is being read.
    pub coverage: Option<&'a Result<CoverageView, String>>,
    pub load_time: Option<Duration>,
}

/// `delegated ███░░░░░░░ 28%` in `width` columns.
pub fn gauge_line(coverage: f64, width: usize) -> Line<'static> {
    let label = "delegated ";
    let fraction = coverage.clamp(0.0, 1.0);
    let percent = format!(" {:.0}%", fraction * 100.0);
    let bar = width.saturating_sub(label.len() + percent.len()).max(1);
    let filled = ((fraction * bar as f64).round() as usize).min(bar);
    let colour = if fraction >= 0.9 {
        Color::Green
    } else if fraction >= 0.25 {
        Color::Yellow
    } else {
        Color::Red
    };
    Line::from(vec![
        Span::raw(label),
        Span::styled("█".repeat(filled), Style::new().fg(colour)),
        Span::styled("░".repeat(bar - filled), Style::new().fg(Color::DarkGray)),
        Span::styled(percent, Style::new().fg(colour).add_modifier(Modifier::BOLD)),
    ])
}

/// The partition map in `width` cells: `█` delegated, `░` default kernels.
pub fn strip_line(strip: &[bool], width: usize) -> Line<'static> {
    let cells = crate::pte::squeeze(strip, width);
    let spans: Vec<Span> = cells
        .iter()
        .map(|&d| if d { Span::styled("█", Style::new().fg(Color::Green)) } else { Span::styled("░", Style::new().fg(Color::Red)) })
        .collect();
    Line::from(spans)
}

/// `106 boundaries: et_view 48, native_layer_norm 13` (`1 kernel run` without a delegate).
fn boundaries(view: &CoverageView) -> String {
    if view.boundaries == 0 {
        return "one run, no boundary".to_owned();
    }
    let breaks: Vec<String> = view.breaks.iter().map(|(name, n)| format!("{} {n}", format::operator(name))).collect();
    if breaks.is_empty() {
        format!("{} boundaries", view.boundaries)
    } else {
        format!("{} boundaries: {}", view.boundaries, breaks.join(", "))
    }
}

fn footer(view: Option<&CoverageView>, load_time: Option<Duration>) -> String {
    let size = view.map(|v| format::bytes(v.file_bytes));
    let load = load_time.map(|d| format!("load {}", format::short(d)));
    match (size, load) {
        (Some(s), Some(l)) => format!("{s} · {l}"),
        (Some(s), None) => s,
        (None, Some(l)) => l,
        (None, None) => String::new(),
    }
}

impl Widget for CoveragePanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.height == 0 || area.width == 0 {
            return;
        }
        let w = area.width as usize;
        let dim = Style::new().fg(Color::DarkGray);
        let mut lines: Vec<Line> = Vec::new();
        let view = match self.coverage {
            Some(Ok(view)) => Some(view),
            _ => None,
        };
        let footer_line = footer(view, self.load_time);
        match self.coverage {
            None => {
                let rows = (area.height as usize).saturating_sub(1).max(1);
                lines.extend(format::wrap("delegation: reading…", w, rows).into_iter().map(|l| Line::styled(l, dim)));
            }
            Some(Err(e)) => {
                lines.push(Line::styled("delegation: unknown", dim));
                for l in format::wrap(e, w, (area.height as usize).saturating_sub(2).max(1)) {
                    lines.push(Line::styled(l, dim));
                }
            }
            Some(Ok(view)) => {
                lines.push(gauge_line(view.coverage, w));
                let calls = format!("delegate {} · kernel {}", view.delegate_calls, view.kernel_calls);
                let calls = if calls.chars().count() + 6 <= w { format!("{calls} calls") } else { calls };
                lines.push(Line::raw(format::fit(&calls, w)));
                // The partition map when there is room for it: the calls in order.
                let with_strip = !view.strip.is_empty() && area.height > ROWS + 1;
                if with_strip {
                    lines.push(strip_line(&view.strip, w));
                    lines.push(Line::styled(format::fit(&boundaries(view), w), dim));
                }
                let op_rows = (area.height as usize).saturating_sub(if with_strip { 5 } else { 3 });
                let ops: Vec<String> =
                    view.top_operators.iter().map(|(name, n)| format!("{} {n}", format::operator(name))).collect();
                if ops.is_empty() {
                    lines.push(Line::styled("kernels: none", dim));
                } else if op_rows <= 1 || ops.len() == 1 {
                    lines.push(Line::styled(format::fit(&format!("kernels: {}", ops.join(", ")), w), dim));
                } else {
                    lines.push(Line::styled(format::fit("on the default kernels:", w), dim));
                    let room = op_rows - 1;
                    for (i, op) in ops.iter().enumerate().take(room) {
                        let more = ops.len() - i - 1;
                        let text = if i + 1 == room && more > 0 { format!("{op} (+{more} more)") } else { op.clone() };
                        lines.push(Line::styled(format::fit(&format!(" {text}"), w), dim));
                    }
                }
            }
        }
        let body_rows = (area.height as usize).saturating_sub(1);
        for (i, line) in lines.iter().take(body_rows.max(1)).enumerate() {
            buf.set_line(area.x, area.y + i as u16, line, area.width);
        }
        if area.height >= 2 && !footer_line.is_empty() {
            buf.set_line(area.x, area.bottom() - 1, &Line::raw(format::fit(&footer_line, w)), area.width);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(view: &Result<CoverageView, String>, height: u16) -> String {
        let area = Rect::new(0, 0, 30, height);
        let mut buf = Buffer::empty(area);
        CoveragePanel { coverage: Some(view), load_time: None }.render(area, &mut buf);
        (0..height).map(|y| (0..30).map(|x| buf[(x, y)].symbol().to_owned()).collect::<String>() + "\n").collect()
    }

    #[test]
    fn the_strip_shows_when_there_is_room() {
        let view = Ok(CoverageView {
            coverage: 0.5,
            kernel_calls: 3,
            delegate_calls: 2,
            top_operators: vec![("executorch_prim::et_view.default".into(), 2)],
            file_bytes: 1000,
            strip: vec![false, true, false, false, true],
            boundaries: 3,
            breaks: vec![("executorch_prim::et_view.default".into(), 2)],
            weight_bytes_per_token: None,
        });
        let tall = render(&view, 8);
        assert!(tall.contains("░█░░█"), "{tall}");
        assert!(tall.contains("3 boundaries: et_view 2"), "{tall}");
        let compact = render(&view, ROWS);
        // The compact panel: the gauge is the only line of bar glyphs, no partition map.
        let bars: Vec<&str> = compact.lines().filter(|l| l.contains('█') || l.contains('░')).collect();
        assert_eq!(bars.len(), 1, "{compact}");
        assert!(bars[0].starts_with("delegated ") && bars[0].trim_end().ends_with("50%"), "{compact}");
        assert!(!compact.contains("░█░░█"), "{compact}");
        assert!(!compact.contains("boundaries"), "the compact panel is unchanged: {compact}");
    }
}
