//! Whether this CPU runs the llama.cpp kernels runlens was built with.
//!
//! ggml picks its CPU kernels when it is compiled, not when it runs: a kernel
//! using an instruction the CPU lacks dies with SIGILL. So the build is for a
//! fixed set (`docs/llama-cpp.md`) and runlens checks the CPU for it before
//! llama.cpp loads anything:
//! - x86-64: ggml's default for a build that is not `-march=native` (AVX, AVX2,
//!   FMA, F16C, BMI2, SSE4.2; no AVX-512, no AMX, whose tiles a VM may
//!   advertise and then refuse);
//! - aarch64: the Raspberry Pi 5's Cortex-A76 (`armv8.2-a+dotprod+fp16`,
//!   `mk/ggml-pi5.cmake`): the int8 dot products Q4_0's and Q8_0's fast paths need.

/// The instructions the build's kernels use that this CPU lacks (empty: it runs them).
pub fn missing() -> Vec<&'static str> {
    let mut missing = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! need {
            ($($f:tt),*) => { $( if !std::arch::is_x86_feature_detected!($f) { missing.push($f); } )* };
        }
        need!("sse4.2", "avx", "avx2", "fma", "f16c", "bmi2");
    }
    #[cfg(target_arch = "aarch64")]
    {
        macro_rules! need {
            ($($f:tt),*) => { $( if !std::arch::is_aarch64_feature_detected!($f) { missing.push($f); } )* };
        }
        need!("asimd", "dotprod", "fp16");
    }
    missing
}

/// What the build's kernels were compiled for, for people.
pub const BUILT_FOR: &str = if cfg!(target_arch = "aarch64") {
    "armv8.2-a+dotprod+fp16 (the Raspberry Pi 5's Cortex-A76)"
} else {
    "x86-64 with AVX2, FMA, F16C and BMI2 (ggml's default set)"
};

/// The error when this CPU cannot run them.
#[derive(Debug, thiserror::Error)]
#[error(
    "this CPU lacks {}, which runlens' llama.cpp kernels were built for ({BUILT_FOR}): \
     the llama.cpp columns cannot run here (they would die with an illegal instruction); the other runtimes can",
    missing.join(", ")
)]
pub struct CpuLacks {
    pub missing: Vec<&'static str>,
}

/// `Ok` when this CPU runs the build's kernels.
pub fn check() -> Result<(), CpuLacks> {
    let missing = missing();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CpuLacks { missing })
    }
}
