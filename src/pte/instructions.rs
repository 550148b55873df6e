//! The instruction table of a program: for every plan, chain and instruction,
//! what that instruction calls. A runtime event names only its chain and
//! instruction (ETDump's `chain_index`, `instruction_id`); this table turns
//! that into an operator name (`name[.overload]`, as `inspect` names it) or
//! a delegate (backend id and delegate index).

use planus::ReadAsRoot;

use super::generated::program::executorch_flatbuffer::{
    ExecutionPlanRef, InstructionArgumentsRef, ProgramRef,
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
                            let op = call.op_index().map_err(fb("a kernel call"))?;
                            match usize::try_from(op) {
                                Ok(k) if k < operators.len() => Instruction::Kernel { op: k },
                                _ => return Err(out_of_range("operator", op, operators.len())),
                            }
                        }
                        Some(InstructionArgumentsRef::DelegateCall(call)) => {
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
    Ok(PlanInstructions { name, operators, delegates, chains })
}
