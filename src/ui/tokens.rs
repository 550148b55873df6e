//! The token strip: the word pieces of the current text with their ids,
//! wrapped, with a clear mark when the text was cut at the model's maximum.
//!
//! ```text
//! Tokens 8   `[CLS]` 101  a 1037  cat 4937  sleeps 11365
//!            on 2006  the 1996  sofa 10682  `[SEP]` 102
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::format;
use crate::model::Encoded;

pub struct TokenStrip<'a> {
    pub encoded: Option<&'a Encoded>,
    /// The tokenizer's complaint, when it had one.
    pub error: Option<&'a str>,
}

impl TokenStrip<'_> {
    fn prefix(&self) -> Vec<Span<'static>> {
        let label = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
        match self.encoded {
            Some(e) if e.truncated => vec![
                Span::styled(format!("Tokens {} ", e.len()), label),
                Span::styled(format!("CUT AT {}", e.len()), Style::new().fg(Color::White).bg(Color::Red).add_modifier(Modifier::BOLD)),
                Span::raw(" "),
            ],
            Some(e) => vec![Span::styled(format!("Tokens {:<3} ", e.len()), label)],
            None => vec![Span::styled("Tokens     ", label)],
        }
    }
}

impl Widget for TokenStrip<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.height == 0 || area.width == 0 {
            return;
        }
        let prefix = self.prefix();
        let indent: usize = prefix.iter().map(|s| s.content.chars().count()).sum();
        let width = (area.width as usize).saturating_sub(indent);
        let encoded = match (self.encoded, self.error) {
            (Some(e), _) => e,
            (None, Some(err)) => {
                let mut spans = prefix;
                spans.push(Span::styled(format::fit(err, width), Style::new().fg(Color::Red)));
                buf.set_line(area.x, area.y, &Line::from(spans), area.width);
                return;
            }
            (None, None) => {
                let mut spans = prefix;
                spans.push(Span::styled(
                    format::fit("type a sentence: its word pieces and ids appear here", width),
                    Style::new().fg(Color::DarkGray),
                ));
                buf.set_line(area.x, area.y, &Line::from(spans), area.width);
                return;
            }
        };

        // Lay the tokens out row by row; each piece is "token id", two spaces apart.
        let pieces: Vec<(&str, String)> =
            encoded.tokens.iter().zip(&encoded.ids).map(|(t, id)| (t.as_str(), id.to_string())).collect();
        let piece_len = |i: usize| pieces[i].0.chars().count() + 1 + pieces[i].1.len();
        let row_len = |row: &[usize]| row.iter().map(|&i| piece_len(i)).sum::<usize>() + 2 * row.len().saturating_sub(1);
        let mut rows: Vec<Vec<usize>> = vec![Vec::new()];
        for i in 0..pieces.len() {
            let row = rows.last().expect("one row at least");
            if !row.is_empty() && row_len(row) + 2 + piece_len(i) > width {
                if rows.len() == area.height as usize {
                    break;
                }
                rows.push(Vec::new());
            }
            rows.last_mut().expect("one row at least").push(i);
        }
        let mut placed: usize = rows.iter().map(Vec::len).sum();
        let mut more = None;
        if placed < pieces.len() {
            // Not all fit: end the last row with how many are left out.
            let last = rows.last_mut().expect("one row at least");
            loop {
                let text = format!(" … +{}", pieces.len() - placed);
                if last.is_empty() || row_len(last) + text.chars().count() <= width {
                    more = Some(text);
                    break;
                }
                last.pop();
                placed -= 1;
            }
        }
        let rows_shown = rows.len();
        for (r, row) in rows.into_iter().enumerate() {
            let mut spans = if r == 0 { prefix.clone() } else { vec![Span::raw(" ".repeat(indent))] };
            for (k, &i) in row.iter().enumerate() {
                if k > 0 {
                    spans.push(Span::raw("  "));
                }
                spans.push(Span::styled(pieces[i].0.to_string(), Style::new().add_modifier(Modifier::BOLD)));
                spans.push(Span::styled(format!(" {}", pieces[i].1), Style::new().fg(Color::DarkGray)));
            }
            if r + 1 == rows_shown {
                if let Some(text) = more.take() {
                    spans.push(Span::styled(text, Style::new().fg(Color::Yellow)));
                }
            }
            buf.set_line(area.x, area.y + r as u16, &Line::from(spans), area.width);
        }
    }
}
