//! The hand-written x86 builds of the Q4_K / Q6_K row kernels of
//! [`kquant`] (x86-64, feature `std`; each handed out where
//! [`crate::simd::level`] says the CPU runs it, `super::super::dispatch`
//! picking which): one weight row against one input row, and with several
//! input rows four weight rows at a time against one input row, in AVX2
//! intrinsics ([`avx2`]; also compiled with the AVX-512 features, as
//! `multiversion!` does: [`avx512`]); and on
//! AVX-512 VNNI one or [`WIDE_GROUPS`] tiles of four weight rows against
//! up to [`WIDE_ACT_TILE`] input rows ([`vnni_tiles`]:
//! [`q4_k_tile_vnni`] (Q4_K and Q5_K), [`q6_k_tile_vnni`]), each weight super-block decoded
//! once for all of the input rows, each input row's terms taken once for
//! all of the tiles.
//!
//! Contract: they compute exactly the `i32` sub-block sums and the `i64`
//! super-block sums of [`kquant`]'s portable bodies, then the same
//! `i128` steps — same integers, another instruction sequence — so results
//! are the same bits; `tests/kernels/matmul.rs` checks that by proptest
//! (every path, and that the one asked for ran), `tests/kernels_guarded.rs`
//! that they read only their inputs (guard pages), `tests/kernels/quant_exact.rs`
//! extreme blocks.
//!
//! ## The VNNI tile, and why it is exact
//!
//! Per super-block each tile's four weight rows are decoded once for every
//! input row of the call: each row's 256 values as four 64-byte vectors laid out
//! as the activations are (Q6_K: vector `c` elements `64c..64c + 64`,
//! sub-blocks `2c` and `2c + 1`, `q + 32` in `0..=63`; Q4_K: the nibbles,
//! vector `2g + h` half `h` of sub-blocks `4g..4g + 4`; Q5_K: likewise,
//! 16 added where the value's fifth bit is set, [`q5_k_high`]), the
//! scales in the lane order the reduction produces (lane `4(j − 4h) + r` of
//! vector `h`: sub-block `j`, weight row `r`), and the `f16` scales. Per
//! input row its terms are taken once for all the call's rows ([`ActTerms`]:
//! `base`, `spread`, `am_j`, `rel_j`, `bsum_j` in that lane order), then
//! `vpdpbusd` per weight row and 64 activations (Q6_K: each `i32` lane,
//! added to `−32·Σ y` of the same four activations, `|Σ q·y| ≤ 4·32·127`;
//! Q4_K, whose weights and activations are laid out with a sub-block's two
//! halves in the same 128-bit lane of two vectors ([`q4_k_act`]), two
//! chained: each lane `≤ 8·15·127`; Q5_K one per vector, `≤ 4·31·127`,
//! and the two halves' reductions added, [`q5_k_dots`]; no lane comes
//! near 2^31), one reduction of the four rows' dots together
//! ([`reduce4`], whose packs need lanes below 2^14; Q6_K also
//! [`pair_halves`]: the sub-block sums `sumq_j` of
//! `q4_5_k_sumq`, `≤ 32·15·127 < 2^16` (Q5_K `≤ 32·31·127 < 2^17`), resp. per 16-element half
//! `|Σ q·y| ≤ 16·32·127 < 2^16`, times the half's signed scale `< 2^23`,
//! the two halves added: `sumi_j` of `q6_k_sumi`, `< 2^24`).
//!
//! The scaling runs a chunk of [`kquant::CHUNK_SUPERS`] super-blocks (one
//! activation chunk, 1024 elements) at a time. Per tile and chunk each
//! weight row's smallest non-zero scale shift `wbase` is found
//! ([`WeightBases`]), and per input row its chunk's `dbase` is known
//! (its `ChunkScale`; `drel_j = ash_j − dbase`). Where the weight spread
//! over the chunk is within `CHUNK_WLIM` and the weight and activation
//! spreads together within `CHUNK_LIM` ([`kquant::CHUNK_WLIM_Q4_K`] 14 /
//! [`kquant::CHUNK_LIM_Q4_K`] 16, Q5_K 14 / 15, [`kquant::CHUNK_WLIM_Q6_K`] 9 /
//! [`kquant::CHUNK_LIM_Q6_K`] 14), every term of every sub-block goes into
//! an `i64` lane of its cell, scaled by both `f16` mantissas and shifted
//! relative to `wbase + dbase`: Q4_K `((sumq·am)·(sc·dm << wrel_d) −
//! (bsum·am)·(mn·nm << wrel_n)) << drel` ([`q4_k_chunk_add`]: the weight
//! factors `< 2^17 · 2^14 < 2^31` in `i32` lanes, `sumq·am < 2^27` (Q5_K
//! `< 2^28`), then
//! `vpmuldq`, `vpsllvq`); Q6_K `(sumi·((dm << wrel)·am)) << drel`
//! ([`q6_k_chunk_add`]: `dm·am·2^9 < 2^31`). Each lane gathers at most
//! eight terms over a chunk, each below `2^60`, so it stays below `2^63`
//! (the bounds at the functions). At the chunk's end each cell's lanes
//! are summed in `i128` and added at `2^(wbase + dbase)` ([`chunk_flush`]):
//! one `i128` step per cell and chunk instead of one per super-block.
//! Every shift is the sum of two `f16` shifts, at most 30 each, and is
//! masked to `0..=63` (the same value) so that no select for wider shifts
//! is compiled. Beyond the chunk limits (rare: a 2^15 spread within 1024
//! elements), that tile's cells of that input row take each super-block as
//! before: within the limit on the super-block's own `spread`
//! ([`kquant::LIM_Q4_K`], [`kquant::LIM_Q5_K`], [`kquant::LIM_Q6_K`];
//! [`ActTerms`]) the `i64` sums `I` (and Q4_K's and Q5_K's `M`) of
//! [`kquant`] by [`row_sums`] / [`row_sums2`] (`sc·sumq < 2^22`, Q5_K
//! `< 2^23`, and `mn·bsum < 2^18` in `i32` lanes,
//! times `am` by `vpmuldq`, shifted by `rel ≤ spread`), then per cell the
//! portable body's `i128` step(s) (Q4_K's two as one, `(I·dm' − M·nm') <<
//! (lo + base)` with the mantissas brought to `lo = min(dsh, nsh)`:
//! [`q4_k_add`]); beyond it per sub-block in `i128` as there. Integer
//! addition being associative, every cell is the portable body's integer.
//! `tests/kernels/matmul.rs` (`kquant_chunk_limits_agree`) runs each limit
//! at and one past its value with terms at their largest.
//!
//! ## Unsafe review
//! * Every `unsafe` block is a call of a `#[target_feature]` function, made
//!   only through a function pointer that [`avx2`], [`avx512`] or
//!   [`vnni_tiles`] hands out after
//!   [`crate::simd::level`] confirmed each of its features
//!   ([`Level::Avx2`]: AVX2, BMI1, BMI2, LZCNT; [`Level::Avx512`]: those
//!   and AVX-512 F, CD, VL, DQ, BW; [`Level::Avx512Vnni`]: those and
//!   VNNI), or an unaligned load or store.
//! * Loads read from slices whose length is asserted at the load
//!   ([`load32`], [`load64`]; the VNNI tile's callers pass whole
//!   super-blocks as arrays, `&[u8; 144]`, `&[u8; 176]`, `&[u8; 210]`, `&[i8; 256]`, and
//!   the eight block scales as their 256 bytes); stores write local arrays
//!   of the stored size.
//! * No pointer arithmetic beyond those checked slices, no writes through
//!   pointers, no uninitialised memory.
#![allow(unsafe_code)]

use crate::quant::GgmlType;
use crate::quant::act::{ActRow, ActScale, CHUNK_BLOCKS, ChunkScale, FLAG_D_NONFINITE};
use crate::quant::block::{QK, QK_K};
use crate::quant::fast::kquant::{self, WIDE_ACT_TILE, WIDE_GROUPS};
use crate::quant::fixed::{ExactAcc, f16_fixed, f16_nonfinite};
use crate::simd::Level;
use core::arch::x86_64::*;

/// The AVX2 builds of the Q4_K or Q6_K row kernel ([`kquant`]) and of its
/// tile (four weight rows against one input row), if this CPU runs
/// [`Level::Avx2`]; `None` for other formats. The sub-block byte dots by
/// `vpmaddubsw` / `vpmaddwd` into one `i32` vector per sub-block, the
/// eight vectors summed together by a `vphaddd` tree, then the
/// super-block's `i64` sum of [`kquant`] in vectors ([`scaled_sum_split`])
/// and its `i128` steps as there.
pub(in crate::quant::fast) fn avx2(ty: GgmlType) -> Option<(kquant::RowFn, kquant::TileFn)> {
    if crate::simd::level() < Level::Avx2 {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some((q4_k_avx2_entry, q4_k_tile_avx2_entry)),
        GgmlType::Q6_K => Some((q6_k_avx2_entry, q6_k_tile_avx2_entry)),
        _ => None,
    }
}

/// [`avx2`]'s kernels compiled with the AVX-512 features too (the same
/// intrinsics, as `multiversion!` does), if this CPU runs
/// [`Level::Avx512`].
pub(in crate::quant::fast) fn avx512(ty: GgmlType) -> Option<(kquant::RowFn, kquant::TileFn)> {
    if crate::simd::level() < Level::Avx512 {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some((q4_k_avx512_entry, q4_k_tile_avx512_entry)),
        GgmlType::Q6_K => Some((q6_k_avx512_entry, q6_k_tile_avx512_entry)),
        _ => None,
    }
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
pub(super) fn load32<T: Copy>(s: &[T], at: usize) -> __m256i {
    assert!(size_of::<T>() == 1 && at + 32 <= s.len());
    // SAFETY: `T` is one byte and `at + 32 <= s.len()` (asserted above), so
    // the 32 bytes read lie in `s`; the load is unaligned.
    unsafe { _mm256_loadu_si256(s.as_ptr().add(at).cast()) }
}

/// Sum of each of eight `i32` vectors, as one vector (lane `j`: `v[j]`'s
/// total): two `vphaddd` levels (lane `k < 4` of the second: `v[k]`'s
/// low-half total, lane `4 + k` its high half's), then the halves added.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn sum8v(v: [__m256i; 8]) -> __m256i {
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
#[inline]
pub(super) fn v8(v: [i32; 8]) -> __m256i {
    _mm256_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
}

/// The Q4_K row kernel: the sub-block sums by `vpmaddubsw` / `vpmaddwd`
/// (nibbles `0..=15` times activations in `-127..=127`, pairs at most
/// `2·15·127`, never saturating) summed by [`sum8v`], and, within
/// [`kquant::LIM_Q4_K`], the `i64` sums `I` and `M` of [`kquant`]
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
pub(super) fn q4_k_rows_vec<const N: usize>(rows: [&[u8]; N], a: &ActRow<'_>) -> [ExactAcc; N] {
    let mut acc = [(); N].map(|()| ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    });
    let m4 = _mm256_set1_epi8(15);
    let ones = _mm256_set1_epi16(1);
    let sbs = a.qs.chunks_exact(QK_K).zip(a.sc.chunks_exact(8));
    for (b, (yq, ys)) in sbs.enumerate() {
        let act = SuperAct::new(super_terms(ys));
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
        q6_k_super_end(&mut acc, blk, sumi, &SuperAct::new(super_terms(ys)), ys);
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

/// The scalar terms of a [`SuperAct`] (`base`, `spread`, the mantissas and
/// `rel`), in plain Rust so that it can be `#[inline(always)]`: as one
/// `#[target_feature]` function with the vector part, `SuperAct::new` was
/// left an out-of-line call per super-block and input row.
#[inline(always)]
fn super_terms(ys: &[ActScale]) -> (u32, u32, [i32; 8], [i32; 8]) {
    let (base, spread) = kquant::act_base(ys);
    let (mut am, mut r) = ([0i32; 8], [0i32; 8]);
    for (j, s) in ys.iter().enumerate() {
        am[j] = s.dm;
        r[j] = kquant::rel(s, base) as i32;
    }
    (base, spread, am, r)
}

impl SuperAct {
    /// The vectors of [`super_terms`]' terms (small enough to inline).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn new((base, spread, am, r): (u32, u32, [i32; 8], [i32; 8])) -> Self {
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
/// << (dsh + base)`; beyond it, per sub-block in `i128`
/// ([`q6_k_sub_blocks_in_i128`]). The same integer either way.
/// (`#[inline]`, not `#[inline(always)]`: stable Rust rejects the latter
/// with `#[target_feature]`; both callers are built with a superset of its
/// features. The rare wide-spread case is kept out of line so that this
/// stays small enough to inline whatever else shares its codegen unit:
/// with it inside, moving files once left it a call per super-block in
/// the one-row kernel.)
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
        q6_k_sub_blocks_in_i128(acc, (dm, dsh), &to_array(sumi), ys);
    }
}

/// A Q6_K super-block's sub-block sums `sumi` added to `acc` one by one in
/// `i128`, each at its own shift (`dm`, `dsh`: the super-block's `f16`
/// scale; `ys`: its eight activation scales), as [`kquant`] does beyond
/// [`kquant::LIM_Q6_K`].
#[cold]
#[inline(never)]
fn q6_k_sub_blocks_in_i128(
    acc: &mut ExactAcc,
    (dm, dsh): (i32, u32),
    sumi: &[i32; 8],
    ys: &[ActScale],
) {
    for (j, s) in ys.iter().enumerate() {
        acc.add_shifted(sumi[j] as i64 * (dm * s.dm) as i64, dsh + s.dsh);
    }
}

/// The two halves' sums of each 32-sub-block of a Q6_K super-block, as two
/// vectors laid out as [`sum8v`]'s second `vphaddd` level: `(u0, u1)`, lane
/// `k < 4` of `u0` the first 16 elements' sum of sub-block `k`, lane `4 + k`
/// its last 16's; `u1` likewise for sub-blocks `4..8`. `v[j]`: sub-block
/// `j`'s `i32` partial sums, the first half in the low 128 bits.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn half_sums(v: [__m256i; 8]) -> (__m256i, __m256i) {
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
pub(super) fn q6_k_rows_vec<const N: usize>(rows: [&[u8]; N], a: &ActRow<'_>) -> [ExactAcc; N] {
    let mut acc = [(); N].map(|()| ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    });
    let c32 = _mm256_set1_epi8(32);
    let ones = _mm256_set1_epi16(1);
    // Scale bytes 0..16 reordered as [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, ...]:
    // the half sums' order in `half_sums`.
    let order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    let sbs = a.qs.chunks_exact(QK_K).zip(a.sc.chunks_exact(8));
    for (b, (yq, ys)) in sbs.enumerate() {
        let act = SuperAct::new(super_terms(ys));
        let y: [__m256i; 8] = core::array::from_fn(|k| load32(yq, 32 * k));
        let (o0, o1) = half_sums(y.map(|y| _mm256_madd_epi16(_mm256_maddubs_epi16(c32, y), ones)));
        for (acc, row) in acc.iter_mut().zip(rows) {
            let Some(blk) = row.get(210 * b..210 * (b + 1)) else {
                continue;
            };
            let q = q6_k_unpack(blk);
            let v: [__m256i; 8] =
                core::array::from_fn(|j| _mm256_madd_epi16(_mm256_maddubs_epi16(q[j], y[j]), ones));
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

/// The 6-bit values of a Q6_K super-block `blk` (its first 192 bytes:
/// `ql`, `qh`) plus 32, `0..=63`, sub-block `j` in `q[j]`: sub-block `j =
/// 4h + k` takes its low bits from the 32 bytes of `ql` at `64h + 32(k %
/// 2)` (low nibbles for `k < 2`) and its high bits from bits `2k..2k + 2`
/// of `qh`'s 32 bytes at `128 + 32h`. The one unpack of the row, tile and
/// decode kernels.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn q6_k_unpack(blk: &[u8]) -> [__m256i; 8] {
    let m4 = _mm256_set1_epi8(15);
    // The high two bits of sub-block `k` of a 128-element half: bits
    // `2k..2k + 2` of `qh`, moved to bits 4..6.
    let mh = [3i8, 12, 48, -64].map(|m| _mm256_set1_epi8(m));
    let mut q = [_mm256_setzero_si256(); 8];
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
            q[4 * h + k] = _mm256_or_si256(low, high);
        }
    }
    q
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
    // SAFETY: only handed out by `avx2`, after `simd::level()`
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
    // SAFETY: only handed out by `avx512`, after `simd::level()`
    // returned `Avx512` or wider: the AVX2 set and AVX-512 F, CD, VL, DQ, BW.
    unsafe { q4_k_avx512(row, a) }
}

/// [`kquant::RowFn`] entry of [`q6_k_avx512`].
fn q6_k_avx512_entry(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    // SAFETY: as in `q4_k_avx512_entry`.
    unsafe { q6_k_avx512(row, a) }
}

/// [`kquant::TileFn`] entry of [`q4_k_tile_avx2`].
fn q4_k_tile_avx2_entry(rows: [&[u8]; kquant::TILE], a: &ActRow<'_>) -> [ExactAcc; kquant::TILE] {
    // SAFETY: only handed out by `avx2`, after `simd::level()`
    // returned `Avx2` or wider: AVX2, BMI1, BMI2, LZCNT.
    unsafe { q4_k_tile_avx2(rows, a) }
}

/// [`kquant::TileFn`] entry of [`q4_k_tile_avx512`].
fn q4_k_tile_avx512_entry(rows: [&[u8]; kquant::TILE], a: &ActRow<'_>) -> [ExactAcc; kquant::TILE] {
    // SAFETY: only handed out by `avx512`, after `simd::level()`
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

// ---------------------------------------------------------------------------
// The AVX-512 VNNI tile: one or `WIDE_GROUPS` tiles of four weight rows ×
// up to `WIDE_ACT_TILE` input rows.

/// The VNNI tile kernels for `ty` ([`q4_k_tile_vnni`] or
/// [`q6_k_tile_vnni`], for one tile and for [`WIDE_GROUPS`]) if this CPU
/// runs them ([`Level::Avx512Vnni`]); `None` for other formats.
pub(in crate::quant::fast) fn vnni_tiles(ty: GgmlType) -> Option<kquant::MultiTileFns> {
    if crate::simd::level() < Level::Avx512Vnni {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some((
            q4_k_tile_vnni_entry::<1>,
            q4_k_tile_vnni_entry::<WIDE_GROUPS>,
        )),
        GgmlType::Q5_K => Some((
            q5_k_tile_vnni_entry::<1>,
            q5_k_tile_vnni_entry::<WIDE_GROUPS>,
        )),
        GgmlType::Q6_K => Some((
            q6_k_tile_vnni_entry::<1>,
            q6_k_tile_vnni_entry::<WIDE_GROUPS>,
        )),
        _ => None,
    }
}

/// [`kquant::MultiTileFn`] entry of [`q4_k_tile_vnni`].
fn q4_k_tile_vnni_entry<const G: usize>(
    rows: [[&[u8]; TILE]; G],
    acts: &[ActRow<'_>],
    out: &mut [Cells; G],
) {
    // SAFETY: only handed out by `vnni_tiles`, after `simd::level()`
    // returned `Avx512Vnni`: AVX2, BMI1, BMI2, LZCNT and AVX-512 F, CD, VL,
    // DQ, BW and VNNI.
    unsafe { q4_k_tile_vnni::<G, 144>(rows, acts, out) }
}

/// [`kquant::MultiTileFn`] entry of [`q4_k_tile_vnni`] for Q5_K.
fn q5_k_tile_vnni_entry<const G: usize>(
    rows: [[&[u8]; TILE]; G],
    acts: &[ActRow<'_>],
    out: &mut [Cells; G],
) {
    // SAFETY: as in `q4_k_tile_vnni_entry`.
    unsafe { q4_k_tile_vnni::<G, Q5_K_BYTES>(rows, acts, out) }
}

/// [`kquant::MultiTileFn`] entry of [`q6_k_tile_vnni`].
fn q6_k_tile_vnni_entry<const G: usize>(
    rows: [[&[u8]; TILE]; G],
    acts: &[ActRow<'_>],
    out: &mut [Cells; G],
) {
    // SAFETY: as in `q4_k_tile_vnni_entry`.
    unsafe { q6_k_tile_vnni(rows, acts, out) }
}

/// Weight rows of a tile.
const TILE: usize = kquant::TILE;
/// A tile's cells, `[weight row][input row]`.
type Cells = [[ExactAcc; WIDE_ACT_TILE]; TILE];

/// The tile's cells before the first super-block: zero, non-finite where
/// the input row's flags say so (as the row kernels start).
fn start_cells(acts: &[ActRow<'_>], out: &mut Cells) {
    for row in out.iter_mut() {
        for (c, a) in row.iter_mut().zip(acts) {
            *c = ExactAcc {
                sum: 0,
                nonfinite: a.flags & FLAG_D_NONFINITE != 0,
            };
        }
    }
}

/// Super-block `b` of each weight row (`B` bytes), if every row has it.
fn weight_supers<'w, const B: usize>(
    rows: &[&'w [u8]; TILE],
    b: usize,
) -> Option<[&'w [u8; B]; TILE]> {
    let one = |r: &'w [u8]| r.get(B * b..B * (b + 1))?.try_into().ok();
    Some([one(rows[0])?, one(rows[1])?, one(rows[2])?, one(rows[3])?])
}

/// Super-block `b` of input row `a`: its 256 activations and 8 block
/// scales, if it has them.
fn act_super<'a>(a: &ActRow<'a>, b: usize) -> Option<(&'a [i8; QK_K], &'a [ActScale; 8])> {
    let qs = a.qs.get(QK_K * b..QK_K * (b + 1))?.try_into().ok()?;
    let sc = a.sc.get(8 * b..8 * (b + 1))?.try_into().ok()?;
    Some((qs, sc))
}

/// The 64 bytes of `s` at `at` as a vector.
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn load64<T: Copy>(s: &[T], at: usize) -> __m512i {
    assert!(size_of::<T>() == 1 && at + 64 <= s.len());
    // SAFETY: `T` is one byte and `at + 64 <= s.len()` (asserted above), so
    // the 64 bytes read lie in `s`; the load is unaligned.
    unsafe { _mm512_loadu_si512(s.as_ptr().add(at).cast()) }
}

/// The eight `i64` lanes of `v`.
#[target_feature(enable = "avx512f")]
#[inline]
fn to_i64x8(v: __m512i) -> [i64; 8] {
    let mut o = [0i64; 8];
    // SAFETY: `o` is 64 writable bytes; the store is unaligned.
    unsafe { _mm512_storeu_si512(o.as_mut_ptr().cast(), v) };
    o
}

/// The sixteen `i32` lanes of `v[0]`, then those of `v[1]`.
#[target_feature(enable = "avx512f")]
#[inline]
fn to_i32x32(v: [__m512i; 2]) -> [i32; 32] {
    let mut o = [0i32; 32];
    for (h, part) in o.chunks_exact_mut(16).enumerate() {
        // SAFETY: `part` is 64 writable bytes; the store is unaligned.
        unsafe { _mm512_storeu_si512(part.as_mut_ptr().cast(), v[h]) };
    }
    o
}

/// Dword index of the `ActScale` field at byte `off`.
const fn dword(off: usize) -> i32 {
    (off / 4) as i32
}
const _: () = assert!(size_of::<ActScale>() == 32);
const _: () = assert!(core::mem::offset_of!(ActScale, dm) % 4 == 0);
const _: () = assert!(core::mem::offset_of!(ActScale, dsh) % 4 == 0);
const _: () = assert!(core::mem::offset_of!(ActScale, bsum) % 4 == 0);

/// One input row's terms of one super-block, computed once for the four
/// weight rows, in the tile's lane order (lane `4(j − 4h) + r` of vector
/// `h`: sub-block `j`, weight row `r`; see [`pair_halves`]): the shift
/// `base` and `spread` of [`kquant::act_base`]; the mantissas `am_j` (every
/// lane of sub-block `j`); `rel_j` as `vpsllvq` counts (even dwords, odd
/// ones zero; 0 where `am_j = 0`); `bsum_j` (Q4_K).
struct ActTerms {
    base: u32,
    spread: u32,
    am: [__m512i; 2],
    rel: [__m512i; 2],
    bsum: [__m512i; 2],
}

impl ActTerms {
    /// The terms of the eight block scales `ys` (four 64-byte loads, the
    /// fields spread to the lanes by `vpermt2d`; `base` and `spread` as
    /// [`kquant::act_base`] takes them, the smallest and largest shift of
    /// the non-zero mantissas, by vector reductions).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn new(ys: &[ActScale; 8]) -> Self {
        let v = scale_vectors(ys);
        let field = |off: usize, h: usize| scale_field(&v, off, h);
        let am = [0, 1].map(|h| field(core::mem::offset_of!(ActScale, dm), h));
        let dsh = [0, 1].map(|h| field(core::mem::offset_of!(ActScale, dsh), h));
        let live = [0, 1].map(|h| _mm512_test_epi32_mask(am[h], am[h]));
        let none = _mm512_set1_epi32(-1);
        let lo = across_lanes(
            _mm512_min_epu32(
                _mm512_mask_blend_epi32(live[0], none, dsh[0]),
                _mm512_mask_blend_epi32(live[1], none, dsh[1]),
            ),
            |a, b| _mm512_min_epu32(a, b),
        );
        let hi = across_lanes(
            _mm512_max_epu32(
                _mm512_maskz_mov_epi32(live[0], dsh[0]),
                _mm512_maskz_mov_epi32(live[1], dsh[1]),
            ),
            |a, b| _mm512_max_epu32(a, b),
        );
        let (base, spread) = if lo == u32::MAX {
            (0, 0)
        } else {
            (lo, hi - lo)
        };
        // Counts masked to 0..=63 (they are at most 30, an f16 shift): the
        // mask lets `vpsllvq` go without a select for counts of 64 and up.
        let rel = [0, 1].map(|h| {
            let r =
                _mm512_maskz_sub_epi32(live[h] & 0x5555, dsh[h], _mm512_set1_epi32(base as i32));
            _mm512_and_si512(r, _mm512_set1_epi64(63))
        });
        let bsum = [0, 1].map(|h| field(core::mem::offset_of!(ActScale, bsum), h));
        ActTerms {
            base,
            spread,
            am,
            rel,
            bsum,
        }
    }
}

/// The eight block scales `ys` as four 64-byte vectors (two `ActScale`s
/// each), for [`scale_field`].
#[target_feature(enable = "avx512f")]
#[inline]
fn scale_vectors(ys: &[ActScale; 8]) -> [__m512i; 4] {
    let bytes: &[u8] = bytemuck::bytes_of(ys);
    core::array::from_fn(|i| load64(bytes, 64 * i))
}

/// The `ActScale` field at byte `off` of sub-blocks `4h..4h + 4` of
/// [`scale_vectors`]' `v`, in the tile's lane order (lane `4(j − 4h) + r`:
/// sub-block `j`'s, the same for the four weight rows `r`), by `vpermt2d`.
#[target_feature(enable = "avx512f")]
#[inline]
fn scale_field(v: &[__m512i; 4], off: usize, h: usize) -> __m512i {
    // Sub-block 4h + i is `ActScale` i % 2 of vector 2h + i / 2.
    let o = dword(off);
    let idx = _mm512_setr_epi32(
        o,
        o,
        o,
        o,
        8 + o,
        8 + o,
        8 + o,
        8 + o,
        16 + o,
        16 + o,
        16 + o,
        16 + o,
        24 + o,
        24 + o,
        24 + o,
        24 + o,
    );
    _mm512_permutex2var_epi32(v[2 * h], idx, v[2 * h + 1])
}

/// `op` (`vpminud`, `vpmaxud`) over the four 128-bit lanes of `v`, whose
/// four dwords within a lane are equal (the tile's lane order repeats each
/// sub-block's term for the four weight rows): two steps, not the four of a
/// full reduction.
#[target_feature(enable = "avx512f")]
#[inline]
fn across_lanes(v: __m512i, op: impl Fn(__m512i, __m512i) -> __m512i) -> u32 {
    let v = op(v, _mm512_shuffle_i64x2::<0x4E>(v, v));
    let v = op(v, _mm512_shuffle_i64x2::<0xB1>(v, v));
    _mm_cvtsi128_si32(_mm512_castsi512_si128(v)) as u32
}

/// `t << s` for `s < 64` (as [`add_mul_shifted`]).
#[inline(always)]
pub(super) fn shl63(t: i128, s: u32) -> i128 {
    debug_assert!(s < 64);
    t << (s & 63)
}

/// `sum += (t · m) << s` in `i128`, for `s < 64`: here every `s` is the
/// sum of two `f16` shifts ([`f16_fixed`], at most 30 each), and masking it
/// to `0..=63` (the same value) lets the `i128` shift go without the
/// select for `s ≥ 64`.
#[inline(always)]
fn add_mul_shifted(sum: &mut i128, t: i64, m: i32, s: u32) {
    debug_assert!(s < 64);
    *sum += (t as i128 * m as i128) << (s & 63);
}

/// The four weight rows' sums of each 128-bit lane of their dots `p[r]`:
/// lane `L` of the result holds `[Σ p0.L, Σ p1.L, Σ p2.L, Σ p3.L]`, by
/// two steps of `vpackssdw` (dwords to words) and `vpmaddwd` by ones (adds
/// each pair of words into a dword): rows 0, 1 and 2, 3 to pair sums, then
/// those to the lane sums. Precondition (the callers'): every dword of
/// `p` is below `2^14` in magnitude (Q4_K: `≤ 8·15·127`, Q6_K:
/// `≤ 4·32·127`; the activations are in `-127..=127`), so that the pair
/// sums, below `2^15`, are words and neither pack saturates: the sums are
/// exact, as with dword adds.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn reduce4(p: [__m512i; 4]) -> __m512i {
    let ones = _mm512_set1_epi16(1);
    let pairs = |a: __m512i, b: __m512i| _mm512_madd_epi16(_mm512_packs_epi32(a, b), ones);
    pairs(pairs(p[0], p[1]), pairs(p[2], p[3]))
}

/// Two [`reduce4`] results of 64-byte steps `c` and `c + 1` (128-bit lanes
/// `0, 1`: sub-block `2c`'s halves, `2, 3`: `2c + 1`'s) as the four
/// sub-blocks `2c..2c + 4`: lane `4i + r` the sum of sub-block `2c + i` of
/// weight row `r` (the two halves added).
#[target_feature(enable = "avx512f")]
#[inline]
fn pair_halves(a: __m512i, b: __m512i) -> __m512i {
    _mm512_add_epi32(
        _mm512_shuffle_i64x2::<0x88>(a, b),
        _mm512_shuffle_i64x2::<0xDD>(a, b),
    )
}

/// Per weight row, `Σ_j (x_j · am_j) << rel_j` over its eight sub-blocks
/// `x` (the tile's lane order) in `i64`, as two partial sums per row:
/// `vpmuldq` of the even and of the odd lanes (moved down by `vpshufd`) by
/// the mantissas, `vpsllvq` by `rel`, and lanes added so that 128-bit lanes
/// 0 and 1 hold `[row 0, row 2]`, lanes 2 and 3 `[row 1, row 3]`.
/// Precondition (the caller's): `act.spread` within the format's limit, so
/// that every partial sum, a subset of the row's terms, stays below 2^62
/// ([`kquant`]'s table).
#[target_feature(enable = "avx512f")]
#[inline]
fn row_partials(x: [__m512i; 2], act: &ActTerms) -> __m512i {
    let term = |v: __m512i, h: usize| _mm512_sllv_epi64(_mm512_mul_epi32(v, act.am[h]), act.rel[h]);
    let odd = |h: usize| _mm512_shuffle_epi32::<0xF5>(x[h]);
    // Even lanes: rows 0 (even qwords) and 2; odd lanes: rows 1 and 3.
    let ev = _mm512_add_epi64(term(x[0], 0), term(x[1], 1));
    let od = _mm512_add_epi64(term(odd(0), 0), term(odd(1), 1));
    _mm512_add_epi64(
        _mm512_shuffle_i64x2::<0x44>(ev, od),
        _mm512_shuffle_i64x2::<0xEE>(ev, od),
    )
}

/// The four rows' sums of [`row_partials`] of `x`.
#[target_feature(enable = "avx512f")]
#[inline]
fn row_sums(x: [__m512i; 2], act: &ActTerms) -> [i64; TILE] {
    let a = row_partials(x, act);
    let t = to_i64x8(_mm512_add_epi64(a, _mm512_shuffle_i64x2::<0xB1>(a, a)));
    [t[0], t[4], t[1], t[5]]
}

/// [`row_sums`] of `x` and of `y` (Q4_K's `I` and `M`), added up
/// together.
#[target_feature(enable = "avx512f")]
#[inline]
fn row_sums2(x: [__m512i; 2], y: [__m512i; 2], act: &ActTerms) -> ([i64; TILE], [i64; TILE]) {
    let (a, b) = (row_partials(x, act), row_partials(y, act));
    // [x: rows 0, 2 | x: rows 1, 3 | y: rows 0, 2 | y: rows 1, 3]
    let t = to_i64x8(_mm512_add_epi64(
        _mm512_shuffle_i64x2::<0x88>(a, b),
        _mm512_shuffle_i64x2::<0xDD>(a, b),
    ));
    ([t[0], t[2], t[1], t[3]], [t[4], t[6], t[5], t[7]])
}

/// The four Q4_K weight rows of one super-block, decoded once for every
/// input row of the tile.
struct Q4kWeights {
    /// `q[r][2g + h]`: row `r`'s nibbles for half `h` (16 values) of
    /// sub-blocks `4g..4g + 4`, one per 128-bit lane as [`q4_k_act`] lays
    /// out the activations: sub-block `2c + k` is the low (`k = 0`) or
    /// high nibbles of the 32 bytes at `16 + 32c`.
    q: [[__m512i; 4]; TILE],
    /// The 6-bit scales and mins `(sc, mn)` of `get_scale_min_k4`, in the
    /// tile's lane order.
    sc: [__m512i; 2],
    mn: [__m512i; 2],
    /// Per row: `f16_fixed(d)`, `f16_fixed(dmin)`, and whether either is
    /// ±∞/NaN.
    d: [(i32, u32); TILE],
    dmin: [(i32, u32); TILE],
    bad: [bool; TILE],
    /// Per row, both mantissas brought to the smaller of the two shifts
    /// `lo = min(dsh, nsh)`: `(dm << (dsh − lo), nm << (nsh − lo), lo)`
    /// (each `< 2^11 · 2^30`, exact in `i64`), so that a cell's two `i128`
    /// steps are one: `(I·dm' − M·nm') << (lo + base)`.
    joint: [(i64, i64, u32); TILE],
    /// The chunk sum's weight factors ([`Q4kWeights::scale_for_chunk`]), per
    /// half `h` as lanes `[even rows, odd rows moved down]`: `sc·dm <<
    /// (dsh − wbase)` and `mn·nm << (nsh − wbase)`.
    scd: [[__m512i; 2]; 2],
    mnn: [[__m512i; 2]; 2],
}

/// The eight 6-bit scales and the eight mins of Q4_K's 12 packed bytes
/// as bytes `j` of two words (the bytes of [`kquant::scale_min`], four
/// sub-blocks per 32-bit operation): `j < 4` the low 6 bits of bytes `j`
/// and `4 + j`; `j ≥ 4` the nibbles of byte `4 + j` and, as bits 4–5, the
/// top two bits of bytes `j − 4` (scale) and `j` (min).
#[inline]
fn unpack_scales(s: &[u8]) -> (u64, u64) {
    let w = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (w0, w1, w2) = (w(0), w(1), w(2));
    let (low6, low4, top2) = (0x3F3F_3F3F, 0x0F0F_0F0F, 0x3030_3030);
    let sc_hi = (w2 & low4) | ((w0 >> 2) & top2);
    let mn_hi = ((w2 >> 4) & low4) | ((w1 >> 2) & top2);
    (
        (w0 & low6) as u64 | (sc_hi as u64) << 32,
        (w1 & low6) as u64 | (mn_hi as u64) << 32,
    )
}

/// Byte `j` of `rows[r]` in dword lane `4(j − 4h) + r` of vector `h`
/// (zero-extended): the four rows' eight bytes in the tile's lane order
/// (a byte interleave per pair of rows, `vpunpck{l,h}wd`, `vpmovzxbd`).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn bytes_to_lanes(rows: [u64; TILE]) -> [__m512i; 2] {
    let v = _mm256_setr_epi64x(
        rows[0] as i64,
        rows[1] as i64,
        rows[2] as i64,
        rows[3] as i64,
    );
    let il = _mm256_setr_epi8(
        0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5,
        13, 6, 14, 7, 15,
    );
    let t = _mm256_shuffle_epi8(v, il);
    let (r01, r23) = (_mm256_castsi256_si128(t), _mm256_extracti128_si256::<1>(t));
    [
        _mm512_cvtepu8_epi32(_mm_unpacklo_epi16(r01, r23)),
        _mm512_cvtepu8_epi32(_mm_unpackhi_epi16(r01, r23)),
    ]
}

impl Q4kWeights {
    /// All zero (a value to decode into).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn zero() -> Self {
        Q4kWeights {
            q: [[_mm512_setzero_si512(); 4]; TILE],
            sc: [_mm512_setzero_si512(); 2],
            mn: [_mm512_setzero_si512(); 2],
            d: [(0, 0); TILE],
            dmin: [(0, 0); TILE],
            bad: [false; TILE],
            joint: [(0, 0, 0); TILE],
            scd: [[_mm512_setzero_si512(); 2]; 2],
            mnn: [[_mm512_setzero_si512(); 2]; 2],
        }
    }

    /// The chunk sum's weight factors [`Q4kWeights::scd`] and
    /// [`Q4kWeights::mnn`] against the rows' chunk bases `base`
    /// ([`WeightBases`]): `sc·dm < 63·2047 < 2^17` shifted by at most
    /// [`kquant::CHUNK_WLIM_Q4_K`] stays below 2^31 (beyond it the tile
    /// takes the per-super-block path and these are not used).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn scale_for_chunk(&mut self, base: &[u32; TILE]) {
        let (mut dm, mut drel, mut nm, mut nrel) = ([0; TILE], [0; TILE], [0; TILE], [0; TILE]);
        for r in 0..TILE {
            (dm[r], drel[r]) = (self.d[r].0, chunk_rel(self.d[r], base[r]));
            (nm[r], nrel[r]) = (self.dmin[r].0, chunk_rel(self.dmin[r], base[r]));
        }
        let (dm, drel, nm, nrel) = (
            row_lanes(dm),
            row_lanes(drel),
            row_lanes(nm),
            row_lanes(nrel),
        );
        for h in 0..2 {
            let scd = _mm512_sllv_epi32(_mm512_mullo_epi32(self.sc[h], dm), drel);
            let mnn = _mm512_sllv_epi32(_mm512_mullo_epi32(self.mn[h], nm), nrel);
            self.scd[h] = [scd, _mm512_shuffle_epi32::<0xF5>(scd)];
            self.mnn[h] = [mnn, _mm512_shuffle_epi32::<0xF5>(mnn)];
        }
    }

    /// Decodes the four rows' super-blocks `blks` into `self` (in place:
    /// built and returned by value, the struct was zeroed and copied per
    /// super-block; plain loops: `map` closures were left out-of-line calls).
    /// `B`: 144, Q4_K (nibbles at 16); 176, Q5_K (nibbles at 48, each
    /// value's fifth bit in the `qh` bytes at 16: [`q5_k_high`]).
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn decode<const B: usize>(&mut self, blks: [&[u8; B]; TILE]) {
        let mask = _mm512_set1_epi8(0x0F);
        let nib_shift = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
        let (mut sc, mut mn) = ([0u64; TILE], [0u64; TILE]);
        let at = if B == Q5_K_BYTES { 48 } else { 16 };
        for (r, blk) in blks.into_iter().enumerate() {
            // Bytes at + 64g.. hold 16-byte halves [2c h0, 2c h1, 2c + 1
            // h0, 2c + 1 h1] of nibble pairs, c = 2g; each picked twice.
            let v = [load64(blk, at), load64(blk, at + 64)];
            let q = &mut self.q[r];
            q[0] = _mm512_shuffle_i64x2::<0xA0>(v[0], v[0]);
            q[1] = _mm512_shuffle_i64x2::<0xF5>(v[0], v[0]);
            q[2] = _mm512_shuffle_i64x2::<0xA0>(v[1], v[1]);
            q[3] = _mm512_shuffle_i64x2::<0xF5>(v[1], v[1]);
            for q in q.iter_mut() {
                *q = _mm512_and_si512(_mm512_srlv_epi64(*q, nib_shift), mask);
            }
            if B == Q5_K_BYTES {
                q5_k_high(q, blk);
            }
            (sc[r], mn[r]) = unpack_scales(&blk[4..16]);
            let (d, dmin) = (
                u16::from_le_bytes([blk[0], blk[1]]),
                u16::from_le_bytes([blk[2], blk[3]]),
            );
            let ((dm, dsh), (nm, nsh)) = (f16_fixed(d), f16_fixed(dmin));
            (self.d[r], self.dmin[r]) = ((dm, dsh), (nm, nsh));
            self.bad[r] = f16_nonfinite(d) | f16_nonfinite(dmin);
            let lo = dsh.min(nsh);
            self.joint[r] = ((dm as i64) << (dsh - lo), (nm as i64) << (nsh - lo), lo);
        }
        (self.sc, self.mn) = (bytes_to_lanes(sc), bytes_to_lanes(mn));
    }
}

/// One input row's super-block `yq` as [`q4_k_dots`] takes it, once for
/// all the call's tiles: vector `2g + h` holds half `h` (16 activations) of
/// sub-blocks `4g..4g + 4` in its four 128-bit lanes (two loads, four
/// `vshufi64x2`).
#[target_feature(enable = "avx512f")]
#[inline]
fn q4_k_act(yq: &[i8; QK_K]) -> [__m512i; 4] {
    let y: [__m512i; 4] = core::array::from_fn(|c| load64(yq, 64 * c));
    [
        _mm512_shuffle_i64x2::<0x88>(y[0], y[1]),
        _mm512_shuffle_i64x2::<0xDD>(y[0], y[1]),
        _mm512_shuffle_i64x2::<0x88>(y[2], y[3]),
        _mm512_shuffle_i64x2::<0xDD>(y[2], y[3]),
    ]
}

/// The four rows' sub-block sums `Σ q·y` of one input row's super-block
/// from its [`q4_k_act`] `ya`, in the tile's lane order: per row and four
/// sub-blocks two chained `vpdpbusd` (the two halves of each sub-block in
/// the same 128-bit lane; nibbles `0..=15` times activations in
/// `-127..=127`, each lane `≤ 8·15·127 < 2^14`), then [`reduce4`] (each
/// sum `≤ 32·15·127 < 2^16`, as `q4_5_k_sumq`'s).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
fn q4_k_dots(w: &Q4kWeights, ya: &[__m512i; 4]) -> [__m512i; 2] {
    let z = _mm512_setzero_si512();
    let dots = |t: usize| {
        reduce4(core::array::from_fn(|r| {
            let first = _mm512_dpbusd_epi32(z, w.q[r][t], ya[t]);
            _mm512_dpbusd_epi32(first, w.q[r][t + 1], ya[t + 1])
        }))
    };
    [dots(0), dots(2)]
}

/// Bytes of a Q5_K super-block.
const Q5_K_BYTES: usize = 176;

/// Adds 16 to each of a Q5_K super-block's decoded nibbles `q` (in
/// [`Q4kWeights::q`]'s layout) whose fifth bit is set: value `i` of
/// sub-block `j` has it at bit `j` of `qh[i]` (bytes 16..48 of `blk`), so
/// vector `2g + h` (half `h`, elements `16h..16h + 16`, of sub-blocks
/// `4g + L` in 128-bit lane `L`) tests `qh[16h..16h + 16]` in every lane
/// against bit `4g + L`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn q5_k_high<const B: usize>(q: &mut [__m512i; 4], blk: &[u8; B]) {
    // The low 16 of the 32 bytes at 16 and at 32 (inside the 176).
    let halves = [16, 32].map(|o| _mm512_broadcast_i32x4(_mm256_castsi256_si128(load32(blk, o))));
    let c16 = _mm512_set1_epi8(16);
    for (k, q) in q.iter_mut().enumerate() {
        let g = (k / 2) as u32;
        // Bit `4g + L` in every byte of 128-bit lane `L`.
        let bit = |l: u32| ((1u32 << (4 * g + l)) * 0x0101_0101) as i32;
        let (b0, b1, b2, b3) = (bit(0), bit(1), bit(2), bit(3));
        let bits = _mm512_setr_epi32(
            b0, b0, b0, b0, b1, b1, b1, b1, b2, b2, b2, b2, b3, b3, b3, b3,
        );
        let set = _mm512_test_epi8_mask(halves[k % 2], bits);
        *q = _mm512_mask_add_epi8(*q, set, *q, c16);
    }
}

/// [`q4_k_dots`] for Q5_K's values `0..=31`: one `vpdpbusd` per vector
/// (each lane `≤ 4·31·127 < 2^14`, [`reduce4`]'s bound; two chained
/// would pass it) and the two halves' [`reduce4`]s added (each sum `≤
/// 32·31·127 < 2^17`, as `q4_5_k_sumq`'s).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
fn q5_k_dots(w: &Q4kWeights, ya: &[__m512i; 4]) -> [__m512i; 2] {
    let z = _mm512_setzero_si512();
    let half = |t: usize| {
        reduce4(core::array::from_fn(|r| {
            _mm512_dpbusd_epi32(z, w.q[r][t], ya[t])
        }))
    };
    [
        _mm512_add_epi32(half(0), half(1)),
        _mm512_add_epi32(half(2), half(3)),
    ]
}

/// One input row's `i64` super-block sums, per weight row `I` and (Q4_K)
/// `M`, and its activation `base` (the per-super-block path).
#[derive(Clone, Copy)]
struct SuperSums {
    i: [i64; TILE],
    m: [i64; TILE],
    base: u32,
}

/// One input row's super-block sums given its sub-block sums `s`
/// ([`q4_k_dots`], [`q5_k_dots`]), within [`kquant::LIM_Q4_K`]
/// ([`kquant::LIM_Q5_K`]): `I = Σ (sc·sumq·am) << rel` and `M = Σ
/// (mn·bsum·am) << rel` by [`row_sums2`] (`sc·sumq < 2^22`, Q5_K `< 2^23`,
/// and `mn·bsum < 2^18` exact in `i32` lanes).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn q4_k_sums(w: &Q4kWeights, act: &ActTerms, s: [__m512i; 2]) -> SuperSums {
    let (i, m) = row_sums2(
        [0, 1].map(|h| _mm512_mullo_epi32(s[h], w.sc[h])),
        [0, 1].map(|h| _mm512_mullo_epi32(w.mn[h], act.bsum[h])),
        act,
    );
    SuperSums {
        i,
        m,
        base: act.base,
    }
}

/// The two `i128` steps of `q4_5_k_row_with`, `(I·dm) << (dsh + base) −
/// (M·nm) << (nsh + base)`, for each of input row `j`'s four cells from its
/// [`SuperSums`], as one: `(I·dm' − M·nm') << (lo + base)`
/// ([`Q4kWeights::joint`]; the same integer: `dm' = dm·2^(dsh − lo)`; no
/// `i128` overflow, the value being a sum of `dot_row`'s terms, each below
/// 2^104, divided by `2^(lo + base)`).
#[inline(always)]
fn q4_k_add(w: &Q4kWeights, p: &SuperSums, cells: &mut Cells, j: usize) {
    for (r, row) in cells.iter_mut().enumerate() {
        let (dm, nm, lo) = w.joint[r];
        let c = &mut row[j];
        c.nonfinite |= w.bad[r];
        let t = p.i[r] as i128 * dm as i128 - p.m[r] as i128 * nm as i128;
        c.sum += shl63(t, lo + p.base);
    }
}

/// One input row's super-block beyond [`kquant::LIM_Q4_K`]
/// ([`kquant::LIM_Q5_K`]) added to its four cells per sub-block in `i128`,
/// as `q4_5_k_row_with` does, from the sub-block sums `s` ([`q4_k_dots`],
/// [`q5_k_dots`]; `sc·sumq < 2^23` in `i32`).
#[target_feature(enable = "avx512f")]
#[inline]
fn q4_k_wide(w: &Q4kWeights, s: [__m512i; 2], ys: &[ActScale; 8], cells: &mut Cells, j: usize) {
    let (sq, sc, mn) = (to_i32x32(s), to_i32x32(w.sc), to_i32x32(w.mn));
    for (r, row) in cells.iter_mut().enumerate() {
        let ((dm, dsh), (nm, nsh)) = (w.d[r], w.dmin[r]);
        let c = &mut row[j];
        c.nonfinite |= w.bad[r];
        for (k, y) in ys.iter().enumerate() {
            let l = 4 * k + r;
            c.add_shifted((sc[l] * sq[l]) as i64 * (dm * y.dm) as i64, dsh + y.dsh);
            c.add_shifted(-((mn[l] * y.bsum) as i64 * (nm * y.dm) as i64), nsh + y.dsh);
        }
    }
}

/// Four per-row values in the tile's lane order (lane `4i + r`: row `r`'s).
#[target_feature(enable = "avx512f")]
#[inline]
fn row_lanes(v: [i32; TILE]) -> __m512i {
    _mm512_broadcast_i32x4(_mm_setr_epi32(v[0], v[1], v[2], v[3]))
}

/// A weight scale's shift `(mant, sh)` above its row's chunk base (0 for
/// a zero mantissa, whose terms are zero).
#[inline(always)]
fn chunk_rel((m, sh): (i32, u32), base: u32) -> i32 {
    if m != 0 {
        sh.wrapping_sub(base) as i32
    } else {
        0
    }
}

// A chunk of super-blocks is one activation chunk: `drel` and `ChunkScale`
// are relative to it.
const _: () = assert!(kquant::CHUNK_SUPERS * QK_K == CHUNK_BLOCKS * QK);

/// One tile's weight rows over one chunk of up to [`kquant::CHUNK_SUPERS`]
/// super-blocks: per row the smallest shift of its non-zero `f16` scales
/// (`base`), the largest spread above it over the rows (`spread`), and
/// whether a scale is ±∞/NaN (`bad`).
#[derive(Clone, Copy)]
struct WeightBases {
    base: [u32; TILE],
    spread: u32,
    bad: [bool; TILE],
}

impl WeightBases {
    /// The bases of super-blocks `b0..b0 + n` (`B` bytes each) of `rows`,
    /// from the `f16` scales at byte offsets `at` of each super-block.
    fn of<const B: usize>(rows: &[&[u8]; TILE], b0: usize, n: usize, at: &[usize]) -> Self {
        let mut w = WeightBases {
            base: [0; TILE],
            spread: 0,
            bad: [false; TILE],
        };
        for (r, row) in rows.iter().enumerate() {
            let (mut lo, mut hi) = (u32::MAX, 0);
            for b in b0..b0 + n {
                for &o in at {
                    let Some(&[h0, h1]) = row.get(B * b + o..B * b + o + 2) else {
                        continue;
                    };
                    let h = u16::from_le_bytes([h0, h1]);
                    w.bad[r] |= f16_nonfinite(h);
                    // `f16_fixed`'s shift, without branches; a zero
                    // mantissa (±0) takes no part.
                    let sh = ((h >> 10) as u32 & 31).max(1) - 1;
                    let live = h & 0x7FFF != 0;
                    lo = lo.min(if live { sh } else { u32::MAX });
                    hi = hi.max(if live { sh } else { 0 });
                }
            }
            if lo != u32::MAX {
                w.base[r] = lo;
                w.spread = w.spread.max(hi - lo);
            }
        }
        w
    }

    /// Whether input row `a`'s chunk `c` takes the chunk sum with these
    /// rows: its [`ChunkScale`] is there (the activation shifts lie in
    /// `dbase ..= dbase + dspread`, `drel` above `dbase`), the weight
    /// spread is within `wlim` and the two spreads together within `lim`.
    fn fits(&self, a: &ActRow<'_>, c: usize, (wlim, lim): (u32, u32)) -> Option<ChunkScale> {
        let ch = *a.ch.get(c)?;
        (self.spread <= wlim && ch.dspread <= lim - self.spread).then_some(ch)
    }
}

/// One input row's terms of one super-block for the chunk sum, in the
/// tile's lane order: the mantissas `am_j`; `drel_j` (the shift above the
/// chunk's `dbase`) as `vpsllvq` counts (the low dword of each `i64`
/// lane; the same for its two rows); Q4_K's `bsum_j·am_j` (`≤ 4064·2047
/// < 2^23`).
struct ChunkAct {
    am: [__m512i; 2],
    rel: [__m512i; 2],
    bam: [__m512i; 2],
}

impl ChunkAct {
    /// The terms of the eight block scales `ys` (`BSUM`: with `bsum·am`).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn new<const BSUM: bool>(ys: &[ActScale; 8]) -> Self {
        // Plain loops: `map` closures were left out-of-line calls.
        let v = scale_vectors(ys);
        let low = _mm512_set1_epi64(0xFFFF_FFFF);
        let z = _mm512_setzero_si512();
        let (mut am, mut rel, mut bam) = ([z; 2], [z; 2], [z; 2]);
        for h in 0..2 {
            am[h] = scale_field(&v, core::mem::offset_of!(ActScale, dm), h);
            let drel = scale_field(&v, core::mem::offset_of!(ActScale, drel), h);
            rel[h] = _mm512_and_si512(drel, low);
            if BSUM {
                let bsum = scale_field(&v, core::mem::offset_of!(ActScale, bsum), h);
                bam[h] = _mm512_mullo_epi32(bsum, am[h]);
            }
        }
        ChunkAct { am, rel, bam }
    }
}

/// A cell group's chunk sums: per input row, `[even rows, odd rows]`, one
/// `i64` lane per (sub-block pair, row): lane `i` of `[p]` is row
/// `2(i % 2) + p`'s.
type ChunkSums = [[__m512i; 2]; WIDE_ACT_TILE];

/// Adds one input row's super-block to its chunk sums `acc` from its
/// sub-block sums `s` ([`q4_k_dots`], [`q5_k_dots`]): per lane
/// `((sumq·am)·(sc·dm') − (bsum·am)·(mn·nm')) << drel` (`vpmulld`:
/// `sumq·am ≤ 60960·2047 < 2^27`, Q5_K `125984·2047 < 2^28`; `vpmuldq` by
/// the [`Q4kWeights::scale_for_chunk`] factors; `vpsllvq`). Each lane
/// gathers at most eight terms over a chunk (two sub-blocks a
/// super-block), each at most `(60960·63·2047² + 4064·63·2047²)·2^16 <
/// 2^59.97` within [`kquant::CHUNK_LIM_Q4_K`] (Q5_K `(125984 + 4064)·63·
/// 2047²·2^15 < 2^59.97` within [`kquant::CHUNK_LIM_Q5_K`]): the sum
/// stays below 2^63.
#[target_feature(enable = "avx512f")]
#[inline]
fn q4_k_chunk_add(w: &Q4kWeights, act: &ChunkAct, s: [__m512i; 2], acc: &mut [__m512i; 2]) {
    for (h, sh) in s.into_iter().enumerate() {
        let u = _mm512_mullo_epi32(sh, act.am[h]);
        let u = [u, _mm512_shuffle_epi32::<0xF5>(u)];
        for (p, acc) in acc.iter_mut().enumerate() {
            let d = _mm512_mul_epi32(u[p], w.scd[h][p]);
            let m = _mm512_mul_epi32(act.bam[h], w.mnn[h][p]);
            let t = _mm512_sllv_epi64(_mm512_sub_epi64(d, m), act.rel[h]);
            *acc = _mm512_add_epi64(*acc, t);
        }
    }
}

/// Input row `j`'s chunk sums `acc` added to its four cells: each row's
/// four lanes summed in `i128` (not `i64`: each lane is bounded, not
/// their sum) and shifted by the row's weight base plus the chunk's
/// activation base `abase` (at most 29 + 29); the cells are non-finite
/// where a row's scale was.
#[target_feature(enable = "avx512f")]
#[inline]
fn chunk_flush(acc: &[__m512i; 2], w: &WeightBases, abase: u32, cells: &mut Cells, j: usize) {
    let lanes = [to_i64x8(acc[0]), to_i64x8(acc[1])];
    for (r, row) in cells.iter_mut().enumerate() {
        let l = &lanes[r % 2];
        let o = r / 2;
        let t = l[o] as i128 + l[o + 2] as i128 + l[o + 4] as i128 + l[o + 6] as i128;
        let c = &mut row[j];
        c.nonfinite |= w.bad[r];
        c.sum += shl63(t, w.base[r] + abase);
    }
}

/// The Q4_K tile (`B` = 144; Q5_K: 176): `G` tiles of four weight rows
/// (whole `B`-byte super-blocks, all the same length) against up to
/// [`WIDE_ACT_TILE`] input rows `acts` (each with its `qs` and `sc` as
/// long as the rows), cell `[g][r][j]` the same integers as [`kquant`]'s
/// `q4_k_row` (`q5_k_row`) of row `r` of tile `g` and input `j`: chunk by
/// chunk of [`kquant::CHUNK_SUPERS`] super-blocks ([`q4_k_chunk`]).
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
fn q4_k_tile_vnni<const G: usize, const B: usize>(
    rows: [[&[u8]; TILE]; G],
    acts: &[ActRow<'_>],
    cells: &mut [Cells; G],
) {
    let acts = &acts[..acts.len().min(WIDE_ACT_TILE)];
    for c in cells.iter_mut() {
        start_cells(acts, c);
    }
    let n = super_count::<B, G>(&rows);
    let mut w: [Q4kWeights; G] = core::array::from_fn(|_| Q4kWeights::zero());
    let mut sums = [[[_mm512_setzero_si512(); 2]; WIDE_ACT_TILE]; G];
    for b0 in (0..n).step_by(kquant::CHUNK_SUPERS) {
        let supers = b0..(b0 + kquant::CHUNK_SUPERS).min(n);
        q4_k_chunk::<G, B>(&rows, acts, cells, (&mut w, &mut sums), (supers, n));
    }
}

/// Super-blocks a tile kernel asks the cache for ahead of the one it
/// decodes ([`prefetch_ahead`]): one chunk.
const TILE_AHEAD: usize = kquant::CHUNK_SUPERS;

/// Asks the cache for the super-block [`TILE_AHEAD`] after `b` (of `n`)
/// of every weight row of `rows`, or, past a row's end, for that
/// super-block of the same row of the next call's weight rows (a matrix's
/// rows are contiguous, so they follow these `G·TILE` rows). Without it
/// the first reads of each chunk, the rows' `f16` scales
/// ([`WeightBases::of`]), waited on memory: with a few input rows the
/// tile spent half its time there. A prefetch never faults.
#[target_feature(enable = "avx2")]
#[inline]
fn prefetch_ahead<const B: usize, const G: usize>(rows: &[[&[u8]; TILE]; G], b: usize, n: usize) {
    let next = b + TILE_AHEAD;
    for row in rows.as_flattened() {
        let at = if next < n {
            B * next
        } else {
            G * TILE * row.len() + B * (next - n)
        };
        let p = row.as_ptr().wrapping_add(at);
        for o in (0..B).step_by(64) {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(o).cast());
        }
    }
}

/// Whole super-blocks every weight row of the call has.
fn super_count<const B: usize, const G: usize>(rows: &[[&[u8]; TILE]; G]) -> usize {
    rows.as_flattened()
        .iter()
        .map(|r| r.len() / B)
        .min()
        .unwrap_or(0)
}

/// The Q4_K tile's super-blocks `supers` (one chunk): per super-block the
/// weight rows decoded once ([`Q4kWeights`], with their chunk factors),
/// per input row its dots with each tile's four rows reduced together
/// ([`q4_k_dots`]) and, where the chunk's spreads allow
/// ([`WeightBases::fits`]), added to the cells' `i64` chunk sums
/// ([`q4_k_chunk_add`]), which end in one `i128` step per cell
/// ([`chunk_flush`]); elsewhere per super-block as `q4_5_k_row_with`
/// does ([`q4_k_sums`] and [`q4_k_add`], beyond its limit [`q4_k_wide`]).
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vnni")]
#[inline]
fn q4_k_chunk<const G: usize, const B: usize>(
    rows: &[[&[u8]; TILE]; G],
    acts: &[ActRow<'_>],
    cells: &mut [Cells; G],
    (w, sums): (&mut [Q4kWeights; G], &mut [ChunkSums; G]),
    (supers, n): (core::ops::Range<usize>, usize),
) {
    let q5 = B == Q5_K_BYTES;
    let (lims, lim) = if q5 {
        (
            (kquant::CHUNK_WLIM_Q5_K, kquant::CHUNK_LIM_Q5_K),
            kquant::LIM_Q5_K,
        )
    } else {
        (
            (kquant::CHUNK_WLIM_Q4_K, kquant::CHUNK_LIM_Q4_K),
            kquant::LIM_Q4_K,
        )
    };
    let c = supers.start / kquant::CHUNK_SUPERS;
    let bases: [WeightBases; G] = core::array::from_fn(|g| {
        WeightBases::of::<B>(&rows[g], supers.start, supers.len(), &[0, 2])
    });
    let fit = chunk_fits(&bases, acts, c, lims, sums);
    for b in supers {
        prefetch_ahead::<B, G>(rows, b, n);
        for ((wg, rows), base) in w.iter_mut().zip(rows).zip(&bases) {
            let Some(blks) = weight_supers::<B>(rows, b) else {
                return;
            };
            wg.decode(blks);
            wg.scale_for_chunk(&base.base);
        }
        for (j, a) in acts.iter().enumerate() {
            let Some((yq, ys)) = act_super(a, b) else {
                continue;
            };
            let act = ChunkAct::new::<true>(ys);
            let ya = q4_k_act(yq);
            let mut terms = None;
            for (g, wg) in w.iter().enumerate() {
                let s = if q5 {
                    q5_k_dots(wg, &ya)
                } else {
                    q4_k_dots(wg, &ya)
                };
                if fit[g][j].is_some() {
                    q4_k_chunk_add(wg, &act, s, &mut sums[g][j]);
                    continue;
                }
                if terms.is_none() {
                    terms = Some(ActTerms::new(ys));
                }
                let Some(t) = &terms else { continue };
                if t.spread <= lim {
                    q4_k_add(wg, &q4_k_sums(wg, t, s), &mut cells[g], j);
                } else {
                    q4_k_wide(wg, s, ys, &mut cells[g], j);
                }
            }
        }
    }
    flush_fits(&fit, &bases, sums, cells);
}

/// Per tile and input row, the chunk `c`'s [`ChunkScale`] where the chunk
/// sum takes the cells ([`WeightBases::fits`] with the format's limits
/// `lims`), their `sums` zeroed; `None` where the cells go per
/// super-block.
#[target_feature(enable = "avx512f")]
#[inline]
fn chunk_fits<const G: usize>(
    bases: &[WeightBases; G],
    acts: &[ActRow<'_>],
    c: usize,
    lims: (u32, u32),
    sums: &mut [ChunkSums; G],
) -> [[Option<ChunkScale>; WIDE_ACT_TILE]; G] {
    let mut fit = [[None; WIDE_ACT_TILE]; G];
    for ((fg, base), sg) in fit.iter_mut().zip(bases).zip(sums.iter_mut()) {
        for ((f, a), s) in fg.iter_mut().zip(acts).zip(sg.iter_mut()) {
            *f = base.fits(a, c, lims);
            *s = [_mm512_setzero_si512(); 2];
        }
    }
    fit
}

/// [`chunk_flush`] of every cell the chunk sum took ([`chunk_fits`]).
#[target_feature(enable = "avx512f")]
#[inline]
fn flush_fits<const G: usize>(
    fit: &[[Option<ChunkScale>; WIDE_ACT_TILE]; G],
    bases: &[WeightBases; G],
    sums: &[ChunkSums; G],
    cells: &mut [Cells; G],
) {
    for (((fg, base), sg), cg) in fit.iter().zip(bases).zip(sums).zip(cells.iter_mut()) {
        for (j, (f, s)) in fg.iter().zip(sg).enumerate() {
            if let Some(ch) = f {
                chunk_flush(s, base, ch.dbase, cg, j);
            }
        }
    }
}

/// The four Q6_K weight rows of one super-block, decoded once for every
/// input row of the tile.
struct Q6kWeights {
    /// `q[r][c]`: row `r`'s 6-bit values plus 32 (`0..=63`) for activations
    /// `64c..64c + 64`: `ql` byte `64h + i` (`h = c / 2`; its low nibble for
    /// even `c`, its high one for odd) and, as bits 4–5, bits `2k..2k + 2`
    /// of `qh` byte `32h + i % 32`, `k = 2(c % 2) + i / 32`.
    q: [[__m512i; 4]; TILE],
    /// `half_sc[c]`: the signed scale of 16-element half `L % 2` of
    /// sub-block `2c + L / 2` of row `r` (scale byte `4c + L`) in lane
    /// `4L + r`: [`reduce4`]'s order.
    half_sc: [__m512i; 4],
    /// Per row: `f16_fixed(d)` and whether `d` is ±∞/NaN.
    d: [(i32, u32); TILE],
    bad: [bool; TILE],
    /// The chunk sum's weight factor ([`Q6kWeights::scale_for_chunk`]):
    /// per row `dm << (dsh − wbase)` in the tile's lane order.
    dmw: __m512i,
}

/// Q6_K row `blk`'s values plus 32 for activations `64c..64c + 64` (see
/// [`Q6kWeights::q`]).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn q6_k_values(blk: &[u8; 210], c: usize) -> __m512i {
    let h = c / 2;
    let ql = load64(blk, 64 * h);
    let low = if c.is_multiple_of(2) {
        ql
    } else {
        _mm512_srli_epi16::<4>(ql)
    };
    let low = _mm512_and_si512(low, _mm512_set1_epi8(0x0F));
    let qh = _mm512_broadcast_i64x4(load32(blk, 128 + 32 * h));
    let k = 2 * (c % 2) as i64;
    let sh = _mm512_setr_epi64(
        2 * k,
        2 * k,
        2 * k,
        2 * k,
        2 * k + 2,
        2 * k + 2,
        2 * k + 2,
        2 * k + 2,
    );
    let high = _mm512_and_si512(_mm512_srlv_epi64(qh, sh), _mm512_set1_epi8(3));
    _mm512_or_si512(low, _mm512_slli_epi16::<4>(high))
}

/// The four rows' 16 signed half scales in [`Q6kWeights::half_sc`]'s
/// order: each row's bytes widened (`vpmovsxbd`, dword `4c + L`), a 4×4
/// dword transpose within each 128-bit lane, then one of the 128-bit lanes.
#[target_feature(enable = "avx512f")]
#[inline]
fn q6_k_half_scales(blks: &[&[u8; 210]; TILE]) -> [__m512i; 4] {
    let mut s = [_mm512_setzero_si512(); TILE];
    for (v, blk) in s.iter_mut().zip(blks) {
        let half = |at: usize| {
            i64::from_le_bytes([
                blk[at],
                blk[at + 1],
                blk[at + 2],
                blk[at + 3],
                blk[at + 4],
                blk[at + 5],
                blk[at + 6],
                blk[at + 7],
            ])
        };
        *v = _mm512_cvtepi8_epi32(_mm_set_epi64x(half(200), half(192)));
    }
    let t0 = _mm512_unpacklo_epi32(s[0], s[1]);
    let t1 = _mm512_unpackhi_epi32(s[0], s[1]);
    let t2 = _mm512_unpacklo_epi32(s[2], s[3]);
    let t3 = _mm512_unpackhi_epi32(s[2], s[3]);
    // u[L], 128-bit lane c: scale byte 4c + L of rows 0..4.
    let u = [
        _mm512_unpacklo_epi64(t0, t2),
        _mm512_unpackhi_epi64(t0, t2),
        _mm512_unpacklo_epi64(t1, t3),
        _mm512_unpackhi_epi64(t1, t3),
    ];
    let lo01 = _mm512_shuffle_i64x2::<0x44>(u[0], u[1]);
    let lo23 = _mm512_shuffle_i64x2::<0x44>(u[2], u[3]);
    let hi01 = _mm512_shuffle_i64x2::<0xEE>(u[0], u[1]);
    let hi23 = _mm512_shuffle_i64x2::<0xEE>(u[2], u[3]);
    [
        _mm512_shuffle_i64x2::<0x88>(lo01, lo23),
        _mm512_shuffle_i64x2::<0xDD>(lo01, lo23),
        _mm512_shuffle_i64x2::<0x88>(hi01, hi23),
        _mm512_shuffle_i64x2::<0xDD>(hi01, hi23),
    ]
}

impl Q6kWeights {
    /// All zero (a value to decode into).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn zero() -> Self {
        Q6kWeights {
            q: [[_mm512_setzero_si512(); 4]; TILE],
            half_sc: [_mm512_setzero_si512(); 4],
            d: [(0, 0); TILE],
            bad: [false; TILE],
            dmw: _mm512_setzero_si512(),
        }
    }

    /// The chunk sum's weight factor [`Q6kWeights::dmw`] against the rows'
    /// chunk bases `base` ([`WeightBases`]): `dm` shifted by at most
    /// [`kquant::CHUNK_WLIM_Q6_K`], so that `dm·am ≤ 2047²·2^9 < 2^31`
    /// (beyond it the tile takes the per-super-block path and this is not
    /// used).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn scale_for_chunk(&mut self, base: &[u32; TILE]) {
        let (mut dm, mut rel) = ([0; TILE], [0; TILE]);
        for r in 0..TILE {
            (dm[r], rel[r]) = (self.d[r].0, chunk_rel(self.d[r], base[r]));
        }
        let (dm, rel) = (row_lanes(dm), row_lanes(rel));
        self.dmw = _mm512_sllv_epi32(dm, rel);
    }

    /// Decodes the four rows' super-blocks `blks` into `self` (as
    /// [`Q4kWeights::decode`]).
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn decode(&mut self, blks: [&[u8; 210]; TILE]) {
        self.half_sc = q6_k_half_scales(&blks);
        for (r, blk) in blks.into_iter().enumerate() {
            for (c, q) in self.q[r].iter_mut().enumerate() {
                *q = q6_k_values(blk, c);
            }
            let d = u16::from_le_bytes([blk[208], blk[209]]);
            (self.d[r], self.bad[r]) = (f16_fixed(d), f16_nonfinite(d));
        }
    }
}

/// One input row's super-block `yq` as [`q6_k_dots`] takes it, once for
/// all the call's tiles: per 64 activations `c`, `[y, −32·Σ y]`, the
/// latter in every lane over the lane's four activations (`vpdpbusd` of
/// 32 with the negated activations; `|·| ≤ 4·32·127`).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
fn q6_k_act(yq: &[i8; QK_K]) -> [[__m512i; 2]; 4] {
    let z = _mm512_setzero_si512();
    let c32 = _mm512_set1_epi8(32);
    core::array::from_fn(|c| {
        let y = load64(yq, 64 * c);
        [y, _mm512_dpbusd_epi32(z, c32, _mm512_sub_epi8(z, y))]
    })
}

/// The four rows' scaled sub-block sums `sumi_j` of one input row's
/// super-block (as `q6_k_sumi`) from its [`q6_k_act`] `ym`, in the tile's
/// lane order: per 64 activations and per row `vpdpbusd` of the values
/// plus 32 (`0..=63`) into `−32·Σ y`: each lane `Σ q·y` over four
/// elements, `|·| ≤ 4·32·127`; [`reduce4`] to the 16-element halves
/// (`≤ 16·32·127 < 2^16`), times their signed scales (`< 2^23`), and
/// [`pair_halves`] adds a sub-block's two halves (`< 2^24`).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
fn q6_k_dots(w: &Q6kWeights, ym: &[[__m512i; 2]; 4]) -> [__m512i; 2] {
    let h: [__m512i; 4] = core::array::from_fn(|c| {
        let [y, minus] = ym[c];
        let halves = reduce4(core::array::from_fn(|r| {
            _mm512_dpbusd_epi32(minus, w.q[r][c], y)
        }));
        _mm512_mullo_epi32(halves, w.half_sc[c])
    });
    [pair_halves(h[0], h[1]), pair_halves(h[2], h[3])]
}

/// One input row's super-block sums given its scaled sub-block sums `s`
/// ([`q6_k_dots`]), within [`kquant::LIM_Q6_K`]: `I = Σ (sumi·am) << rel`
/// by [`row_sums`] (`M` zero).
#[target_feature(enable = "avx512f")]
#[inline]
fn q6_k_sums(act: &ActTerms, s: [__m512i; 2]) -> SuperSums {
    SuperSums {
        i: row_sums(s, act),
        m: [0; TILE],
        base: act.base,
    }
}

/// The `i128` step of `q6_k_row_with` for each of input row `j`'s four
/// cells, from its [`SuperSums`].
#[inline(always)]
fn q6_k_add(w: &Q6kWeights, p: &SuperSums, cells: &mut Cells, j: usize) {
    for (r, row) in cells.iter_mut().enumerate() {
        let (dm, dsh) = w.d[r];
        let c = &mut row[j];
        c.nonfinite |= w.bad[r];
        add_mul_shifted(&mut c.sum, p.i[r], dm, dsh + p.base);
    }
}

/// One input row's super-block beyond [`kquant::LIM_Q6_K`] added to its
/// four cells per sub-block in `i128`, as `q6_k_row_with` does.
#[target_feature(enable = "avx512f")]
#[inline]
fn q6_k_wide(w: &Q6kWeights, s: [__m512i; 2], ys: &[ActScale; 8], cells: &mut Cells, j: usize) {
    let sumi = to_i32x32(s);
    for (r, row) in cells.iter_mut().enumerate() {
        let (dm, dsh) = w.d[r];
        let c = &mut row[j];
        c.nonfinite |= w.bad[r];
        for (k, y) in ys.iter().enumerate() {
            c.add_shifted(sumi[4 * k + r] as i64 * (dm * y.dm) as i64, dsh + y.dsh);
        }
    }
}

/// Adds one input row's super-block to its chunk sums `acc` from its
/// scaled sub-block sums `s` ([`q6_k_dots`], `|sumi| ≤ 2·65024·128 <
/// 2^24`): per lane `(sumi·(dm'·am)) << drel` (`vpmulld` of the
/// [`Q6kWeights::scale_for_chunk`] factor by `am`, below 2^31, its odd
/// rows moved down by `vpshufd`; `vpmuldq`; `vpsllvq`). Each lane gathers at most eight terms over a chunk, each at
/// most `16646144·2047²·2^14 < 2^59.99` within [`kquant::CHUNK_LIM_Q6_K`]:
/// the sum stays below 2^63.
#[target_feature(enable = "avx512f")]
#[inline]
fn q6_k_chunk_add(w: &Q6kWeights, act: &ChunkAct, s: [__m512i; 2], acc: &mut [__m512i; 2]) {
    for (h, sh) in s.into_iter().enumerate() {
        let sumi = [sh, _mm512_shuffle_epi32::<0xF5>(sh)];
        let dma = _mm512_mullo_epi32(w.dmw, act.am[h]);
        let dma = [dma, _mm512_shuffle_epi32::<0xF5>(dma)];
        for (p, acc) in acc.iter_mut().enumerate() {
            let t = _mm512_sllv_epi64(_mm512_mul_epi32(sumi[p], dma[p]), act.rel[h]);
            *acc = _mm512_add_epi64(*acc, t);
        }
    }
}

/// [`q4_k_tile_vnni`] for Q6_K (210-byte super-blocks; [`Q6kWeights`],
/// [`q6_k_chunk`]): cell `[g][r][j]` the same integers as `q6_k_row`'s.
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
fn q6_k_tile_vnni<const G: usize>(
    rows: [[&[u8]; TILE]; G],
    acts: &[ActRow<'_>],
    cells: &mut [Cells; G],
) {
    let acts = &acts[..acts.len().min(WIDE_ACT_TILE)];
    for c in cells.iter_mut() {
        start_cells(acts, c);
    }
    let n = super_count::<210, G>(&rows);
    let mut w: [Q6kWeights; G] = core::array::from_fn(|_| Q6kWeights::zero());
    let mut sums = [[[_mm512_setzero_si512(); 2]; WIDE_ACT_TILE]; G];
    for b0 in (0..n).step_by(kquant::CHUNK_SUPERS) {
        let supers = b0..(b0 + kquant::CHUNK_SUPERS).min(n);
        q6_k_chunk(&rows, acts, cells, (&mut w, &mut sums), (supers, n));
    }
}

/// [`q4_k_chunk`] for Q6_K: per input row its activation terms once for
/// the tiles ([`q6_k_act`]), its scaled sub-block sums with each tile's
/// rows ([`q6_k_dots`]) added to the chunk sums ([`q6_k_chunk_add`]) or
/// per super-block ([`q6_k_sums`] and [`q6_k_add`], beyond its limit
/// [`q6_k_wide`]).
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vnni")]
#[inline]
fn q6_k_chunk<const G: usize>(
    rows: &[[&[u8]; TILE]; G],
    acts: &[ActRow<'_>],
    cells: &mut [Cells; G],
    (w, sums): (&mut [Q6kWeights; G], &mut [ChunkSums; G]),
    (supers, n): (core::ops::Range<usize>, usize),
) {
    const LIMS: (u32, u32) = (kquant::CHUNK_WLIM_Q6_K, kquant::CHUNK_LIM_Q6_K);
    let c = supers.start / kquant::CHUNK_SUPERS;
    let bases: [WeightBases; G] = core::array::from_fn(|g| {
        WeightBases::of::<210>(&rows[g], supers.start, supers.len(), &[208])
    });
    let fit = chunk_fits(&bases, acts, c, LIMS, sums);
    for b in supers {
        prefetch_ahead::<210, G>(rows, b, n);
        for ((wg, rows), base) in w.iter_mut().zip(rows).zip(&bases) {
            let Some(blks) = weight_supers::<210>(rows, b) else {
                return;
            };
            wg.decode(blks);
            wg.scale_for_chunk(&base.base);
        }
        for (j, a) in acts.iter().enumerate() {
            let Some((yq, ys)) = act_super(a, b) else {
                continue;
            };
            let act = ChunkAct::new::<false>(ys);
            let ym = q6_k_act(yq);
            let mut terms = None;
            for (g, wg) in w.iter().enumerate() {
                let s = q6_k_dots(wg, &ym);
                if fit[g][j].is_some() {
                    q6_k_chunk_add(wg, &act, s, &mut sums[g][j]);
                    continue;
                }
                if terms.is_none() {
                    terms = Some(ActTerms::new(ys));
                }
                let Some(t) = &terms else { continue };
                if t.spread <= kquant::LIM_Q6_K {
                    q6_k_add(wg, &q6_k_sums(t, s), &mut cells[g], j);
                } else {
                    q6_k_wide(wg, s, ys, &mut cells[g], j);
                }
            }
        }
    }
    flush_fits(&fit, &bases, sums, cells);
}
