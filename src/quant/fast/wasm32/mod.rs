//! WebAssembly SIMD128 build of the Q4_1 split chunk kernel (compiled when
//! the target has `simd128`, e.g. `RUSTFLAGS="-C target-feature=+simd128"`
//! for the browser verifier; wasm has no run-time feature detection, so the
//! build is chosen at compile time). A leaf: only `dispatch` names it.
//!
//! Contract: the same `(Σ d terms, Σ m terms)` as the portable
//! `chunk_q4_1`, bit for bit: only the block's integer sum `Σ q·y` is
//! computed in lanes (16-bit products `|15·128| < 2^11`, pairwise sums in
//! 32-bit lanes, exact), the scale terms are the portable code's. Verified
//! by the proptests of `tests/kernels/matmul.rs` run for wasm32-wasip1 with
//! `+simd128` under Node (`scripts/cross-test.sh wasm32-simd128`), where
//! the `Auto` path runs this build.
#![forbid(unsafe_code)]

use super::chunk::{ChunkFn, ROW_GROUP, WeightChunkScales, chunk_q4_1_with};
use crate::quant::GgmlType;
use crate::quant::act::ActScale;
use core::arch::wasm32::{
    i16x8_extend_high_i8x16, i16x8_extend_low_i8x16, i32x4_add, i32x4_dot_i16x8,
    i32x4_extract_lane, u8x16, u8x16_shr, u8x16_splat, u16x8_extend_high_u8x16,
    u16x8_extend_low_u8x16, v128, v128_and,
};

/// The SIMD128 split kernel for `ty`, if there is one.
pub fn split_kernel(ty: GgmlType) -> Option<ChunkFn> {
    match ty {
        GgmlType::Q4_1 => Some(chunk_q4_1),
        _ => None,
    }
}

/// 16 bytes as one vector.
#[inline(always)]
fn load(b: &[u8]) -> v128 {
    u8x16(
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
        b[14], b[15],
    )
}

/// `Σ_j (q[j] & 15)·y[j] + (q[j] >> 4)·y[j+16]` (the portable `nib_dot`).
#[inline(always)]
fn nib_dot(q: &[u8], y: &[i8]) -> i32 {
    let qv = load(q);
    let lo = v128_and(qv, u8x16_splat(15));
    let hi = u8x16_shr(qv, 4);
    let y0 = load(bytemuck::cast_slice(&y[..16]));
    let y1 = load(bytemuck::cast_slice(&y[16..32]));
    let s = i32x4_add(
        i32x4_add(
            i32x4_dot_i16x8(u16x8_extend_low_u8x16(lo), i16x8_extend_low_i8x16(y0)),
            i32x4_dot_i16x8(u16x8_extend_high_u8x16(lo), i16x8_extend_high_i8x16(y0)),
        ),
        i32x4_add(
            i32x4_dot_i16x8(u16x8_extend_low_u8x16(hi), i16x8_extend_low_i8x16(y1)),
            i32x4_dot_i16x8(u16x8_extend_high_u8x16(hi), i16x8_extend_high_i8x16(y1)),
        ),
    );
    i32x4_extract_lane::<0>(s)
        + i32x4_extract_lane::<1>(s)
        + i32x4_extract_lane::<2>(s)
        + i32x4_extract_lane::<3>(s)
}

/// SIMD128 Q4_1 chunk kernel: the portable body with [`nib_dot`] in lanes.
fn chunk_q4_1(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WeightChunkScales,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    chunk_q4_1_with(rows, b0, nb, w, qs, sc, nib_dot)
}
