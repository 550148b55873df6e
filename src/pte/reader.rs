//! Walks the program flatbuffer and builds the [`CoverageReport`].

use std::collections::{BTreeMap, HashMap};

use planus::ReadAsRoot;

use super::coverage::{
    coverage_of, BlobContents, BlobLocation, CoverageReport, DelegateBlob, InputShape, PlanCoverage,
};
use super::generated::program::executorch_flatbuffer::{
    DataLocation, ExecutionPlanRef, InstructionArgumentsRef, KernelTypesRef, ProgramRef,
    TensorShapeDynamism,
};
use super::header::{read_layout, Layout};
use super::limits::Limits;
use super::partition::PartitionMap;
use super::xnnpack::{self, XnnGraphSummary, XNNPACK_BACKEND_ID};
use super::PteError;

/// Turns a planus error into a [`PteError`] naming what was being read.
fn fb(what: &'static str) -> impl Fn(planus::Error) -> PteError {
    move |source| PteError::Flatbuffer {
        what: what.to_owned(),
        source,
    }
}

fn len_u64(n: usize) -> u64 {
    n as u64
}

/// A checked segment: `bytes[start..start + len]` of the file.
#[derive(Clone, Copy)]
struct Segment {
    start: usize,
    len: usize,
}

/// What a segment holds, for the size split.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Unused,
    Constant,
    Delegate,
}

struct Reader<'a> {
    bytes: &'a [u8],
    program: ProgramRef<'a>,
    segments: Vec<Segment>,
    roles: Vec<Role>,
    /// Inline delegate data entries already counted.
    inline_seen: Vec<bool>,
    delegate_blob_bytes: u64,
    inline_delegate_bytes: u64,
    /// XNNPACK blobs decoded so far, by byte range of the file.
    decoded: HashMap<(usize, usize), Result<XnnGraphSummary, String>>,
    limits: Limits,
}

pub(crate) fn read_report(file: &str, bytes: &[u8]) -> Result<CoverageReport, PteError> {
    let layout = read_layout(bytes)?;
    let program_data = bytes.get(..layout.program_len).unwrap_or(bytes);
    let program = ProgramRef::read_as_root(program_data).map_err(fb("the program root"))?;
    let mut limits = Limits::for_file(bytes.len());
    let segments = read_segments(&program, bytes, layout, &mut limits)?;
    let inline_len = match program
        .backend_delegate_data()
        .map_err(fb("backend_delegate_data"))?
    {
        Some(v) => v.len(),
        None => 0,
    };
    let mut reader = Reader {
        bytes,
        program,
        roles: vec![Role::Unused; segments.len()],
        segments,
        inline_seen: vec![false; inline_len],
        delegate_blob_bytes: 0,
        inline_delegate_bytes: 0,
        decoded: HashMap::new(),
        limits,
    };

    let mut plans = Vec::new();
    if let Some(list) = program.execution_plan().map_err(fb("execution_plan"))? {
        reader.limits.visit(list.len())?;
        for plan in list.iter() {
            plans.push(reader.plan(plan.map_err(fb("an execution plan"))?)?);
        }
    }
    let (constant_bytes, inline_constant_bytes, mutable_data_bytes) = reader.constants()?;
    // The strip of each plan, from the same instructions in execution order.
    let table = super::instructions::read_instructions(bytes)?;
    for (plan, instructions) in plans.iter_mut().zip(&table.plans) {
        plan.partition = PartitionMap::of(instructions);
    }
    Ok(CoverageReport {
        file: file.to_owned(),
        size_bytes: len_u64(bytes.len()),
        program_bytes: len_u64(layout.program_len),
        segment_count: len_u64(reader.segments.len()),
        constant_bytes,
        delegate_blob_bytes: reader.delegate_blob_bytes,
        plans,
        inline_constant_bytes,
        inline_delegate_bytes: reader.inline_delegate_bytes,
        mutable_data_bytes,
    })
}

/// Reads `Program.segments` and checks each lies inside the file.
fn read_segments(
    program: &ProgramRef<'_>,
    bytes: &[u8],
    layout: Layout,
    limits: &mut Limits,
) -> Result<Vec<Segment>, PteError> {
    let Some(list) = program.segments().map_err(fb("segments"))? else {
        return Ok(Vec::new());
    };
    if list.is_empty() {
        return Ok(Vec::new());
    }
    if layout.segment_base == 0 {
        return Err(PteError::Inconsistent(format!(
            "the program lists {} segments but the file has no segment base offset (no eh00 header)",
            list.len()
        )));
    }
    limits.visit(list.len())?;
    let mut out = Vec::with_capacity(list.len());
    for (i, seg) in list.iter().enumerate() {
        let seg = seg.map_err(fb("a segment"))?;
        let offset = seg.offset().map_err(fb("a segment offset"))?;
        let size = seg.size().map_err(fb("a segment size"))?;
        let start = (layout.segment_base as u64).checked_add(offset);
        let end = start.and_then(|s| s.checked_add(size));
        match (start, end) {
            (Some(start), Some(end)) if end <= len_u64(bytes.len()) => out.push(Segment {
                start: start as usize,
                len: size as usize,
            }),
            _ => {
                return Err(PteError::Inconsistent(format!(
                    "segment {i} ({size} bytes at offset {offset} after the segment base {}) \
                     runs past the end of the file ({} bytes); is it truncated?",
                    layout.segment_base,
                    bytes.len()
                )))
            }
        }
    }
    Ok(out)
}

fn to_index(i: i32) -> Option<usize> {
    usize::try_from(i).ok()
}

impl<'a> Reader<'a> {
    fn segment(&self, index: u32, user: &str) -> Result<Segment, PteError> {
        self.segments.get(index as usize).copied().ok_or_else(|| {
            PteError::Inconsistent(format!(
                "{user} refers to segment {index}, but the program has {} segments",
                self.segments.len()
            ))
        })
    }

    fn segment_bytes(&self, seg: Segment) -> &'a [u8] {
        // read_segments checked the range against the file.
        self.bytes
            .get(seg.start..seg.start + seg.len)
            .unwrap_or(&[])
    }

    fn plan(&mut self, plan: ExecutionPlanRef<'a>) -> Result<PlanCoverage, PteError> {
        let name = plan.name().map_err(fb("a plan name"))?.unwrap_or("");
        let name = self.limits.name(&[name])?;
        let inputs = plan
            .inputs()
            .map_err(fb("plan inputs"))?
            .map_or(0, |v| v.len());
        let outputs = plan
            .outputs()
            .map_err(fb("plan outputs"))?
            .map_or(0, |v| v.len());
        let operators = plan.operators().map_err(fb("plan operators"))?;
        let delegates = plan.delegates().map_err(fb("plan delegates"))?;
        let op_count = operators.map_or(0, |v| v.len());
        let delegate_count = delegates.map_or(0, |v| v.len());

        // Count by index first; names are resolved once per used index.
        let mut op_calls = vec![0u64; op_count];
        let mut delegate_calls_by_index = vec![0u64; delegate_count];
        let (mut instructions, mut kernel_calls, mut delegate_calls) = (0u64, 0u64, 0u64);
        if let Some(chains) = plan.chains().map_err(fb("plan chains"))? {
            self.limits.visit(chains.len())?;
            for chain in chains.iter() {
                let chain = chain.map_err(fb("a chain"))?;
                let Some(list) = chain.instructions().map_err(fb("chain instructions"))? else {
                    continue;
                };
                self.limits.visit(list.len())?;
                for (i, instr) in list.iter().enumerate() {
                    let instr = instr.map_err(fb("an instruction"))?;
                    instructions += 1;
                    match instr.instr_args().map_err(fb("instruction arguments"))? {
                        Some(InstructionArgumentsRef::KernelCall(call)) => {
                            let op = call.op_index().map_err(fb("a kernel call"))?;
                            let slot = to_index(op).and_then(|k| op_calls.get_mut(k)).ok_or_else(
                                || {
                                    PteError::Inconsistent(format!(
                                        "method {name:?}: instruction {i} calls operator {op}, \
                                     but the method has {op_count} operators"
                                    ))
                                },
                            )?;
                            *slot += 1;
                            kernel_calls += 1;
                        }
                        Some(InstructionArgumentsRef::DelegateCall(call)) => {
                            let d = call.delegate_index().map_err(fb("a delegate call"))?;
                            let slot = to_index(d)
                                .and_then(|k| delegate_calls_by_index.get_mut(k))
                                .ok_or_else(|| {
                                    PteError::Inconsistent(format!(
                                        "method {name:?}: instruction {i} calls delegate {d}, \
                                         but the method has {delegate_count} delegates"
                                    ))
                                })?;
                            *slot += 1;
                            delegate_calls += 1;
                        }
                        Some(_) | None => {}
                    }
                }
            }
        }

        let mut operator_map = BTreeMap::new();
        if let Some(ops) = operators {
            self.limits.visit(ops.len())?;
            for (k, op) in ops.iter().enumerate() {
                let n = op_calls[k];
                if n == 0 {
                    continue;
                }
                let op = op.map_err(fb("an operator"))?;
                let op_name = op.name().map_err(fb("an operator name"))?.unwrap_or("");
                let overload = op
                    .overload()
                    .map_err(fb("an operator overload"))?
                    .unwrap_or("");
                if overload.is_empty() {
                    self.limits.count(&mut operator_map, &[op_name], n)?;
                } else {
                    self.limits
                        .count(&mut operator_map, &[op_name, ".", overload], n)?;
                }
            }
        }

        let mut delegate_map = BTreeMap::new();
        let mut xnnpack_nodes = BTreeMap::new();
        let mut blobs = Vec::new();
        if let Some(list) = delegates {
            self.limits.visit(list.len())?;
            for (k, delegate) in list.iter().enumerate() {
                let delegate = delegate.map_err(fb("a delegate"))?;
                let id = delegate.id().map_err(fb("a delegate id"))?.unwrap_or("");
                let n = delegate_calls_by_index[k];
                if n > 0 {
                    self.limits.count(&mut delegate_map, &[id], n)?;
                }
                let blob = self.delegate_blob(&name, k, id, &delegate)?;
                if let Some(summary) = &blob.1 {
                    self.limits.visit(summary.nodes.len())?;
                    for (node, count) in &summary.nodes {
                        self.limits.count(&mut xnnpack_nodes, &[node], *count)?;
                    }
                }
                blobs.push(blob.0);
            }
        }

        let total_nodes: u64 = xnnpack_nodes.values().sum();
        Ok(PlanCoverage {
            name,
            inputs: len_u64(inputs),
            outputs: len_u64(outputs),
            instructions,
            kernel_calls,
            delegate_calls,
            operators: operator_map,
            delegates: delegate_map,
            xnnpack_nodes,
            coverage: coverage_of(total_nodes, kernel_calls),
            input_shapes: self.tensor_shapes(&plan, false)?,
            output_shapes: self.tensor_shapes(&plan, true)?,
            blobs,
            partition: PartitionMap::default(),
        })
    }

    /// The shape and element type of each tensor input (or output) of a plan.
    /// A value that is not a tensor is left out: the shapes only describe, the
    /// counts are what the report is for.
    fn tensor_shapes(&mut self, plan: &ExecutionPlanRef<'a>, outputs: bool) -> Result<Vec<InputShape>, PteError> {
        let which = if outputs { plan.outputs().map_err(fb("plan outputs"))? } else { plan.inputs().map_err(fb("plan inputs"))? };
        let (Some(indices), Some(values)) = (which, plan.values().map_err(fb("plan values"))?) else {
            return Ok(Vec::new());
        };
        self.limits.visit(indices.len())?;
        let mut shapes = Vec::new();
        for index in indices.iter() {
            let Some(value) = to_index(index).and_then(|k| values.get(k)) else { continue };
            let value = value.map_err(fb("an input or output value"))?;
            if let Some(KernelTypesRef::Tensor(tensor)) = value.val().map_err(fb("an input or output value"))? {
                let sizes = tensor.sizes().map_err(fb("tensor sizes"))?;
                let sizes: Vec<i64> = sizes.map_or_else(Vec::new, |v| v.iter().map(i64::from).collect());
                let dynamic = tensor.shape_dynamism().map_err(fb("tensor shape dynamism"))? != TensorShapeDynamism::Static;
                let dtype = format!("{:?}", tensor.scalar_type().map_err(fb("tensor scalar type"))?).to_lowercase();
                shapes.push(InputShape { sizes, dynamic, dtype });
            }
        }
        Ok(shapes)
    }

    /// Finds a delegate's data, counts its size once, and decodes it when it is XNNPACK's.
    fn delegate_blob(
        &mut self,
        plan: &str,
        k: usize,
        id: &str,
        delegate: &super::generated::program::executorch_flatbuffer::BackendDelegateRef<'a>,
    ) -> Result<(DelegateBlob, Option<XnnGraphSummary>), PteError> {
        let backend = self.limits.name(&[id])?;
        let missing = || {
            PteError::Inconsistent(format!(
                "method {plan:?}: delegate {k} ({id}) has no data reference"
            ))
        };
        let processed = delegate
            .processed()
            .map_err(fb("a delegate data reference"))?
            .ok_or_else(missing)?;
        let index = processed.index().map_err(fb("a delegate data index"))?;
        let location = processed
            .location()
            .map_err(fb("a delegate data location"))?;
        let (location, data, range) = match location {
            DataLocation::Inline => {
                let list = self
                    .program
                    .backend_delegate_data()
                    .map_err(fb("backend_delegate_data"))?;
                let entry = list.and_then(|v| v.get(index as usize)).ok_or_else(|| {
                    PteError::Inconsistent(format!(
                        "method {plan:?}: delegate {k} ({id}) refers to inline data {index}, but the program has {}",
                        self.inline_seen.len()
                    ))
                })?;
                let data = entry
                    .map_err(fb("inline delegate data"))?
                    .data()
                    .map_err(fb("inline delegate data"))?;
                let data = data.unwrap_or(&[]);
                if let Some(seen) = self.inline_seen.get_mut(index as usize) {
                    if !*seen {
                        *seen = true;
                        self.delegate_blob_bytes += len_u64(data.len());
                        self.inline_delegate_bytes += len_u64(data.len());
                    }
                }
                // Inline data lies inside `bytes`; its offset keys the decode cache.
                let start = (data.as_ptr() as usize).wrapping_sub(self.bytes.as_ptr() as usize);
                (BlobLocation::Inline, data, (start, data.len()))
            }
            DataLocation::Segment => {
                let seg = self.segment(index, &format!("method {plan:?}: delegate {k} ({id})"))?;
                if self.roles[index as usize] != Role::Delegate {
                    self.roles[index as usize] = Role::Delegate;
                    self.delegate_blob_bytes += len_u64(seg.len);
                }
                (
                    BlobLocation::Segment,
                    self.segment_bytes(seg),
                    (seg.start, seg.len),
                )
            }
        };
        let summary = if id == XNNPACK_BACKEND_ID {
            let decoded = match self.decoded.get(&range) {
                Some(done) => done.clone(),
                None => {
                    let done = xnnpack::summarize(data);
                    if let Ok(s) = &done {
                        // Charge the nodes decoded against the work bound.
                        self.limits.visit(s.nodes.values().sum::<u64>() as usize)?;
                    }
                    self.decoded.insert(range, done.clone());
                    done
                }
            };
            Some(decoded)
        } else {
            None
        };
        let xnodes = match &summary {
            Some(Ok(s)) => s.order.clone(),
            _ => Vec::new(),
        };
        let (contents, summary) = match summary {
            Some(Ok(s)) => (
                BlobContents::Xnnpack {
                    nodes: s.nodes.values().sum(),
                    constant_bytes: s.constant_bytes,
                },
                Some(s),
            ),
            Some(Err(reason)) => (BlobContents::Opaque { reason }, None),
            None => (
                BlobContents::Opaque {
                    reason: format!("runlens does not decode {id:?} blobs"),
                },
                None,
            ),
        };
        Ok((
            DelegateBlob {
                backend,
                location,
                bytes: len_u64(data.len()),
                contents,
                xnodes,
            },
            summary,
        ))
    }

    /// Constant tensor data: (all of it, the part inside the flatbuffer, the
    /// part in mutable-data segments).
    fn constants(&mut self) -> Result<(u64, u64, u64), PteError> {
        let mut inline = 0u64;
        if let Some(buffers) = self
            .program
            .constant_buffer()
            .map_err(fb("constant_buffer"))?
        {
            self.limits.visit(buffers.len())?;
            for b in buffers.iter() {
                let storage = b
                    .map_err(fb("a constant buffer"))?
                    .storage()
                    .map_err(fb("a constant buffer"))?;
                inline += len_u64(storage.map_or(0, <[u8]>::len));
            }
        }
        let mut segment_users: Vec<(u32, &str)> = Vec::new();
        if let Some(cs) = self
            .program
            .constant_segment()
            .map_err(fb("constant_segment"))?
        {
            let has_offsets = cs
                .offsets()
                .map_err(fb("constant_segment offsets"))?
                .is_some_and(|o| !o.is_empty());
            if has_offsets {
                segment_users.push((
                    cs.segment_index().map_err(fb("constant_segment"))?,
                    "the constant segment",
                ));
            }
        }
        if let Some(list) = self
            .program
            .mutable_data_segments()
            .map_err(fb("mutable_data_segments"))?
        {
            self.limits.visit(list.len())?;
            for m in list.iter() {
                let m = m.map_err(fb("a mutable data segment"))?;
                let has_offsets = m
                    .offsets()
                    .map_err(fb("mutable data offsets"))?
                    .is_some_and(|o| !o.is_empty());
                if has_offsets {
                    segment_users.push((
                        m.segment_index().map_err(fb("a mutable data segment"))?,
                        "mutable data",
                    ));
                }
            }
        }
        if let Some(list) = self.program.named_data().map_err(fb("named_data"))? {
            self.limits.visit(list.len())?;
            for nd in list.iter() {
                let nd = nd.map_err(fb("a named data entry"))?;
                segment_users.push((
                    nd.segment_index().map_err(fb("a named data entry"))?,
                    "named data",
                ));
            }
        }
        let (mut in_segments, mut mutable) = (0u64, 0u64);
        for (index, user) in segment_users {
            let seg = self.segment(index, user)?;
            if self.roles[index as usize] == Role::Unused {
                self.roles[index as usize] = Role::Constant;
                in_segments += len_u64(seg.len);
                if user == "mutable data" {
                    mutable += len_u64(seg.len);
                }
            }
        }
        Ok((inline + in_segments, inline, mutable))
    }
}
