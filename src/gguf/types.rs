//! ggml's tensor types: names, block sizes and block bytes, as ggml's
//! `type_traits` table (ggml/src/ggml.c, with the block structs of
//! ggml-common.h) gives them in the llama.cpp runlens links.

use std::fmt;

/// A tensor's ggml type id, as the GGUF stores it (`enum ggml_type`).
///
/// Ids ggml has removed (Q4_2 = 4, Q4_3 = 5, the repacked Q4_0_4_4 = 31 to
/// Q4_0_8_8 = 33 and IQ4_NL_4_4 = 36 to IQ4_NL_8_8 = 38) and ids past its
/// table are not [known](GgmlType::is_known): ggml refuses them in a GGUF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GgmlType(pub u32);

/// `(name, elements per block, bytes per block)` by type id; `None` where
/// ggml has no type (removed ids).
const TABLE: [Option<(&str, u64, u64)>; 43] = [
    Some(("f32", 1, 4)),       // 0
    Some(("f16", 1, 2)),       // 1
    Some(("q4_0", 32, 18)),    // 2
    Some(("q4_1", 32, 20)),    // 3
    None,                      // 4: Q4_2, removed
    None,                      // 5: Q4_3, removed
    Some(("q5_0", 32, 22)),    // 6
    Some(("q5_1", 32, 24)),    // 7
    Some(("q8_0", 32, 34)),    // 8
    Some(("q8_1", 32, 36)),    // 9
    Some(("q2_k", 256, 84)),   // 10
    Some(("q3_k", 256, 110)),  // 11
    Some(("q4_k", 256, 144)),  // 12
    Some(("q5_k", 256, 176)),  // 13
    Some(("q6_k", 256, 210)),  // 14
    Some(("q8_k", 256, 292)),  // 15
    Some(("iq2_xxs", 256, 66)), // 16
    Some(("iq2_xs", 256, 74)), // 17
    Some(("iq3_xxs", 256, 98)), // 18
    Some(("iq1_s", 256, 50)),  // 19
    Some(("iq4_nl", 32, 18)),  // 20
    Some(("iq3_s", 256, 110)), // 21
    Some(("iq2_s", 256, 82)),  // 22
    Some(("iq4_xs", 256, 136)), // 23
    Some(("i8", 1, 1)),        // 24
    Some(("i16", 1, 2)),       // 25
    Some(("i32", 1, 4)),       // 26
    Some(("i64", 1, 8)),       // 27
    Some(("f64", 1, 8)),       // 28
    Some(("iq1_m", 256, 56)),  // 29
    Some(("bf16", 1, 2)),      // 30
    None,                      // 31: Q4_0_4_4, removed (runtime repacking instead)
    None,                      // 32: Q4_0_4_8, removed
    None,                      // 33: Q4_0_8_8, removed
    Some(("tq1_0", 256, 54)),  // 34
    Some(("tq2_0", 256, 66)),  // 35
    None,                      // 36: IQ4_NL_4_4, removed
    None,                      // 37: IQ4_NL_4_8, removed
    None,                      // 38: IQ4_NL_8_8, removed
    Some(("mxfp4", 32, 17)),   // 39
    Some(("nvfp4", 64, 36)),   // 40
    Some(("q1_0", 128, 18)),   // 41
    Some(("q2_0", 64, 18)),    // 42
];

/// The types runlens hands to llama.cpp's CPU backend (see
/// [`GgufFile::check_runnable`](super::GgufFile::check_runnable)).
pub const RUNNABLE_TYPES: &[&str] = &[
    "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k",
    "q6_k",
];

impl GgmlType {
    pub const F32: GgmlType = GgmlType(0);
    pub const F16: GgmlType = GgmlType(1);
    pub const Q4_0: GgmlType = GgmlType(2);
    pub const Q8_0: GgmlType = GgmlType(8);
    pub const BF16: GgmlType = GgmlType(30);

    fn entry(self) -> Option<(&'static str, u64, u64)> {
        TABLE.get(self.0 as usize).copied().flatten()
    }

    /// ggml's name in lower case (`"q4_0"`, `"q6_k"`; ggml itself spells the
    /// K-quants `"q6_K"`), or `"unknown"`.
    pub fn name(&self) -> &'static str {
        self.entry().map_or("unknown", |e| e.0)
    }

    /// Elements per block (32 for q4_0, 256 for the K-quants, 1 for floats);
    /// 0 when unknown.
    pub fn block_size(&self) -> u64 {
        self.entry().map_or(0, |e| e.1)
    }

    /// Bytes per block (18 for q4_0, 4 for f32); 0 when unknown.
    pub fn type_size(&self) -> u64 {
        self.entry().map_or(0, |e| e.2)
    }

    /// Whether ggml has this type (a GGUF with any other is refused).
    pub fn is_known(&self) -> bool {
        self.entry().is_some()
    }

    /// Whether runlens hands tensors of this type to llama.cpp's CPU backend.
    pub fn is_runnable(&self) -> bool {
        RUNNABLE_TYPES.contains(&self.name())
    }

    /// The type called `name` (lower or upper case), if ggml has one.
    pub fn from_name(name: &str) -> Option<GgmlType> {
        let lower = name.to_ascii_lowercase();
        (0..TABLE.len() as u32).map(GgmlType).find(|t| t.is_known() && t.name() == lower)
    }

    /// Bytes of `elements` elements (a multiple of the block size), if the
    /// count fits in a u64.
    pub fn bytes_for(&self, elements: u64) -> Option<u64> {
        let block = self.block_size();
        if block == 0 {
            return None;
        }
        (elements / block).checked_mul(self.type_size())
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_known() {
            f.write_str(self.name())
        } else {
            write!(f, "unknown type {}", self.0)
        }
    }
}
