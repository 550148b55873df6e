//! The bytes of a GGUF header, read in order through a buffer. Every read is
//! checked against the bytes the file has left before anything is allocated
//! or skipped, so no length read out of the file costs more than the file
//! holds; the data section is never read.

use std::io::{BufRead, Seek, SeekFrom};

use super::error::{FileName, GgufError};
use super::limits::MAX_STRING_BYTES;

/// Skips longer than this seek instead of reading through the buffer.
const SEEK_OVER: u64 = 1 << 20;

pub(super) struct Source<R> {
    inner: R,
    pos: u64,
    len: u64,
    pub(super) file: FileName,
    /// What is being read, for messages ("key 'general.name'"); empty for
    /// the fixed header.
    pub(super) context: String,
}

impl<R: BufRead + Seek> Source<R> {
    /// `inner` positioned at byte 0 of a file of `len` bytes.
    pub(super) fn new(inner: R, len: u64, file: FileName) -> Self {
        Source { inner, pos: 0, len, file, context: String::new() }
    }

    pub(super) fn pos(&self) -> u64 {
        self.pos
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    pub(super) fn left(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn what(&self, what: &str) -> String {
        if self.context.is_empty() {
            what.to_string()
        } else {
            format!("{what} of {}", self.context)
        }
    }

    fn past_end(&self, n: u64, what: &str) -> GgufError {
        GgufError::PastEnd { file: self.file.clone(), what: self.what(what), at: self.pos, need: n, left: self.left() }
    }

    /// Whether `n` more bytes are there.
    pub(super) fn need(&self, n: u64, what: &str) -> Result<(), GgufError> {
        if n > self.left() {
            return Err(self.past_end(n, what));
        }
        Ok(())
    }

    fn io(&self, source: std::io::Error) -> GgufError {
        GgufError::Io { file: self.file.clone(), source }
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), GgufError> {
        self.inner.read_exact(buf).map_err(|e| self.io(e))?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    pub(super) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        self.need(N as u64, what)?;
        let mut buf = [0; N];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    pub(super) fn u8(&mut self, what: &str) -> Result<u8, GgufError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(super) fn u16(&mut self, what: &str) -> Result<u16, GgufError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub(super) fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(super) fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// `n` bytes, after checking the file has them.
    pub(super) fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>, GgufError> {
        self.need(n, what)?;
        let mut buf = vec![0; n as usize];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    /// Moves past `n` bytes, after checking the file has them.
    pub(super) fn skip(&mut self, n: u64, what: &str) -> Result<(), GgufError> {
        self.need(n, what)?;
        if n > SEEK_OVER {
            // n <= the file's length, far below i64::MAX.
            self.inner.seek(SeekFrom::Current(n as i64)).map_err(|e| self.io(e))?;
        } else {
            let mut rest = n as usize;
            while rest > 0 {
                let got = match self.inner.fill_buf() {
                    Ok(buf) => buf.len().min(rest),
                    Err(e) => return Err(self.io(e)),
                };
                if got == 0 {
                    return Err(self.io(std::io::ErrorKind::UnexpectedEof.into()));
                }
                self.inner.consume(got);
                rest -= got;
            }
        }
        self.pos += n;
        Ok(())
    }

    /// A string's length, checked against ggml's limit and the bytes left.
    pub(super) fn string_len(&mut self, what: &str) -> Result<u64, GgufError> {
        let at = self.pos;
        if self.left() < 8 {
            return Err(self.past_end(8, &format!("the length of {what}")));
        }
        let len = self.u64(what)?;
        if len > MAX_STRING_BYTES {
            return Err(GgufError::StringTooLong { file: self.file.clone(), what: self.what(what), at, len });
        }
        self.need(len, what)?;
        Ok(len)
    }

    /// A GGUF string (`u64` length, bytes), as bytes.
    pub(super) fn string(&mut self, what: &str) -> Result<Vec<u8>, GgufError> {
        let len = self.string_len(what)?;
        self.bytes(len, what)
    }

    /// Moves past a GGUF string.
    pub(super) fn skip_string(&mut self, what: &str) -> Result<(), GgufError> {
        let len = self.string_len(what)?;
        self.skip(len, what)
    }
}
