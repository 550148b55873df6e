//! The instruction table agrees with the coverage counts, names what each
//! instruction calls, and rejects indices out of range.

use std::collections::BTreeMap;

use super::*;

/// Operator and delegate calls per name, counted from the instruction table.
fn table_counts(plan: &PlanInstructions) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let (mut ops, mut delegates) = (BTreeMap::new(), BTreeMap::new());
    for chain in &plan.chains {
        for instr in chain {
            match *instr {
                Instruction::Kernel { op } => *ops.entry(plan.operator(op).unwrap().to_owned()).or_insert(0) += 1,
                Instruction::Delegate { delegate } => {
                    *delegates.entry(plan.delegate_backend(delegate).unwrap().to_owned()).or_insert(0) += 1
                }
                _ => {}
            }
        }
    }
    (ops, delegates)
}

#[test]
fn the_table_agrees_with_the_coverage_counts_of_every_testdata_file() {
    for name in TESTDATA {
        let bytes = testdata(&format!("{name}.pte"));
        let report = read(&bytes).unwrap();
        let table = instructions_bytes(&bytes).unwrap();
        assert_eq!(table.plans.len(), report.plans.len(), "{name}");
        for plan in &report.plans {
            let t = table.plan(&plan.name).unwrap_or_else(|| panic!("{name}: no plan {}", plan.name));
            assert_eq!(t.instruction_count() as u64, plan.instructions, "{name} {}", plan.name);
            let (ops, delegates) = table_counts(t);
            assert_eq!(ops, plan.operators, "{name} {}", plan.name);
            assert_eq!(delegates, plan.delegates, "{name} {}", plan.name);
        }
    }
}

#[test]
fn each_instruction_says_what_it_calls() {
    let (program, segments) = full_program();
    let table = instructions_bytes(&pte(program, &segments)).unwrap();
    let f = table.plan("forward").unwrap();
    let kinds: Vec<String> = f.chains[0]
        .iter()
        .map(|i| match *i {
            Instruction::Kernel { op } => f.operator(op).unwrap().to_owned(),
            Instruction::Delegate { delegate } => format!("{}#{delegate}", f.delegate_backend(delegate).unwrap()),
            other => format!("{other:?}"),
        })
        .collect();
    let report = read(&pte(full_program().0, &full_program().1)).unwrap();
    assert_eq!(kinds.len() as u64, report.plan("forward").unwrap().instructions);
    assert!(kinds.iter().any(|k| k == "aten::native_layer_norm.out"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k.starts_with("XnnpackBackend#")), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "Free"), "{kinds:?}");
    assert_eq!(f.get(0, kinds.len()), None);
    assert_eq!(f.get(9, 0), None);
}

#[test]
fn an_operator_index_out_of_range_is_an_error() {
    let (mut program, segments) = full_program();
    let plan = &mut program.execution_plan.as_mut().unwrap()[0];
    plan.chains.as_mut().unwrap()[0].instructions.as_mut().unwrap().push(kernel(99));
    let err = instructions_bytes(&pte(program, &segments)).unwrap_err().to_string();
    assert!(err.contains("operator 99"), "{err}");
}

#[test]
fn truncated_and_foreign_bytes_are_errors() {
    let bytes = full_file();
    for cut in [0, 7, 16, bytes.len() / 3] {
        assert!(instructions_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut foreign = bytes.clone();
    foreign[4..8].copy_from_slice(b"XN01");
    assert!(instructions_bytes(&foreign).is_err());
}
