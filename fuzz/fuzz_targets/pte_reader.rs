//! Any bytes must give a report or an error: no panic, abort, or allocation
//! beyond what the input's length allows.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code, unused_imports)]
#[path = "../../src/pte/mod.rs"]
mod pte;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = pte::inspect_bytes("fuzz.pte", data) {
        // The table and the JSON must render for every report.
        let _ = report.to_string();
        let _ = serde_json::to_string(&report).expect("a report always serializes");
        for plan in &report.plans {
            let _ = plan.operators_by_count();
            let _ = plan.xnnpack_nodes_by_count();
        }
        let _ = report.other_bytes();
    }
});
