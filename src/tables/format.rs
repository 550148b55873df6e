//! How a figure is printed: three significant figures by default, as the docs
//! write them (`0.618`, `5.37`, `20.3`, `157`), whole numbers never rounded
//! into zeros (`1859`, not `1860`); or in scientific notation (`4.90e-3`).

use std::fmt;

/// A cell's number format: `sig3`, `int` or `.N` (N decimals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Three significant figures; from 100 up, the whole number.
    Sig3,
    /// The whole number (`int`).
    Whole,
    /// A fixed number of decimals (`.1`).
    Decimals(u8),
    /// Scientific notation with N decimals (`e2`: `4.90e-3`).
    Sci(u8),
}

impl Format {
    /// The spec's word for a format: `sig3`, `int`, `.0` to `.6`, `e0` to `e6`.
    pub fn parse(word: &str) -> Result<Format, String> {
        let digits = |prefix: char| word.strip_prefix(prefix).and_then(|n| n.parse::<u8>().ok()).filter(|n| *n <= 6);
        match word {
            "sig3" => Ok(Format::Sig3),
            "int" => Ok(Format::Whole),
            _ => match (digits('.'), digits('e')) {
                (Some(n), _) => Ok(Format::Decimals(n)),
                (_, Some(n)) => Ok(Format::Sci(n)),
                _ => Err(format!("unknown format `{word}`: give sig3 (three significant figures, the default), int, .N (N decimals, 0 to 6) or eN (scientific, N decimals)")),
            },
        }
    }

    /// `value` printed in this format.
    pub fn apply(self, value: f64) -> String {
        match self {
            Format::Sig3 => sig3(value),
            Format::Whole => format!("{value:.0}"),
            Format::Decimals(n) => format!("{value:.*}", usize::from(n)),
            Format::Sci(n) => format!("{value:.*e}", usize::from(n)),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Format::Sig3 => f.write_str("sig3"),
            Format::Whole => f.write_str("int"),
            Format::Decimals(n) => write!(f, ".{n}"),
            Format::Sci(n) => write!(f, "e{n}"),
        }
    }
}

/// Three significant figures, the whole number from 100 up: 0.617983 is
/// `0.618`, 29.98 is `30.0`, 99.96 is `100`, 1859.1 is `1859`.
fn sig3(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).max(0) as usize;
    let text = format!("{value:.decimals$}");
    // Rounding up may reach the next power of ten (9.996 -> 10.00): one decimal fewer.
    let rounded: f64 = text.parse().unwrap_or(value);
    if decimals > 0 && rounded.abs() >= 10f64.powi(magnitude + 1) {
        format!("{value:.*}", decimals - 1)
    } else {
        text
    }
}
