//! How the eager path holds its linear layers' weights: the checkpoint's
//! float32 (`eager`) or quantized at load for ATen's packed CPU kernels
//! (`eager-int8`, `eager-int4`; `eager/quant.rs`). Here, not in `eager/`, so
//! that a build without the eager path still names the columns it lacks.

/// How eager holds its linear layers' weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// The checkpoint's float32 (`eager`).
    Float,
    /// 8-bit, a scale per output channel (`eager-int8`).
    Int8,
    /// 4-bit, a scale per group of `group_size` input channels (`eager-int4`).
    Int4 { group_size: i64 },
}

/// The group size of `eager-int4` when the model directory has no 4-bit
/// program to take it from: ExecuTorch's LLM recipe's (8da4w, groups of 128).
pub const DEFAULT_GROUP_SIZE: i64 = 128;

impl WeightFormat {
    /// The column's name: `eager`, `eager-int8`, `eager-int4`.
    pub fn backend_name(self) -> &'static str {
        match self {
            WeightFormat::Float => "eager",
            WeightFormat::Int8 => "eager-int8",
            WeightFormat::Int4 { .. } => "eager-int4",
        }
    }

    /// The ATen kernel its linear layers run on.
    pub fn kernel(self) -> &'static str {
        match self {
            WeightFormat::Float => "aten::linear (float32)",
            WeightFormat::Int8 => "aten::_weight_int8pack_mm",
            WeightFormat::Int4 { .. } => "aten::_weight_int4pack_mm_for_cpu",
        }
    }

    /// Every format, as the catalog lists them (int4 with `group_size`).
    pub fn all(group_size: i64) -> [WeightFormat; 3] {
        [WeightFormat::Float, WeightFormat::Int8, WeightFormat::Int4 { group_size }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest's program may not take one of eager's column names: the
    /// catalog refuses it with the list of [`crate::backend::reserved_names`].
    #[test]
    fn a_manifest_refuses_every_eager_column_name_as_a_program_name() {
        for format in WeightFormat::all(DEFAULT_GROUP_SIZE) {
            let json = format!(
                r#"{{"runlens_manifest": 2, "model": "x", "task": "text-generation", "max_seq_len": 64,
                    "programs": [{{"name": "{}", "file": "a.pte", "title": "A"}}]}}"#,
                format.backend_name()
            );
            let tmp = tempfile::tempdir().unwrap();
            std::fs::write(tmp.path().join("manifest.json"), json).unwrap();
            let dir = crate::model::ModelDir::open(tmp.path()).unwrap();
            let e = crate::backend::catalog(&dir, &[]).unwrap_err();
            assert!(e.to_string().contains("cannot be used"), "{}: {e}", format.backend_name());
            assert!(e.downcast_ref::<crate::model::manifest::ManifestError>().is_some(), "exit code 2, as a bad manifest");
        }
    }
}
