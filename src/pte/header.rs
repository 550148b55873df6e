//! The fixed part of a `.pte` file: the `ET12` file identifier and the
//! optional `eh00` extended header that follows it at byte 8.

use super::PteError;

/// The flatbuffer file identifier of an ExecuTorch program, at bytes 4..8.
pub const FILE_IDENTIFIER: &[u8; 4] = b"ET12";

const EXTENDED_MAGIC: &[u8; 4] = b"eh00";
const EXTENDED_AT: usize = 8;
/// magic, header length, program size, segment base offset.
const EXTENDED_MIN_LEN: usize = 24;
/// ... and segment data size.
const EXTENDED_FULL_LEN: usize = 32;

/// The `eh00` header: where the program flatbuffer ends and the segments start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtendedHeader {
    /// The header's own length in bytes.
    pub length: u32,
    /// Size of the program flatbuffer, including this header.
    pub program_size: u64,
    /// File offset of the first segment; 0 when there are no segments.
    pub segment_base_offset: u64,
    /// Size of all segment data (0 when absent from an older header).
    pub segment_data_size: u64,
}

/// Where the parts of the file are, checked against its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub header: Option<ExtendedHeader>,
    /// Bytes `0..program_len` are the program flatbuffer.
    pub program_len: usize,
    /// Segment offsets are relative to this file offset (0: no segments).
    pub segment_base: usize,
}

pub(crate) fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    let end = at.checked_add(2)?;
    Some(u16::from_le_bytes(bytes.get(at..end)?.try_into().ok()?))
}

pub(crate) fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    Some(u32::from_le_bytes(bytes.get(at..end)?.try_into().ok()?))
}

pub(crate) fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let end = at.checked_add(8)?;
    Some(u64::from_le_bytes(bytes.get(at..end)?.try_into().ok()?))
}

/// Shows 4 magic bytes as text when printable, else as hex.
pub(crate) fn show_magic(magic: &[u8]) -> String {
    if magic.iter().all(|b| b.is_ascii_graphic()) {
        format!("{:?}", String::from_utf8_lossy(magic))
    } else {
        let hex: Vec<String> = magic.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{}", hex.join(""))
    }
}

/// Checks the file identifier and reads the extended header, if any.
pub(crate) fn read_layout(bytes: &[u8]) -> Result<Layout, PteError> {
    layout_of(bytes, bytes.len() as u64)
}

/// [`read_layout`] from the first bytes of a file of `len` bytes (at least
/// its headers; [`super::sizes`] reads no more than the program).
pub(crate) fn layout_of(bytes: &[u8], len: u64) -> Result<Layout, PteError> {
    let magic = bytes.get(4..8).ok_or(PteError::TooShort {
        len: bytes.len(),
        need: 8,
    })?;
    if magic != FILE_IDENTIFIER {
        return Err(PteError::NotAProgram {
            found: show_magic(magic),
        });
    }
    // Every offset is <= len; on a 32-bit machine len may not fit in usize.
    let fits = |n: u64| usize::try_from(n).map_err(|_| PteError::BadHeader(format!("{n} bytes do not fit in memory")));
    let Some(header) = read_extended_header(bytes)? else {
        return Ok(Layout {
            header: None,
            program_len: fits(len)?,
            segment_base: 0,
        });
    };
    let header_end = EXTENDED_AT as u64 + u64::from(header.length);
    if header.program_size > len {
        return Err(PteError::BadHeader(format!(
            "program size {} runs past the end of the file ({len} bytes); is it truncated?",
            header.program_size
        )));
    }
    if header.program_size < header_end {
        return Err(PteError::BadHeader(format!(
            "program size {} ends inside the headers (they end at byte {header_end})",
            header.program_size
        )));
    }
    if header.segment_base_offset != 0 {
        if header.segment_base_offset < header.program_size || header.segment_base_offset > len {
            return Err(PteError::BadHeader(format!(
                "segment base offset {} is outside {}..={} (program end..file end)",
                header.segment_base_offset, header.program_size, len
            )));
        }
        let end = header
            .segment_base_offset
            .checked_add(header.segment_data_size);
        if end.is_none_or(|end| end > len) {
            return Err(PteError::BadHeader(format!(
                "segment data ({} bytes at {}) runs past the end of the file ({} bytes); is it truncated?",
                header.segment_data_size, header.segment_base_offset, len
            )));
        }
    }
    Ok(Layout {
        header: Some(header),
        program_len: fits(header.program_size)?,
        segment_base: fits(header.segment_base_offset)?,
    })
}

/// `Ok(None)` when bytes 8..12 are not `eh00` (a program without segments).
fn read_extended_header(bytes: &[u8]) -> Result<Option<ExtendedHeader>, PteError> {
    let magic_end = EXTENDED_AT + 4;
    if bytes.get(EXTENDED_AT..magic_end) != Some(EXTENDED_MAGIC.as_slice()) {
        return Ok(None);
    }
    let truncated = || PteError::TooShort {
        len: bytes.len(),
        need: EXTENDED_AT + EXTENDED_MIN_LEN,
    };
    let length = u32_at(bytes, EXTENDED_AT + 4).ok_or_else(truncated)?;
    if (length as usize) < EXTENDED_MIN_LEN {
        return Err(PteError::BadHeader(format!(
            "header length {length} is less than the minimum {EXTENDED_MIN_LEN}"
        )));
    }
    let need = EXTENDED_AT + (length as usize).min(EXTENDED_FULL_LEN);
    if bytes.len() < need {
        return Err(PteError::TooShort {
            len: bytes.len(),
            need,
        });
    }
    let program_size = u64_at(bytes, EXTENDED_AT + 8).ok_or_else(truncated)?;
    let segment_base_offset = u64_at(bytes, EXTENDED_AT + 16).ok_or_else(truncated)?;
    let segment_data_size = if length as usize >= EXTENDED_FULL_LEN {
        u64_at(bytes, EXTENDED_AT + 24).ok_or_else(truncated)?
    } else {
        0
    };
    Ok(Some(ExtendedHeader {
        length,
        program_size,
        segment_base_offset,
        segment_data_size,
    }))
}
