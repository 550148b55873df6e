//! The text-generation panel of a column: time to first token and decode
//! tokens/s on top, then the continuation as it grows (its last rows when it
//! no longer fits). Tokens from the first one that differs from the reference
//! column's on are red, with `≠` where they begin; underneath, how the ids
//! compare and why the generation stopped.
//!
//! ```text
//! ttft 41.0 ms
//! over the hill and the
//! river ≠ ran down to
//! ≠ eager at token 7 · cos 0.9502 · top1 16/24
//! 24 tok/s · 12 tok
//! ```
//!
//! `cos` is the first step's logits against the reference's, `top1` the
//! positions where the column's likeliest token is the reference's, fed the
//! reference's tokens (teacher-forced). In a narrower column `cos` goes
//! first, then the reference's name, then `top1`.
//!
//! The rows follow the newest tokens, but never scroll the first difference
//! out of view.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::ui::draw::line_at;
use crate::ui::format;
use crate::app::{Divergence, LiveGeneration};
use crate::task::generation::Stop;

const DIM: Style = Style::new().fg(Color::DarkGray);
const DIFFERS: Style = Style::new().fg(Color::Red);
const MARK: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);

/// Tokens per second in at most four digits.
fn rate(per_s: f64) -> String {
    if per_s < 9.95 {
        format!("{per_s:.1}")
    } else {
        format!("{per_s:.0}")
    }
}

/// The continuation and how it measures: the area from a column's header to its nearest-sentence rows.
pub struct GenerationPanel<'a> {
    /// The tokens for the current text, if any came.
    pub live: Option<&'a LiveGeneration>,
    pub divergence: Divergence,
    /// What to say while there are no tokens.
    pub hint: &'a str,
}

impl Widget for GenerationPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.height == 0 || area.width == 0 {
            return;
        }
        let Some(live) = self.live.filter(|l| !l.tokens.is_empty()) else {
            line_at(buf, area, 0, &Line::styled(format::fit(self.hint, area.width as usize), DIM));
            return;
        };
        let ttft = live.ttft().map_or_else(|| "–".to_string(), |d| format!("ttft {} ms", format::ms(d)));
        let width = area.width as usize;
        let header = Line::styled(format::fit(&ttft, width), Style::new().add_modifier(Modifier::BOLD));
        line_at(buf, area, 0, &header);

        let from = match self.divergence {
            Divergence::At(i) => Some(i),
            _ => None,
        };
        let mut cells: Vec<(char, Style)> = Vec::new();
        for (i, t) in live.tokens.iter().enumerate() {
            let style = if from.is_some_and(|f| i >= f) { DIFFERS } else { Style::new() };
            let mut chars = t.text.chars().peekable();
            if from == Some(i) {
                // The mark goes before the token's first letter, after its leading space.
                while let Some(c) = chars.next_if(|c| c.is_whitespace()) {
                    cells.push((c, style));
                }
                cells.push(('≠', MARK));
            }
            cells.extend(chars.map(|c| (c, style)));
        }
        if from.is_some_and(|f| f >= live.tokens.len()) {
            // It stopped where the reference went on.
            cells.push(('≠', MARK));
        }
        let rows = area.height.saturating_sub(1) as usize;
        let lines = wrap_cells(&cells, width);
        let mut first = lines.len().saturating_sub(rows);
        if let Some(marked) = lines.iter().position(|l| l.iter().any(|&(c, style)| c == '≠' && style == MARK)) {
            first = first.min(marked);
        }
        for (row, cells) in lines[first..].iter().take(rows).enumerate() {
            let spans: Vec<Span> = cells.iter().map(|&(c, style)| Span::styled(c.to_string(), style)).collect();
            line_at(buf, area, 1 + row as u16, &Line::from(spans));
        }
    }
}

/// Lay out styled characters in rows of `width`, breaking after a space where
/// a row has one; a newline starts a row, other control characters show as
/// spaces, leading whitespace of the text is dropped.
pub fn wrap_cells(cells: &[(char, Style)], width: usize) -> Vec<Vec<(char, Style)>> {
    let width = width.max(1);
    let mut lines: Vec<Vec<(char, Style)>> = vec![Vec::new()];
    let start = cells.iter().position(|(c, _)| !c.is_whitespace()).unwrap_or(cells.len());
    for &(c, style) in &cells[start..] {
        if c == '\n' {
            lines.push(Vec::new());
            continue;
        }
        let c = if c.is_control() { ' ' } else { c };
        let wrapped = lines.len() > 1;
        let line = lines.last_mut().expect("at least one line");
        if line.is_empty() && c == ' ' && wrapped {
            continue; // a wrapped row does not start with the space it broke at
        }
        line.push((c, style));
        if line.len() > width {
            let cut = match line.iter().rposition(|(c, _)| *c == ' ') {
                Some(space) if space > 0 => space + 1,
                _ => width,
            };
            let rest: Vec<(char, Style)> = line.split_off(cut).into_iter().skip_while(|(c, _)| *c == ' ').collect();
            while line.last().is_some_and(|(c, _)| *c == ' ') {
                line.pop();
            }
            lines.push(rest);
        }
    }
    lines
}

/// How a column's ids compare with the reference's and where its generation stands: two rows.
pub struct GenerationParity<'a> {
    pub live: Option<&'a LiveGeneration>,
    pub divergence: Divergence,
    /// The reference column's name.
    pub reference: &'a str,
    /// The weights a decode step reads, when known: GB/s beside tokens/s.
    pub weight_bytes: Option<u64>,
    /// How near its logits stay to the reference's, as far as measured.
    pub logits: Option<crate::task::GenerationParity>,
}

/// ` · cos 0.9502` and ` · top1 16/24` (empty where not measured).
fn logits_parts(p: Option<&crate::task::GenerationParity>) -> (String, String) {
    let cos = p.and_then(|p| p.first_logits_cosine).map(|c| if c.is_nan() { " · cos NaN".to_string() } else { format!(" · cos {c:.4}") });
    let top1 = p.and_then(|p| p.top1).map(|t| format!(" · top1 {}/{}", t.agreed, t.positions));
    (cos.unwrap_or_default(), top1.unwrap_or_default())
}

/// Why a generation stopped, for its state line.
pub fn stop_words(stop: Stop) -> &'static str {
    match stop {
        Stop::MaxNewTokens => "max new tokens",
        Stop::EndOfText => "end of text",
        Stop::MaxLength => "max length",
        Stop::Cancelled => "cancelled",
    }
}

impl Widget for GenerationParity<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let reference = self.reference;
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let green = Style::new().fg(Color::Green).add_modifier(Modifier::BOLD);
        // The verdict, then whom it is against when that fits too.
        let against = |verdict: Span<'static>, rest: String, style: Style| {
            let fits = verdict.content.chars().count() + rest.chars().count() <= area.width as usize;
            Line::from(if fits { vec![verdict, Span::styled(rest, style)] } else { vec![verdict] })
        };
        let width = area.width as usize;
        let (cos, top1) = logits_parts(self.logits.as_ref());
        // A verdict (with the reference's name, or short), then the logits figures: the
        // first of these that fits; cos drops before top-1, then the name, then both.
        let pick = |full: Line<'static>, short: Line<'static>| {
            let figures: [Vec<&String>; 4] = [vec![&cos, &top1], vec![&top1], vec![&cos], vec![]];
            let chosen = figures
                .iter()
                .flat_map(|parts| [(&full, parts), (&short, parts)])
                .map(|(verdict, parts)| {
                    let mut spans = verdict.spans.clone();
                    spans.extend(parts.iter().filter(|p| !p.is_empty()).map(|p| Span::styled((*p).clone(), Style::new().fg(Color::Cyan))));
                    Line::from(spans)
                })
                .find(|line| line.width() <= width)
                .unwrap_or_else(|| short.clone());
            chosen
        };
        let first = match self.divergence {
            Divergence::Reference => Line::from(vec![Span::styled("parity: ", bold), Span::raw("reference")]),
            Divergence::Same { complete: true, .. } => {
                pick(Line::from(vec![Span::styled("same ids", green), Span::styled(format!(" as {reference}"), bold)]), Line::from(Span::styled("same ids", green)))
            }
            Divergence::Same { .. } => against(Span::styled("same so far", green), format!(" as {reference}"), bold),
            Divergence::At(i) => pick(
                Line::from(vec![Span::styled("≠ ", MARK), Span::styled(format!("{reference} at token {}", i + 1), MARK)]),
                Line::styled(format!("≠ at token {}", i + 1), MARK),
            ),
            Divergence::Waiting => Line::styled(format::fit(&format!("vs {reference}: waiting"), area.width as usize), DIM),
        };
        line_at(buf, area, 0, &first);
        if let Some(live) = self.live.filter(|l| !l.tokens.is_empty()) {
            let n = live.tokens.len();
            let per_s = live.decode_tokens_per_s();
            let rate = per_s.map_or_else(|| "– tok/s".to_string(), |r| format!("{} tok/s", rate(r)));
            // Weights a step reads x steps a second: how near the memory wall it runs.
            let gbps = self.weight_bytes.zip(per_s).map(|(b, r)| format!(" · {:.1} GB/s", b as f64 * r / 1e9));
            // The count drops before anything is cut mid-word, then the GB/s, then the unit.
            let width = area.width as usize;
            let fits = |parts: &[&str]| parts.iter().map(|p| p.chars().count()).sum::<usize>() <= width;
            let counts = [format!(" · {n} tok"), format!(" · {n}"), String::new()];
            let (gbps, count) = gbps
                .into_iter()
                .chain([String::new()])
                .flat_map(|g| counts.iter().map(move |c| (g.clone(), c.clone())))
                .find(|(g, c)| fits(&[&rate, g, c]))
                .unwrap_or_default();
            let rate = if rate.chars().count() <= width { rate } else { rate.trim_end_matches(" tok/s").to_string() };
            let cyan = Style::new().fg(Color::Cyan);
            line_at(buf, area, 1, &Line::from(vec![Span::styled(rate, cyan), Span::styled(gbps, cyan), Span::styled(count, DIM)]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Vec<(char, Style)>]) -> Vec<String> {
        lines.iter().map(|l| l.iter().map(|(c, _)| *c).collect()).collect()
    }

    #[test]
    fn the_speed_line_drops_the_count_before_cutting_a_word() {
        use ratatui::layout::Rect;
        let mut live = crate::app::LiveGeneration::new(0);
        let step = |index| crate::task::generation::TokenStep { index, id: 1, text: "a".into(), latency: std::time::Duration::from_secs_f64(1.0 / 3575.0) };
        live.tokens = (0..32).map(step).collect();
        let row = |width: u16| {
            let area = Rect::new(0, 0, width, 2);
            let mut buf = Buffer::empty(area);
            GenerationParity { reference: "eager", divergence: Divergence::Reference, live: Some(&live), weight_bytes: None, logits: None }.render(area, &mut buf);
            (0..width).map(|x| buf[(x, 1)].symbol().to_string()).collect::<String>().trim_end().to_string()
        };
        assert_eq!(row(30), "3575 tok/s · 32 tok");
        assert_eq!(row(18), "3575 tok/s · 32");
        assert_eq!(row(12), "3575 tok/s");
        assert_eq!(row(6), "3575");
    }

    #[test]
    fn the_speed_line_shows_the_gb_per_s_the_weights_stream_at_and_drops_it_after_the_count() {
        use ratatui::layout::Rect;
        let mut live = crate::app::LiveGeneration::new(0);
        // 20 tokens a second of 500 MB each: 10 GB/s.
        let step = |index| crate::task::generation::TokenStep { index, id: 1, text: "a".into(), latency: std::time::Duration::from_millis(50) };
        live.tokens = (0..32).map(step).collect();
        let row = |width: u16| {
            let area = Rect::new(0, 0, width, 2);
            let mut buf = Buffer::empty(area);
            GenerationParity { reference: "eager", divergence: Divergence::Reference, live: Some(&live), weight_bytes: Some(500_000_000), logits: None }
                .render(area, &mut buf);
            (0..width).map(|x| buf[(x, 1)].symbol().to_string()).collect::<String>().trim_end().to_string()
        };
        assert_eq!(row(40), "20 tok/s · 10.0 GB/s · 32 tok");
        assert_eq!(row(25), "20 tok/s · 10.0 GB/s · 32");
        assert_eq!(row(21), "20 tok/s · 10.0 GB/s");
        assert_eq!(row(16), "20 tok/s · 32");
    }

    #[test]
    fn the_parity_line_shows_the_logits_figures_and_drops_top1_first() {
        use crate::task::generation::Top1Agreement;
        use ratatui::layout::Rect;
        let mut p = crate::task::GenerationParity::of(&[1, 2, 9], &[1, 2, 3]);
        p.first_logits_cosine = Some(0.95022);
        p.top1 = Some(Top1Agreement { agreed: 16, positions: 24 });
        let row = |width: u16, divergence: Divergence, logits| {
            let area = Rect::new(0, 0, width, 2);
            let mut buf = Buffer::empty(area);
            GenerationParity { reference: "eager", divergence, live: None, weight_bytes: None, logits }.render(area, &mut buf);
            (0..width).map(|x| buf[(x, 0)].symbol().to_string()).collect::<String>().trim_end().to_string()
        };
        assert_eq!(row(50, Divergence::At(8), Some(p)), "≠ eager at token 9 · cos 0.9502 · top1 16/24");
        assert_eq!(row(40, Divergence::At(8), Some(p)), "≠ at token 9 · cos 0.9502 · top1 16/24");
        assert_eq!(row(32, Divergence::At(8), Some(p)), "≠ eager at token 9 · top1 16/24");
        assert_eq!(row(28, Divergence::At(8), Some(p)), "≠ at token 9 · top1 16/24");
        assert_eq!(row(20, Divergence::At(8), Some(p)), "≠ eager at token 9");
        assert_eq!(row(14, Divergence::At(8), Some(p)), "≠ at token 9");
        assert_eq!(row(50, Divergence::At(8), None), "≠ eager at token 9", "nothing measured, nothing said");
        let cos_only = crate::task::GenerationParity { top1: None, ..p };
        assert_eq!(row(32, Divergence::At(8), Some(cos_only)), "≠ eager at token 9 · cos 0.9502");
        let same = crate::task::GenerationParity {
            first_logits_cosine: Some(1.0),
            top1: Some(Top1Agreement { agreed: 24, positions: 24 }),
            ..crate::task::GenerationParity::of(&[1], &[1])
        };
        assert_eq!(row(50, Divergence::Same { complete: true, compared: 24 }, Some(same)), "same ids as eager · cos 1.0000 · top1 24/24");
        let nan = crate::task::GenerationParity { first_logits_cosine: Some(f64::NAN), ..same };
        assert!(row(40, Divergence::At(0), Some(nan)).contains("cos NaN"), "a NaN shows as NaN");
    }

    #[test]
    fn wraps_at_spaces_and_newlines() {
        let cells: Vec<(char, Style)> = " the cat sat on\nthe mat\tok".chars().map(|c| (c, Style::new())).collect();
        assert_eq!(text(&wrap_cells(&cells, 8)), vec!["the cat", "sat on", "the mat", "ok"]);
        let long: Vec<(char, Style)> = "abcdefghij".chars().map(|c| (c, Style::new())).collect();
        assert_eq!(text(&wrap_cells(&long, 4)), vec!["abcd", "efgh", "ij"]);
        assert_eq!(text(&wrap_cells(&[], 4)), vec![""]);
    }
}
