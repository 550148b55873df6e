//! The characters and colours the terminal can show, chosen once at start
//! ([`GlyphSet::choose`]: `--glyphs`, else from `TERM`) and applied to every
//! frame in one place ([`Theme::apply`]), after all widgets have drawn.
//!
//! Widgets draw with the full Unicode set (block elements `▁…█`, `Δ`, `↳`, ...).
//! The Linux console's fonts (console-setup's Lat15 / Uni2 in Fixed, Terminus,
//! VGA) have only `█ ░ ▒` of the block elements and no `Δ`, and the console has
//! 16 colours: the console set swaps each glyph those fonts lack for one they
//! have (bars become `░ ▒ █`, so a sparkline is a column of `█` topped by a
//! shade) and keeps colours to the 16 ANSI ones, with backgrounds among the
//! 8 the console can show. The ASCII set is plain 7-bit for anything else.
//! A widget that wants a different drawing per set can read [`Theme::glyphs`].
//!
//! `tests/tui_snapshots.rs` draws every screen with the console set and checks
//! each character against the code points of those fonts
//! (`tests/data/console-font-codepoints.txt`, made by
//! `scripts/console_font_codepoints.py` from the fonts themselves).

use ratatui::buffer::Buffer;
use ratatui::style::Color;

/// Which characters the explorer draws with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GlyphSet {
    /// Block elements, box drawing and symbols: terminal emulators with a full font.
    Unicode,
    /// What the Linux text console's fonts have (`TERM=linux`), and 16 colours.
    Console,
    /// Plain 7-bit ASCII and 16 colours.
    Ascii,
}

impl GlyphSet {
    /// The set for a `TERM` value: the Linux console gets the console set,
    /// terminals without Unicode the ASCII one, everything else Unicode.
    pub fn for_term(term: Option<&str>) -> GlyphSet {
        match term.unwrap_or("") {
            t if t == "linux" || t.starts_with("linux-") => GlyphSet::Console,
            "dumb" | "vt52" | "vt100" | "vt102" | "vt220" | "ansi" | "cons25" => GlyphSet::Ascii,
            _ => GlyphSet::Unicode,
        }
    }

    /// `--glyphs` when given, else from the environment's `TERM`.
    pub fn choose(forced: Option<GlyphSet>) -> GlyphSet {
        forced.unwrap_or_else(|| GlyphSet::for_term(std::env::var("TERM").ok().as_deref()))
    }

    pub fn name(self) -> &'static str {
        match self {
            GlyphSet::Unicode => "unicode",
            GlyphSet::Console => "console",
            GlyphSet::Ascii => "ascii",
        }
    }

    /// What a cell's symbol becomes in this set; `None`: it stays.
    pub fn substitute(self, symbol: &str) -> Option<&'static str> {
        if self == GlyphSet::Unicode || symbol.is_ascii() {
            return None;
        }
        let mut chars = symbol.chars();
        let (Some(c), None) = (chars.next(), chars.next()) else {
            // A grapheme of several code points (user text): ASCII cannot show it.
            return (self == GlyphSet::Ascii).then_some("?");
        };
        match (self, stand_in(c)) {
            (GlyphSet::Console, Some((console, _))) => (console != symbol).then_some(console),
            (GlyphSet::Ascii, Some((_, ascii))) => Some(ascii),
            // Characters the console fonts have (Latin letters of user text) stay.
            (GlyphSet::Console, None) | (GlyphSet::Unicode, _) => None,
            (GlyphSet::Ascii, None) => Some("?"),
        }
    }
}

/// The console and ASCII stand-ins of every non-ASCII character the widgets
/// draw. Bars keep their order, in thirds on the console (eighths 1-2 `░`,
/// 3-5 `▒`, 6-8 `█`) and quarters in ASCII (`. : = #`).
fn stand_in(c: char) -> Option<(&'static str, &'static str)> {
    Some(match c {
        // Bars of sparklines and the embedding strip (eighths from the bottom).
        '▁' => ("░", "."),
        '▂' => ("░", "."),
        '▃' => ("▒", ":"),
        '▄' => ("▒", ":"),
        '▅' => ("▒", "="),
        '▆' => ("█", "="),
        '▇' | '█' => ("█", "#"),
        // Bars of the profile (eighths from the left).
        '▏' | '▎' | '▍' => ("░", "."),
        '▌' | '▋' | '▊' | '▉' => ("▒", ":"),
        // Shades (the gauge's empty part).
        '░' => ("░", "."),
        '▒' => ("▒", ":"),
        '▓' => ("█", "#"),
        // State marks.
        '●' => ("●", "*"),
        '◌' => ("·", "."),
        '▶' => ("▶", ">"),
        '✖' => ("×", "x"),
        '↳' => ("└", "`"),
        // Letters and punctuation.
        'Δ' => ("d", "d"),
        // A token or label that differs from the reference column's.
        '≠' => ("≠", "!"),
        '…' => ("…", "~"),
        // GPT-2's byte-level mark for a leading space, in its token strip (`Ġupon`).
        'Ġ' => ("_", "_"),
        '“' => ("“", "\""),
        '”' => ("”", "\""),
        '›' => ("›", ">"),
        '·' => ("·", "|"),
        '–' | '—' | '−' => ("-", "-"),
        '×' => ("×", "x"),
        'µ' => ("µ", "u"),
        '°' => ("°", "o"),
        '←' => ("←", "<"),
        '→' => ("→", ">"),
        '↑' => ("↑", "^"),
        '↓' => ("↓", "v"),
        // Box drawing: the console fonts have these; ASCII draws + - |.
        '─' | '━' | '┄' => ("─", "-"),
        '│' | '┃' | '┆' => ("│", "|"),
        '═' => ("═", "="),
        '║' => ("║", "|"),
        '╭' => ("╭", "+"),
        '╮' => ("╮", "+"),
        '╰' => ("╰", "+"),
        '╯' => ("╯", "+"),
        '┌' => ("┌", "+"),
        '┐' => ("┐", "+"),
        '└' => ("└", "+"),
        '┘' => ("┘", "+"),
        '╔' => ("╔", "+"),
        '╗' => ("╗", "+"),
        '╚' => ("╚", "+"),
        '╝' => ("╝", "+"),
        '├' => ("├", "+"),
        '┤' => ("┤", "+"),
        '┬' => ("┬", "+"),
        '┴' => ("┴", "+"),
        '┼' => ("┼", "+"),
        _ => return None,
    })
}

/// The 16 ANSI colours, as ratatui names them.
const ANSI16: [(Color, [u8; 3]); 16] = [
    (Color::Black, [0, 0, 0]),
    (Color::Red, [170, 0, 0]),
    (Color::Green, [0, 170, 0]),
    (Color::Yellow, [170, 85, 0]),
    (Color::Blue, [0, 0, 170]),
    (Color::Magenta, [170, 0, 170]),
    (Color::Cyan, [0, 170, 170]),
    (Color::Gray, [170, 170, 170]),
    (Color::DarkGray, [85, 85, 85]),
    (Color::LightRed, [255, 85, 85]),
    (Color::LightGreen, [85, 255, 85]),
    (Color::LightYellow, [255, 255, 85]),
    (Color::LightBlue, [85, 85, 255]),
    (Color::LightMagenta, [255, 85, 255]),
    (Color::LightCyan, [85, 255, 255]),
    (Color::White, [255, 255, 255]),
];

/// The nearest of the 16 colours (RGB and 256-colour values; named ones stay).
fn to_16(colour: Color) -> Color {
    let rgb = match colour {
        Color::Rgb(r, g, b) => [r, g, b],
        Color::Indexed(i) if i < 16 => return ANSI16[i as usize].0,
        Color::Indexed(i) if i >= 232 => {
            let v = 8 + 10 * (i - 232);
            [v, v, v]
        }
        Color::Indexed(i) => {
            let level = |n: u8| if n == 0 { 0 } else { 55 + 40 * n };
            let i = i - 16;
            [level(i / 36), level(i / 6 % 6), level(i % 6)]
        }
        other => return other,
    };
    let distance = |c: &[u8; 3]| (0..3).map(|k| (c[k] as i32 - rgb[k] as i32).pow(2)).sum::<i32>();
    ANSI16.iter().min_by_key(|(_, c)| distance(c)).map_or(Color::Reset, |(name, _)| *name)
}

/// A background the console can show: one of its 8 base colours (it shows a
/// bright background as the base colour, or as blink on some setups).
fn to_console_background(colour: Color) -> Color {
    match to_16(colour) {
        Color::DarkGray => Color::Black,
        Color::LightRed => Color::Red,
        Color::LightGreen => Color::Green,
        Color::LightYellow => Color::Yellow,
        Color::LightBlue => Color::Blue,
        Color::LightMagenta => Color::Magenta,
        Color::LightCyan => Color::Cyan,
        Color::White => Color::Gray,
        other => other,
    }
}

/// The glyph set and colour palette every frame is drawn with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    pub glyphs: GlyphSet,
}

impl Default for Theme {
    fn default() -> Theme {
        Theme { glyphs: GlyphSet::Unicode }
    }
}

impl Theme {
    pub fn new(glyphs: GlyphSet) -> Theme {
        Theme { glyphs }
    }

    /// Turn a frame drawn with the Unicode set into this set: each cell's
    /// symbol and, for the console and ASCII sets, its colours.
    pub fn apply(&self, buf: &mut Buffer) {
        if self.glyphs == GlyphSet::Unicode {
            return;
        }
        for cell in buf.content.iter_mut() {
            if let Some(symbol) = self.glyphs.substitute(cell.symbol()) {
                cell.set_symbol(symbol);
            }
            cell.fg = to_16(cell.fg);
            cell.bg = to_console_background(cell.bg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_picks_the_set() {
        assert_eq!(GlyphSet::for_term(Some("linux")), GlyphSet::Console);
        assert_eq!(GlyphSet::for_term(Some("linux-16color")), GlyphSet::Console);
        assert_eq!(GlyphSet::for_term(Some("vt100")), GlyphSet::Ascii);
        assert_eq!(GlyphSet::for_term(Some("dumb")), GlyphSet::Ascii);
        assert_eq!(GlyphSet::for_term(Some("xterm-256color")), GlyphSet::Unicode);
        assert_eq!(GlyphSet::for_term(Some("tmux-256color")), GlyphSet::Unicode);
        assert_eq!(GlyphSet::for_term(None), GlyphSet::Unicode);
        assert_eq!(GlyphSet::choose(Some(GlyphSet::Ascii)), GlyphSet::Ascii);
    }

    #[test]
    fn bars_keep_their_order_in_every_set() {
        let bars = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];
        for set in [GlyphSet::Console, GlyphSet::Ascii] {
            let shown: Vec<&str> = bars.iter().map(|b| set.substitute(b).unwrap_or(b)).collect();
            let levels: Vec<&str> = if set == GlyphSet::Console { vec!["░", "▒", "█"] } else { vec![".", ":", "=", "#"] };
            let rank: Vec<usize> = shown.iter().map(|s| levels.iter().position(|l| l == s).expect("a level")).collect();
            assert!(rank.windows(2).all(|w| w[0] <= w[1]), "{set:?}: {shown:?}");
            assert_eq!((rank[0], rank[7]), (0, levels.len() - 1), "{set:?}: lowest and highest stay apart");
            for (level, glyph) in levels.iter().enumerate() {
                assert!(rank.contains(&level), "{set:?}: level {glyph} unused");
            }
        }
    }

    #[test]
    fn ascii_is_seven_bit_and_console_keeps_latin_letters() {
        assert_eq!(GlyphSet::Ascii.substitute("é"), Some("?"));
        assert_eq!(GlyphSet::Console.substitute("é"), None);
        assert_eq!(GlyphSet::Console.substitute("Δ"), Some("d"));
        assert_eq!(GlyphSet::Unicode.substitute("Δ"), None);
        assert_eq!(GlyphSet::Ascii.substitute("a"), None);
        // GPT-2's token strip: the console fonts lack Ġ (U+0120).
        assert_eq!((GlyphSet::Console.substitute("Ġ"), GlyphSet::Ascii.substitute("Ġ"), GlyphSet::Unicode.substitute("Ġ")), (Some("_"), Some("_"), None));
    }

    #[test]
    fn colours_become_the_16_and_backgrounds_the_8() {
        assert_eq!(to_16(Color::Rgb(250, 10, 10)), Color::Red);
        assert_eq!(to_16(Color::Rgb(255, 90, 90)), Color::LightRed);
        assert_eq!(to_16(Color::Indexed(2)), Color::Green);
        assert_eq!(to_16(Color::Indexed(240)), Color::DarkGray);
        assert_eq!(to_16(Color::Cyan), Color::Cyan);
        assert_eq!(to_console_background(Color::DarkGray), Color::Black);
        assert_eq!(to_console_background(Color::Blue), Color::Blue);
        assert_eq!(to_console_background(Color::Reset), Color::Reset);
    }
}
