//! Each task's output panel, a file each: [`embedding`] (the vector as a strip),
//! [`fill_mask`] (the top tokens at each mask, with probability bars),
//! [`classification`] (a bar per label), [`generation`] (the continuation as it
//! grows, and its parity line). Which one a column draws is decided in one
//! place, `ui::column`'s body, by the task output's variant. This file holds what
//! fill-mask and classification share: a token or label that differs from the
//! reference column's is marked, so a disagreement between runtimes shows where it is.

pub mod classification;
pub mod embedding;
pub mod fill_mask;
pub mod generation;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::ui::format;

pub(super) const DIM: Style = Style::new().fg(Color::DarkGray);

/// A probability as a bar of `width` cells: `█` for the share, `░` for the rest.
pub fn prob_bar(prob: f64, width: usize) -> String {
    let full = ((prob.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    format!("{}{}", "█".repeat(full), "░".repeat(width - full))
}

/// One row: name, bar, probability; `mark` says how it compares with the reference.
pub(super) fn prob_row(name: &str, prob: f64, width: u16, mark: Mark, stale: bool) -> Line<'static> {
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
pub(super) enum Mark {
    /// As in the reference (or this is the reference).
    Same,
    /// Not among the reference's top tokens.
    Other,
    /// The most likely token or label differs from the reference's.
    WrongTop,
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
