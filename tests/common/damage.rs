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

/// Rewrite, in place, the first Int argument of a kernel call in `forward`
/// (chain 0) to the call's first Tensor argument. `skip` kernel calls with an
/// Int argument are passed over first (to pick another instruction).
pub fn int_argument_to_tensor(bytes: &mut [u8], skip: usize) -> Option<Redirected> {
    let program_len = if bytes.len() >= 24 && &bytes[8..12] == b"eh00" {
        u64::from_le_bytes(bytes[16..24].try_into().ok()?) as usize
    } else {
        bytes.len()
    };
    let program_len = program_len.min(bytes.len());
    let candidates = {
        let program = ProgramRef::read_as_root(&bytes[..program_len]).ok()?;
        let plans = program.execution_plan().ok()??;
        let plan = plans.iter().filter_map(Result::ok).find(|p| p.name().ok().flatten() == Some("forward"))?;
        let values = plan.values().ok()??;
        let kind = |index: i32| values.get(usize::try_from(index).ok()?)?.ok()?.val().ok()?;
        let operators = plan.operators().ok()??;
        let chain = plan.chains().ok()??.get(0)?.ok()?;
        let mut candidates = Vec::new();
        for (i, instr) in chain.instructions().ok()??.iter().enumerate() {
            let Ok(Some(InstructionArgumentsRef::KernelCall(call))) = instr.ok()?.instr_args() else { continue };
            let args: Vec<i32> = call.args().ok()??.iter().collect();
            let int_arg = args.iter().position(|&a| matches!(kind(a), Some(KernelTypesRef::Int(_))));
            let tensor = args.iter().copied().find(|&a| matches!(kind(a), Some(KernelTypesRef::Tensor(_))));
            let (Some(k), Some(t)) = (int_arg, tensor) else { continue };
            let op = operators.get(call.op_index().ok()? as usize)?.ok()?;
            let overload = op.overload().ok()?.unwrap_or("");
            let name = op.name().ok()??;
            let operator = if overload.is_empty() { name.to_string() } else { format!("{name}.{overload}") };
            candidates.push((i, operator, args, k, t));
        }
        candidates
    };
    // The args vector as stored: u32 length, then the i32s. Only a call whose
    // vector occurs once in the flatbuffer is changed, so the instruction is known.
    let mut skipped = 0;
    for (instruction, operator, args, argument, to_value) in candidates {
        let mut pattern = (args.len() as u32).to_le_bytes().to_vec();
        for a in &args {
            pattern.extend_from_slice(&a.to_le_bytes());
        }
        let mut matches = bytes[..program_len].windows(pattern.len()).enumerate().filter(|(_, w)| *w == pattern.as_slice()).map(|(at, _)| at);
        let (Some(at), None) = (matches.next(), matches.next()) else { continue };
        if skipped < skip {
            skipped += 1;
            continue;
        }
        let offset = at + 4 + 4 * argument;
        bytes[offset..offset + 4].copy_from_slice(&to_value.to_le_bytes());
        return Some(Redirected { instruction, operator, argument, from_value: args[argument], to_value, offset });
    }
    None
}
