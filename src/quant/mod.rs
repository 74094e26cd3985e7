//! GGUF block formats (zero-copy over `&[u8]`) and exact dot products.
//!
//! * [`block`] — the GGUF block structs, byte-exact, little-endian accessors.
//! * [`dequantize_row`] — any supported type to [`crate::F32`], rounding order fixed.
//! * [`QActs`] — activations quantized once (llama.cpp's reference Q8_0/Q8_1
//!   formulas) and shared by several matmuls.
//! * [`dot`] — exact row dot products (integer sums in an `i128`, one rounding).
//! * [`QMatrix`] — a weight `(n_out, n_in)` borrowed zero-copy from model bytes.
//!
//! The fast paths (portable blocked kernels and, under `std` on x86-64, the
//! runtime-selected AVX2/AVX-512 module) compute the same exact integers, so
//! their results are the same bits.

pub mod act;
pub mod block;
pub mod dequant;
pub mod dot;
pub mod fast;
pub mod fixed;
pub mod matrix;

pub use act::{ActKind, ActRow, ActScale, QActs, quantize_row_q8_0, quantize_row_q8_1};
pub use dequant::dequantize_row;
pub use matrix::QMatrix;

use crate::{Error, Result};

/// GGML tensor types this crate knows, with their GGUF ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    /// IEEE binary32.
    F32 = 0,
    /// IEEE binary16.
    F16 = 1,
    /// 32-blocks: `f16 d; u8 qs[16]`.
    Q4_0 = 2,
    /// 32-blocks: `f16 d; f16 m; u8 qs[16]`.
    Q4_1 = 3,
    /// 32-blocks: `f16 d; u8 qh[4]; u8 qs[16]`.
    Q5_0 = 6,
    /// 32-blocks: `f16 d; f16 m; u8 qh[4]; u8 qs[16]`.
    Q5_1 = 7,
    /// 32-blocks: `f16 d; i8 qs[32]`.
    Q8_0 = 8,
    /// 32-blocks: `f16 d; f16 s; i8 qs[32]` (activations).
    Q8_1 = 9,
    /// 256-blocks: `f16 d; f16 dmin; u8 scales[12]; u8 qs[128]`.
    Q4_K = 12,
    /// 256-blocks: `f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]`.
    Q5_K = 13,
    /// 256-blocks: `u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d`.
    Q6_K = 14,
    /// bfloat16.
    BF16 = 30,
}

impl GgmlType {
    /// The type with GGUF id `id`, if this crate supports it.
    pub const fn from_u32(id: u32) -> Option<GgmlType> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            9 => GgmlType::Q8_1,
            12 => GgmlType::Q4_K,
            13 => GgmlType::Q5_K,
            14 => GgmlType::Q6_K,
            30 => GgmlType::BF16,
            _ => return None,
        })
    }

    /// Elements per block.
    pub const fn block_size(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => 256,
            _ => 32,
        }
    }

    /// Bytes per block.
    pub const fn type_size(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q8_0 => 34,
            GgmlType::Q8_1 => 36,
            GgmlType::Q4_K => 144,
            GgmlType::Q5_K => 176,
            GgmlType::Q6_K => 210,
        }
    }

    /// Bytes of a row of `n` elements; `Err` if `n` is not a whole number of
    /// blocks or the size overflows.
    pub fn row_bytes(self, n: usize) -> Result<usize> {
        let bs = self.block_size();
        if !n.is_multiple_of(bs) {
            return Err(Error::ShapeMismatch {
                expected: n.next_multiple_of(bs),
                found: n,
            });
        }
        (n / bs)
            .checked_mul(self.type_size())
            .ok_or(Error::SizeOverflow)
    }
}
