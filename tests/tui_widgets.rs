//! Widgets of the explorer rendered into a buffer, compared line by line.

use std::time::Duration;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Color;
use ratatui::widgets::Widget;
use runlens::app::CoverageView;
use runlens::model::Encoded;
use runlens::stats::LatencyStats;
use runlens::ui::coverage::CoveragePanel;
use runlens::ui::latency::LatencyPanel;
use runlens::ui::tokens::TokenStrip;

fn render(widget: impl Widget, width: u16, height: u16) -> Buffer {
    let mut buf = Buffer::empty(Rect::new(0, 0, width, height));
    widget.render(buf.area, &mut buf);
    buf
}

fn lines(buf: &Buffer) -> Vec<String> {
    (0..buf.area.height)
        .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect()
}

fn padded(expected: &[&str], width: usize) -> Vec<String> {
    expected.iter().map(|l| format!("{l:<width$}")).collect()
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

#[test]
fn latency_panel_before_any_run() {
    let stats = LatencyStats::default();
    let buf = render(LatencyPanel { stats: &stats, per_token: false }, 24, 4);
    assert_eq!(
        lines(&buf),
        padded(&["latency (ms)      0 runs", "  last   p50   p90   p99", "     –     –     –     –", ""], 24)
    );
}

#[test]
fn latency_panel_shows_last_percentiles_and_sparkline() {
    let mut stats = LatencyStats::default();
    for v in [10, 2, 3, 4] {
        stats.record(ms(v));
    }
    let buf = render(LatencyPanel { stats: &stats, per_token: false }, 24, 4);
    assert_eq!(
        lines(&buf),
        padded(&["latency (ms)      4 runs", "  last   p50   p90   p99", "  4.00  3.00  10.0  10.0", "█▁▂▃"], 24)
    );
    // The last run stands out; percentiles are cyan.
    assert_eq!(buf[(8, 2)].fg, Color::Cyan);
    assert_ne!(buf[(3, 2)].fg, Color::Cyan);
}

#[test]
fn latency_sparkline_keeps_the_most_recent_runs_that_fit() {
    let mut stats = LatencyStats::default();
    for v in 1..=40 {
        stats.record(ms(if v % 2 == 0 { 8 } else { 4 }));
    }
    let buf = render(LatencyPanel { stats: &stats, per_token: false }, 24, 4);
    assert_eq!(lines(&buf)[2], "  8.00  4.00  8.00  8.00");
    assert_eq!(lines(&buf)[3], "▄█".repeat(12));
}

fn coverage_view() -> CoverageView {
    CoverageView {
        coverage: 0.28,
        kernel_calls: 136,
        delegate_calls: 53,
        top_operators: vec![
            ("aten::native_layer_norm.out".to_string(), 13),
            ("aten::add.Tensor".to_string(), 12),
            ("aten::gelu.out".to_string(), 6),
        ],
        file_bytes: 90_400_000,
        ..Default::default()
    }
}

#[test]
fn coverage_gauge_compact() {
    let view = Ok(coverage_view());
    let buf = render(CoveragePanel { coverage: Some(&view), load_time: Some(ms(210)) }, 24, 4);
    assert_eq!(
        lines(&buf),
        padded(&["delegated ███░░░░░░░ 28%", "delegate 53 · kernel 136", "kernels: native_layer_n…", "90.4 MB · load 210 ms"], 24)
    );
    assert_eq!(buf[(10, 0)].fg, Color::Yellow, "a quarter to 90% delegated is yellow");
    assert_eq!(buf[(13, 0)].fg, Color::DarkGray);
}

#[test]
fn coverage_gauge_lists_operators_when_there_is_room() {
    let view = Ok(coverage_view());
    let buf = render(CoveragePanel { coverage: Some(&view), load_time: Some(ms(1500)) }, 30, 7);
    assert_eq!(
        lines(&buf),
        padded(
            &[
                "delegated ████░░░░░░░░░░░░ 28%",
                "delegate 53 · kernel 136 calls",
                "on the default kernels:",
                " native_layer_norm 13",
                " add 12",
                " gelu 6",
                "90.4 MB · load 1.50 s",
            ],
            30
        )
    );
}

#[test]
fn coverage_gauge_full_none_and_error() {
    let mut full = coverage_view();
    full.coverage = 1.0;
    full.top_operators.clear();
    let full = Ok(full);
    let buf = render(CoveragePanel { coverage: Some(&full), load_time: None }, 24, 4);
    assert_eq!(lines(&buf)[0], "delegated █████████ 100%");
    assert_eq!(buf[(10, 0)].fg, Color::Green);
    assert_eq!(lines(&buf)[2], format!("{:<24}", "kernels: none"));

    let buf = render(CoveragePanel { coverage: None, load_time: None }, 24, 4);
    assert_eq!(lines(&buf), padded(&["delegation: reading…", "", "", ""], 24));

    let err = Err("not a .pte file (no ET12 identifier)".to_string());
    let buf = render(CoveragePanel { coverage: Some(&err), load_time: Some(ms(20)) }, 24, 4);
    assert_eq!(
        lines(&buf),
        padded(&["delegation: unknown", "not a .pte file (no ET12", "identifier)", "load 20 ms"], 24)
    );
}

fn encoded(words: &[(&str, i64)], truncated: bool) -> Encoded {
    let mut tokens = vec!["[CLS]".to_string()];
    let mut ids = vec![101];
    for (w, id) in words {
        tokens.push(w.to_string());
        ids.push(*id);
    }
    tokens.push("[SEP]".to_string());
    ids.push(102);
    Encoded {
        text: words.iter().map(|(w, _)| *w).collect::<Vec<_>>().join(" "),
        attention_mask: vec![1; ids.len()],
        tokens,
        ids,
        truncated,
    }
}

const SOFA: [(&str, i64); 6] = [("a", 1037), ("cat", 4937), ("sleeps", 25126), ("on", 2006), ("the", 1996), ("sofa", 10682)];

#[test]
fn token_strip_wraps_and_counts_what_does_not_fit() {
    let e = encoded(&SOFA, false);
    let buf = render(TokenStrip { encoded: Some(&e), error: None }, 50, 2);
    assert_eq!(
        lines(&buf),
        padded(&["Tokens 8   [CLS] 101  a 1037  cat 4937", "           sleeps 25126  on 2006  the 1996 … +2"], 50)
    );
    let buf = render(TokenStrip { encoded: Some(&e), error: None }, 50, 3);
    assert_eq!(
        lines(&buf),
        padded(
            &["Tokens 8   [CLS] 101  a 1037  cat 4937", "           sleeps 25126  on 2006  the 1996", "           sofa 10682  [SEP] 102"],
            50
        )
    );
}

#[test]
fn token_strip_marks_truncated_text() {
    let e = encoded(&SOFA[..2], true);
    let buf = render(TokenStrip { encoded: Some(&e), error: None }, 60, 1);
    assert_eq!(lines(&buf), padded(&["Tokens 4 CUT AT 4 [CLS] 101  a 1037  cat 4937  [SEP] 102"], 60));
    assert_eq!(buf[(9, 0)].bg, Color::Red);
}

#[test]
fn token_strip_hint_and_error() {
    let buf = render(TokenStrip { encoded: None, error: None }, 40, 1);
    assert_eq!(lines(&buf), vec!["Tokens     type a sentence: its word pi…".to_string()]);
    let buf = render(TokenStrip { encoded: None, error: Some("cannot tokenize the text") }, 40, 1);
    assert_eq!(lines(&buf), vec![format!("{:<40}", "Tokens     cannot tokenize the text")]);
}
