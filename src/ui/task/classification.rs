//! text-classification's panel: a bar per label.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Widget;

use super::{prob_row, Mark, DIM};
use crate::ui::draw::line_at;
use crate::task::Classification;

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
