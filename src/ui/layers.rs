//! The layers view (F6): each backend's time per module of the model for the
//! current text (`runlens layers`' table), a heat shade per cell. Drawn over
//! the columns; the input line stays live above it. When the rows do not fit,
//! each layer's rows are summed into one row per layer.
//!
//! ```text
//! ╭ layers · time per module, a separate run (eager timed, programs traced) · F6 closes ─╮
//! │ "a cat": 4 tokens · ms per run, mean of 3 runs · share of each backend's run · shade  │
//! │ module                      eager              portable            xnnpack            │
//! │ embeddings            ░    0.210   2.1%       0.180   0.1%  ░    0.020   2.0%        │
//! │ L0 attention.self     ▒    1.110  11.0%  █   50.000  25.0%  ▒    0.150  15.0%        │
//! ```

use std::time::Instant;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::draw::{self, put};
use super::format;
use crate::app::{LayersState, LayersView};
use crate::layers::report::DRIFT;
use crate::layers::rows::order_key;
use crate::layers::{BackendLayers, LayersReport};

pub const TITLE: &str = " layers · time per module, a separate run (eager timed, programs traced) · F6 closes ";

pub struct LayersPanel<'a> {
    pub view: &'a LayersView,
    pub now: Instant,
}

/// The heat shade of a cell: its share of the backend's run, in four steps
/// that every glyph set keeps apart (`░ ▒ █` on the console, `. : #` in ASCII).
pub fn shade(share: f64) -> (&'static str, Color) {
    match share {
        s if s < 0.03 => (" ", Color::Reset),
        s if s < 0.10 => ("░", Color::Yellow),
        s if s < 0.25 => ("▒", Color::LightRed),
        _ => ("█", Color::Red),
    }
}

/// A row name shortened for the table: `encoder.layer.3.attention.self` → `L3 attention.self`.
fn short(row: &str) -> String {
    for stack in ["encoder.layer.", "transformer.layer.", "h.", "layers."] {
        if let Some(rest) = row.strip_prefix(stack) {
            return match rest.split_once('.') {
                Some((n, tail)) => format!("L{n} {tail}"),
                None => format!("L{rest} (residual adds)"),
            };
        }
    }
    row.to_string()
}

/// The rows shown: every row, or (when they do not fit) one per layer.
fn table(report: &LayersReport, room: usize) -> Vec<(String, Vec<Option<f64>>)> {
    let cells = |rows: &[&String]| -> Vec<Option<f64>> {
        report
            .backends
            .iter()
            .map(|b| rows.iter().filter_map(|r| b.row_ms(r)).fold(None, |sum: Option<f64>, ms| Some(sum.unwrap_or(0.0) + ms)))
            .collect()
    };
    if report.rows.len() <= room {
        return report.rows.iter().map(|r| (short(r), cells(&[r]))).collect();
    }
    let mut groups: Vec<(String, Vec<&String>)> = Vec::new();
    for r in &report.rows {
        let name = match order_key(r) {
            (2, n, _) => format!("layer {n} (all rows)"),
            _ => short(r),
        };
        match groups.last_mut() {
            Some((last, members)) if *last == name => members.push(r),
            _ => groups.push((name, vec![r])),
        }
    }
    groups.into_iter().map(|(name, members)| (name, cells(&members))).collect()
}

fn share(b: &BackendLayers, ms: f64) -> f64 {
    if b.total_ms > 0.0 { ms / b.total_ms } else { 0.0 }
}

/// One row's cells: `██  123.456  12.3%` (or without the share when narrow).
fn cells(report: &LayersReport, values: &[Option<f64>], wide: bool) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    for (b, value) in report.backends.iter().zip(values) {
        match value {
            Some(ms) => {
                let s = share(b, *ms);
                let (glyph, colour) = shade(s);
                spans.push(Span::styled(glyph.repeat(2), Style::new().fg(colour)));
                spans.push(Span::raw(if wide { format!("{ms:>9.3}{:>6.1}% ", 100.0 * s) } else { format!("{ms:>9.3} ") }));
            }
            None => spans.push(Span::styled(format!("{:>w$} ", "-", w = if wide { 18 } else { 11 }), Style::new().fg(Color::DarkGray))),
        }
    }
    spans
}

fn report_lines(report: &LayersReport, text: &str, width: usize, height: usize) -> Vec<Line<'static>> {
    let head = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
    let dim = Style::new().fg(Color::DarkGray);
    let n = report.backends.len();
    let wide = width >= 18 + n * 19;
    let cell_w = if wide { 19 } else { 12 };
    let name_w = width.saturating_sub(n * cell_w).max(6);
    let runs = report.backends.first().map_or(0, |b| b.runs);
    let mut lines = vec![Line::raw(format::fit(
        &format!("{text}: ms per run, mean of {runs} runs · share of each backend's run · shade from 3% ░, 10% ▒, 25% █"),
        width,
    ))];
    let mut header = vec![Span::styled(format!("{:<name_w$}", "module"), head)];
    for b in &report.backends {
        header.push(Span::styled(format!("{:>w$} ", format::fit(&b.name, cell_w - 3), w = cell_w - 1), head));
    }
    lines.push(Line::from(header));
    // Below the rows: unmapped, total, then drift, where it begins, and notes.
    let drifting: Vec<String> = report
        .backends
        .iter()
        .filter(|b| report.gaps.keys().any(|(_, name)| *name == b.name))
        .map(|b| match report.drift(&b.name) {
            (Some(first), Some(most)) => format!("{}: first drifts at {}, most at {}", b.name, short(first), short(most)),
            _ => format!("{}: no module drifts", b.name),
        })
        .collect();
    // Where each drift begins: the rows between the last clean one and the first drifting
    // one, not measured on their own (inside a delegate call, or not at all). A line each.
    let begins: Vec<String> = report
        .backends
        .iter()
        .filter_map(|b| match report.drift_begins(&b.name)? {
            start if !start.between.is_empty() => {
                let rows: Vec<String> = start.between.iter().map(|r| short(r)).collect();
                Some(format!("{}: within it at {}, so the drift begins in {}", b.name, short(start.clean_until?), rows.join(", ")))
            }
            _ => None,
        })
        .collect();
    let notes: Vec<String> = report.backends.iter().filter_map(|b| b.note.as_ref().map(|_| format!("{}: rows are instructions (no sidecar)", b.name))).collect();
    let footer = 2 + drifting.len() + begins.len() + notes.len();
    let room = height.saturating_sub(lines.len() + footer);
    let rows = table(report, room);
    let shown = rows.len().min(room);
    for (name, values) in &rows[..shown] {
        let mut spans = vec![Span::raw(format!("{:<name_w$}", format::fit(name, name_w.saturating_sub(1))))];
        spans.extend(cells(report, values, wide));
        lines.push(Line::from(spans));
    }
    if shown < rows.len() {
        lines.pop();
        lines.push(Line::styled(format!("… {} more rows (a larger terminal shows them)", rows.len() - shown + 1), dim));
    }
    let unmapped: Vec<Option<f64>> = report.backends.iter().map(|b| Some(b.unmapped_ms)).collect();
    let mut spans = vec![Span::styled(format!("{:<name_w$}", "unmapped"), dim)];
    spans.extend(cells(report, &unmapped, wide));
    lines.push(Line::from(spans));
    let mut spans = vec![Span::styled(format!("{:<name_w$}", "total"), head)];
    for b in &report.backends {
        let total = if wide { format!("  {:>9.3}{:>7} ", b.total_ms, format!("x{}", b.runs)) } else { format!("  {:>9.3} ", b.total_ms) };
        spans.push(Span::styled(total, Style::new().add_modifier(Modifier::BOLD)));
    }
    lines.push(Line::from(spans));
    // A line per compared backend (joined on one line, a second backend's was cut off), the
    // threshold on the first.
    for (i, drift) in drifting.iter().enumerate() {
        let line = if i == 0 { format!("gap vs eager (drift: 1 - cosine > {DRIFT:.0e}) · {drift}") } else { format!("  {drift}") };
        lines.push(Line::styled(format::fit(&line, width), Style::new().fg(Color::Magenta)));
    }
    for line in begins {
        lines.push(Line::styled(format::fit(&format!("  {line}"), width), Style::new().fg(Color::Magenta)));
    }
    for note in notes {
        lines.push(Line::styled(format::fit(&note, width), dim));
    }
    lines
}

impl Widget for LayersPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let inner = draw::overlay(TITLE, area, buf);
        let width = inner.width as usize;
        let text = format::fit(&format!("{:?}", self.view.text), width.saturating_sub(40).max(8));
        match &self.view.state {
            LayersState::Running { since } => {
                let elapsed = format::secs(self.now.saturating_duration_since(*since));
                let line = format!("{text}: timing every column per module (its own eager model, traced programs) … {elapsed}");
                put(&[Line::styled(format::fit(&line, width), Style::new().fg(Color::Yellow))], inner, buf);
            }
            LayersState::Failed(message) => {
                let mut lines = vec![Line::raw(format!("{text}: no time per module"))];
                lines.extend(format::wrap(message, width, inner.height.saturating_sub(1) as usize).into_iter().map(|l| Line::styled(l, Style::new().fg(Color::Red))));
                put(&lines, inner, buf);
            }
            LayersState::Ready(report) => put(&report_lines(report, &text, width, inner.height as usize), inner, buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shades_rise_with_the_share_and_names_shorten() {
        let order: Vec<&str> = [0.0, 0.05, 0.2, 0.9].iter().map(|s| shade(*s).0).collect();
        assert_eq!(order, [" ", "░", "▒", "█"]);
        assert_eq!(short("encoder.layer.3.attention.self"), "L3 attention.self");
        assert_eq!(short("transformer.layer.2"), "L2 (residual adds)");
        assert_eq!(short("embeddings"), "embeddings");
        assert_eq!(short("layers.0.self_attn"), "L0 self_attn", "the Llama family's rows");
    }

    #[test]
    fn the_drift_line_says_where_the_drift_begins() {
        use crate::layers::report::fixtures::{decoder_report, gap};
        let report = decoder_report(gap(0.99, "kernel"));
        let text: String = report_lines(&report, "hi", 160, 30).iter().map(|l| l.to_string() + "\n").collect();
        assert!(text.contains("q: first drifts at L0 ln_2, most at head"), "{text}");
        assert!(text.contains("q: within it at L0 ln_1, so the drift begins in L0 attn"), "{text}");
    }

    #[test]
    fn each_compared_backend_has_its_drift_line() {
        use crate::layers::report::fixtures::{backend, decoder_report, gap};
        let mut report = decoder_report(gap(0.99, "kernel"));
        report.backends.push(backend("r", &[("head", 1.0)], (0, 0.0)));
        report.gaps.insert(("head".to_owned(), "r".to_owned()), gap(0.5, "module"));
        let lines: Vec<String> = report_lines(&report, "hi", 90, 30).iter().map(|l| l.to_string()).collect();
        assert!(lines.iter().any(|l| l.starts_with("gap vs eager") && l.ends_with("q: first drifts at L0 ln_2, most at head")), "{lines:#?}");
        assert!(lines.iter().any(|l| l == "  r: first drifts at head, most at head"), "{lines:#?}");
    }
}
