//! The reference's next-token logits, every position of every prompt, kept
//! for the columns that come after it: in a temporary file, not in memory
//! (50 prompts × 32 tokens of SmolLM2's 49,152 logits are 315 MB of float32,
//! more than the column being measured holds). Rows are stored as the decoder
//! returned them (float32, bit for bit), so a column that computes the same
//! logits has a KL of exactly 0.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};

use anyhow::Context;

/// Rows of `V` float32 logits, appended in order and read back by index.
pub struct LogitRows {
    file: File,
    vocab: Option<usize>,
    rows: usize,
    /// Rows waiting to be written (one write per few rows).
    pending: Vec<u8>,
}

impl LogitRows {
    /// An empty store in the system's temporary directory, in a file with no
    /// name (unlinked as it is made): nothing is left after the store is dropped,
    /// nor after a crash.
    pub fn new() -> anyhow::Result<LogitRows> {
        let file = tempfile::tempfile().context("cannot make a temporary file for the reference's logits (set TMPDIR to a writable directory)")?;
        Ok(LogitRows { file, vocab: None, rows: 0, pending: Vec::new() })
    }

    /// Rows stored so far.
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The vocabulary size, once a row is in.
    pub fn vocab(&self) -> Option<usize> {
        self.vocab
    }

    /// Append one row; every row has the first one's length.
    pub fn push(&mut self, logits: &[f32]) -> anyhow::Result<()> {
        let vocab = *self.vocab.get_or_insert(logits.len());
        anyhow::ensure!(logits.len() == vocab, "the reference returned {} logits after {vocab}", logits.len());
        self.pending.extend(logits.iter().flat_map(|x| x.to_le_bytes()));
        self.rows += 1;
        if self.pending.len() >= 1 << 22 {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        if !self.pending.is_empty() {
            self.file.seek(SeekFrom::End(0))?;
            self.file.write_all(&self.pending).context("writing the reference's logits to a temporary file")?;
            self.pending.clear();
        }
        Ok(())
    }

    /// Row `index` into `out` (resized to the vocabulary).
    pub fn read(&mut self, index: usize, out: &mut Vec<f32>) -> anyhow::Result<()> {
        anyhow::ensure!(index < self.rows, "row {index} of {} stored", self.rows);
        self.flush()?;
        let vocab = self.vocab.unwrap_or(0);
        let mut bytes = vec![0u8; vocab * 4];
        self.file.seek(SeekFrom::Start((index * vocab * 4) as u64))?;
        self.file.read_exact(&mut bytes).context("reading the reference's logits back from their temporary file")?;
        out.clear();
        out.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_back_bit_for_bit() {
        let mut store = LogitRows::new().unwrap();
        store.push(&[1.0, f32::MIN_POSITIVE, -0.0]).unwrap();
        store.push(&[f32::NEG_INFINITY, 2.5, 1e-30]).unwrap();
        assert!(store.push(&[1.0]).is_err(), "another length");
        let mut row = Vec::new();
        store.read(1, &mut row).unwrap();
        assert_eq!(row.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), [f32::NEG_INFINITY, 2.5, 1e-30].map(f32::to_bits));
        store.read(0, &mut row).unwrap();
        assert_eq!(row[2].to_bits(), (-0.0f32).to_bits());
        assert!(store.read(2, &mut row).is_err());
        assert_eq!((store.len(), store.vocab()), (2, Some(3)));
    }
}
