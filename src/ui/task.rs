//! The output panels of the tasks that are not embeddings: fill-mask (the top
//! tokens at each mask, with probability bars) and text-classification (a bar
//! per label). A token or label that differs from the reference column's is
//! marked, so a disagreement between runtimes shows where it is.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::draw::line_at;
use super::format;
use crate::task::{Classification, FillMask};

const DIM: Style = Style::new().fg(Color::DarkGray);

/// A probability as a bar of `width` cells: `█` for the share, `░` for the rest.
pub fn prob_bar(prob: f64, width: usize) -> String {
    let full = ((prob.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    format!("{}{}", "█".repeat(full), "░".repeat(width - full))
}

/// One row: name, bar, probability; `mark` says how it compares with the reference.
fn prob_row(name: &str, prob: f64, width: u16, mark: Mark, stale: bool) -> Line<'static> {
    let width = width as usize;
    let num = format!("{:>5.1}%", prob * 100.0);
    let name_w = (width / 3).clamp(4, 14).min(width.saturating_sub(num.len() + 4));
    let bar_w = width.saturating_sub(name_w + num.len() + 3).max(1);
    let (name_style, bar_colour) = match (stale, mark) {
        (true, _) => (DIM, Color::DarkGray),
        (false, Mark::Same) => (Style::new(), Color::Green),
        (false, Mark::Other) => (Style::new().fg(Color::Yellow), Color::Yellow),
        (false, Mark::WrongTop) => (Style::new().fg(Color::Red).add_modifier(Modifier::BOLD), Color::Red),
    };
    let flag = match mark {
        Mark::Same => " ",
        Mark::Other | Mark::WrongTop => "≠",
    };
    Line::from(vec![
        Span::styled(format!("{:<name_w$}", format::fit(name, name_w)), name_style),
        Span::styled(flag, name_style),
        Span::styled(prob_bar(prob, bar_w), Style::new().fg(bar_colour)),
        Span::styled(format!(" {num}"), if stale { DIM } else { Style::new() }),
    ])
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// As in the reference (or this is the reference).
    Same,
    /// Not among the reference's top tokens.
    Other,
    /// The most likely token or label differs from the reference's.
    WrongTop,
}

/// fill-mask: for each mask, a title row and its top tokens.
pub struct FillMaskPanel<'a> {
    pub output: &'a FillMask,
    /// The reference column's output for the same text, when there is one.
    pub reference: Option<&'a FillMask>,
    pub stale: bool,
}

impl Widget for FillMaskPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let masks = &self.output.masks;
        let mut row = 0u16;
        for (i, mask) in masks.iter().enumerate() {
            if row >= area.height {
                break;
            }
            let more = if self.output.uncovered > 0 { format!(" · {} more not predicted", self.output.uncovered) } else { String::new() };
            let title = format!("mask {} of {} · token {}{more}", i + 1, masks.len() + self.output.uncovered, mask.position);
            line_at(buf, area, row, &Line::styled(format::fit(&title, area.width as usize), if self.stale { DIM } else { Style::new().add_modifier(Modifier::BOLD) }));
            row += 1;
            // Leave room for the next masks' titles and first tokens.
            let left = masks.len() - i - 1;
            let rows = area.height.saturating_sub(row + 2 * left as u16).max(1) as usize;
            let theirs = self.reference.and_then(|r| r.masks.iter().find(|m| m.position == mask.position));
            for (rank, t) in mask.top.iter().take(rows).enumerate() {
                let mark = match theirs {
                    None => Mark::Same,
                    Some(r) if rank == 0 && r.top.first().map(|u| u.id) != Some(t.id) => Mark::WrongTop,
                    Some(r) if !r.top.iter().any(|u| u.id == t.id) => Mark::Other,
                    Some(_) => Mark::Same,
                };
                line_at(buf, area, row, &prob_row(&t.token, t.prob, area.width, mark, self.stale));
                row += 1;
            }
        }
    }
}

/// text-classification: every label with its probability, in label-id order.
pub struct LabelBars<'a> {
    pub output: &'a Classification,
    pub reference: Option<&'a Classification>,
    pub stale: bool,
}

impl Widget for LabelBars<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let mine = self.output.argmax();
        let theirs = self.reference.and_then(Classification::argmax);
        line_at(buf, area, 0, &Line::styled(format!("{} labels", self.output.labels.len()), if self.stale { DIM } else { Style::new().add_modifier(Modifier::BOLD) }));
        for (i, l) in self.output.labels.iter().enumerate().take(area.height.saturating_sub(1) as usize) {
            let mark = match theirs {
                Some(t) if Some(i) == mine && mine != Some(t) => Mark::WrongTop,
                _ => Mark::Same,
            };
            line_at(buf, area, 1 + i as u16, &prob_row(&l.label, l.prob, area.width, mark, self.stale));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fill_in_proportion() {
        assert_eq!(prob_bar(0.5, 10), "█████░░░░░");
        assert_eq!(prob_bar(1.5, 4), "████");
        assert_eq!(prob_bar(0.0, 3), "░░░");
    }
}
