//! One backend's column: state, output (embedding strip, norm), nearest corpus
//! sentence, parity against the reference, latency, and for `.pte` paths the
//! delegation panel. All columns share one row layout, so the same section
//! sits on the same row everywhere and differences show at a glance.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Widget};

use super::coverage::{self, CoveragePanel};
use super::task::embedding::EmbeddingStrip;
use super::draw::line_at;
use super::format;
use super::task::generation::{GenerationPanel, GenerationParity};
use super::latency::{self, LatencyPanel};
use super::task::classification::LabelBars;
use super::task::fill_mask::FillMaskPanel;
use crate::backend::{Footer, Hue};
use crate::app::{App, ColumnState, CorpusState, Output, ParityView, Phase};
use crate::task::{Parity, Task, TaskOutput, TaskParity};

/// Rows inside the border a column needs at the least.
pub const MIN_INNER_ROWS: u16 = 17;

/// Where each section goes, relative to the inner area of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sections {
    pub state: Rect,
    pub header: Rect,
    pub strip: Rect,
    pub nearest: Rect,
    pub parity: Rect,
    pub latency: Rect,
    pub coverage: Rect,
}

// Slots in display order: sizes at the least, the most, and the order extra rows go to.
const STATE: usize = 0;
const HEADER: usize = 2;
const STRIP: usize = 3;
const NEAREST: usize = 5;
const PARITY: usize = 7;
const LATENCY: usize = 9;
const COVERAGE: usize = 11;
const GROWTH: [usize; 21] = [1, 8, 4, 10, 6, 9, 3, 5, 9, 3, 11, 11, 11, 3, 9, 5, 3, 9, 3, 3, 3];

impl Sections {
    pub fn new(inner: Rect, dims: usize) -> Sections {
        let strip_max = dims.div_ceil(inner.width.max(1) as usize).clamp(2, 8) as u16;
        let mut size: [u16; 12] = [1, 0, 1, 2, 0, 3, 0, 2, 0, latency::TEXT_ROWS + 1, 0, coverage::ROWS];
        let max: [u16; 12] = [1, 1, 1, strip_max, 1, 5, 1, 2, 1, latency::TEXT_ROWS + 5, 1, coverage::ROWS + 4];
        let mut extra = inner.height.saturating_sub(size.iter().sum());
        for &slot in GROWTH.iter().chain(std::iter::repeat_n(&STRIP, 8)) {
            if extra == 0 {
                break;
            }
            if size[slot] < max[slot] {
                size[slot] += 1;
                extra -= 1;
            }
        }
        let mut y = inner.y;
        let mut rects = [Rect::default(); 12];
        for (i, h) in size.iter().enumerate() {
            let h = (*h).min(inner.bottom().saturating_sub(y));
            rects[i] = Rect { x: inner.x, y, width: inner.width, height: h };
            y += h;
        }
        Sections {
            state: rects[STATE],
            header: rects[HEADER],
            strip: rects[STRIP],
            nearest: rects[NEAREST],
            parity: rects[PARITY],
            latency: rects[LATENCY],
            coverage: rects[COVERAGE],
        }
    }

    /// From the header to the end of parity: where an error message goes.
    fn output_area(&self) -> Rect {
        Rect { height: self.parity.bottom().saturating_sub(self.header.y), ..self.header }
    }

    /// From the header to the end of the nearest sentence: where a task's panel goes.
    fn task_area(&self) -> Rect {
        Rect { height: self.nearest.bottom().saturating_sub(self.header.y), ..self.header }
    }
}

pub struct BackendColumn<'a> {
    pub app: &'a App,
    pub index: usize,
}

const DIM: Style = Style::new().fg(Color::DarkGray);

/// A label on the left, a value on the right.
fn split_line<'a>(left: Vec<Span<'a>>, right: Span<'a>, width: u16) -> Line<'a> {
    let used: usize = left.iter().map(|s| s.content.chars().count()).sum();
    let rlen = right.content.chars().count();
    let mut spans = left;
    if used + 1 + rlen <= width as usize {
        spans.push(Span::raw(" ".repeat(width as usize - used - rlen)));
        spans.push(right);
    }
    Line::from(spans)
}

/// A column's title in a border `width` cells wide: the whole title when it
/// fits, else without its runtime's name (`ExecuTorch portable` → `portable`:
/// the colour and the neighbours say which runtime), else cut with `…`; the
/// key hint (`key`) is kept whole.
pub fn column_title(title: &str, key: &str, width: u16) -> String {
    let inside = (width as usize).saturating_sub(2); // between the corners
    let key_len = key.chars().count();
    let fits = |name: &str| 1 + name.chars().count() + key_len <= inside;
    let short = ["ExecuTorch ", "PyTorch "].iter().find_map(|p| title.strip_prefix(p)).unwrap_or(title);
    let name = match () {
        _ if fits(title) => title.to_string(),
        _ if fits(short) => short.to_string(),
        _ => format::fit(short, inside.saturating_sub(1 + key_len)),
    };
    if name.is_empty() {
        return format!(" {} ", key.trim());
    }
    let mut out = format!(" {name}{key}");
    if out.chars().count() < inside {
        out.push(' ');
    }
    out
}

/// Green when the outputs agree to float precision, yellow when a person would
/// read the same answer, red when they differ.
pub fn task_parity_colour(p: &TaskParity) -> Color {
    match p {
        TaskParity::Embedding(e) => parity_colour(e),
        _ if !p.agrees() => Color::Red,
        _ if p.max_abs_diff() <= 1e-3 => Color::Green,
        _ => Color::Yellow,
    }
}

pub fn parity_colour(p: &Parity) -> Color {
    if p.cosine >= 0.99999 && p.max_abs_diff <= 1e-4 {
        Color::Green
    } else if p.cosine >= 0.999 {
        Color::Yellow
    } else {
        Color::Red
    }
}

/// While a column loads: "loading… 1.41 GiB of ~2.73 GiB resident" (the
/// process's memory against what every column will hold, when estimated).
fn loading_hint(app: &App) -> String {
    use crate::memory::size::show;
    match app.load_progress() {
        Some((now, expected)) => format!("loading… {} of ~{} resident", show(now), show(expected)),
        None => "loading the model…".to_string(),
    }
}

impl BackendColumn<'_> {
    /// The path's name; a column with other programs names the key that switches them.
    fn title(&self, width: u16) -> String {
        let kind = &self.app.columns()[self.index].kind;
        let key = if self.app.has_variants(self.index) { " · F5" } else { "" };
        column_title(&kind.title, key, width)
    }

    fn state_line(&self, width: u16) -> Line<'static> {
        let app = self.app;
        let column = &app.columns()[self.index];
        let current_error = column.run_error.as_ref().is_some_and(|(g, _)| *g == app.generation());
        let (text, style) = match app.state(self.index) {
            ColumnState::Loading(d) => {
                let need = app.need(self.index).map(|n| format!(" · needs ~{}", crate::memory::size::show(n))).unwrap_or_default();
                (format!("◌ loading {}{need}", format::secs(d)), Style::new().fg(Color::Yellow))
            }
            ColumnState::Failed(_) => ("✖ failed to load".to_string(), Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)),
            ColumnState::Running { elapsed, stale } => (
                format!("▶ running {}{}", format::secs(elapsed), if stale { " (old)" } else { "" }),
                Style::new().fg(Color::Green).add_modifier(Modifier::BOLD),
            ),
            ColumnState::Queued if app.is_serial() => ("… waiting its turn".to_string(), Style::new().fg(Color::Yellow)),
            ColumnState::Queued => ("… queued".to_string(), Style::new().fg(Color::Yellow)),
            ColumnState::Idle if current_error => ("✖ run failed".to_string(), Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)),
            // A generation that ended says why it stopped.
            ColumnState::Idle => match app.live(self.index).and_then(|l| l.stop) {
                Some(stop) => (format!("● {}", super::task::generation::stop_words(stop)), Style::new().fg(Color::Green)),
                None => ("● idle".to_string(), Style::new().fg(Color::Green)),
            },
        };
        let dropped = match column.stale_dropped {
            0 => String::new(),
            n => format!("{n} stale"),
        };
        split_line(vec![Span::styled(text, style)], Span::styled(dropped, DIM), width)
    }

    fn render_output(&self, s: &Sections, buf: &mut Buffer) {
        let app = self.app;
        let column = &app.columns()[self.index];
        let area = s.output_area();
        // The state line already says "failed to load" or "run failed": the message follows.
        let error = match (&column.phase, &column.run_error) {
            (Phase::Failed(e), _) => Some(e.as_str()),
            (_, Some((g, e))) if *g == app.generation() => Some(e.as_str()),
            _ => None,
        };
        if let Some(message) = error {
            let red = Style::new().fg(Color::Red);
            for (i, l) in format::wrap(message, area.width as usize, area.height as usize).into_iter().enumerate() {
                line_at(buf, area, i as u16, &Line::styled(l, red));
            }
            return;
        }
        if app.task() == Task::TextGeneration {
            return self.render_generation(s, buf);
        }
        let Some(output) = &column.output else {
            let hint = match (&column.phase, app.encoded()) {
                (Phase::Loading, _) => loading_hint(app),
                (_, None) => "type a sentence above".into(),
                (_, Some(_)) => "waiting for the first result…".into(),
            };
            line_at(buf, s.header, 0, &Line::styled(hint, DIM));
            return;
        };
        let stale = !app.is_current(output);
        let text_style = if stale { DIM } else { Style::new() };
        let reference = app.reference().and_then(|r| app.columns()[r].output.as_ref()).filter(|r| r.generation == output.generation);
        match &output.output {
            TaskOutput::Embedding(_) => self.render_embedding(s, buf, output, stale),
            TaskOutput::FillMask(fill) => {
                let reference = reference.and_then(|r| match &r.output {
                    TaskOutput::FillMask(f) => Some(f),
                    _ => None,
                });
                FillMaskPanel { output: fill, reference, stale }.render(s.task_area(), buf);
            }
            TaskOutput::Classification(c) => {
                let reference = reference.and_then(|r| match &r.output {
                    TaskOutput::Classification(c) => Some(c),
                    _ => None,
                });
                LabelBars { output: c, reference, stale }.render(s.task_area(), buf);
            }
            // Drawn from the tokens as they come (render_generation).
            TaskOutput::Generation(_) => {}
        }
        self.render_parity(s, buf, text_style, stale);
    }

    /// text-generation: the continuation of the current text as it grows, and
    /// how its ids compare with the reference column's.
    fn render_generation(&self, s: &Sections, buf: &mut Buffer) {
        let app = self.app;
        let column = &app.columns()[self.index];
        let live = app.live(self.index);
        let running = column.running.is_some_and(|(g, _)| g == app.generation());
        let hint = match (&column.phase, app.encoded()) {
            (Phase::Loading, _) => loading_hint(app),
            (_, None) => "type a prompt above".into(),
            _ if running => "prefilling the prompt…".into(),
            _ => "waiting for its turn…".into(),
        };
        let divergence = app.divergence(self.index);
        GenerationPanel { live, divergence, hint: &hint }.render(s.task_area(), buf);
        let reference = app.reference().map(|r| app.columns()[r].kind.name()).unwrap_or("-");
        let weight_bytes = app.weight_bytes_per_token(self.index);
        let logits = match app.parity(self.index) {
            ParityView::Value(TaskParity::Generation(p)) => Some(p),
            _ => None,
        };
        GenerationParity { live, divergence, reference, weight_bytes, logits }.render(s.parity, buf);
    }

    /// An embedding: its dimension and norm, the strip, the nearest corpus sentence.
    fn render_embedding(&self, s: &Sections, buf: &mut Buffer, output: &Output, stale: bool) {
        let app = self.app;
        let text_style = if stale { DIM } else { Style::new() };
        let Some(embedding) = output.embedding() else { return };

        // Header and strip.
        let shown = EmbeddingStrip::shown(embedding.dim(), s.strip);
        let what = if stale {
            // An output for earlier text: say so in words, not only in grey.
            Span::styled("old text", Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD))
        } else {
            Span::styled(format!("{}-d", embedding.dim()), Style::new().add_modifier(Modifier::BOLD))
        };
        let header = split_line(
            vec![what, Span::styled(format!(" · norm {:.4}", embedding.norm()), text_style)],
            Span::styled(format!("dims 0–{}", shown.saturating_sub(1)), DIM),
            s.header.width,
        );
        line_at(buf, s.header, 0, &header);
        EmbeddingStrip { embedding, dim: stale }.render(s.strip, buf);

        // Nearest sentence.
        let corpus = app.corpus();
        match (&corpus.state, output.nearest) {
            (CorpusState::Ready { .. }, Some(n)) => {
                let cos = Span::styled(format!("cos {:.3}", n.cosine), if stale { DIM } else { Style::new().fg(Color::Cyan) });
                line_at(buf, s.nearest, 0, &split_line(vec![Span::styled("nearest", text_style.add_modifier(Modifier::BOLD))], cos, s.nearest.width));
                let quoted = format!("“{}”", corpus.sentences[n.index]);
                let rows = s.nearest.height.saturating_sub(1) as usize;
                for (i, l) in format::wrap(&quoted, s.nearest.width as usize, rows).into_iter().enumerate() {
                    line_at(buf, s.nearest, 1 + i as u16, &Line::styled(l, text_style.add_modifier(Modifier::ITALIC)));
                }
            }
            (CorpusState::Embedding(kind), _) => {
                line_at(buf, s.nearest, 0, &Line::styled("nearest: the corpus is", DIM));
                line_at(buf, s.nearest, 1, &Line::styled(format!("being embedded ({kind})…"), DIM));
            }
            (CorpusState::Failed(e), _) => {
                line_at(buf, s.nearest, 0, &Line::styled("nearest: unavailable", DIM));
                line_at(buf, s.nearest, 1, &Line::styled(format::fit(e, s.nearest.width as usize), DIM));
            }
            _ => line_at(buf, s.nearest, 0, &Line::styled("nearest: –", DIM)),
        }
    }

    /// Parity against the reference column, in the task's terms.
    fn render_parity(&self, s: &Sections, buf: &mut Buffer, text_style: Style, stale: bool) {
        let app = self.app;
        let reference = app.reference().map(|r| app.columns()[r].kind.name()).unwrap_or("-");
        let (first, second) = match app.parity(self.index) {
            ParityView::Reference => (
                Line::from(vec![Span::styled("parity: ", text_style.add_modifier(Modifier::BOLD)), Span::styled("reference", text_style)]),
                Line::styled("the others compare to it", DIM),
            ),
            ParityView::Value(p) => {
                let colour = if stale { DIM } else { Style::new().fg(task_parity_colour(&p)).add_modifier(Modifier::BOLD) };
                // The task's words: never "same" when a compared value is NaN or infinite.
                let verdict = p.verdict();
                let overlap = match p {
                    TaskParity::FillMask(f) => format!(" · top-k {:.0}%", f.topk_overlap * 100.0),
                    _ => String::new(),
                };
                (
                    Line::from(vec![Span::styled(format!("vs {reference} "), text_style.add_modifier(Modifier::BOLD)), Span::styled(verdict, colour)]),
                    Line::from(vec![
                        Span::styled("max|Δ| ", text_style),
                        Span::styled(format!("{:.1e}", p.max_abs_diff()), colour),
                        Span::styled(overlap, text_style),
                    ]),
                )
            }
            ParityView::Waiting => (Line::styled(format!("vs {reference}: waiting"), DIM), Line::default()),
            ParityView::Unavailable => (Line::styled(format!("vs {reference}: –"), DIM), Line::default()),
        };
        line_at(buf, s.parity, 0, &first);
        line_at(buf, s.parity, 1, &second);
    }

    fn render_footer(&self, s: &Sections, buf: &mut Buffer) {
        let column = &self.app.columns()[self.index];
        // What the runtime runs instead of delegates, where it has none to count.
        let (first, second) = match column.kind.footer() {
            Footer::Coverage => {
                CoveragePanel { coverage: column.coverage.as_ref(), load_time: column.load_time }.render(s.coverage, buf);
                return;
            }
            Footer::Note(first, second) => (first, second),
        };
        let area = s.coverage;
        let rows = (area.height as usize).saturating_sub(1).max(1);
        let lines = if first.len() <= area.width as usize {
            vec![first.to_owned(), format::fit(second, area.width as usize)]
        } else {
            format::wrap(&format!("{first} {second}"), area.width as usize, rows)
        };
        for (i, l) in lines.into_iter().take(rows).enumerate() {
            line_at(buf, area, i as u16, &Line::styled(l, DIM));
        }
        if let Some(load) = column.load_time {
            line_at(buf, area, area.height.saturating_sub(1), &Line::raw(format!("load {}", format::short(load))));
        }
    }
}

impl Widget for BackendColumn<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let column = &self.app.columns()[self.index];
        let failed = matches!(column.phase, Phase::Failed(_));
        let border = if failed { Style::new().fg(Color::Red) } else { Style::new().fg(Color::DarkGray) };
        let title_style = Style::new().fg(title_colour(&column.kind));
        let block = Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(border)
            .title(Span::styled(self.title(area.width), title_style.add_modifier(Modifier::BOLD)));
        let inner = block.inner(area);
        block.render(area, buf);
        let dims = column.output.as_ref().and_then(Output::embedding).map_or(384, |e| e.dim());
        let s = Sections::new(inner, dims);
        line_at(buf, s.state, 0, &self.state_line(s.state.width));
        self.render_output(&s, buf);
        LatencyPanel { stats: &column.stats, per_token: self.app.task() == Task::TextGeneration }.render(s.latency, buf);
        self.render_footer(&s, buf);
    }
}

/// A column title's colour, by what the column runs (`BackendSpec::hue`).
fn title_colour(spec: &crate::backend::BackendSpec) -> Color {
    match spec.hue() {
        Hue::Magenta => Color::LightMagenta,
        Hue::Blue => Color::LightBlue,
        Hue::Green => Color::LightGreen,
        Hue::Yellow => Color::LightYellow,
        Hue::Cyan => Color::LightCyan,
    }
}

#[cfg(test)]
mod tests {
    use super::column_title;

    /// The colour follows what the column runs, not its name.
    #[test]
    fn a_columns_colour_is_its_runtime_and_delegate_not_its_name() {
        use super::title_colour;
        use crate::backend::{named, Delegate};
        use ratatui::style::Color;
        assert_eq!(title_colour(&crate::backend::BackendSpec::eager()), Color::LightMagenta);
        assert_eq!(title_colour(&named("portable")), Color::LightBlue);
        assert_eq!(title_colour(&named("xnnpack")), Color::LightGreen);
        let mut mine = named("my-portable-thing");
        mine.delegate = Delegate::Xnnpack;
        assert_eq!(title_colour(&mine), Color::LightGreen, "an XNNPACK program named portable is not portable");
        let mut plain = named("fast");
        plain.delegate = Delegate::None;
        assert_eq!(title_colour(&plain), Color::LightBlue, "a program on no delegate is, whatever its name");
    }

    #[test]
    fn titles_drop_the_runtime_before_they_are_cut() {
        assert_eq!(column_title("ExecuTorch portable", "", 40), " ExecuTorch portable ");
        assert_eq!(column_title("ExecuTorch portable", "", 20), " portable ");
        assert_eq!(column_title("ExecuTorch XNNPACK", " · F5", 20), " XNNPACK · F5 ");
        assert_eq!(column_title("PyTorch eager", "", 17), " PyTorch eager ");
        assert_eq!(column_title("ExecuTorch XNNPACK, no cache", "", 20), " XNNPACK, no cache");
        assert_eq!(column_title("ExecuTorch XNNPACK, no cache", "", 17), " XNNPACK, no c…");
        assert_eq!(column_title("ExecuTorch XNNPACK", " · F5", 26), " ExecuTorch XNNPACK · F5");
        assert_eq!(column_title("ExecuTorch XNNPACK", " · F5", 8), " · F5 ");
    }
}
