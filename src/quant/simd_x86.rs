//! AVX2 chunk kernels for the blocked matmul (x86-64, feature `std`, runtime
//! detected). The only module of the crate allowed `unsafe` code.
//!
//! They compute exactly the `i64` chunk sums of the portable kernels in
//! [`super::fast`] (same integers, another instruction sequence), so results
//! are the same bits; `tests/kernels_matmul.rs` checks that by proptest.
//!
//! Per block and group of four weight rows: the 32 weights are widened to
//! unsigned bytes (Q4_1: nibbles `q`; Q8_0: `|x|` with the sign moved onto the
//! activation by `vpsignb`), `vpmaddubsw` against the 32 activation bytes
//! (pairs of products, `|pair| ≤ 2·128·127 < 2^15`, never saturating because
//! activations are in `-127..=127`), `vpmaddwd` by ones to 8 `i32` lanes, a
//! `vphaddd` tree to the four block sums, then `sumi · (mw·ma)` as `i64`
//! (`vpmuldq`) shifted by the relative exponent (`vpsllvq`) and added.
//!
//! ## Unsafe review
//! * Every `unsafe` block is a call of a `#[target_feature(enable = "avx2")]`
//!   function, made only after `is_x86_feature_detected!("avx2")` returned
//!   true (cached in [`chunk_fn`]'s caller path), or an unaligned load.
//! * Loads (`_mm_loadu_si128`, `_mm256_loadu_si256`) read from slices whose
//!   length was checked to cover the bytes read (`chunks_exact` of the block
//!   size, `first_chunk`), through unaligned-load intrinsics.
//! * No pointer arithmetic beyond those checked slices, no writes through
//!   pointers, no uninitialised memory.
#![allow(unsafe_code)]

use super::GgmlType;
use super::act::ActScale;
use super::block::QK;
use super::fast::{ChunkFn, ROW_GROUP, WChunk};
use core::arch::x86_64::*;

/// The AVX2 chunk kernel for `ty`, if the CPU has AVX2 and the kernel exists.
pub(crate) fn chunk_fn(ty: GgmlType) -> Option<ChunkFn> {
    if !std::is_x86_feature_detected!("avx2") {
        return None;
    }
    match ty {
        GgmlType::Q4_1 => Some(q4_1_entry),
        GgmlType::Q8_0 => Some(q8_0_entry),
        _ => None,
    }
}

fn q4_1_entry(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WChunk,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    // SAFETY: only reachable through `chunk_fn`, which checked AVX2.
    unsafe { q4_1_avx2(rows, b0, nb, w, qs, sc) }
}

fn q8_0_entry(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WChunk,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    // SAFETY: only reachable through `chunk_fn`, which checked AVX2.
    unsafe { q8_0_avx2(rows, b0, nb, w, qs, sc) }
}

/// 16 bytes at the start of `s` (`None` if shorter).
#[inline(always)]
fn load16(s: &[u8]) -> Option<__m128i> {
    let a: &[u8; 16] = s.first_chunk()?;
    // SAFETY: `a` is 16 readable bytes; the load is unaligned.
    Some(unsafe { _mm_loadu_si128(a.as_ptr().cast()) })
}

/// 32 bytes at the start of `s` (`None` if shorter).
#[inline(always)]
fn load32(s: &[u8]) -> Option<__m256i> {
    let a: &[u8; 32] = s.first_chunk()?;
    // SAFETY: `a` is 32 readable bytes; the load is unaligned.
    Some(unsafe { _mm256_loadu_si256(a.as_ptr().cast()) })
}

#[inline(always)]
fn i8_bytes(y: &[i8]) -> &[u8] {
    bytemuck::cast_slice(y)
}

/// Four `[i32; 4]` / `[u32; 4]` rows as a vector.
#[inline(always)]
fn load4(v: &[i32; 4]) -> __m128i {
    // SAFETY: 16 readable bytes.
    unsafe { _mm_loadu_si128(v.as_ptr().cast()) }
}

#[inline(always)]
fn load4u(v: &[u32; 4]) -> __m128i {
    // SAFETY: 16 readable bytes.
    unsafe { _mm_loadu_si128(v.as_ptr().cast()) }
}

/// Sums of the 8 lanes of each of p0..p3, as 4 lanes.
#[target_feature(enable = "avx2")]
fn reduce4(p0: __m256i, p1: __m256i, p2: __m256i, p3: __m256i) -> __m128i {
    let h01 = _mm256_hadd_epi32(p0, p1);
    let h23 = _mm256_hadd_epi32(p2, p3);
    let h = _mm256_hadd_epi32(h01, h23);
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1))
}

/// `acc += (a · b as i64) << sh` on four lanes (a, b, sh: 4 × 32-bit).
#[target_feature(enable = "avx2")]
fn mul_shift_add(acc: __m256i, a: __m128i, b: __m128i, sh: __m128i) -> __m256i {
    let t = _mm256_mul_epi32(_mm256_cvtepi32_epi64(a), _mm256_cvtepi32_epi64(b));
    _mm256_add_epi64(acc, _mm256_sllv_epi64(t, _mm256_cvtepu32_epi64(sh)))
}

#[target_feature(enable = "avx2")]
fn store(v: __m256i) -> [i64; 4] {
    let mut o = [0i64; 4];
    // SAFETY: 32 writable bytes.
    unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), v) };
    o
}

#[target_feature(enable = "avx2")]
fn q4_1_avx2(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WChunk,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    const BS: usize = 20;
    let mask = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let mut acc_d = _mm256_setzero_si256();
    let mut acc_m = _mm256_setzero_si256();
    let start = b0 * BS;
    let r = [
        rows[0].get(start..).unwrap_or(&[]),
        rows[1].get(start..).unwrap_or(&[]),
        rows[2].get(start..).unwrap_or(&[]),
        rows[3].get(start..).unwrap_or(&[]),
    ];
    let it = r[0]
        .chunks_exact(BS)
        .zip(r[1].chunks_exact(BS))
        .zip(r[2].chunks_exact(BS))
        .zip(r[3].chunks_exact(BS))
        .zip(qs.chunks_exact(QK))
        .zip(sc)
        .take(nb);
    for (b, (((((x0, x1), x2), x3), y), s)) in it.enumerate() {
        let (Some(y), Some(q0), Some(q1), Some(q2), Some(q3)) = (
            load32(i8_bytes(y)),
            load16(&x0[4..]),
            load16(&x1[4..]),
            load16(&x2[4..]),
            load16(&x3[4..]),
        ) else {
            break;
        };
        let dot = |q: __m128i| {
            let v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), mask);
            _mm256_madd_epi16(_mm256_maddubs_epi16(v, y), ones)
        };
        let sumi = reduce4(dot(q0), dot(q1), dot(q2), dot(q3));
        let c = _mm_mullo_epi32(load4(&w.dm[b]), _mm_set1_epi32(s.dm));
        let sh = _mm_add_epi32(load4u(&w.drel[b]), _mm_set1_epi32(s.drel as i32));
        acc_d = mul_shift_add(acc_d, sumi, c, sh);
        let cm = _mm_mullo_epi32(load4(&w.mm[b]), _mm_set1_epi32(s.sm));
        let shm = _mm_add_epi32(load4u(&w.mrel[b]), _mm_set1_epi32(s.srel as i32));
        acc_m = mul_shift_add(acc_m, cm, _mm_set1_epi32(1), shm);
    }
    (store(acc_d), store(acc_m))
}

#[target_feature(enable = "avx2")]
fn q8_0_avx2(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WChunk,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    const BS: usize = 34;
    let ones = _mm256_set1_epi16(1);
    let mut acc_d = _mm256_setzero_si256();
    let start = b0 * BS;
    let r = [
        rows[0].get(start..).unwrap_or(&[]),
        rows[1].get(start..).unwrap_or(&[]),
        rows[2].get(start..).unwrap_or(&[]),
        rows[3].get(start..).unwrap_or(&[]),
    ];
    let it = r[0]
        .chunks_exact(BS)
        .zip(r[1].chunks_exact(BS))
        .zip(r[2].chunks_exact(BS))
        .zip(r[3].chunks_exact(BS))
        .zip(qs.chunks_exact(QK))
        .zip(sc)
        .take(nb);
    for (b, (((((x0, x1), x2), x3), y), s)) in it.enumerate() {
        let (Some(y), Some(q0), Some(q1), Some(q2), Some(q3)) = (
            load32(i8_bytes(y)),
            load32(&x0[2..]),
            load32(&x1[2..]),
            load32(&x2[2..]),
            load32(&x3[2..]),
        ) else {
            break;
        };
        let dot = |x: __m256i| {
            let ax = _mm256_sign_epi8(x, x);
            let sy = _mm256_sign_epi8(y, x);
            _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), ones)
        };
        let sumi = reduce4(dot(q0), dot(q1), dot(q2), dot(q3));
        let c = _mm_mullo_epi32(load4(&w.dm[b]), _mm_set1_epi32(s.dm));
        let sh = _mm_add_epi32(load4u(&w.drel[b]), _mm_set1_epi32(s.drel as i32));
        acc_d = mul_shift_add(acc_d, sumi, c, sh);
    }
    (store(acc_d), [0; ROW_GROUP])
}
