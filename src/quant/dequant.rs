//! Dequantization of one row to [`F32`], rounding order fixed.
//!
//! | type | element formula (each operation one soft RNE rounding) |
//! |---|---|
//! | F32 / F16 / BF16 | exact conversion |
//! | Q4_0 | `(q - 8) · d` |
//! | Q4_1 | `(q · d) + m` |
//! | Q5_0 | `(q - 16) · d` |
//! | Q5_1 | `(q · d) + m` |
//! | Q8_0 | `q · d` |
//! | Q4_K | `(d · sc) · q - (dmin · mn)` (`d1 = d·sc`, `m1 = dmin·mn` first) |
//! | Q5_K | as Q4_K, `q` with its fifth bit |
//! | Q6_K | `(d · sc) · q` |
//!
//! These are llama.cpp's `dequantize_row_*` formulas with C's left-to-right
//! association and no FMA contraction. (Many of the products are exact in
//! binary32 anyway; the order is written down so it never matters.)

#![forbid(unsafe_code)]

use super::GgmlType;
use super::block::{
    BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0, QK,
    QK_K, blocks,
};
use crate::{Error, F32, Result};
use bytemuck::Pod;

#[inline(always)]
fn h(x: u16) -> F32 {
    F32::from_f16_bits(x)
}

#[inline(always)]
fn i(q: i32) -> F32 {
    F32::from_i32(q)
}

/// Dequantizes one row: `data` holds exactly `out.len()` elements of `ty`.
///
/// `Err(ShapeMismatch)` if `out.len()` is not a whole number of blocks or
/// `data` is not exactly that many blocks; `UnsupportedType` for `Q8_1`
/// (an activation-only format). `out` is unchanged on error.
pub fn dequantize_row(ty: GgmlType, data: &[u8], out: &mut [F32]) -> Result<()> {
    let n = out.len();
    let need = ty.row_bytes(n)?;
    if data.len() != need {
        return Err(Error::ShapeMismatch {
            expected: need,
            found: data.len(),
        });
    }
    match ty {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
                *o = F32::from_bits(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = h(u16::from_le_bytes([c[0], c[1]]));
            }
        }
        GgmlType::BF16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = F32::from_bf16_bits(u16::from_le_bytes([c[0], c[1]]));
            }
        }
        GgmlType::Q4_0 => each_block(data, out, q4_0_block)?,
        GgmlType::Q4_1 => each_block(data, out, q4_1_block)?,
        GgmlType::Q5_0 => each_block(data, out, q5_0_block)?,
        GgmlType::Q5_1 => each_block(data, out, q5_1_block)?,
        GgmlType::Q8_0 => each_block(data, out, q8_0_block)?,
        GgmlType::Q4_K => each_block(data, out, q4_k_block)?,
        GgmlType::Q5_K => each_block(data, out, q5_k_block)?,
        GgmlType::Q6_K => each_block(data, out, q6_k_block)?,
        GgmlType::Q8_1 => {
            return Err(Error::UnsupportedType {
                ggml_type: ty as u32,
            });
        }
    }
    Ok(())
}

/// Calls `block(b, y)` for each block `b` of `data` and the `N` elements `y`
/// of `out` it holds (`data` already checked to hold exactly `out`).
#[inline(always)]
fn each_block<B: Pod, const N: usize>(
    data: &[u8],
    out: &mut [F32],
    block: impl Fn(&B, &mut [F32; N]),
) -> Result<()> {
    for (b, y) in blocks::<B>(data)?.iter().zip(out.as_chunks_mut::<N>().0) {
        block(b, y);
    }
    Ok(())
}

/// Q4_0: `(q - 8) · d`; low nibbles are elements 0..16, high 16..32.
#[inline(always)]
fn q4_0_block(b: &BlockQ4_0, y: &mut [F32; QK]) {
    let d = h(b.d());
    for j in 0..16 {
        y[j] = i((b.qs[j] & 15) as i32 - 8) * d;
        y[j + 16] = i((b.qs[j] >> 4) as i32 - 8) * d;
    }
}

/// Q4_1: `(q · d) + m`.
#[inline(always)]
fn q4_1_block(b: &BlockQ4_1, y: &mut [F32; QK]) {
    let (d, m) = (h(b.d()), h(b.m()));
    for j in 0..16 {
        y[j] = i((b.qs[j] & 15) as i32) * d + m;
        y[j + 16] = i((b.qs[j] >> 4) as i32) * d + m;
    }
}

/// Q5_0: `(q - 16) · d`.
#[inline(always)]
fn q5_0_block(b: &BlockQ5_0, y: &mut [F32; QK]) {
    let (d, qh) = (h(b.d()), b.qh());
    for j in 0..16 {
        let (lo, hi) = q5_pair(b.qs[j], qh, j);
        y[j] = i(lo - 16) * d;
        y[j + 16] = i(hi - 16) * d;
    }
}

/// Q5_1: `(q · d) + m`.
#[inline(always)]
fn q5_1_block(b: &BlockQ5_1, y: &mut [F32; QK]) {
    let (d, m, qh) = (h(b.d()), h(b.m()), b.qh());
    for j in 0..16 {
        let (lo, hi) = q5_pair(b.qs[j], qh, j);
        y[j] = i(lo) * d + m;
        y[j + 16] = i(hi) * d + m;
    }
}

/// Q8_0: `q · d`.
#[inline(always)]
fn q8_0_block(b: &BlockQ8_0, y: &mut [F32; QK]) {
    let d = h(b.d());
    for (o, &q) in y.iter_mut().zip(b.qs.iter()) {
        *o = i(q as i32) * d;
    }
}

/// Q4_K: per 32-element sub-block `j`, `d1 · q - m1` with `d1 = d · sc`,
/// `m1 = dmin · mn` rounded first.
#[inline(always)]
fn q4_k_block(b: &BlockQ4_K, y: &mut [F32; QK_K]) {
    let (d, dmin) = (h(b.d()), h(b.dmin()));
    for (j, ys) in y.chunks_exact_mut(32).enumerate() {
        let (sc, mn) = b.scale_min(j);
        let d1 = d * i(sc as i32);
        let m1 = dmin * i(mn as i32);
        for (l, o) in ys.iter_mut().enumerate() {
            *o = d1 * i(b.q(32 * j + l) as i32) - m1;
        }
    }
}

/// Q5_K: [`q4_k_block`] with 5-bit quants.
#[inline(always)]
fn q5_k_block(b: &BlockQ5_K, y: &mut [F32; QK_K]) {
    let (d, dmin) = (h(b.d()), h(b.dmin()));
    for (j, ys) in y.chunks_exact_mut(32).enumerate() {
        let (sc, mn) = b.scale_min(j);
        let d1 = d * i(sc as i32);
        let m1 = dmin * i(mn as i32);
        for (l, o) in ys.iter_mut().enumerate() {
            *o = d1 * i(b.q(32 * j + l) as i32) - m1;
        }
    }
}

/// Q6_K: `(d · sc) · q`, one scale per 16 elements.
#[inline(always)]
fn q6_k_block(b: &BlockQ6_K, y: &mut [F32; QK_K]) {
    let d = h(b.d());
    for (l, o) in y.iter_mut().enumerate() {
        *o = d * i(b.scales[l / 16] as i32) * i(b.q(l) as i32);
    }
}

/// The two 5-bit quants `(j, j + 16)` of a Q5 block, 0..=31 each.
#[inline(always)]
pub(crate) fn q5_pair(qs: u8, qh: u32, j: usize) -> (i32, i32) {
    let xh0 = ((qh >> j) << 4) & 0x10;
    let xh1 = (qh >> (j + 12)) & 0x10;
    (
        ((qs & 15) as u32 | xh0) as i32,
        ((qs >> 4) as u32 | xh1) as i32,
    )
}
