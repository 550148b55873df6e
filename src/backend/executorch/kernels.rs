//! What a program needs of the runtime linked into runlens, checked before it
//! is loaded: a kernel for every operator its `KernelCall`s name, and every
//! delegate it calls. ExecuTorch would only say "operator missing" from deep in
//! `load_method`; runlens names them, from the program itself (its reader's
//! operator table) against what the runtime has registered (the shim asks
//! ExecuTorch's kernel and backend registries).
//!
//! The usual case is a program from ExecuTorch's own LLM flow (`export_llm`,
//! optimum-executorch): its `llama::custom_sdpa`, `llama::update_cache` and
//! `llama::sdpa_with_kv_cache` have kernels only inside the wheel's Python
//! extension, not in the C++ libraries runlens links.

use std::fmt;

use crate::pte::PlanCoverage;

/// The operators and delegates of one method that this runtime lacks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MissingKernels {
    /// `name.overload`, as the program's operator table names them.
    pub operators: Vec<String>,
    /// Backend ids of `DelegateCall`s (`XnnpackBackend`, `VulkanBackend`, ...).
    pub backends: Vec<String>,
}

impl MissingKernels {
    /// What `plan` calls that the runtime in this process has no kernel or backend for.
    pub fn of(plan: &PlanCoverage) -> MissingKernels {
        MissingKernels::with(plan, crate::ffi::has_kernel, crate::ffi::has_backend)
    }

    /// [`of`](Self::of) against given registries (the unit tests' fakes).
    pub fn with(plan: &PlanCoverage, has_kernel: impl Fn(&str) -> bool, has_backend: impl Fn(&str) -> bool) -> MissingKernels {
        MissingKernels {
            operators: plan.operators.keys().filter(|op| !has_kernel(op)).cloned().collect(),
            backends: plan.delegates.keys().filter(|b| !has_backend(b)).cloned().collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.operators.is_empty() && self.backends.is_empty()
    }

    /// Whether any of the operators comes from ExecuTorch's LLM flow (`llama::`).
    fn has_llm_flow_operators(&self) -> bool {
        self.operators.iter().any(|op| op.starts_with("llama::"))
    }

    /// What to do about it, for the error message.
    pub fn advice(&self) -> &'static str {
        if self.has_llm_flow_operators() {
            "these are the custom operators of ExecuTorch's LLM export flow (export_llm, optimum-executorch), whose kernels \
             ship only inside the executorch wheel's Python extension; export the same checkpoint with runlens' command, \
             which uses standard operators only: .venv/bin/python python/export.py --model CHECKPOINT_DIR --task text-generation --out DIR"
        } else {
            "export the program with operators and delegates this runtime has (runlens links the executorch wheel's \
             libexecutorch, its default CPU kernels, its quantized kernels (libexecutorch_kernels_quantized: \
             quantized_decomposed::) and XNNPACK), or run it with a runtime built with those kernels"
        }
    }
}

impl fmt::Display for MissingKernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.operators.is_empty() {
            parts.push(format!("no kernel in this runlens for {}", self.operators.join(", ")));
        }
        if !self.backends.is_empty() {
            parts.push(format!("no delegate in this runlens for {}", self.backends.join(", ")));
        }
        write!(f, "{}", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(ops: &[&str], delegates: &[&str]) -> PlanCoverage {
        let mut plan = PlanCoverage::empty("forward");
        plan.operators = ops.iter().map(|o| (o.to_string(), 1)).collect();
        plan.delegates = delegates.iter().map(|d| (d.to_string(), 1)).collect();
        plan
    }

    #[test]
    fn names_what_the_registries_lack() {
        let plan = plan(&["aten::add.out", "llama::update_cache.out"], &["XnnpackBackend", "VulkanBackend"]);
        let missing = MissingKernels::with(&plan, |op| op.starts_with("aten::"), |b| b == "XnnpackBackend");
        assert_eq!(missing.operators, vec!["llama::update_cache.out"]);
        assert_eq!(missing.backends, vec!["VulkanBackend"]);
        let text = missing.to_string();
        assert!(text.contains("no kernel in this runlens for llama::update_cache.out"), "{text}");
        assert!(text.contains("no delegate in this runlens for VulkanBackend"), "{text}");
        assert!(missing.advice().contains("python/export.py"), "{}", missing.advice());
    }

    #[test]
    fn a_program_of_registered_kernels_lacks_nothing() {
        let plan = plan(&["aten::add.out"], &["XnnpackBackend"]);
        assert!(MissingKernels::with(&plan, |_| true, |_| true).is_empty());
    }

    #[test]
    fn the_runtime_in_this_process_has_its_own_default_kernels() {
        // Real registries: the wheel's libraries register at load.
        assert!(crate::ffi::has_kernel("aten::add.out"));
        assert!(crate::ffi::has_backend("XnnpackBackend"));
        assert!(!crate::ffi::has_kernel("llama::update_cache.out"));
        assert!(!crate::ffi::has_kernel("no::such_op.out"));
        assert!(!crate::ffi::has_backend("NoSuchBackend"));
    }
}
