//! Which columns fit in a given room: the set asked for, else the nearest set
//! that fits (a column's smaller variants first, then fewer columns).

use serde::Serialize;

use super::ColumnNeed;

/// How a command holds its columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Holding {
    /// All loaded at once (the explorer: one worker per column, loading in parallel).
    Together,
    /// One loaded, run and dropped before the next (`run`, `bench`, `profile`, `layers`).
    OneAtATime,
}

impl Holding {
    /// What the columns take at their peak: the sum, or the largest.
    pub fn need(self, needs: &[&ColumnNeed]) -> u64 {
        let peaks = needs.iter().map(|n| n.peak);
        match self {
            Holding::Together => peaks.sum(),
            Holding::OneAtATime => peaks.max().unwrap_or(0),
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Holding::Together => "together",
            Holding::OneAtATime => "one at a time",
        }
    }
}

/// The set nearest to `asked` whose need held as `holding` is within `room`,
/// from the columns of `catalog`: one at a time, the asked columns that fit
/// alone (else any that does); together, each column's largest excess
/// replaced first by its smallest variant (F5's: `xnnpack` by
/// `xnnpack-8da4w`), then a column dropped (the smallest whose going is
/// enough, else the largest), until the rest fits.
/// Empty when not even the smallest column fits.
pub fn nearest<'a>(asked: &[&'a ColumnNeed], catalog: &'a [ColumnNeed], room: u64, holding: Holding) -> Vec<&'a ColumnNeed> {
    let mut set: Vec<&ColumnNeed> = asked.to_vec();
    match holding {
        Holding::OneAtATime => set.retain(|n| n.peak <= room),
        Holding::Together => {
            while !set.is_empty() && holding.need(&set) > room {
                let swap = set
                    .iter()
                    .enumerate()
                    .filter_map(|(i, n)| {
                        let smaller = catalog
                            .iter()
                            .filter(|v| v.column == n.column && v.peak < n.peak && !set.iter().any(|s| s.name == v.name))
                            .min_by_key(|v| v.peak)?;
                        Some((n.peak - smaller.peak, i, smaller))
                    })
                    .max_by_key(|(saving, ..)| *saving);
                match swap {
                    Some((_, i, smaller)) => set[i] = smaller,
                    None => {
                        // The smallest column whose going is enough, else the largest.
                        let total = holding.need(&set);
                        let enough = (0..set.len()).filter(|&i| total - set[i].peak <= room).min_by_key(|&i| set[i].peak);
                        let largest = (0..set.len()).max_by_key(|&i| set[i].peak).unwrap_or(0);
                        set.remove(enough.unwrap_or(largest));
                    }
                }
            }
        }
    }
    if set.is_empty() {
        // Nothing asked for fits: the smallest column of all, if it does.
        set.extend(catalog.iter().filter(|n| n.peak <= room).min_by_key(|n| n.peak));
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(name: &str, column: &str, peak: u64) -> ColumnNeed {
        ColumnNeed { name: name.into(), column: column.into(), quantized: name.contains('-'), steady: peak, peak, estimated_peak: peak, measured_peak: None, parts: vec![], transient: None }
    }

    fn names(set: &[&ColumnNeed]) -> Vec<String> {
        set.iter().map(|n| n.name.clone()).collect()
    }

    #[test]
    fn swaps_to_smaller_variants_then_drops_the_largest() {
        let catalog = vec![
            need("eager", "eager", 2600),
            need("eager-int4", "eager", 2600),
            need("portable", "portable", 2000),
            need("xnnpack", "xnnpack", 2600),
            need("xnnpack-int8", "xnnpack", 760),
            need("xnnpack-8da4w", "xnnpack", 470),
        ];
        let asked: Vec<&ColumnNeed> = vec![&catalog[0], &catalog[2], &catalog[3]];
        assert_eq!(Holding::Together.need(&asked), 7200);
        assert_eq!(Holding::OneAtATime.need(&asked), 2600);
        // Room for everything: the set asked for.
        assert_eq!(names(&nearest(&asked, &catalog, 8000, Holding::Together)), ["eager", "portable", "xnnpack"]);
        // xnnpack becomes its 4-bit variant first (the largest saving): 5070 fits.
        assert_eq!(names(&nearest(&asked, &catalog, 5100, Holding::Together)), ["eager", "portable", "xnnpack-8da4w"]);
        // Still too much: eager has no smaller variant; its going alone is enough.
        assert_eq!(names(&nearest(&asked, &catalog, 3000, Holding::Together)), ["portable", "xnnpack-8da4w"]);
        // Where dropping the smallest is enough, that one goes.
        assert_eq!(names(&nearest(&asked, &catalog, 4700, Holding::Together)), ["eager", "portable"]);
        assert_eq!(names(&nearest(&asked, &catalog, 1000, Holding::Together)), ["xnnpack-8da4w"]);
        assert!(nearest(&asked, &catalog, 100, Holding::Together).is_empty());
        // One at a time: those that fit alone, else the smallest of all.
        assert_eq!(names(&nearest(&asked, &catalog, 2100, Holding::OneAtATime)), ["portable"]);
        assert_eq!(names(&nearest(&asked, &catalog, 1000, Holding::OneAtATime)), ["xnnpack-8da4w"]);
    }
}
