//! The embedding as a strip of tiny bars, one cell per dimension, row after
//! row: height is |value| on a scale fixed for all columns (so the same output
//! looks the same everywhere), colour is the sign (yellow +, cyan −).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::widgets::Widget;

use crate::task::Embedding;

/// |value| drawn as a full cell. A unit-norm 384-d vector has an RMS of about 0.05.
pub const FULL_SCALE: f32 = 0.15;

const BARS: [&str; 8] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];

/// The glyph for one value: at least the lowest bar, so the sign always shows.
pub fn bar(value: f32) -> &'static str {
    let level = (value.abs() / FULL_SCALE * 8.0).ceil() as usize;
    BARS[level.clamp(1, 8) - 1]
}

pub struct EmbeddingStrip<'a> {
    pub embedding: &'a Embedding,
    /// Drawn grey (an output for earlier text).
    pub dim: bool,
}

impl EmbeddingStrip<'_> {
    /// How many dimensions fit in `area`.
    pub fn shown(dims: usize, area: Rect) -> usize {
        dims.min(area.width as usize * area.height as usize)
    }
}

impl Widget for EmbeddingStrip<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let w = area.width as usize;
        if w == 0 {
            return;
        }
        let values = self.embedding.values();
        for (i, &v) in values.iter().take(Self::shown(values.len(), area)).enumerate() {
            let x = area.x + (i % w) as u16;
            let y = area.y + (i / w) as u16;
            let colour = match (self.dim, v >= 0.0) {
                (true, _) => Color::DarkGray,
                (false, true) => Color::Yellow,
                (false, false) => Color::Cyan,
            };
            buf[(x, y)].set_symbol(bar(v)).set_style(Style::new().fg(colour));
        }
    }
}
