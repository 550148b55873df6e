//! What a program will hold in memory, read from its headers and program
//! flatbuffer alone: the segments' data (weights, often gigabytes) is never
//! read, only its sizes, so asking costs milliseconds and no memory
//! (`crate::memory` estimates a column from it before anything loads).

use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use planus::ReadAsRoot;

use super::generated::program::executorch_flatbuffer::{DataLocation, EValueRef, ExecutionPlanRef, KernelTypesRef, ProgramRef};
use super::header::{layout_of, Layout};
use super::limits::Limits;
use super::xnnpack::{XnnHeader, XNNPACK_BACKEND_ID};
use super::PteError;

/// The bytes of a program by what the runtime does with them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramSizes {
    pub file_bytes: u64,
    /// Constant tensors the kernels read where they lie (inline buffers, the
    /// constant segment): resident, as pages of the mapped file, once a run has read them.
    pub constants_in_place: u64,
    /// Weights a delegate takes at load (named data, and constant data inside
    /// XNNPACK blobs): XNNPACK packs them into buffers of its own.
    pub delegate_weights: u64,
    /// The rest of the delegate blobs (XNNPACK's graphs), read at load.
    pub delegate_graphs: u64,
    /// Every method's planned memory (`non_const_buffer_sizes`; each method
    /// loaded has its own): every intermediate tensor, and a KV-cache program's cache.
    pub planned: u64,
    /// `forward`'s inputs the program reads from the caller's memory, not
    /// planned, at their largest: a KV cache given as inputs, which the caller holds.
    pub caller_inputs: u64,
    /// Initial values of the program's mutable state (mutable-data segments),
    /// copied into the planned memory at load.
    pub mutable_data: u64,
}

fn fb(what: &'static str) -> impl Fn(planus::Error) -> PteError {
    move |source| PteError::Flatbuffer { what: what.to_owned(), source }
}

/// Read the sizes of the program at `path` (its header and flatbuffer only).
pub fn read_sizes(path: &Path) -> Result<ProgramSizes, PteError> {
    let Opened { mut file, layout, program, len } = open(path)?;
    let root = ProgramRef::read_as_root(program.as_slice()).map_err(fb("the program root"))?;
    let mut limits = Limits::for_file(program.len());
    let mut sizes = ProgramSizes { file_bytes: len, ..ProgramSizes::default() };

    // Each segment's (file offset, length), checked to lie inside the file.
    let mut segments = Vec::new();
    if let Some(list) = root.segments().map_err(fb("segments"))? {
        limits.visit(list.len())?;
        for seg in list.iter() {
            let seg = seg.map_err(fb("a segment"))?;
            let (offset, size) = (seg.offset().map_err(fb("a segment offset"))?, seg.size().map_err(fb("a segment size"))?);
            let start = (layout.segment_base as u64).checked_add(offset).filter(|s| s.checked_add(size).is_some_and(|end| end <= len));
            let start = start.ok_or_else(|| PteError::Inconsistent(format!("segment {} lies outside the file ({len} bytes)", segments.len())))?;
            segments.push((start, size));
        }
    }
    let (mut counted, mut inline_counted) = (BTreeSet::new(), BTreeSet::new());
    let mut segment = |index: u32, user: &str| -> Result<Option<(u64, u64)>, PteError> {
        let seg = segments.get(index as usize).copied().ok_or_else(|| {
            PteError::Inconsistent(format!("{user} refers to segment {index}, but the program has {}", segments.len()))
        })?;
        Ok(counted.insert(index).then_some(seg))
    };

    if let Some(plan) = forward(&root)? {
        sizes.caller_inputs = caller_input_bytes(&plan)?;
    }
    let plans = root.execution_plan().map_err(fb("execution_plan"))?;
    limits.visit(plans.map_or(0, |p| p.len()))?;
    for plan in plans.into_iter().flat_map(|p| p.iter()) {
        let plan = plan.map_err(fb("an execution plan"))?;
        let planned = plan
            .non_const_buffer_sizes()
            .map_err(fb("non_const_buffer_sizes"))?
            .map_or(0, |v| v.iter().map(|n| n.max(0) as u64).fold(0, u64::saturating_add));
        sizes.planned = sizes.planned.saturating_add(planned);
        let delegates = plan.delegates().map_err(fb("plan delegates"))?;
        limits.visit(delegates.map_or(0, |d| d.len()))?;
        for delegate in delegates.into_iter().flat_map(|d| d.iter()) {
            let delegate = delegate.map_err(fb("a delegate"))?;
            let id = delegate.id().map_err(fb("a delegate id"))?.unwrap_or_default();
            let Some(data) = delegate.processed().map_err(fb("a delegate data reference"))? else { continue };
            let index = data.index().map_err(fb("a delegate data index"))?;
            let blob: Option<(u64, Vec<u8>)> = match data.location().map_err(fb("a delegate data location"))? {
                DataLocation::Segment => match segment(index, "a delegate")? {
                    Some((start, size)) => {
                        let mut head = Vec::new();
                        file.seek(SeekFrom::Start(start))?;
                        (&mut file).take(size.min(64)).read_to_end(&mut head)?;
                        Some((size, head))
                    }
                    None => None,
                },
                DataLocation::Inline => {
                    let list = root.backend_delegate_data().map_err(fb("backend_delegate_data"))?;
                    let entry = list.and_then(|v| v.get(index as usize)).ok_or_else(|| {
                        PteError::Inconsistent(format!("a delegate refers to inline data {index}, which the program lacks"))
                    })?;
                    let bytes = entry.map_err(fb("inline delegate data"))?.data().map_err(fb("inline delegate data"))?.unwrap_or(&[]);
                    // Inline data is part of the flatbuffer, counted as the file's; counted here once per entry.
                    inline_counted.insert(index).then(|| (bytes.len() as u64, bytes[..bytes.len().min(64)].to_vec()))
                }
            };
            let Some((size, head)) = blob else { continue };
            let inside = match id {
                XNNPACK_BACKEND_ID => XnnHeader::parse(&head).ok().flatten().map_or(0, |h| h.constant_data_size.min(size)),
                _ => 0,
            };
            sizes.delegate_weights += inside;
            sizes.delegate_graphs += size - inside;
        }
    }
    if let Some(buffers) = root.constant_buffer().map_err(fb("constant_buffer"))? {
        limits.visit(buffers.len())?;
        for b in buffers.iter() {
            let storage = b.map_err(fb("a constant buffer"))?.storage().map_err(fb("a constant buffer"))?;
            sizes.constants_in_place += storage.map_or(0, <[u8]>::len) as u64;
        }
    }
    if let Some(cs) = root.constant_segment().map_err(fb("constant_segment"))? {
        if cs.offsets().map_err(fb("constant_segment offsets"))?.is_some_and(|o| !o.is_empty()) {
            if let Some((_, size)) = segment(cs.segment_index().map_err(fb("constant_segment"))?, "the constant segment")? {
                sizes.constants_in_place += size;
            }
        }
    }
    let mutable = root.mutable_data_segments().map_err(fb("mutable_data_segments"))?;
    limits.visit(mutable.map_or(0, |m| m.len()))?;
    for m in mutable.into_iter().flat_map(|m| m.iter()) {
        let m = m.map_err(fb("a mutable data segment"))?;
        if m.offsets().map_err(fb("mutable data offsets"))?.is_some_and(|o| !o.is_empty()) {
            if let Some((_, size)) = segment(m.segment_index().map_err(fb("a mutable data segment"))?, "mutable data")? {
                sizes.mutable_data += size;
            }
        }
    }
    let named = root.named_data().map_err(fb("named_data"))?;
    limits.visit(named.map_or(0, |n| n.len()))?;
    for nd in named.into_iter().flat_map(|n| n.iter()) {
        let index = nd.map_err(fb("a named data entry"))?.segment_index().map_err(fb("a named data entry"))?;
        if let Some((_, size)) = segment(index, "named data")? {
            sizes.delegate_weights += size;
        }
    }
    Ok(sizes)
}

/// The bytes of `plan`'s tensor inputs that are neither planned nor constant (the
/// caller's memory, read in place), at their upper-bound sizes.
fn caller_input_bytes(plan: &ExecutionPlanRef<'_>) -> Result<u64, PteError> {
    let (Some(inputs), Some(values)) = (plan.inputs().map_err(fb("plan inputs"))?, plan.values().map_err(fb("plan values"))?) else {
        return Ok(0);
    };
    let mut bytes = 0u64;
    for index in inputs.iter() {
        let Some(value) = values.get(usize::try_from(index).unwrap_or(usize::MAX)) else { continue };
        let Some(KernelTypesRef::Tensor(t)) = EValueRef::val(&value.map_err(fb("an input value"))?).map_err(fb("an input value"))? else { continue };
        if t.allocation_info().map_err(fb("an input's allocation"))?.is_some() || t.data_buffer_idx().map_err(fb("an input's data"))? > 0 {
            continue;
        }
        let elements = t.sizes().map_err(fb("an input's sizes"))?.map_or(0, |s| s.iter().map(|d| d.max(0) as u64).product::<u64>());
        let element = super::instructions::element_bytes(t.scalar_type().map_err(fb("an input's dtype"))? as i8);
        bytes = bytes.saturating_add(elements.saturating_mul(element));
    }
    Ok(bytes)
}

/// The ids of the delegates `forward` calls (`XnnpackBackend`, ...), read from
/// the header and program flatbuffer alone; empty for a program without one.
pub fn read_delegate_ids(path: &Path) -> Result<BTreeSet<String>, PteError> {
    let Opened { program, .. } = open(path)?;
    let root = ProgramRef::read_as_root(program.as_slice()).map_err(fb("the program root"))?;
    let mut limits = Limits::for_file(program.len());
    let mut ids = BTreeSet::new();
    if let Some(plan) = forward(&root)? {
        let delegates = plan.delegates().map_err(fb("plan delegates"))?;
        limits.visit(delegates.map_or(0, |d| d.len()))?;
        for delegate in delegates.into_iter().flat_map(|d| d.iter()) {
            let delegate = delegate.map_err(fb("a delegate"))?;
            ids.insert(delegate.id().map_err(fb("a delegate id"))?.unwrap_or_default().to_owned());
        }
    }
    Ok(ids)
}

/// A program file opened: its header's layout and the program flatbuffer at
/// its head (the segments, the weights, are not read).
struct Opened {
    file: std::fs::File,
    layout: Layout,
    program: Vec<u8>,
    len: u64,
}

fn open(path: &Path) -> Result<Opened, PteError> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut head = Vec::new();
    (&mut file).take(64).read_to_end(&mut head)?;
    let layout = layout_of(&head, len)?;
    let mut program = vec![0u8; layout.program_len];
    file.seek(SeekFrom::Start(0))?;
    file.read_exact(&mut program)?;
    Ok(Opened { file, layout, program, len })
}

/// The plan runlens runs: `forward`, else the first.
fn forward<'a>(root: &ProgramRef<'a>) -> Result<Option<ExecutionPlanRef<'a>>, PteError> {
    let Some(plans) = root.execution_plan().map_err(fb("execution_plan"))? else { return Ok(None) };
    let mut first = None;
    for plan in plans.iter() {
        let plan = plan.map_err(fb("an execution plan"))?;
        if plan.name().map_err(fb("a plan name"))? == Some("forward") {
            return Ok(Some(plan));
        }
        first.get_or_insert(plan);
    }
    Ok(first)
}
