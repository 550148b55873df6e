//! fill-mask's panel: the top tokens at each mask, with probability bars.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Widget;

use super::{prob_row, Mark, DIM};
use crate::ui::draw::line_at;
use crate::ui::format;
use crate::task::FillMask;

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
