//! Bounds on what reading one file may cost.

use std::collections::BTreeMap;

use super::PteError;

/// Bounds on the work and the name bytes one file may cost. A well-formed
/// file visits each vector element once and stores each name once, and both
/// take bytes of the file; a crafted one can make many entries point at the
/// same table or string, which would otherwise cost quadratic time or memory.
pub(crate) struct Limits {
    visits_left: usize,
    name_bytes_left: usize,
}

impl Limits {
    pub(crate) fn for_file(len: usize) -> Self {
        Limits {
            visits_left: len.saturating_add(1024),
            name_bytes_left: len.saturating_add(1024),
        }
    }

    pub(crate) fn visit(&mut self, n: usize) -> Result<(), PteError> {
        self.visits_left = self.visits_left.checked_sub(n).ok_or_else(|| {
            PteError::Inconsistent(
                "the program's tables are shared far more than any exporter writes them".into(),
            )
        })?;
        Ok(())
    }

    pub(crate) fn name(&mut self, parts: &[&str]) -> Result<String, PteError> {
        let len = parts.iter().map(|p| p.len()).sum::<usize>();
        self.name_bytes_left = self.name_bytes_left.checked_sub(len).ok_or_else(|| {
            PteError::Inconsistent("the program's names take more bytes than the file has".into())
        })?;
        Ok(parts.concat())
    }

    /// Adds `n` to `map[key]` where key is `parts` joined; a one-part key is
    /// only allocated (and charged) when it is new.
    pub(crate) fn count(
        &mut self,
        map: &mut BTreeMap<String, u64>,
        parts: &[&str],
        n: u64,
    ) -> Result<(), PteError> {
        if let [key] = parts {
            if let Some(v) = map.get_mut(*key) {
                *v += n;
                return Ok(());
            }
        }
        let key = self.name(parts)?;
        *map.entry(key).or_insert(0) += n;
        Ok(())
    }
}
