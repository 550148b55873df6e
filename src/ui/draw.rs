//! Small drawing steps the widgets share: a line on a row of an area, a list
//! of lines from the top of an area, and the frame of a view drawn over the
//! columns (F4's profile, F6's layers).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Widget};

use super::format;

/// `line` on row `row` of `area`, cut at its width; nothing when the row is below it.
pub fn line_at(buf: &mut Buffer, area: Rect, row: u16, line: &Line) {
    if row < area.height {
        buf.set_line(area.x, area.y + row, line, area.width);
    }
}

/// `lines` from the top of `area`, as many as fit.
pub fn put(lines: &[Line<'_>], area: Rect, buf: &mut Buffer) {
    for (i, line) in lines.iter().enumerate().take(area.height as usize) {
        line_at(buf, area, i as u16, line);
    }
}

/// Clears `area` and draws a view's frame over it: a rounded magenta border
/// titled `title` (cut to fit). Returns the inside, a column of margin each side.
pub fn overlay(title: &str, area: Rect, buf: &mut Buffer) -> Rect {
    Clear.render(area, buf);
    let block = Block::bordered()
        .border_type(BorderType::Rounded)
        .border_style(Style::new().fg(Color::Magenta))
        .title(Span::styled(format::fit(title, area.width.saturating_sub(2) as usize), Style::new().add_modifier(Modifier::BOLD)));
    let inner = block.inner(area);
    block.render(area, buf);
    Rect { x: inner.x + 1, width: inner.width.saturating_sub(2), ..inner }
}
