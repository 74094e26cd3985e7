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
use super::act::ChunkScale;
use super::block::QK;
use super::fast::{
    ACT_TILE, ActTile, Fused, FusedFn, FusedMultiFn, LIM_Q4_1_D, LIM_Q4_1_M, LIM_Q8_0_D, ROW_GROUP,
};
use core::arch::x86_64::*;

/// The fused AVX2 kernels for `ty` — one input row, and up to [`ACT_TILE`]
/// rows per pass over the weights — if the CPU has AVX2 and they exist.
pub(crate) fn fused_fns(ty: GgmlType) -> Option<(FusedFn, FusedMultiFn)> {
    if !std::is_x86_feature_detected!("avx2") {
        return None;
    }
    match ty {
        GgmlType::Q4_1 => Some((q4_1_entry, q4_1_multi_entry)),
        GgmlType::Q8_0 => Some((q8_0_entry, q8_0_multi_entry)),
        _ => None,
    }
}

fn q4_1_multi_entry(
    group: &[u8],
    rb: usize,
    b0: usize,
    nb: usize,
    t: &ActTile<'_>,
) -> [Fused; ACT_TILE] {
    // SAFETY: only reachable through `fused_fns`, which checked AVX2.
    unsafe { fused_avx2::<true, ACT_TILE>(group, rb, b0, nb, t) }
}

fn q8_0_multi_entry(
    group: &[u8],
    rb: usize,
    b0: usize,
    nb: usize,
    t: &ActTile<'_>,
) -> [Fused; ACT_TILE] {
    // SAFETY: only reachable through `fused_fns`, which checked AVX2.
    unsafe { fused_avx2::<false, ACT_TILE>(group, rb, b0, nb, t) }
}

/// A tile holding one input row.
fn one_row<'x>(qs: &'x [i8], sc: &'x [ActScale], ch: &ChunkScale) -> ActTile<'x> {
    let mut t = ActTile {
        n: 1,
        qs: [&[]; ACT_TILE],
        sc: [&[]; ACT_TILE],
        ch: [ChunkScale::default(); ACT_TILE],
    };
    (t.qs[0], t.sc[0], t.ch[0]) = (qs, sc, *ch);
    t
}

fn q4_1_entry(
    group: &[u8],
    rb: usize,
    b0: usize,
    nb: usize,
    qs: &[i8],
    sc: &[ActScale],
    ch: &ChunkScale,
) -> Fused {
    let t = one_row(qs, sc, ch);
    // SAFETY: only reachable through `fused_fns`, which checked AVX2.
    let [r] = unsafe { fused_avx2::<true, 1>(group, rb, b0, nb, &t) };
    r
}

fn q8_0_entry(
    group: &[u8],
    rb: usize,
    b0: usize,
    nb: usize,
    qs: &[i8],
    sc: &[ActScale],
    ch: &ChunkScale,
) -> Fused {
    let t = one_row(qs, sc, ch);
    // SAFETY: only reachable through `fused_fns`, which checked AVX2.
    let [r] = unsafe { fused_avx2::<false, 1>(group, rb, b0, nb, &t) };
    r
}

/// Guessed base below the first block's shift: weight scales of one row
/// within a chunk rarely lie more than this many binades below it.
const MARGIN_D: i32 = 8;
/// The same for Q4_1 mins (the `m·s` sum has more headroom).
const MARGIN_M: i32 = 16;

/// Four binary16 (in the low 16 bits of 32-bit lanes) as
/// `(mant, sh, nonzero, nonfinite)`, the vector form of
/// [`super::fixed::f16_fixed`].
#[target_feature(enable = "avx2")]
fn f16_fixed4(h: __m128i) -> (__m128i, __m128i, __m128i, __m128i) {
    let e = _mm_and_si128(_mm_srli_epi32(h, 10), _mm_set1_epi32(31));
    let frac = _mm_and_si128(h, _mm_set1_epi32(0x3FF));
    let normal = _mm_cmpgt_epi32(e, _mm_setzero_si128());
    let mant = _mm_or_si128(frac, _mm_and_si128(normal, _mm_set1_epi32(0x400)));
    let sh = _mm_sub_epi32(_mm_max_epi32(e, _mm_set1_epi32(1)), _mm_set1_epi32(1));
    let neg = _mm_cmpeq_epi32(
        _mm_and_si128(h, _mm_set1_epi32(0x8000)),
        _mm_set1_epi32(0x8000),
    );
    let mant_s = _mm_sub_epi32(_mm_xor_si128(mant, neg), neg);
    let nz = _mm_xor_si128(
        _mm_cmpeq_epi32(mant, _mm_setzero_si128()),
        _mm_set1_epi32(-1),
    );
    let bad = _mm_cmpeq_epi32(e, _mm_set1_epi32(31));
    (mant_s, sh, nz, bad)
}

#[inline(always)]
fn store4(v: __m128i) -> [i32; 4] {
    let mut o = [0i32; 4];
    // SAFETY: 16 writable bytes.
    unsafe { _mm_storeu_si128(o.as_mut_ptr().cast(), v) };
    o
}

/// Relative shifts of one scale against `base`, with the running
/// minimum/maximum over non-zero mantissas: `(rel masked to 0 where the
/// mantissa is 0, min, max)`.
#[target_feature(enable = "avx2")]
fn rel_track(
    sh: __m128i,
    nz: __m128i,
    base: __m128i,
    lo: __m128i,
    hi: __m128i,
) -> (__m128i, __m128i, __m128i) {
    let rel = _mm_and_si128(_mm_sub_epi32(sh, base), nz);
    (rel, _mm_min_epi32(lo, rel), _mm_max_epi32(hi, rel))
}

/// Single pass over one chunk of a group of four rows (Q4_1 if `Q41`, else
/// Q8_0) for the first `min(t.n, N)` input rows of the tile: decodes the
/// weight scales against guessed bases, checks the relative shifts, sums in
/// `i64`. Each weight block's scales and bytes are decoded once and used for
/// every row of the tile, so the per-row work is only the byte dots and the
/// exact accumulation; `N = 1` is the single-row kernel.
#[target_feature(enable = "avx2")]
fn fused_avx2<const Q41: bool, const N: usize>(
    group: &[u8],
    rb: usize,
    b0: usize,
    nb: usize,
    t: &ActTile<'_>,
) -> [Fused; N] {
    let bs: usize = if Q41 { 20 } else { 34 };
    let mut res = [Fused::NOT_OK; N];
    let n = t.n.min(N);
    let in_bounds = rb <= (i32::MAX as usize) / 4
        && group.len() >= ROW_GROUP * rb
        && (b0 + nb) * bs <= rb
        && nb > 0
        && N <= ACT_TILE
        && n >= 1
        && (0..n).all(|j| t.qs[j].len() >= nb * QK && t.sc[j].len() >= nb);
    if !in_bounds {
        return res;
    }
    let base_ptr = group.as_ptr();
    let head = |b: usize| {
        let o = b * bs;
        // SAFETY: r·rb + b·bs + 4 ≤ 4·rb ≤ group.len() (checked above).
        let rd = |r: usize| unsafe { base_ptr.add(r * rb + o).cast::<i32>().read_unaligned() };
        _mm_setr_epi32(rd(0), rd(1), rd(2), rd(3))
    };
    let lo16 = _mm_set1_epi32(0xFFFF);
    let h0 = head(b0);
    let (_, sd0, _, _) = f16_fixed4(_mm_and_si128(h0, lo16));
    let (_, sm0, _, _) = f16_fixed4(_mm_srli_epi32(h0, 16));
    let zero = _mm_setzero_si128();
    let base_d = _mm_max_epi32(_mm_sub_epi32(sd0, _mm_set1_epi32(MARGIN_D)), zero);
    let base_m = _mm_max_epi32(_mm_sub_epi32(sm0, _mm_set1_epi32(MARGIN_M)), zero);
    let (mut dlo, mut dhi, mut mlo, mut mhi) = (zero, zero, zero, zero);
    let mut bad = zero;
    let mut acc_d = [_mm256_setzero_si256(); N];
    let mut acc_m = [_mm256_setzero_si256(); N];
    let mask = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    for b in 0..nb {
        let blk = b0 + b;
        let h = head(blk);
        let (dm, dsh, dnz, dbad) = f16_fixed4(_mm_and_si128(h, lo16));
        bad = _mm_or_si128(bad, dbad);
        let (drel, l, hh) = rel_track(dsh, dnz, base_d, dlo, dhi);
        (dlo, dhi) = (l, hh);
        let at = |r: usize, o: usize| r * rb + blk * bs + o;
        for r in 0..ROW_GROUP {
            let p = base_ptr.wrapping_add(at(r, 0) + ROW_GROUP * rb);
            _mm_prefetch::<_MM_HINT_T0>(p.cast());
        }
        // The four rows' weight bytes, decoded once for the whole tile:
        // Q4_1 nibbles as unsigned bytes; Q8_0 magnitudes and raw signs.
        let (w, sgn) = if Q41 {
            // SAFETY: at(r, 4) + 16 ≤ at(r, bs) ≤ 4·rb ≤ group.len().
            let ld = |r: usize| unsafe { _mm_loadu_si128(base_ptr.add(at(r, 4)).cast()) };
            let un = |q: __m128i| _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), mask);
            (
                [un(ld(0)), un(ld(1)), un(ld(2)), un(ld(3))],
                [_mm256_setzero_si256(); ROW_GROUP],
            )
        } else {
            // SAFETY: at(r, 2) + 32 = at(r, bs) ≤ 4·rb ≤ group.len().
            let ld = |r: usize| unsafe { _mm256_loadu_si256(base_ptr.add(at(r, 2)).cast()) };
            let x = [ld(0), ld(1), ld(2), ld(3)];
            (x.map(|x| _mm256_sign_epi8(x, x)), x)
        };
        let (mm, mrel) = if Q41 {
            let (mm, msh, mnz, mbad) = f16_fixed4(_mm_srli_epi32(h, 16));
            bad = _mm_or_si128(bad, mbad);
            let (mrel, l, hh) = rel_track(msh, mnz, base_m, mlo, mhi);
            (mlo, mhi) = (l, hh);
            (mm, mrel)
        } else {
            (zero, zero)
        };
        for j in 0..n {
            let Some(y) = t.qs[j].get(b * QK..).and_then(|q| load32(i8_bytes(q))) else {
                return res;
            };
            let Some(s) = t.sc[j].get(b) else { return res };
            let dot = |r: usize| {
                let (a, y) = if Q41 {
                    (w[r], y)
                } else {
                    (w[r], _mm256_sign_epi8(y, sgn[r]))
                };
                _mm256_madd_epi16(_mm256_maddubs_epi16(a, y), ones)
            };
            let sumi = reduce4(dot(0), dot(1), dot(2), dot(3));
            let c = _mm_mullo_epi32(dm, _mm_set1_epi32(s.dm));
            let sh = _mm_add_epi32(drel, _mm_set1_epi32(s.drel as i32));
            acc_d[j] = mul_shift_add(acc_d[j], sumi, c, sh);
            if Q41 {
                let cm = _mm_mullo_epi32(mm, _mm_set1_epi32(s.sm));
                let shm = _mm_add_epi32(mrel, _mm_set1_epi32(s.srel as i32));
                acc_m[j] = mul_shift_add(acc_m[j], cm, _mm_set1_epi32(1), shm);
            }
        }
    }
    let (dlo, dhi, mlo, mhi) = (store4(dlo), store4(dhi), store4(mlo), store4(mhi));
    let (lim_d, lim_m) = if Q41 {
        (LIM_Q4_1_D, LIM_Q4_1_M)
    } else {
        (LIM_Q8_0_D, 0)
    };
    let (bd, bm) = (store4(base_d), store4(base_m));
    let badv = store4(bad);
    for j in 0..n {
        let ch = &t.ch[j];
        let r = &mut res[j];
        r.ok = (0..ROW_GROUP).all(|i| {
            dlo[i] >= 0
                && dhi[i] as u32 + ch.dspread <= lim_d
                && (!Q41 || (mlo[i] >= 0 && mhi[i] as u32 + ch.sspread <= lim_m))
        });
        for i in 0..ROW_GROUP {
            r.dbase[i] = bd[i] as u32 + ch.dbase;
            r.mbase[i] = bm[i] as u32 + ch.sbase;
            r.bad[i] = badv[i] != 0;
        }
        r.d = store(acc_d[j]);
        r.m = store(acc_m[j]);
    }
    res
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
