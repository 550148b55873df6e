//! The instruction table of a program: for every plan, chain and instruction,
//! what that instruction calls. A runtime event names only its chain and
//! instruction (ETDump's `chain_index`, `instruction_id`); this table turns
//! that into an operator name (`name[.overload]`, as `inspect` names it) or
//! a delegate (backend id and delegate index).

use planus::ReadAsRoot;

use super::generated::program::executorch_flatbuffer::{
    EValueRef, ExecutionPlanRef, InstructionArgumentsRef, KernelTypesRef, ProgramRef, ScalarType,
};
use super::header::read_layout;
use super::limits::Limits;
use super::PteError;

/// What one instruction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// `KernelCall`: operator `op` of the plan's operator table.
    Kernel { op: usize },
    /// `DelegateCall`: entry `delegate` of the plan's delegate table.
    Delegate { delegate: usize },
    Move,
    JumpFalse,
    Free,
    /// An instruction without arguments (not written by any exporter).
    Empty,
}

/// One execution plan's instructions with the names they refer to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanInstructions {
    pub name: String,
    /// `name[.overload]` by operator index.
    pub operators: Vec<String>,
    /// Backend id by delegate index.
    pub delegates: Vec<String>,
    /// Instructions by chain.
    pub chains: Vec<Vec<Instruction>>,
    /// About how many bytes ExecuTorch's tracer copies into its debug buffer
    /// in one run at the intermediate-output level, at the program's largest
    /// shapes (`logged_bytes`); what the buffer reserves. An estimate: the
    /// buffer grows past it (an XNNPACK call can log more than its arguments).
    pub logged_output_bytes: u64,
    /// Bytes of constant tables that only an embedding kernel reads (a token
    /// embedding not shared with the head, a position embedding): a decode
    /// step gathers one row of each, not the table (`pte::weight_bytes_per_token`).
    pub gathered_table_bytes: u64,
}

/// Every plan of a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstructionTable {
    pub plans: Vec<PlanInstructions>,
}

impl InstructionTable {
    /// The plan called `name`.
    pub fn plan(&self, name: &str) -> Option<&PlanInstructions> {
        self.plans.iter().find(|p| p.name == name)
    }
}

impl PlanInstructions {
    /// A `forward` plan of one chain over `operators` and one XNNPACK delegate, for unit tests.
    #[cfg(test)]
    pub fn forward(operators: &[&str], chain: Vec<Instruction>) -> PlanInstructions {
        PlanInstructions {
            name: "forward".into(),
            operators: operators.iter().map(|o| o.to_string()).collect(),
            delegates: vec!["XnnpackBackend".into()],
            chains: vec![chain],
            logged_output_bytes: 0,
            gathered_table_bytes: 0,
        }
    }

    /// The instruction at `chain`, `index`, if the plan has it.
    pub fn get(&self, chain: usize, index: usize) -> Option<Instruction> {
        self.chains.get(chain)?.get(index).copied()
    }

    /// The operator a kernel call runs (checked against the table when read).
    pub fn operator(&self, op: usize) -> Option<&str> {
        self.operators.get(op).map(String::as_str)
    }

    /// The backend id of a delegate call's delegate.
    pub fn delegate_backend(&self, delegate: usize) -> Option<&str> {
        self.delegates.get(delegate).map(String::as_str)
    }

    /// What the instruction at `chain`, `index` runs, for messages:
    /// "kernel aten::mul.out", "delegate 3, XnnpackBackend", "Move".
    pub fn describe(&self, chain: usize, index: usize) -> Option<String> {
        Some(match self.get(chain, index)? {
            Instruction::Kernel { op } => format!("kernel {}", self.operator(op)?),
            Instruction::Delegate { delegate } => format!("delegate {delegate}, {}", self.delegate_backend(delegate)?),
            other => format!("{other:?}"),
        })
    }

    /// Instructions in all chains.
    pub fn instruction_count(&self) -> usize {
        self.chains.iter().map(Vec::len).sum()
    }
}

fn fb(what: &'static str) -> impl Fn(planus::Error) -> PteError {
    move |source| PteError::Flatbuffer {
        what: what.to_owned(),
        source,
    }
}

/// Reads the instruction table of the program in `bytes`. Every index an
/// instruction holds is checked against its plan's tables.
pub(crate) fn read_instructions(bytes: &[u8]) -> Result<InstructionTable, PteError> {
    let layout = read_layout(bytes)?;
    let program_data = bytes.get(..layout.program_len).unwrap_or(bytes);
    let program = ProgramRef::read_as_root(program_data).map_err(fb("the program root"))?;
    let mut limits = Limits::for_file(bytes.len());
    let mut plans = Vec::new();
    if let Some(list) = program.execution_plan().map_err(fb("execution_plan"))? {
        limits.visit(list.len())?;
        for plan in list.iter() {
            plans.push(read_plan(plan.map_err(fb("an execution plan"))?, &mut limits)?);
        }
    }
    Ok(InstructionTable { plans })
}

fn read_plan(plan: ExecutionPlanRef<'_>, limits: &mut Limits) -> Result<PlanInstructions, PteError> {
    let name = limits.name(&[plan.name().map_err(fb("a plan name"))?.unwrap_or("")])?;
    let mut operators = Vec::new();
    if let Some(ops) = plan.operators().map_err(fb("plan operators"))? {
        limits.visit(ops.len())?;
        for op in ops.iter() {
            let op = op.map_err(fb("an operator"))?;
            let op_name = op.name().map_err(fb("an operator name"))?.unwrap_or("");
            let overload = op.overload().map_err(fb("an operator overload"))?.unwrap_or("");
            operators.push(if overload.is_empty() {
                limits.name(&[op_name])?
            } else {
                limits.name(&[op_name, ".", overload])?
            });
        }
    }
    let mut delegates = Vec::new();
    if let Some(list) = plan.delegates().map_err(fb("plan delegates"))? {
        limits.visit(list.len())?;
        for d in list.iter() {
            let id = d.map_err(fb("a delegate"))?.id().map_err(fb("a delegate id"))?.unwrap_or("");
            delegates.push(limits.name(&[id])?);
        }
    }
    let values: Vec<EValueRef<'_>> = match plan.values().map_err(fb("plan values"))? {
        Some(list) => {
            limits.visit(list.len())?;
            list.iter().collect::<Result<_, _>>().map_err(fb("a value"))?
        }
        None => Vec::new(),
    };
    let mut logged_output_bytes = 0u64;
    // How often each value is an argument, and the tables embedding kernels read.
    let mut uses: std::collections::HashMap<i32, usize> = std::collections::HashMap::new();
    let mut gathers: Vec<i32> = Vec::new();
    let mut chains = Vec::new();
    if let Some(list) = plan.chains().map_err(fb("plan chains"))? {
        limits.visit(list.len())?;
        for (c, chain) in list.iter().enumerate() {
            let chain = chain.map_err(fb("a chain"))?;
            let mut instructions = Vec::new();
            if let Some(list) = chain.instructions().map_err(fb("chain instructions"))? {
                limits.visit(list.len())?;
                for (i, instr) in list.iter().enumerate() {
                    let args = instr.map_err(fb("an instruction"))?.instr_args().map_err(fb("instruction arguments"))?;
                    let out_of_range = |what: &str, index: i32, len: usize| {
                        PteError::Inconsistent(format!(
                            "method {name:?}: chain {c} instruction {i} calls {what} {index}, but the method has {len}"
                        ))
                    };
                    instructions.push(match args {
                        Some(InstructionArgumentsRef::KernelCall(call)) => {
                            // The tracer logs a kernel call's outputs: its `out`
                            // arguments and the returned values after them (a
                            // permute_copy logs both), the run of tensor arguments
                            // at the end of the list. Counting the whole run is an
                            // upper bound where an input tensor comes right before.
                            let args = call.args().map_err(fb("kernel call arguments"))?;
                            let args: Vec<i32> = args.iter().flat_map(|a| a.iter()).collect();
                            for &v in args.iter().rev() {
                                match logged_bytes(&values, v) {
                                    0 => break,
                                    bytes => logged_output_bytes = logged_output_bytes.saturating_add(bytes),
                                }
                            }
                            let op = call.op_index().map_err(fb("a kernel call"))?;
                            for &v in &args {
                                *uses.entry(v).or_insert(0usize) += 1;
                            }
                            match usize::try_from(op) {
                                Ok(k) if k < operators.len() => {
                                    if operators[k].starts_with("quantized_decomposed::embedding") {
                                        // (weight, scales, zero points, ...): a row of each a token.
                                        gathers.extend(args.iter().take(3).copied());
                                    } else if operators[k].contains("embedding") {
                                        gathers.extend(args.first().copied());
                                    }
                                    Instruction::Kernel { op: k }
                                }
                                _ => return Err(out_of_range("operator", op, operators.len())),
                            }
                        }
                        Some(InstructionArgumentsRef::DelegateCall(call)) => {
                            // A delegate call's arguments are logged all: the runtime
                            // cannot tell its outputs from its inputs.
                            let args = call.args().map_err(fb("delegate call arguments"))?;
                            for v in args.iter().flat_map(|a| a.iter()) {
                                logged_output_bytes = logged_output_bytes.saturating_add(logged_bytes(&values, v));
                                *uses.entry(v).or_insert(0usize) += 1;
                            }
                            let d = call.delegate_index().map_err(fb("a delegate call"))?;
                            match usize::try_from(d) {
                                Ok(k) if k < delegates.len() => Instruction::Delegate { delegate: k },
                                _ => return Err(out_of_range("delegate", d, delegates.len())),
                            }
                        }
                        Some(InstructionArgumentsRef::MoveCall(_)) => Instruction::Move,
                        Some(InstructionArgumentsRef::JumpFalseCall(_)) => Instruction::JumpFalse,
                        Some(InstructionArgumentsRef::FreeCall(_)) => Instruction::Free,
                        None => Instruction::Empty,
                    });
                }
            }
            chains.push(instructions);
        }
    }
    // The method's outputs are logged again when the run ends (twice with
    // executorch 1.5.1: a fill-mask program's logits showed up two more times).
    if let Some(outputs) = plan.outputs().map_err(fb("plan outputs"))? {
        for v in outputs.iter() {
            logged_output_bytes = logged_output_bytes.saturating_add(logged_bytes(&values, v).saturating_mul(2));
        }
    }
    gathers.sort_unstable();
    gathers.dedup();
    let gathered_table_bytes = gathers
        .iter()
        .filter(|v| uses.get(v) == Some(&1))
        .filter_map(|&v| match usize::try_from(v).ok().and_then(|i| values.get(i)).and_then(|e| e.val().ok().flatten()) {
            Some(KernelTypesRef::Tensor(t)) if t.data_buffer_idx().unwrap_or(0) > 0 => Some(tensor_data_bytes(&t)),
            _ => None,
        })
        .sum();
    Ok(PlanInstructions { name, operators, delegates, chains, logged_output_bytes, gathered_table_bytes })
}

/// The 64-byte alignment ETDump's buffer sink keeps between tensors.
const LOG_ALIGN: u64 = 64;

/// The bytes the tracer copies when it logs value `index`: a tensor's data at
/// its stored sizes (a dynamic dimension at its bound) plus the alignment
/// padding, every tensor of a list; nothing for other values.
pub fn logged_bytes(values: &[EValueRef<'_>], index: i32) -> u64 {
    let value = |i: i32| usize::try_from(i).ok().and_then(|i| values.get(i)).and_then(|v| v.val().ok().flatten());
    let tensor_list = |items: Option<planus::Vector<'_, i32>>| {
        items.iter().flat_map(|v| v.iter()).fold(0u64, |sum, i| match value(i) {
            Some(KernelTypesRef::Tensor(t)) => sum.saturating_add(tensor_bytes(&t)),
            _ => sum,
        })
    };
    match value(index) {
        Some(KernelTypesRef::Tensor(t)) => tensor_bytes(&t),
        Some(KernelTypesRef::TensorList(l)) => tensor_list(l.items().ok().flatten()),
        Some(KernelTypesRef::OptionalTensorList(l)) => tensor_list(l.items().ok().flatten()),
        _ => 0,
    }
}

fn tensor_bytes(t: &super::generated::program::executorch_flatbuffer::TensorRef<'_>) -> u64 {
    tensor_data_bytes(t).saturating_add(LOG_ALIGN)
}

/// A tensor's data at its stored sizes.
fn tensor_data_bytes(t: &super::generated::program::executorch_flatbuffer::TensorRef<'_>) -> u64 {
    let numel = t.sizes().ok().flatten().map_or(1u64, |s| s.iter().fold(1u64, |n, d| n.saturating_mul(u64::try_from(d).unwrap_or(0))));
    let element = t.scalar_type().map_or(8, |s| element_bytes(s.into()));
    numel.saturating_mul(element)
}

/// Bytes per element of ExecuTorch's scalar type number (as the program and
/// ETDump store it); 8, the widest, for a number it does not know.
pub fn element_bytes(scalar_type: i8) -> u64 {
    match ScalarType::try_from(scalar_type) {
        Ok(ScalarType::Short | ScalarType::Half | ScalarType::Bfloat16 | ScalarType::Bits16 | ScalarType::Uint16) => 2,
        Ok(ScalarType::Int | ScalarType::Float | ScalarType::Qint32 | ScalarType::Uint32) => 4,
        Ok(ScalarType::Long | ScalarType::Double | ScalarType::Uint64) => 8,
        Ok(_) => 1,
        Err(_) => 8,
    }
}
