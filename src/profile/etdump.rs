//! Decoding an ETDump: the size-prefixed flatbuffer (file identifier `ED00`)
//! that ExecuTorch's `ETDumpGen` event tracer writes.
//!
//! Every table read goes through planus (bounds-checked, fallible), so any
//! byte string gives an [`EtDump`] or a [`DumpError`], never a panic. Only the
//! profiling events are kept; allocation and debug events are counted.

use planus::ReadAsRoot;

use super::generated::etdump::etdump::{DebugEventRef, EtDumpRef, ProfileEventRef, RunDataRef};

/// The file identifier at bytes 4..8 of the flatbuffer (after the size prefix).
pub const ETDUMP_IDENTIFIER: &[u8; 4] = b"ED00";

/// Why bytes are not a readable ETDump.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("the ETDump is empty or too short ({0} bytes)")]
    TooShort(usize),
    #[error("the ETDump's size prefix says {said} bytes, but {have} follow it")]
    BadSize { said: u64, have: usize },
    #[error("not an ETDump: the file identifier is {0:?}, expected \"ED00\"")]
    NotAnEtDump(String),
    #[error("malformed ETDump while reading {what}")]
    Flatbuffer {
        what: &'static str,
        #[source]
        source: planus::Error,
    },
    #[error("the ETDump's names take more bytes than the dump has")]
    TooManyNames,
}

fn fb(what: &'static str) -> impl Fn(planus::Error) -> DumpError {
    move |source| DumpError::Flatbuffer { what, source }
}

/// A decoded ETDump: one [`RunBlock`] per event block (`Method::execute`
/// opens one per run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtDump {
    pub version: u32,
    pub runs: Vec<RunBlock>,
}

/// One event block of the dump (`RunData`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunBlock {
    /// "Execute" for a block opened by `Method::execute`.
    pub name: String,
    pub events: Vec<ProfileEvent>,
    /// Allocation events and debug events that hold no tensor, not decoded further.
    pub other_events: usize,
    /// Debug events that hold a tensor: intermediate outputs, when the tracer
    /// was given a debug buffer (`EtModule::log_outputs`).
    pub outputs: Vec<OutputEvent>,
}

/// One tensor a debug event logged: the output of an instruction (or of a
/// delegate call), its bytes at `offset` in the tracer's debug buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputEvent {
    pub chain: u64,
    pub instruction: i32,
    /// Logged by a delegate from inside its call.
    pub in_delegate: bool,
    /// ExecuTorch's scalar type (6 = float32).
    pub scalar_type: i8,
    pub sizes: Vec<i64>,
    pub offset: i64,
}

/// ExecuTorch's `ScalarType::Float`.
pub const FLOAT32: i8 = 6;

impl OutputEvent {
    /// Elements, when the sizes are sane.
    pub fn numel(&self) -> Option<usize> {
        self.sizes.iter().try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
    }

    /// The float32 values in `buffer`, when the event is float32 and lies inside it.
    pub fn floats<'b>(&self, buffer: &'b [u8]) -> Option<Vec<f32>> {
        if self.scalar_type != FLOAT32 {
            return None;
        }
        let start = usize::try_from(self.offset).ok()?;
        let end = start.checked_add(self.numel()?.checked_mul(4)?)?;
        let bytes: &'b [u8] = buffer.get(start..end)?;
        Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

/// One profiling event: an instruction (`OPERATOR_CALL`, `DELEGATE_CALL`,
/// ...), a method (`Method::execute`) or an event a delegate logged itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileEvent {
    /// Empty for delegate events identified by an integer id.
    pub name: String,
    /// Chain and instruction of the program; negative when not set.
    pub chain: i32,
    pub instruction: i32,
    /// Set only on events a delegate logged from inside its own execution.
    pub delegate_id: Option<DelegateEventId>,
    /// In the platform's ticks (see [`crate::ffi::ticks_to_ns_ratio`]).
    pub start: u64,
    pub end: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DelegateEventId {
    Int(i32),
    Name(String),
}

impl ProfileEvent {
    /// The event's length in ticks (0 if the clock went backwards).
    pub fn ticks(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// The chain and instruction it belongs to, when both are set.
    pub fn instruction_ref(&self) -> Option<(usize, usize)> {
        Some((usize::try_from(self.chain).ok()?, usize::try_from(self.instruction).ok()?))
    }
}

/// Decodes ETDump bytes as `ETDumpGen::get_etdump_data` returns them: a
/// little-endian u32 size, then the flatbuffer.
pub fn decode(bytes: &[u8]) -> Result<EtDump, DumpError> {
    let prefix: [u8; 4] = bytes.get(..4).and_then(|b| b.try_into().ok()).ok_or(DumpError::TooShort(bytes.len()))?;
    let said = u32::from_le_bytes(prefix);
    let rest = &bytes[4..];
    let buffer = rest.get(..said as usize).ok_or(DumpError::BadSize { said: u64::from(said), have: rest.len() })?;
    let ident = buffer.get(4..8).ok_or(DumpError::TooShort(bytes.len()))?;
    if ident != ETDUMP_IDENTIFIER {
        return Err(DumpError::NotAnEtDump(String::from_utf8_lossy(ident).into_owned()));
    }
    let root = EtDumpRef::read_as_root(buffer).map_err(fb("the ETDump root"))?;
    // Names are copied out; a crafted dump could point many events at one long
    // string, so their total is bounded by the dump's size.
    let mut name_budget = NameBudget(bytes.len().saturating_add(1024));
    let mut runs = Vec::new();
    if let Some(list) = root.run_data().map_err(fb("run_data"))? {
        for run in list.iter() {
            runs.push(run_block(run.map_err(fb("a run block"))?, &mut name_budget)?);
        }
    }
    Ok(EtDump { version: root.version().map_err(fb("the version"))?, runs })
}

struct NameBudget(usize);

impl NameBudget {
    fn take(&mut self, s: &str) -> Result<String, DumpError> {
        self.0 = self.0.checked_sub(s.len()).ok_or(DumpError::TooManyNames)?;
        Ok(s.to_owned())
    }
}

fn run_block(run: RunDataRef<'_>, names: &mut NameBudget) -> Result<RunBlock, DumpError> {
    let name = names.take(run.name().map_err(fb("a run block name"))?.unwrap_or(""))?;
    let mut events = Vec::new();
    let mut other_events = 0;
    let mut outputs = Vec::new();
    if let Some(list) = run.events().map_err(fb("events"))? {
        for event in list.iter() {
            let event = event.map_err(fb("an event"))?;
            if let Some(p) = event.profile_event().map_err(fb("a profile event"))? {
                events.push(profile_event(p, names)?);
                continue;
            }
            match event.debug_event().map_err(fb("a debug event"))? {
                Some(d) => match output_event(d)? {
                    Some(o) => outputs.push(o),
                    None => other_events += 1,
                },
                None => other_events += 1,
            }
        }
    }
    Ok(RunBlock { name, events, other_events, outputs })
}

fn output_event(d: DebugEventRef<'_>) -> Result<Option<OutputEvent>, DumpError> {
    let Some(value) = d.debug_entry().map_err(fb("a debug entry"))? else { return Ok(None) };
    let Some(tensor) = value.tensor().map_err(fb("a debug tensor"))? else { return Ok(None) };
    let sizes = match tensor.sizes().map_err(fb("debug tensor sizes"))? {
        Some(list) => list.iter().collect(),
        None => Vec::new(),
    };
    let in_delegate = d.delegate_debug_id_int().map_err(fb("a delegate debug id"))? != -1
        || d.delegate_debug_id_str().map_err(fb("a delegate debug id"))?.is_some();
    Ok(Some(OutputEvent {
        chain: d.chain_index().map_err(fb("a chain index"))?,
        instruction: d.instruction_id().map_err(fb("an instruction id"))?,
        in_delegate,
        scalar_type: tensor.scalar_type().map_err(fb("a scalar type"))? as i8,
        sizes,
        offset: tensor.offset().map_err(fb("a debug tensor offset"))?,
    }))
}

fn profile_event(p: ProfileEventRef<'_>, names: &mut NameBudget) -> Result<ProfileEvent, DumpError> {
    let name = names.take(p.name().map_err(fb("an event name"))?.unwrap_or(""))?;
    let id_int = p.delegate_debug_id_int().map_err(fb("a delegate debug id"))?;
    let id_str = p.delegate_debug_id_str().map_err(fb("a delegate debug id"))?;
    let delegate_id = match (id_str, id_int) {
        (Some(s), _) => Some(DelegateEventId::Name(names.take(s)?)),
        (None, i) if i != -1 => Some(DelegateEventId::Int(i)),
        (None, _) => None,
    };
    Ok(ProfileEvent {
        name,
        chain: p.chain_index().map_err(fb("a chain index"))?,
        instruction: p.instruction_id().map_err(fb("an instruction id"))?,
        delegate_id,
        start: p.start_time().map_err(fb("a start time"))?,
        end: p.end_time().map_err(fb("an end time"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_empty_and_foreign_bytes_are_errors() {
        assert!(matches!(decode(&[]), Err(DumpError::TooShort(0))));
        assert!(matches!(decode(&[8, 0, 0]), Err(DumpError::TooShort(3))));
        assert!(matches!(decode(&[200, 0, 0, 0, 1, 2]), Err(DumpError::BadSize { said: 200, have: 2 })));
        let foreign = [12, 0, 0, 0, 8, 0, 0, 0, b'E', b'T', b'1', b'2', 0, 0, 0, 0];
        assert!(matches!(decode(&foreign), Err(DumpError::NotAnEtDump(id)) if id == "ET12"));
        // The right identifier, but the root offset points past the end.
        let bad_root = [8, 0, 0, 0, 0xff, 0, 0, 0, b'E', b'D', b'0', b'0'];
        assert!(matches!(decode(&bad_root), Err(DumpError::Flatbuffer { .. })));
    }
}
