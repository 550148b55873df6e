//! The profile view (F4): where each ExecuTorch and ONNX Runtime column spends
//! its time, per operator, from a separate traced run. Drawn over the columns; the input
//! line stays live above it.
//!
//! ```text
//! ╭ profile · a separate traced run (ETDump or ORT's profiler) · F4 closes ──────╮
//! │ "a cat": 4 tokens · mean of 3 traced runs · share of each backend's time     │
//! │ xnnpack  4.000 ms/run · 53 x XnnpackBackend subgraphs = 97% of xnnpack time  │
//! │   XnnpackBackend             delegate   53×    3.880 ms  97.0% ███████████▋  │
//! │   ↳ Fully Connected (NC, F3… inside     36×    3.500 ms  87.5% ██████████▌   │
//! │   aten::native_layer_norm.o… kernel     13×    0.080 ms   2.0% ▎             │
//! ```

use std::time::Instant;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::draw::{self, put};
use super::format;
use crate::app::{ProfileState, ProfileView};
use crate::profile::{BackendProfile, DelegateOperatorProfile, OperatorKind, OperatorProfile};

pub const TITLE: &str = " profile · a separate traced run (ETDump or ORT's profiler) · F4 closes ";

pub struct ProfilePanel<'a> {
    pub view: &'a ProfileView,
    pub now: Instant,
}

/// `██████▍` for a share, in `width` cells (eighths for the last cell).
fn bar(share: f64, width: usize) -> String {
    const PARTS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    let eighths = (share.clamp(0.0, 1.0) * width as f64 * 8.0).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    if eighths / 8 < width {
        s.push_str(PARTS[eighths % 8]);
    }
    s
}

/// Operator types shown under a delegate row (the delegate's own timings).
const INSIDE_ROWS: usize = 2;

/// A row of a backend's table: an operator (or delegate) row, or an operator
/// type inside a delegate's calls.
enum Entry<'a> {
    Operator(&'a OperatorProfile),
    Inside(&'a DelegateOperatorProfile),
}

/// `longest`: the longest operator name of all backends (so their columns line up).
fn backend_lines(b: &BackendProfile, width: usize, height: usize, longest: usize) -> Vec<Line<'static>> {
    let head = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
    let mut lines = Vec::new();
    let headline = b.headline().unwrap_or_default();
    lines.push(Line::from(vec![
        Span::styled(format!("{} ", b.name), head),
        Span::raw(format::fit(&format!(" {:.3} ms/run · {headline}", b.total_ms), width.saturating_sub(b.name.len() + 1))),
    ]));
    let rows = height.saturating_sub(1);
    if rows == 0 {
        return lines;
    }
    // Each delegate row is followed by the top operators inside its calls.
    let mut entries: Vec<Entry<'_>> = Vec::new();
    for o in &b.operators {
        entries.push(Entry::Operator(o));
        if o.kind == OperatorKind::Delegate {
            entries.extend(b.inside(&o.name).take(INSIDE_ROWS).map(Entry::Inside));
        }
    }
    let shown = if entries.len() > rows { rows - 1 } else { entries.len() };
    // name  kind  calls×  ms  share  bar
    let fixed = 2 + 1 + 8 + 1 + 5 + 1 + 11 + 1 + 6 + 1;
    let bar_w = 12.min(width.saturating_sub(fixed + 12));
    let name_w = width.saturating_sub(fixed + bar_w + 1).min(longest).max(4);
    for entry in &entries[..shown] {
        let (name, kind, colour, count, ms, share) = match entry {
            Entry::Operator(o) => {
                let (kind, colour) = match o.kind {
                    OperatorKind::Kernel => ("kernel", Color::Yellow),
                    OperatorKind::Delegate => ("delegate", Color::Green),
                };
                (format::fit(&o.name, name_w), kind, colour, o.count, o.total_ms, o.share)
            }
            Entry::Inside(d) => {
                (format!("↳ {}", format::fit(&d.name, name_w.saturating_sub(2))), "inside", Color::DarkGray, d.count, d.total_ms, d.share)
            }
        };
        lines.push(Line::from(vec![
            Span::raw(format!("  {name:<name_w$} ")),
            Span::styled(format!("{kind:<8} "), Style::new().fg(colour)),
            Span::raw(format!("{count:>4}× {ms:>8.3} ms {:>5.1}% ", 100.0 * share)),
            Span::styled(bar(share, bar_w), Style::new().fg(colour)),
        ]));
    }
    let rest: Vec<&OperatorProfile> = entries[shown..]
        .iter()
        .filter_map(|e| match e {
            Entry::Operator(o) => Some(*o),
            Entry::Inside(_) => None,
        })
        .collect();
    if !rest.is_empty() {
        let share: f64 = rest.iter().map(|o| o.share).sum();
        lines.push(Line::styled(
            format!("  … {} more operators, {:.1}% together", rest.len(), 100.0 * share),
            Style::new().fg(Color::DarkGray),
        ));
    }
    lines
}

impl Widget for ProfilePanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let inner = draw::overlay(TITLE, area, buf);
        let width = inner.width as usize;
        let text = format::fit(&format!("{:?}", self.view.text), width.saturating_sub(30).max(8));
        match &self.view.state {
            ProfileState::Running { since } => {
                let elapsed = format::secs(self.now.saturating_duration_since(*since));
                let line = format!("{text}: loading the programs with the tracer and running them … {elapsed}");
                put(&[Line::styled(format::fit(&line, width), Style::new().fg(Color::Yellow))], inner, buf);
            }
            ProfileState::Failed(message) => {
                let mut lines = vec![Line::raw(format!("{text}: no profile"))];
                lines.extend(format::wrap(message, width, inner.height.saturating_sub(1) as usize).into_iter().map(|l| Line::styled(l, Style::new().fg(Color::Red))));
                put(&lines, inner, buf);
            }
            ProfileState::Ready(report) => {
                let runs = report.backends.first().map_or(0, |b| b.runs);
                let first = format!("{text}: {} tokens · mean of {runs} traced runs · share of each backend's time", report.tokens);
                put(&[Line::raw(format::fit(&first, width))], inner, buf);
                let rest = Rect { y: inner.y + 1, height: inner.height.saturating_sub(1), ..inner };
                let n = report.backends.len().max(1) as u32;
                let parts = Layout::vertical((0..n).map(|_| Constraint::Ratio(1, n))).split(rest);
                let longest = report
                    .backends
                    .iter()
                    .flat_map(|b| {
                        let inside = b.delegate_operators.iter().map(|d| d.name.chars().count() + 2);
                        b.operators.iter().map(|o| o.name.chars().count()).chain(inside)
                    })
                    .max()
                    .unwrap_or(4);
                for (b, part) in report.backends.iter().zip(parts.iter()) {
                    put(&backend_lines(b, width, part.height as usize, longest), *part, buf);
                }
            }
        }
    }
}
