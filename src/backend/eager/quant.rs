//! Quantized weights for eager's linear layers, on ATen's packed CPU kernels:
//! the `eager-int8` and `eager-int4` columns. A PyTorch user gets the same
//! from torchao's weight-only configs on CPU; here the checkpoint's float
//! weights are quantized at load, with the scheme of the XNNPACK programs'
//! weights (python/runlens_export/quantize.py: symmetric, one scale per output
//! channel or per group of input channels, scales held as bfloat16), so that
//! the columns differ in their kernels and activations, not in their weights.
//!
//! | column      | weights                          | kernel                             | activations |
//! |-------------|----------------------------------|------------------------------------|-------------|
//! | eager-int8  | int8, a scale per output channel | `aten::_weight_int8pack_mm`         | bfloat16    |
//! | eager-int4  | int4, a scale per group of K     | `aten::_weight_int4pack_mm_for_cpu` | bfloat16    |
//!
//! Both kernels are fast only with bfloat16 activations (float32 takes a
//! scalar path: 5-10x slower than the float matmul; docs/quantization.md), so
//! a quantized layer casts its input to bfloat16 and its output back; the rest
//! of the model stays float32. ATen's 8-bit-activation kernel
//! (`_dyn_quant_matmul_4bit`, the XNNPACK programs' scheme) is KleidiAI's on
//! Arm but a reference loop on x86 (40x slower than `_weight_int4pack_mm_for_cpu`
//! here), so it is not used.

use tch::{Kind, Tensor};

pub use crate::backend::weight_format::WeightFormat;

/// The group sizes `_weight_int4pack_mm_for_cpu` takes.
const INT4_GROUPS: [i64; 4] = [256, 128, 64, 32];

/// `_convert_weight_to_int4pack_for_cpu` packs output channels in blocks of 16.
const INT4_N_BLOCK: i64 = 16;


/// A linear layer's weight quantized and packed for its ATen kernel.
pub struct PackedWeight {
    format: WeightFormat,
    /// int8 `[N, K]`; or int4 packed by `_convert_weight_to_int4pack_for_cpu` ([N', K / 2] uint8).
    data: Tensor,
    /// int8: `[N]` bfloat16; int4: [K / group, N', 2] bfloat16 (scale, zero).
    scales: Tensor,
    /// Output channels (N' >= N is the padded count int4 packs).
    out_features: i64,
    /// The group size used (int4), which may be smaller than asked for a narrow layer.
    group_size: i64,
}

impl PackedWeight {
    /// `weight` `[N, K]` (float32) in `format`; None for [`WeightFormat::Float`], and
    /// for a 4-bit layer whose input width no group size of the kernel divides
    /// (it stays float).
    pub fn quantize(weight: &Tensor, format: WeightFormat) -> tch::Result<Option<PackedWeight>> {
        let _no_grad = tch::no_grad_guard();
        let (n, k) = weight.size2()?;
        let w = weight.f_to_kind(Kind::Float)?;
        match format {
            WeightFormat::Float => Ok(None),
            WeightFormat::Int8 => {
                // Symmetric per output channel, as torchao's PerAxis(0) int8:
                // scale = max|w| / 127.5, q = clamp(round(w / scale), -128, 127).
                let scales = bf16_scales(&w.f_abs()?.f_amax([1], false)?, 127.5)?; // [N]
                // In place after the division: one float copy of the layer at a time (a
                // chain of out-of-place ops keeps each until the statement ends: for
                // Qwen2.5-0.5B's 545 MB head, 1.6 GB more at the load's peak).
                let mut q = w.f_div(&scales.f_unsqueeze(1)?)?;
                let _ = q.f_round_()?.f_clamp_(-128, 127)?; // the returned tensor is q itself
                let q = q.f_to_kind(Kind::Int8)?;
                Ok(Some(PackedWeight {
                    format,
                    data: q,
                    scales: scales.f_to_kind(Kind::BFloat16)?,
                    out_features: n,
                    group_size: k,
                }))
            }
            WeightFormat::Int4 { group_size } => {
                let Some(group) = INT4_GROUPS.into_iter().find(|&g| g <= group_size.max(INT4_GROUPS[3]) && k % g == 0) else {
                    return Ok(None);
                };
                // Symmetric per group, as torchao's PerGroup int4: scale = max|w| / 7.5,
                // q = clamp(round(w / scale), -8, 7). The kernel computes
                // (u - 8) * scale + zero from unsigned u in 0..15: u = q + 8, zero = 0.
                let groups = w.f_view([n, k / group, group])?;
                let scales = bf16_scales(&groups.f_abs()?.f_amax([2], false)?, 7.5)?; // [N, K/g]
                let mut q = groups.f_div(&scales.f_unsqueeze(2)?)?; // in place from here, as int8's
                let _ = q.f_round_()?.f_clamp_(-8, 7)?.f_add_scalar_(8)?;
                let unsigned = q.f_view([n, k])?.f_to_kind(Kind::Int)?;
                drop(q);
                // Pad the output channels to the kernel's block of 16 (GPT-2's 50257-token head).
                let padded = (n + INT4_N_BLOCK - 1) / INT4_N_BLOCK * INT4_N_BLOCK;
                let (unsigned, scales) = if padded == n {
                    (unsigned, scales)
                } else {
                    (
                        unsigned.f_constant_pad_nd([0, 0, 0, padded - n])?,
                        scales.f_constant_pad_nd([0, 0, 0, padded - n])?,
                    )
                };
                let data = unsigned.f_internal_convert_weight_to_int4pack_for_cpu(2)?;
                let zeros = scales.f_zeros_like()?;
                // [N', K/g] -> [K/g, N', 2]
                let scales_zeros = Tensor::f_stack(&[scales, zeros], 2)?.f_transpose(0, 1)?.f_contiguous()?.f_to_kind(Kind::BFloat16)?;
                Ok(Some(PackedWeight { format, data, scales: scales_zeros, out_features: n, group_size: group }))
            }
        }
    }

    /// x `[M, K]` float32 -> x @ W.T `[M, N]` float32, on the format's ATen kernel.
    pub fn matmul(&self, x: &Tensor) -> tch::Result<Tensor> {
        let x = x.f_to_kind(Kind::BFloat16)?;
        let y = match self.format {
            WeightFormat::Int4 { .. } => {
                let y = x.f_internal_weight_int4pack_mm_for_cpu(&self.data, self.group_size, &self.scales)?;
                if y.size()[1] == self.out_features {
                    y
                } else {
                    y.f_narrow(1, 0, self.out_features)?
                }
            }
            _ => x.f_internal_weight_int8pack_mm(&self.data, &self.scales)?,
        };
        y.f_to_kind(Kind::Float)
    }

    /// The bytes a forward reads: the packed weight and its scales.
    pub fn bytes(&self) -> u64 {
        tensor_bytes(&self.data) + tensor_bytes(&self.scales)
    }

    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// The group size used (int4); the input width for int8.
    pub fn group_size(&self) -> i64 {
        self.group_size
    }
}

/// `amax / half_range` with a floor (an all-zero row or group keeps a scale),
/// rounded to bfloat16 values, as the kernels hold them: the weights are
/// quantized with the scales the kernel multiplies by.
fn bf16_scales(amax: &Tensor, half_range: f64) -> tch::Result<Tensor> {
    amax.f_div_scalar(half_range)?.f_clamp_min(f64::from(f32::EPSILON))?.f_to_kind(Kind::BFloat16)?.f_to_kind(Kind::Float)
}

/// A tensor's bytes in memory.
pub fn tensor_bytes(t: &Tensor) -> u64 {
    (t.numel() * t.kind().elt_size_in_bytes()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dequantized weight, computed from the integers and scales (not by the kernel).
    fn dequantized_int8(w: &Tensor) -> Tensor {
        let scales = bf16_scales(&w.abs().amax([1], false), 127.5).unwrap();
        w.divide(&scales.unsqueeze(1)).round().clamp(-128, 127).multiply(&scales.unsqueeze(1))
    }

    fn dequantized_int4(w: &Tensor, group: i64) -> Tensor {
        let (n, k) = w.size2().unwrap();
        let g = w.view([n, k / group, group]);
        let scales = bf16_scales(&g.abs().amax([2], false), 7.5).unwrap().unsqueeze(2);
        g.divide(&scales).round().clamp(-8, 7).multiply(&scales).view([n, k])
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        a.f_sub(b).unwrap().abs().max().double_value(&[])
    }

    #[test]
    fn int8_kernel_computes_with_the_dequantized_weight() {
        tch::manual_seed(0);
        let w = Tensor::randn([48, 64], (Kind::Float, tch::Device::Cpu));
        let x = Tensor::randn([3, 64], (Kind::Float, tch::Device::Cpu));
        let p = PackedWeight::quantize(&w, WeightFormat::Int8).unwrap().unwrap();
        // The kernel rounds its activations to bfloat16: compare with x so rounded.
        let xb = x.to_kind(Kind::BFloat16).to_kind(Kind::Float);
        let expected = xb.matmul(&dequantized_int8(&w).tr());
        let got = p.matmul(&x).unwrap();
        assert_eq!(got.size(), [3, 48]);
        // bfloat16 output: 8 bits of mantissa on values of about 10.
        assert!(max_diff(&got, &expected) < 0.1, "{}", max_diff(&got, &expected));
        // Quantization moved the weights (it is not the float matmul) by little.
        let float = x.matmul(&w.tr());
        let d = max_diff(&got, &float);
        assert!(d > 1e-3 && d < 0.5, "{d}");
        assert_eq!(p.bytes(), 48 * 64 + 48 * 2);
    }

    #[test]
    fn int4_pads_output_channels_and_picks_a_group_the_kernel_takes() {
        tch::manual_seed(1);
        // N = 50 is not a multiple of 16; K = 96 takes no group of 64 or more.
        let w = Tensor::randn([50, 96], (Kind::Float, tch::Device::Cpu));
        let x = Tensor::randn([2, 96], (Kind::Float, tch::Device::Cpu));
        let p = PackedWeight::quantize(&w, WeightFormat::Int4 { group_size: 128 }).unwrap().unwrap();
        assert_eq!(p.group_size(), 32);
        let xb = x.to_kind(Kind::BFloat16).to_kind(Kind::Float);
        let expected = xb.matmul(&dequantized_int4(&w, 32).tr());
        let got = p.matmul(&x).unwrap();
        assert_eq!(got.size(), [2, 50]);
        assert!(max_diff(&got, &expected) < 0.1, "{}", max_diff(&got, &expected));
        // 64 padded rows of 48 bytes, 3 groups x 64 x (scale, zero) in bfloat16.
        assert_eq!(p.bytes(), 64 * 48 + 3 * 64 * 2 * 2);
    }

    #[test]
    fn int4_leaves_a_layer_no_group_divides_in_float() {
        let w = Tensor::zeros([16, 48], (Kind::Float, tch::Device::Cpu));
        assert!(PackedWeight::quantize(&w, WeightFormat::Int4 { group_size: 32 }).unwrap().is_none());
        assert!(PackedWeight::quantize(&w, WeightFormat::Float).unwrap().is_none());
    }
}
