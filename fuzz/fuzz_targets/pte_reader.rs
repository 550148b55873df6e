//! Any bytes must give a report or an error: no panic, abort, or allocation
//! beyond what the input's length allows. The same holds for what runlens'
//! probe derives from a program before ExecuTorch runs it (the input it builds
//! from the stored shapes) and for naming an instruction in an abort report
//! (any chain and index, as a crashed child might report them).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code, unused_imports)]
#[path = "../../src/pte/mod.rs"]
mod pte;

#[allow(dead_code)]
#[path = "../../src/backend/probe/input.rs"]
mod probe_input;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = pte::inspect_bytes("fuzz.pte", data) {
        // The table and the JSON must render for every report.
        let _ = report.to_string();
        let _ = serde_json::to_string(&report).expect("a report always serializes");
        for plan in &report.plans {
            let _ = plan.operators_by_count();
            let _ = plan.xnnpack_nodes_by_count();
            let (ids, mask) = probe_input::representative_input(Some(plan));
            assert!(!ids.is_empty() && ids.len() == mask.len() && ids.len() <= 1 << 16);
        }
        let _ = report.other_bytes();
        if let Ok(table) = pte::instructions_bytes(data) {
            // Indices from the tail of the input: in range, out of range, huge.
            let tail = |i: usize| data.get(data.len().saturating_sub(i + 1)).copied().unwrap_or(0) as usize;
            for plan in &table.plans {
                for (chain, index) in [(0, 0), (tail(0), tail(1)), (tail(2) << 24, tail(3) << 16), (usize::MAX, usize::MAX)] {
                    let _ = plan.describe(chain, index);
                }
            }
        }
    }
});
