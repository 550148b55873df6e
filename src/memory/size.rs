//! Sizes of memory as people write them (`3.5G`, `900M`, `2GiB`) and as
//! runlens shows them. Units are binary, as `free`, systemd's `MemoryMax=` and
//! `docker --memory` take them: 1G = 1 GiB = 2^30 bytes.

const UNITS: [(&str, u64); 4] = [("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)];

/// Parse a size: a number (a fraction is fine) with an optional unit K, M, G
/// or T (also KB/KiB, ...; any case); no unit is bytes.
pub fn parse(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a memory size: give a number with a unit, such as 3.5G or 900M (binary units: 1G = 2^30 bytes)");
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit.strip_suffix("IB").or_else(|| unit.strip_suffix('B')).unwrap_or(&unit);
    let scale = match unit {
        "" => 1,
        u => UNITS.iter().find(|(name, _)| *name == u).map(|(_, s)| *s).ok_or_else(bad)?,
    };
    let bytes = number * scale as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 / 2.0 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// `2.61 GiB`, `150 MiB`, `512 KiB`: three significant figures at most.
pub fn show(bytes: u64) -> String {
    let (unit, scale) = match bytes {
        b if b >= 1 << 30 => ("GiB", (1u64 << 30) as f64),
        b if b >= 1 << 20 => ("MiB", (1u64 << 20) as f64),
        _ => ("KiB", 1024.0),
    };
    let v = bytes as f64 / scale;
    let digits = if v >= 100.0 { 0 } else if v >= 10.0 { 1 } else { 2 };
    let text = format!("{v:.digits$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text };
    format!("{text} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_people_write() {
        assert_eq!(parse("3.5G"), Ok(3584 << 20));
        assert_eq!(parse("900M"), Ok(900 << 20));
        assert_eq!(parse("2GiB"), Ok(2 << 30));
        assert_eq!(parse("2 gb"), Ok(2 << 30));
        assert_eq!(parse("512k"), Ok(512 << 10));
        assert_eq!(parse("1000000"), Ok(1_000_000));
        for bad in ["", "G", "3.5X", "-1G", "1e9", "0", "lots", "99999999999T"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("not a memory size") && e.contains("3.5G"), "{bad}: {e}");
        }
    }

    #[test]
    fn shows_three_figures() {
        assert_eq!(show(157286400), "150 MiB");
        assert_eq!(show(2_800_000_000), "2.61 GiB");
        assert_eq!(show(12 << 30), "12 GiB");
        assert_eq!(show(1536 << 20), "1.5 GiB");
        assert_eq!(show(4096), "4 KiB");
        assert_eq!(show(0), "0 KiB");
    }
}
