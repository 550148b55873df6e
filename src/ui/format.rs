//! Numbers and text fitted to narrow columns.

use std::time::Duration;

/// Milliseconds in at most five characters: `2.31`, `23.1`, `231`, `1392`, `120s`.
pub fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    if v < 9.995 {
        format!("{v:.2}")
    } else if v < 99.95 {
        format!("{v:.1}")
    } else if v < 99_999.5 {
        format!("{v:.0}")
    } else {
        format!("{:.0}s", v / 1e3)
    }
}

/// Seconds with one decimal for state lines: `0.4 s`, `12.0 s`.
pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// A duration for humans: `350 ms` below a second, else `1.25 s`.
pub fn short(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

/// File sizes: `912 B`, `12.3 KB`, `87.6 MB` (powers of 1000).
pub fn bytes(n: u64) -> String {
    let v = n as f64;
    if n < 1000 {
        format!("{n} B")
    } else if v < 1e6 {
        format!("{:.1} KB", v / 1e3)
    } else if v < 1e9 {
        format!("{:.1} MB", v / 1e6)
    } else {
        format!("{:.2} GB", v / 1e9)
    }
}

/// An operator name without the namespace and overload: `aten::addmm.out` -> `addmm`.
pub fn operator(name: &str) -> &str {
    let name = name.rsplit("::").next().unwrap_or(name);
    match name.rsplit_once('.') {
        Some((base, "out" | "default" | "Tensor" | "Scalar" | "int")) if !base.is_empty() => base,
        _ => name,
    }
}

/// Cut `s` to `width` characters, ending with `…` when cut.
pub fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Greedy word wrap to `width` columns and at most `max_lines` lines; the last
/// line ends with `…` when text was left out. Words longer than a line are cut.
pub fn wrap(text: &str, width: usize, max_lines: usize) -> Vec<String> {
    if width == 0 || max_lines == 0 {
        return Vec::new();
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut line_len = 0;
    for word in text.split_whitespace() {
        let mut word: String = word.to_string();
        loop {
            let len = word.chars().count();
            let need = if line_len == 0 { len } else { line_len + 1 + len };
            if need <= width {
                if line_len > 0 {
                    line.push(' ');
                }
                line.push_str(&word);
                line_len = need;
                break;
            }
            if line_len > 0 {
                lines.push(std::mem::take(&mut line));
                line_len = 0;
                continue;
            }
            // A word longer than the line: cut it.
            let head: String = word.chars().take(width).collect();
            word = word.chars().skip(width).collect();
            lines.push(head);
            if word.is_empty() {
                break;
            }
        }
    }
    if line_len > 0 {
        lines.push(line);
    }
    if lines.len() > max_lines {
        lines.truncate(max_lines);
        let last = lines.pop().unwrap_or_default();
        let cut = if last.chars().count() >= width { last.chars().take(width - 1).collect() } else { last };
        lines.push(format!("{cut}…"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_fit_five_characters() {
        let cases = [(1_234, "1.23"), (23_456, "23.5"), (231_000, "231"), (1_392_000, "1392"), (120_000_000, "120s")];
        for (micros, want) in cases {
            assert_eq!(ms(Duration::from_micros(micros)), want);
        }
        assert_eq!(bytes(87_600_000), "87.6 MB");
        assert_eq!(operator("aten::native_layer_norm.out"), "native_layer_norm");
        assert_eq!(operator("aten::add.Tensor"), "add");
    }

    #[test]
    fn wraps_words_and_marks_what_is_cut() {
        assert_eq!(wrap("the cat sat on the mat", 10, 5), vec!["the cat", "sat on the", "mat"]);
        assert_eq!(wrap("the cat sat on the mat", 10, 2), vec!["the cat", "sat on th…"]);
        assert_eq!(wrap("abcdefghijkl", 5, 3), vec!["abcde", "fghij", "kl"]);
        assert_eq!(fit("abcdef", 4), "abc…");
    }
}
