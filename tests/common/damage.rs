//! A program damaged where ExecuTorch aborts instead of failing: a kernel call's
//! argument that should be an Int made to point at a Tensor value. The file
//! stays a well-formed flatbuffer that runlens' reader and ExecuTorch's
//! `InternalConsistency` verification accept; the kernel's `toInt()` then fails
//! an `ET_CHECK` ("EValue is not an int") and the runtime aborts. Found through
//! the program's own tables, so it does not depend on byte offsets of one export.

use planus::ReadAsRoot;
use runlens::pte::generated::program::executorch_flatbuffer::{InstructionArgumentsRef, KernelTypesRef, ProgramRef};

/// What [`int_argument_to_tensor`] changed.
#[derive(Debug, Clone)]
pub struct Redirected {
    /// The instruction (chain 0 of `forward`) and its operator.
    pub instruction: usize,
    pub operator: String,
    /// The argument's position in the call, its value index before and after.
    pub argument: usize,
    pub from_value: i32,
    pub to_value: i32,
    /// The byte offset of the changed i32 in the file.
    pub offset: usize,
}

/// One argument of a kernel call in chain 0 of `forward`, where it is stored.
#[derive(Debug, Clone)]
pub struct ArgumentSite {
    pub instruction: usize,
    pub operator: String,
    /// Position in the call and the value index it holds.
    pub argument: usize,
    pub value: i32,
    /// The call's first Tensor argument, if any.
    pub first_tensor: Option<i32>,
    /// Whether the value it points at is an Int.
    pub is_int: bool,
    /// The byte offset of the i32 in the file.
    pub offset: usize,
}

/// Every kernel-call argument of `forward` (chain 0) whose args vector occurs
/// once in the flatbuffer (so its offset, and so its instruction, is certain).
pub fn kernel_arguments(bytes: &[u8]) -> Vec<ArgumentSite> {
    let program_len = if bytes.len() >= 24 && &bytes[8..12] == b"eh00" {
        u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize
    } else {
        bytes.len()
    };
    let program_len = program_len.min(bytes.len());
    let calls = read_calls(&bytes[..program_len]).unwrap_or_default();
    let mut sites = Vec::new();
    for (instruction, operator, args, kinds) in calls {
        // The args vector as stored: u32 length, then the i32s.
        let mut pattern = (args.len() as u32).to_le_bytes().to_vec();
        for a in &args {
            pattern.extend_from_slice(&a.to_le_bytes());
        }
        let mut matches = bytes[..program_len].windows(pattern.len()).enumerate().filter(|(_, w)| *w == pattern.as_slice()).map(|(at, _)| at);
        let (Some(at), None) = (matches.next(), matches.next()) else { continue };
        let first_tensor = args.iter().zip(&kinds).find(|(_, k)| **k == Kind::Tensor).map(|(a, _)| *a);
        for (argument, (&value, kind)) in args.iter().zip(&kinds).enumerate() {
            sites.push(ArgumentSite {
                instruction,
                operator: operator.clone(),
                argument,
                value,
                first_tensor,
                is_int: *kind == Kind::Int,
                offset: at + 4 + 4 * argument,
            });
        }
    }
    sites
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Tensor,
    Other,
}

type Call = (usize, String, Vec<i32>, Vec<Kind>);

fn read_calls(program: &[u8]) -> Option<Vec<Call>> {
    let program = ProgramRef::read_as_root(program).ok()?;
    let plans = program.execution_plan().ok()??;
    let plan = plans.iter().filter_map(Result::ok).find(|p| p.name().ok().flatten() == Some("forward"))?;
    let values = plan.values().ok()??;
    let kind = |index: i32| match values.get(usize::try_from(index).ok()?)?.ok()?.val().ok()? {
        Some(KernelTypesRef::Int(_)) => Some(Kind::Int),
        Some(KernelTypesRef::Tensor(_)) => Some(Kind::Tensor),
        _ => Some(Kind::Other),
    };
    let operators = plan.operators().ok()??;
    let chain = plan.chains().ok()??.get(0)?.ok()?;
    let mut calls = Vec::new();
    for (i, instr) in chain.instructions().ok()??.iter().enumerate() {
        let Ok(Some(InstructionArgumentsRef::KernelCall(call))) = instr.ok()?.instr_args() else { continue };
        let args: Vec<i32> = call.args().ok()??.iter().collect();
        let kinds: Vec<Kind> = args.iter().map(|&a| kind(a).unwrap_or(Kind::Other)).collect();
        let op = operators.get(call.op_index().ok()? as usize)?.ok()?;
        let overload = op.overload().ok()?.unwrap_or("");
        let name = op.name().ok()??;
        let operator = if overload.is_empty() { name.to_string() } else { format!("{name}.{overload}") };
        calls.push((i, operator, args, kinds));
    }
    Some(calls)
}

/// Rewrite, in place, the first Int argument of a kernel call in `forward`
/// (chain 0) to the call's first Tensor argument. `skip` such calls are
/// passed over first (to pick another instruction).
pub fn int_argument_to_tensor(bytes: &mut [u8], skip: usize) -> Option<Redirected> {
    let mut seen = std::collections::BTreeSet::new();
    let site = kernel_arguments(bytes)
        .into_iter()
        .filter(|s| s.is_int && s.first_tensor.is_some() && seen.insert(s.instruction))
        .nth(skip)?;
    let to_value = site.first_tensor?;
    bytes[site.offset..site.offset + 4].copy_from_slice(&to_value.to_le_bytes());
    Some(Redirected {
        instruction: site.instruction,
        operator: site.operator,
        argument: site.argument,
        from_value: site.value,
        to_value,
        offset: site.offset,
    })
}
