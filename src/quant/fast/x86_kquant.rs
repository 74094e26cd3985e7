//! The hand-written x86 builds of the Q4_K / Q6_K row kernels of
//! [`super::kquant`] (x86-64, feature `std`; the builds chosen by
//! [`crate::simd::level`]): one weight row against one input row
//! ([`kquant_builds`]), and with several input rows four weight rows at a
//! time against one input row ([`kquant_tile`]), in AVX2 intrinsics (also
//! compiled with the AVX-512 features, as `multiversion!` does).
//!
//! Contract: they compute exactly the `i32` sub-block sums and the `i64`
//! super-block sums of [`super::kquant`]'s portable bodies, then the same
//! `i128` steps — same integers, another instruction sequence — so results
//! are the same bits; `tests/kernels_matmul.rs` checks that by proptest
//! (every path, and that the one asked for ran), `tests/kernels_guarded.rs`
//! that they read only their inputs (guard pages), `tests/quant_exact.rs`
//! extreme blocks.
//!
//! ## Unsafe review
//! * Every `unsafe` block is a call of a `#[target_feature]` function, made
//!   only through a function pointer that [`kquant_builds`] or
//!   [`kquant_tile`] hands out after [`crate::simd::level`] confirmed each
//!   of its features ([`Level::Avx2`]: AVX2, BMI1, BMI2, LZCNT;
//!   [`Level::Avx512`]: those and AVX-512 F, CD, VL, DQ, BW), or an
//!   unaligned load or store.
//! * Loads read from slices whose length is asserted at the load
//!   ([`load32`]); stores write local arrays of the stored size.
//! * No pointer arithmetic beyond those checked slices, no writes through
//!   pointers, no uninitialised memory.
#![allow(unsafe_code)]

use super::kquant;
use crate::quant::GgmlType;
use crate::quant::act::{ActRow, ActScale, FLAG_D_NONFINITE};
use crate::quant::block::QK_K;
use crate::quant::fixed::{ExactAcc, f16_fixed, f16_nonfinite};
use crate::simd::Level;
use core::arch::x86_64::*;

/// The hand-written `[AVX-512, AVX2]` builds of the Q4_K and Q6_K row
/// kernels ([`super::kquant`]) this CPU runs, `None` for other formats.
/// Both builds are the same AVX2 intrinsics (the AVX-512 one compiled with
/// the AVX-512 features too, as `multiversion!` does): the sub-block byte
/// dots by `vpmaddubsw` / `vpmaddwd` into one `i32` vector per sub-block,
/// the eight vectors summed together by a `vphaddd` tree, then the
/// super-block's `i64` sum of [`super::kquant`] in vectors
/// ([`scaled_sum_split`]) and its `i128` steps as there.
pub(super) fn kquant_builds(ty: GgmlType) -> Option<[Option<kquant::RowFn>; 2]> {
    let level = crate::simd::level();
    let (wide, narrow): (kquant::RowFn, kquant::RowFn) = match ty {
        GgmlType::Q4_K => (q4_k_avx512_entry, q4_k_avx2_entry),
        GgmlType::Q6_K => (q6_k_avx512_entry, q6_k_avx2_entry),
        _ => return None,
    };
    if level < Level::Avx2 {
        return None;
    }
    Some([(level >= Level::Avx512).then_some(wide), Some(narrow)])
}

/// The eight `i32` lanes of `v`.
#[target_feature(enable = "avx2")]
fn to_array(v: __m256i) -> [i32; 8] {
    let mut out = [0i32; 8];
    // SAFETY: `out` is 32 writable bytes; the store is unaligned.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) };
    out
}

/// The 32 bytes of `s` at `at` as a vector.
#[target_feature(enable = "avx2")]
fn load32<T: Copy>(s: &[T], at: usize) -> __m256i {
    assert!(size_of::<T>() == 1 && at + 32 <= s.len());
    // SAFETY: `T` is one byte and `at + 32 <= s.len()` (asserted above), so
    // the 32 bytes read lie in `s`; the load is unaligned.
    unsafe { _mm256_loadu_si256(s.as_ptr().add(at).cast()) }
}

/// Sum of each of eight `i32` vectors, as one vector (lane `j`: `v[j]`'s
/// total): two `vphaddd` levels (lane `k < 4` of the second: `v[k]`'s
/// low-half total, lane `4 + k` its high half's), then the halves added.
#[target_feature(enable = "avx2")]
fn sum8v(v: [__m256i; 8]) -> __m256i {
    let t0 = _mm256_hadd_epi32(v[0], v[1]);
    let t1 = _mm256_hadd_epi32(v[2], v[3]);
    let t2 = _mm256_hadd_epi32(v[4], v[5]);
    let t3 = _mm256_hadd_epi32(v[6], v[7]);
    let u0 = _mm256_hadd_epi32(t0, t1);
    let u1 = _mm256_hadd_epi32(t2, t3);
    _mm256_add_epi32(
        _mm256_permute2x128_si256(u0, u1, 0x20),
        _mm256_permute2x128_si256(u0, u1, 0x31),
    )
}

/// `Σ_j (a_j · m_j) << r_j` over the eight `i32` lanes, in `i64` (the
/// caller's bounds keep every partial sum below 2^62): `vpmuldq` on the
/// even and the odd lanes, `vpsllvq`, and the four `i64` lanes added. `m`
/// and `r` come split once for several `a` ([`SuperAct`]): `m` and `m_odd`
/// (its odd lanes moved down, as by `vpshufd`), `r_even` and `r_odd` (the
/// shifts in the low half of each `i64` lane). The odd lanes of `a` are
/// moved down by `vpshufd`, not by a 64-bit shift (which the compiler
/// lowers to a full 64-bit multiply there).
#[target_feature(enable = "avx2")]
fn scaled_sum_split(a: __m256i, m: [__m256i; 2], r: [__m256i; 2]) -> i64 {
    let even = _mm256_sllv_epi64(_mm256_mul_epi32(a, m[0]), r[0]);
    let odd = _mm256_sllv_epi64(_mm256_mul_epi32(_mm256_shuffle_epi32(a, 0xF5), m[1]), r[1]);
    let s = _mm256_add_epi64(even, odd);
    let s = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    _mm_cvtsi128_si64(s).wrapping_add(_mm_extract_epi64(s, 1))
}

/// Eight `i32` as a vector.
#[target_feature(enable = "avx2")]
fn v8(v: [i32; 8]) -> __m256i {
    _mm256_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
}

/// The Q4_K row kernel: the sub-block sums by `vpmaddubsw` / `vpmaddwd`
/// (nibbles `0..=15` times activations in `-127..=127`, pairs at most
/// `2·15·127`, never saturating) summed by [`sum8v`], and, within
/// [`kquant::LIM_Q4_K`], the `i64` sums `I` and `M` of [`super::kquant`]
/// (`Σ_j ((sc_j·sumq_j)·am_j) << rel_j`, `Σ_j ((mn_j·bsum_j)·am_j) <<
/// rel_j`: the same integers, `sc·sumq < 2^22` and `mn·bsum < 2^18` exact
/// in `i32`) in vectors; beyond it, per sub-block in `i128` as there.
#[target_feature(enable = "avx2")]
fn q4_k_row_vec(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    let [acc] = q4_k_rows_vec([row], a);
    acc
}

/// [`q4_k_row_vec`] for `N` weight rows at once against one input row (each
/// cell the same integers): the input's per-super-block terms (shift base
/// and spread, mantissas, `rel`, `bsum`) are gathered once for all rows.
/// The caller checks the input row's lengths as for one.
#[target_feature(enable = "avx2")]
fn q4_k_rows_vec<const N: usize>(rows: [&[u8]; N], a: &ActRow<'_>) -> [ExactAcc; N] {
    let mut acc = [(); N].map(|()| ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    });
    let m4 = _mm256_set1_epi8(15);
    let ones = _mm256_set1_epi16(1);
    let sbs = a.qs.chunks_exact(QK_K).zip(a.sc.chunks_exact(8));
    for (b, (yq, ys)) in sbs.enumerate() {
        let act = SuperAct::new(ys);
        let (base, spread, am, r) = (act.base, act.spread, act.am, act.r);
        let bs = v8(core::array::from_fn(|j| ys[j].bsum));
        let y: [__m256i; 8] = core::array::from_fn(|k| load32(yq, 32 * k));
        for (acc, row) in acc.iter_mut().zip(rows) {
            let Some(blk) = row.get(144 * b..144 * (b + 1)) else {
                continue;
            };
            let d = u16::from_le_bytes([blk[0], blk[1]]);
            let dmin = u16::from_le_bytes([blk[2], blk[3]]);
            acc.nonfinite |= f16_nonfinite(d) | f16_nonfinite(dmin);
            let (dm, dsh) = f16_fixed(d);
            let (nm, nsh) = f16_fixed(dmin);
            let scales = &blk[4..16];
            let (mut sc, mut mn) = ([0i32; 8], [0i32; 8]);
            for (j, (s, m)) in sc.iter_mut().zip(mn.iter_mut()).enumerate() {
                (*s, *m) = kquant::scale_min(scales, j);
            }
            // Sub-block 2c: low nibbles of bytes 32c.., 2c + 1: the high ones.
            let mut v = [_mm256_setzero_si256(); 8];
            for c in 0..4 {
                let q = load32(blk, 16 + 32 * c);
                let lo = _mm256_and_si256(q, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                v[2 * c] = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y[2 * c]), ones);
                v[2 * c + 1] = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y[2 * c + 1]), ones);
            }
            let sumq = sum8v(v);
            if spread <= kquant::LIM_Q4_K {
                let id = scaled_sum_split(_mm256_mullo_epi32(v8(sc), sumq), am, r);
                let im = scaled_sum_split(_mm256_mullo_epi32(v8(mn), bs), am, r);
                acc.sum += (id as i128 * dm as i128) << (dsh + base);
                acc.sum -= (im as i128 * nm as i128) << (nsh + base);
            } else {
                let sq = to_array(sumq);
                for (j, s) in ys.iter().enumerate() {
                    acc.add_shifted((sc[j] * sq[j]) as i64 * (dm * s.dm) as i64, dsh + s.dsh);
                    acc.add_shifted(-((mn[j] * s.bsum) as i64 * (nm * s.dm) as i64), nsh + s.dsh);
                }
            }
        }
    }
    acc
}

/// The Q6_K scaled sub-block sums of a 210-byte super-block `blk` with its
/// 256 activations `yq` (the same integers as the portable `q6_k_sumi`):
/// `q + 32` in `0..=63` by `vpmaddubsw` (pairs at most `2·63·127`), minus
/// `32·y` the same way (pairs at most `2·32·127`; the difference stays
/// within `i16`), then `vpmaddwd` by the two 16-element halves' signed
/// scales.
#[target_feature(enable = "avx2")]
fn q6_k_sumi_avx2(blk: &[u8], yq: &[i8]) -> __m256i {
    let m4 = _mm256_set1_epi8(15);
    let m2 = _mm256_set1_epi8(3);
    let c32 = _mm256_set1_epi8(32);
    let mut v = [_mm256_setzero_si256(); 8];
    for h in 0..2 {
        let qh = load32(blk, 128 + 32 * h);
        let ql = [load32(blk, 64 * h), load32(blk, 64 * h + 32)];
        for k in 0..4 {
            let low = if k < 2 {
                _mm256_and_si256(ql[k % 2], m4)
            } else {
                _mm256_and_si256(_mm256_srli_epi16(ql[k % 2], 4), m4)
            };
            let high = match k {
                0 => qh,
                1 => _mm256_srli_epi16(qh, 2),
                2 => _mm256_srli_epi16(qh, 4),
                _ => _mm256_srli_epi16(qh, 6),
            };
            let high = _mm256_slli_epi16(_mm256_and_si256(high, m2), 4);
            let q = _mm256_or_si256(low, high);
            let y = load32(yq, 128 * h + 32 * k);
            let p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(c32, y));
            let j = 4 * h + k;
            let sc = _mm256_set_m128i(
                _mm_set1_epi16(blk[192 + 2 * j + 1] as i8 as i16),
                _mm_set1_epi16(blk[192 + 2 * j] as i8 as i16),
            );
            v[j] = _mm256_madd_epi16(p, sc);
        }
    }
    sum8v(v)
}

/// The Q6_K row kernel: the sums of [`q6_k_sumi_avx2`], each super-block
/// ended by [`q6_k_super_end`].
#[target_feature(enable = "avx2")]
fn q6_k_row_vec(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    let mut acc = ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    };
    let sbs = a.qs.chunks_exact(QK_K).zip(a.sc.chunks_exact(8));
    for (blk, (yq, ys)) in row.chunks_exact(210).zip(sbs) {
        let sumi = q6_k_sumi_avx2(blk, yq);
        q6_k_super_end(&mut acc, blk, sumi, &SuperAct::new(ys), ys);
    }
    acc
}

/// A super-block's activation terms as [`scaled_sum_split`] takes them,
/// gathered once for every weight row: the shift `base` and `spread` of
/// [`kquant::act_base`], the mantissas `am` (and their odd lanes moved
/// down), and `rel` (even and odd lanes, each in the low half of an `i64`
/// lane).
struct SuperAct {
    base: u32,
    spread: u32,
    am: [__m256i; 2],
    r: [__m256i; 2],
}

impl SuperAct {
    #[target_feature(enable = "avx2")]
    fn new(ys: &[ActScale]) -> Self {
        let (base, spread) = kquant::act_base(ys);
        let (mut am, mut r) = ([0i32; 8], [0i32; 8]);
        for (j, s) in ys.iter().enumerate() {
            am[j] = s.dm;
            r[j] = kquant::rel(s, base) as i32;
        }
        let (am, r) = (v8(am), v8(r));
        SuperAct {
            base,
            spread,
            am: [am, _mm256_shuffle_epi32(am, 0xF5)],
            r: [
                _mm256_and_si256(r, _mm256_set1_epi64x(0xFFFF_FFFF)),
                _mm256_srli_epi64(r, 32),
            ],
        }
    }
}

/// The end of a Q6_K super-block `blk` (its `f16` scale `d` at byte 208)
/// for one weight row: its sub-block sums `sumi` (as `q6_k_sumi`) added to
/// `acc`. Within [`kquant::LIM_Q6_K`] (`act.spread`), `I = Σ_j (sumi_j·am_j)
/// << rel_j` in `i64` by [`scaled_sum_split`] and one `i128` step `(I·dm)
/// << (dsh + base)`; beyond it, per sub-block in `i128`, as
/// [`super::kquant`] does. The same integer either way. (`#[inline]`, not
/// `#[inline(always)]`: stable Rust rejects the latter with
/// `#[target_feature]`; both callers are built with a superset of its
/// features, so it inlines.)
#[target_feature(enable = "avx2")]
#[inline]
fn q6_k_super_end(acc: &mut ExactAcc, blk: &[u8], sumi: __m256i, act: &SuperAct, ys: &[ActScale]) {
    let d = u16::from_le_bytes([blk[208], blk[209]]);
    acc.nonfinite |= f16_nonfinite(d);
    let (dm, dsh) = f16_fixed(d);
    if act.spread <= kquant::LIM_Q6_K {
        let id = scaled_sum_split(sumi, act.am, act.r);
        acc.sum += (id as i128 * dm as i128) << (dsh + act.base);
    } else {
        let sumi = to_array(sumi);
        for (j, s) in ys.iter().enumerate() {
            acc.add_shifted(sumi[j] as i64 * (dm * s.dm) as i64, dsh + s.dsh);
        }
    }
}

/// The two halves' sums of each 32-sub-block of a Q6_K super-block, as two
/// vectors laid out as [`sum8v`]'s second `vphaddd` level: `(u0, u1)`, lane
/// `k < 4` of `u0` the first 16 elements' sum of sub-block `k`, lane `4 + k`
/// its last 16's; `u1` likewise for sub-blocks `4..8`. `v[j]`: sub-block
/// `j`'s `i32` partial sums, the first half in the low 128 bits.
#[target_feature(enable = "avx2")]
fn half_sums(v: [__m256i; 8]) -> (__m256i, __m256i) {
    let t0 = _mm256_hadd_epi32(v[0], v[1]);
    let t1 = _mm256_hadd_epi32(v[2], v[3]);
    let t2 = _mm256_hadd_epi32(v[4], v[5]);
    let t3 = _mm256_hadd_epi32(v[6], v[7]);
    (_mm256_hadd_epi32(t0, t1), _mm256_hadd_epi32(t2, t3))
}

/// [`q6_k_row_vec`] for `N` weight rows at once against one input row (each
/// cell the same integers as the portable `q6_k_sumi` and `q6_k_row`).
///
/// Per super-block the input's terms are taken once for all rows: the
/// activation vectors, the shift base and spread, mantissas and `rel`, and
/// `32·Σ y` over each 16-element half. Per weight row, the 6-bit values
/// `q + 32` (in `0..=63`) times the activations by `vpmaddubsw` (pairs at
/// most `2·63·127`, never saturating) and `vpmaddwd` by ones, reduced to
/// the sixteen half sums by [`half_sums`] (each `≤ 16·63·127 < 2^17`);
/// minus the input's `32·Σ y` that gives `Σ q·y` per half (`|·| ≤
/// 16·32·127 < 2^16`), times the half's signed scale (`< 2^23`), and the
/// two halves added: `sumi_j`, as `q6_k_sumi`; then [`q6_k_super_end`].
/// The caller checks the input row's lengths as for one.
#[target_feature(enable = "avx2")]
fn q6_k_rows_vec<const N: usize>(rows: [&[u8]; N], a: &ActRow<'_>) -> [ExactAcc; N] {
    let mut acc = [(); N].map(|()| ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    });
    let m4 = _mm256_set1_epi8(15);
    let c32 = _mm256_set1_epi8(32);
    let ones = _mm256_set1_epi16(1);
    // Scale bytes 0..16 reordered as [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, ...]:
    // the half sums' order in `half_sums`.
    let order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    // The high two bits of sub-block `k` of a 128-element half: bits
    // `2k..2k + 2` of `qh`, moved to bits 4..6.
    let mh = [3i8, 12, 48, -64].map(|m| _mm256_set1_epi8(m));
    let sbs = a.qs.chunks_exact(QK_K).zip(a.sc.chunks_exact(8));
    for (b, (yq, ys)) in sbs.enumerate() {
        let act = SuperAct::new(ys);
        let y: [__m256i; 8] = core::array::from_fn(|k| load32(yq, 32 * k));
        let (o0, o1) = half_sums(y.map(|y| _mm256_madd_epi16(_mm256_maddubs_epi16(c32, y), ones)));
        for (acc, row) in acc.iter_mut().zip(rows) {
            let Some(blk) = row.get(210 * b..210 * (b + 1)) else {
                continue;
            };
            // Sub-block j = 4h + k: low bits from the 32 bytes of `ql` at
            // 64h + 32(k % 2) (low nibbles for k < 2), high bits 2k..2k+2 of
            // `qh`'s 32 bytes at 128 + 32h.
            let mut v = [_mm256_setzero_si256(); 8];
            for h in 0..2 {
                let qh = load32(blk, 128 + 32 * h);
                let ql = [load32(blk, 64 * h), load32(blk, 64 * h + 32)];
                for k in 0..4 {
                    let low = if k < 2 {
                        _mm256_and_si256(ql[k], m4)
                    } else {
                        _mm256_and_si256(_mm256_srli_epi16(ql[k - 2], 4), m4)
                    };
                    let high = _mm256_and_si256(qh, mh[k]);
                    let high = match k {
                        0 => _mm256_slli_epi16(high, 4),
                        1 => _mm256_slli_epi16(high, 2),
                        2 => high,
                        _ => _mm256_srli_epi16(high, 2),
                    };
                    let q = _mm256_or_si256(low, high);
                    let j = 4 * h + k;
                    v[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y[j]), ones);
                }
            }
            let (u0, u1) = half_sums(v);
            let sb: [u8; 16] = core::array::from_fn(|i| blk[192 + i]);
            let scales = _mm_set_epi64x(
                i64::from_le_bytes(core::array::from_fn(|i| sb[8 + i])),
                i64::from_le_bytes(core::array::from_fn(|i| sb[i])),
            );
            let sc = _mm_shuffle_epi8(scales, order);
            let s0 = _mm256_cvtepi8_epi32(sc);
            let s1 = _mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8));
            let p0 = _mm256_mullo_epi32(_mm256_sub_epi32(u0, o0), s0);
            let p1 = _mm256_mullo_epi32(_mm256_sub_epi32(u1, o1), s1);
            let sumi = _mm256_add_epi32(
                _mm256_permute2x128_si256(p0, p1, 0x20),
                _mm256_permute2x128_si256(p0, p1, 0x31),
            );
            q6_k_super_end(acc, blk, sumi, &act, ys);
        }
    }
    acc
}

/// Builds of the hand-written K-quant row kernels for a feature set.
macro_rules! kquant_build {
    ($q4:ident, $q6:ident, $q4t:ident, $q6t:ident, $features:literal) => {
        #[target_feature(enable = $features)]
        fn $q4(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
            q4_k_row_vec(row, a)
        }

        #[target_feature(enable = $features)]
        fn $q6(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
            q6_k_row_vec(row, a)
        }

        #[target_feature(enable = $features)]
        fn $q4t(rows: [&[u8]; kquant::TILE], a: &ActRow<'_>) -> [ExactAcc; kquant::TILE] {
            q4_k_rows_vec(rows, a)
        }

        #[target_feature(enable = $features)]
        fn $q6t(rows: [&[u8]; kquant::TILE], a: &ActRow<'_>) -> [ExactAcc; kquant::TILE] {
            q6_k_rows_vec(rows, a)
        }
    };
}

kquant_build!(
    q4_k_avx2,
    q6_k_avx2,
    q4_k_tile_avx2,
    q6_k_tile_avx2,
    "avx2,bmi1,bmi2,lzcnt"
);
kquant_build!(
    q4_k_avx512,
    q6_k_avx512,
    q4_k_tile_avx512,
    q6_k_tile_avx512,
    "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw"
);

/// [`kquant::RowFn`] entry of [`q4_k_avx2`].
fn q4_k_avx2_entry(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    // SAFETY: only handed out by `kquant_builds`, after `simd::level()`
    // returned `Avx2` or wider: AVX2, BMI1, BMI2, LZCNT.
    unsafe { q4_k_avx2(row, a) }
}

/// [`kquant::RowFn`] entry of [`q6_k_avx2`].
fn q6_k_avx2_entry(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    // SAFETY: as in `q4_k_avx2_entry`.
    unsafe { q6_k_avx2(row, a) }
}

/// [`kquant::RowFn`] entry of [`q4_k_avx512`].
fn q4_k_avx512_entry(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    // SAFETY: only handed out by `kquant_builds`, after `simd::level()`
    // returned `Avx512` or wider: the AVX2 set and AVX-512 F, CD, VL, DQ, BW.
    unsafe { q4_k_avx512(row, a) }
}

/// [`kquant::RowFn`] entry of [`q6_k_avx512`].
fn q6_k_avx512_entry(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    // SAFETY: as in `q4_k_avx512_entry`.
    unsafe { q6_k_avx512(row, a) }
}

/// The tile build of the Q4_K or Q6_K row kernel for the build `kquant_builds`
/// handed out at `level` ([`Level::Avx512`] or [`Level::Avx2`]), if this
/// CPU runs it; `None` for other formats.
pub(super) fn kquant_tile(ty: GgmlType, level: Level) -> Option<kquant::TileFn> {
    let cpu = crate::simd::level();
    match (ty, level) {
        (GgmlType::Q4_K, Level::Avx512) if cpu >= Level::Avx512 => Some(q4_k_tile_avx512_entry),
        (GgmlType::Q4_K, Level::Avx2) if cpu >= Level::Avx2 => Some(q4_k_tile_avx2_entry),
        (GgmlType::Q6_K, Level::Avx512) if cpu >= Level::Avx512 => Some(q6_k_tile_avx512_entry),
        (GgmlType::Q6_K, Level::Avx2) if cpu >= Level::Avx2 => Some(q6_k_tile_avx2_entry),
        _ => None,
    }
}

/// [`kquant::TileFn`] entry of [`q4_k_tile_avx2`].
fn q4_k_tile_avx2_entry(rows: [&[u8]; kquant::TILE], a: &ActRow<'_>) -> [ExactAcc; kquant::TILE] {
    // SAFETY: only handed out by `kquant_tile`, after `simd::level()`
    // returned `Avx2` or wider: AVX2, BMI1, BMI2, LZCNT.
    unsafe { q4_k_tile_avx2(rows, a) }
}

/// [`kquant::TileFn`] entry of [`q4_k_tile_avx512`].
fn q4_k_tile_avx512_entry(rows: [&[u8]; kquant::TILE], a: &ActRow<'_>) -> [ExactAcc; kquant::TILE] {
    // SAFETY: only handed out by `kquant_tile`, after `simd::level()`
    // returned `Avx512` or wider: the AVX2 set and AVX-512 F, CD, VL, DQ, BW.
    unsafe { q4_k_tile_avx512(rows, a) }
}

/// [`kquant::TileFn`] entry of [`q6_k_tile_avx2`].
fn q6_k_tile_avx2_entry(rows: [&[u8]; kquant::TILE], a: &ActRow<'_>) -> [ExactAcc; kquant::TILE] {
    // SAFETY: as in `q4_k_tile_avx2_entry`.
    unsafe { q6_k_tile_avx2(rows, a) }
}

/// [`kquant::TileFn`] entry of [`q6_k_tile_avx512`].
fn q6_k_tile_avx512_entry(rows: [&[u8]; kquant::TILE], a: &ActRow<'_>) -> [ExactAcc; kquant::TILE] {
    // SAFETY: as in `q4_k_tile_avx512_entry`.
    unsafe { q6_k_tile_avx512(rows, a) }
}
