//! The x86 decode kernels of Q4_K and Q6_K (x86-64, feature `std`): every
//! weight row of a call against one input row (M = 1), in AVX2 intrinsics
//! ([`avx2`]; also compiled with the AVX-512 features: [`avx512`]). Each
//! cell is the exact sum of [`kquant`]'s row kernel, rounded once.
//!
//! Contract: for weight rows `rows` (whole rows of `n_in / 256`
//! super-blocks) and an input row `a` (its `qs`, `sc` and `ch` as long as
//! the rows), a [`kquant::DecodeFn`] sets each cell to
//! `q4_k_row(row, a).finish()` (`q6_k_row`), the same bits as
//! [`crate::quant::dot::dot_row`]; it returns `false`, writing nothing,
//! for an input row it does not take (longer than [`MAX_SUPERS`]
//! super-blocks, or lengths that do not match). Verified by
//! `tests/kernels/matmul.rs` (every path at M = 1 asserted to run this
//! kernel and to give the reference's bits; random and wild scales;
//! `kquant_chunk_limits_agree` at and one past each limit),
//! `tests/kernels_guarded.rs` (guard pages), `tests/kernels/quant_exact.rs`.
//!
//! ## What it saves over the row kernel
//!
//! The row kernel ([`super::kquant`]) takes, per weight row and
//! super-block, the input's terms (shift base and spread, mantissas,
//! shifts: scalar work on eight 32-byte block scales), the weight's
//! 6-bit scales one by one, and one or two `i128` steps. Here the input's
//! terms are taken once per call for all rows ([`ActSuper`]), the scales
//! unpacked with eight-byte words, and the `i128` step taken once per
//! chunk of [`kquant::CHUNK_SUPERS`] super-blocks, as the AVX-512 VNNI
//! tile does: per weight row and chunk the smallest shift of the row's
//! non-zero `f16` scales `wbase` ([`ChunkWeights`]), per input row its
//! chunk's `dbase` (its `ChunkScale`; `drel_j = ash_j − dbase`).
//!
//! ## Why it is exact
//!
//! Within the chunk limits (weight spread `≤ CHUNK_WLIM`, weight plus
//! activation spread `≤ CHUNK_LIM`: [`kquant::CHUNK_WLIM_Q4_K`] 14 /
//! [`kquant::CHUNK_LIM_Q4_K`] 16, [`kquant::CHUNK_WLIM_Q6_K`] 9 /
//! [`kquant::CHUNK_LIM_Q6_K`] 14) every sub-block's term goes into an
//! `i64` lane shifted relative to `wbase + dbase`:
//!
//! * Q4_K ([`q4_k_super`]): `((sumq·am)·(sc·dm << wrel_d) − (bsum·am)·(mn·nm
//!   << wrel_n)) << drel`: `sumq·am ≤ 60960·2047 < 2^27` and `bsum·am ≤
//!   4064·2047 < 2^23` (`vpmulld`), the weight factors `≤ 63·2047·2^14 <
//!   2^31` (`vpmulld`), their products by `vpmuldq`; a term is at most
//!   `(60960 + 4064)·63·2047²·2^16 < 2^59.97`.
//! * Q6_K ([`q6_k_super`]): `(sumi·((dm << wrel)·am)) << drel`: `|sumi| <
//!   2^24`, `(dm << wrel)·am ≤ 2047²·2^9 < 2^31` (`vpmulld`); a term is at
//!   most `2^24·2^22·2^14 = 2^60`.
//!
//! Each of the four lanes gathers two sub-blocks a super-block, eight
//! terms a chunk: it stays below 2^63. At the chunk's end the lanes are
//! summed in `i128` (each lane is bounded, not their sum) and added at
//! `2^(wbase + dbase)` (each shift at most 29, the sum masked to
//! `0..=63`: [`shl63`]). Integer addition being associative, that is the
//! row kernel's integer. Beyond the limits (rare: a spread of 2^14
//! within 1024 elements) that row's chunk goes through the row kernel's
//! body ([`q4_k_rows_vec`], [`q6_k_rows_vec`]) and its sum is added.
//!
//! ## Unsafe review
//! * Every `unsafe` block is a call of a `#[target_feature]` function, made
//!   only through a function pointer that [`avx2`] or [`avx512`] hands out
//!   after [`crate::simd::level`] confirmed each of its features
//!   ([`Level::Avx2`]: AVX2, BMI1, BMI2, LZCNT; [`Level::Avx512`]: those
//!   and AVX-512 F, CD, VL, DQ, BW).
//! * Loads go through [`load32`] (length asserted at the load); there is no
//!   pointer arithmetic, no write through a pointer, no uninitialised
//!   memory.
#![allow(unsafe_code)]

use super::kquant::{half_sums, load32, q4_k_rows_vec, q6_k_rows_vec, shl63, sum8v, v8};
use crate::F32;
use crate::quant::GgmlType;
use crate::quant::act::{ActRow, CHUNK_BLOCKS, ChunkScale, FLAG_D_NONFINITE};
use crate::quant::block::{QK, QK_K};
use crate::quant::fast::kquant::{self, CHUNK_SUPERS};
use crate::quant::fixed::ExactAcc;
use crate::simd::Level;
use core::arch::x86_64::*;

/// Super-blocks of the longest input row the decode kernels take (32768
/// elements; the input's terms, [`ActSuper`], 160 bytes each, live on the
/// stack: 20 KiB).
pub const MAX_SUPERS: usize = 128;

// A chunk of super-blocks is one activation chunk: `drel` and `ChunkScale`
// are relative to it.
const _: () = assert!(CHUNK_SUPERS * QK_K == CHUNK_BLOCKS * QK);

/// Bytes of a Q4_K and of a Q6_K super-block.
const Q4_K_BYTES: usize = 144;
const Q6_K_BYTES: usize = 210;

/// The AVX2 decode kernel of Q4_K or Q6_K if this CPU runs [`Level::Avx2`];
/// `None` for other formats.
pub(in crate::quant::fast) fn avx2(ty: GgmlType) -> Option<kquant::DecodeFn> {
    if crate::simd::level() < Level::Avx2 {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some(q4_k_decode_avx2_entry),
        GgmlType::Q6_K => Some(q6_k_decode_avx2_entry),
        _ => None,
    }
}

/// [`avx2`]'s kernels compiled with the AVX-512 features too (the same
/// intrinsics), if this CPU runs [`Level::Avx512`].
pub(in crate::quant::fast) fn avx512(ty: GgmlType) -> Option<kquant::DecodeFn> {
    if crate::simd::level() < Level::Avx512 {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some(q4_k_decode_avx512_entry),
        GgmlType::Q6_K => Some(q6_k_decode_avx512_entry),
        _ => None,
    }
}

/// One super-block's input terms, taken once per call for every weight
/// row: the mantissas `am_j` (lane `j`); `drel_j` for the even and the odd
/// sub-blocks as `vpsllvq` counts (the low dword of each `i64` lane, odd
/// ones moved down); `x`: Q4_K's `bsum_j·am_j` (`< 2^23`) likewise even
/// and odd, Q6_K's `32·Σ y` over each 16-element half in [`half_sums`]'
/// layout.
#[derive(Clone, Copy)]
struct ActSuper {
    am: __m256i,
    rel: [__m256i; 2],
    x: [__m256i; 2],
}

/// The [`ActSuper`] of super-block `b` of `a` (`Q6`: Q6_K's `x`, else
/// Q4_K's); the caller checks that `a` has it.
#[target_feature(enable = "avx2")]
#[inline]
fn act_super<const Q6: bool>(a: &ActRow<'_>, b: usize) -> ActSuper {
    let (mut am, mut rel, mut bsum) = ([0i32; 8], [0i32; 8], [0i32; 8]);
    for (j, s) in a.sc[8 * b..8 * b + 8].iter().enumerate() {
        // `drel` is 0 where `dm` is (`fill_chunks`): that term is 0.
        (am[j], rel[j], bsum[j]) = (s.dm, s.drel as i32, s.bsum);
    }
    let (am, rel) = (v8(am), v8(rel));
    let rel = [
        _mm256_and_si256(rel, _mm256_set1_epi64x(0xFFFF_FFFF)),
        _mm256_srli_epi64(rel, 32),
    ];
    let x = if Q6 {
        let (c32, ones) = (_mm256_set1_epi8(32), _mm256_set1_epi16(1));
        let y: [__m256i; 8] = core::array::from_fn(|k| load32(a.qs, QK_K * b + 32 * k));
        let (o0, o1) = half_sums(y.map(|y| _mm256_madd_epi16(_mm256_maddubs_epi16(c32, y), ones)));
        [o0, o1]
    } else {
        let bam = _mm256_mullo_epi32(v8(bsum), am);
        [bam, _mm256_shuffle_epi32(bam, 0xF5)]
    };
    ActSuper { am, rel, x }
}

/// One weight row's `f16` scales over one chunk of at most
/// [`CHUNK_SUPERS`] super-blocks: the mantissas shifted by their shift
/// above the row's chunk base (`m`; 0 for a zero mantissa), Q4_K's lane
/// `2i` super-block `i`'s `d`, `2i + 1` its `dmin`, Q6_K's lane `i` its
/// `d`; the chunk sum's shift `wbase + dbase` where the chunk's spreads
/// are within the limits (`fit`); whether a scale is ±∞/NaN (`bad`).
struct ChunkWeights {
    m: [i32; 8],
    fit: Option<u32>,
    bad: bool,
}

/// The smallest and the largest of the eight `u32` lanes of `lo`, `hi`.
#[target_feature(enable = "avx2")]
#[inline]
fn min_max_u32(lo: __m256i, hi: __m256i) -> (u32, u32) {
    let lo = _mm256_min_epu32(lo, _mm256_permute2x128_si256(lo, lo, 1));
    let hi = _mm256_max_epu32(hi, _mm256_permute2x128_si256(hi, hi, 1));
    let lo = _mm256_min_epu32(lo, _mm256_shuffle_epi32(lo, 0x4E));
    let hi = _mm256_max_epu32(hi, _mm256_shuffle_epi32(hi, 0x4E));
    let lo = _mm256_min_epu32(lo, _mm256_shuffle_epi32(lo, 0xB1));
    let hi = _mm256_max_epu32(hi, _mm256_shuffle_epi32(hi, 0xB1));
    (
        _mm256_cvtsi256_si32(lo) as u32,
        _mm256_cvtsi256_si32(hi) as u32,
    )
}

/// The [`ChunkWeights`] of the super-blocks `blks` (at most
/// [`CHUNK_SUPERS`]; `Q4`: Q4_K's `d` and `dmin` at bytes 0 and 2, else
/// Q6_K's `d` at 208) against the input chunk `ch`, limits `(wlim,
/// lim)`: the `f16`s decoded in `i32` lanes as
/// [`f16_fixed`](crate::quant::fixed::f16_fixed) does
/// (`mant = frac | 0x400` unless the exponent field `e` is 0, `sh =
/// max(e, 1) − 1`, the sign applied), the base and spread over the lanes
/// with a non-zero mantissa, each shifted by its shift above the base.
#[target_feature(enable = "avx2")]
#[inline]
fn chunk_weights<const B: usize, const Q4: bool>(
    blks: &[[u8; B]],
    ch: Option<&ChunkScale>,
    (wlim, lim): (u32, u32),
) -> ChunkWeights {
    // Straight into lanes: through a stack array, the four 32-bit stores
    // and the wider load missed store forwarding (a stall per chunk).
    let word = |i: usize| {
        blks.get(i).map_or(0, |b| {
            if Q4 {
                i32::from_le_bytes([b[0], b[1], b[2], b[3]])
            } else {
                u16::from_le_bytes([b[208], b[209]]) as i32
            }
        })
    };
    let w = _mm_setr_epi32(word(0), word(1), word(2), word(3));
    let h = if Q4 {
        _mm256_cvtepu16_epi32(w)
    } else {
        _mm256_zextsi128_si256(w)
    };
    let c = |x: i32| _mm256_set1_epi32(x);
    let e = _mm256_and_si256(_mm256_srli_epi32(h, 10), c(31));
    let frac = _mm256_and_si256(h, c(0x3FF));
    let normal = _mm256_andnot_si256(_mm256_cmpeq_epi32(e, c(0)), c(0x400));
    // Negated where bit 15 is set (`h << 16` negative; zero only for
    // `h == 0`, whose mantissa is 0).
    let mant = _mm256_sign_epi32(_mm256_or_si256(frac, normal), _mm256_slli_epi32(h, 16));
    let sh = _mm256_sub_epi32(_mm256_max_epu32(e, c(1)), c(1));
    let dead = _mm256_cmpeq_epi32(_mm256_and_si256(h, c(0x7FFF)), c(0));
    let bad = _mm256_movemask_epi8(_mm256_cmpeq_epi32(e, c(31))) != 0;
    let (lo, hi) = min_max_u32(_mm256_or_si256(sh, dead), _mm256_andnot_si256(dead, sh));
    let base = if lo == u32::MAX { 0 } else { lo };
    let spread = hi.saturating_sub(base);
    let fit = ch
        .filter(|ch| spread <= wlim && ch.dspread <= lim - spread.min(lim))
        .map(|ch| base + ch.dbase);
    // Within `wlim` (at most 14) each shift keeps `mant << rel` in `i32`.
    let rel = _mm256_andnot_si256(dead, _mm256_sub_epi32(sh, c(base as i32)));
    let mut m = [0i32; 8];
    // SAFETY: `m` is 32 writable bytes; the store is unaligned.
    unsafe { _mm256_storeu_si256(m.as_mut_ptr().cast(), _mm256_sllv_epi32(mant, rel)) };
    ChunkWeights { m, fit, bad }
}

/// The four `i64` lanes of `v` summed in `i128`.
#[target_feature(enable = "avx2")]
#[inline]
fn lanes_i128(v: __m256i) -> i128 {
    let mut l = [0i64; 4];
    // SAFETY: `l` is 32 writable bytes; the store is unaligned.
    unsafe { _mm256_storeu_si256(l.as_mut_ptr().cast(), v) };
    l.iter().map(|&x| x as i128).sum()
}

/// `Σ (e_j << rel_j)` of the even and odd sub-blocks' `i64` terms `e`, `o`.
#[target_feature(enable = "avx2")]
#[inline]
fn shifted_pair(e: __m256i, o: __m256i, act: &ActSuper) -> __m256i {
    _mm256_add_epi64(
        _mm256_sllv_epi64(e, act.rel[0]),
        _mm256_sllv_epi64(o, act.rel[1]),
    )
}

/// The 6-bit scales and mins of a Q4_K super-block as `i32` lanes
/// (`get_scale_min_k4` on three little-endian words: scales `0..4` are
/// the low six bits of word 0, `4..8` the low nibbles of word 2 with the
/// top two bits of word 0 above; mins likewise from words 1 and 2).
#[target_feature(enable = "avx2")]
#[inline]
fn q4_k_scales(blk: &[u8]) -> (__m256i, __m256i) {
    let w = |i: usize| u32::from_le_bytes([blk[i], blk[i + 1], blk[i + 2], blk[i + 3]]);
    let (s0, s1, s2) = (w(4), w(8), w(12));
    let (m6, m4, m2) = (0x3F3F_3F3F, 0x0F0F_0F0F, 0x0303_0303);
    let sc = (s0 & m6) as u64 | ((((s2 & m4) | ((s0 >> 6) & m2) << 4) as u64) << 32);
    let mn = (s1 & m6) as u64 | (((((s2 >> 4) & m4) | ((s1 >> 6) & m2) << 4) as u64) << 32);
    let lanes = |x: u64| _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(x as i64));
    (lanes(sc), lanes(mn))
}

/// One Q4_K super-block `blk` (144 bytes) of one weight row against
/// activations `yq` (256) as chunk-sum lanes: the sub-block sums `sumq_j`
/// by `vpmaddubsw` / `vpmaddwd` (nibbles `0..=15` times `-127..=127`,
/// pairs at most `2·15·127`) and [`sum8v`], then the terms of the module
/// header with the weight factors `dmw = dm << wrel_d`, `nmw = nm <<
/// wrel_n`.
#[target_feature(enable = "avx2")]
#[inline]
fn q4_k_super(
    blk: &[u8; Q4_K_BYTES],
    yq: &[i8; QK_K],
    act: &ActSuper,
    (dmw, nmw): (i32, i32),
) -> __m256i {
    let (m4, ones) = (_mm256_set1_epi8(15), _mm256_set1_epi16(1));
    let mut v = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let q = load32(blk, 16 + 32 * c);
        let lo = _mm256_and_si256(q, m4);
        let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        let y = [load32(yq, 64 * c), load32(yq, 64 * c + 32)];
        v[2 * c] = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y[0]), ones);
        v[2 * c + 1] = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y[1]), ones);
    }
    let (sc, mn) = q4_k_scales(blk);
    let u = _mm256_mullo_epi32(sum8v(v), act.am);
    let wd = _mm256_mullo_epi32(sc, _mm256_set1_epi32(dmw));
    let wn = _mm256_mullo_epi32(mn, _mm256_set1_epi32(nmw));
    let odd = |x| _mm256_shuffle_epi32(x, 0xF5);
    let e = _mm256_sub_epi64(_mm256_mul_epi32(u, wd), _mm256_mul_epi32(act.x[0], wn));
    let o = _mm256_sub_epi64(
        _mm256_mul_epi32(odd(u), odd(wd)),
        _mm256_mul_epi32(act.x[1], odd(wn)),
    );
    shifted_pair(e, o, act)
}

/// One Q6_K super-block `blk` (210 bytes) of one weight row against
/// activations `yq` (256) as chunk-sum lanes: `q + 32` (`0..=63`) by
/// `vpmaddubsw` (pairs at most `2·63·127`) and `vpmaddwd`, the sixteen
/// half sums by [`half_sums`], less the input's `32·Σ y` (`|Σ q·y| ≤
/// 16·32·127`), times the halves' signed scales and the halves added:
/// `sumi_j` of `q6_k_sumi`; then the terms of the module header with the
/// weight factor `dmw = dm << wrel`.
#[target_feature(enable = "avx2")]
#[inline]
fn q6_k_super(blk: &[u8; Q6_K_BYTES], yq: &[i8; QK_K], act: &ActSuper, dmw: i32) -> __m256i {
    let (m4, ones) = (_mm256_set1_epi8(15), _mm256_set1_epi16(1));
    // The high two bits of sub-block `k` of a 128-element half: bits
    // `2k..2k + 2` of `qh`, moved to bits 4..6.
    let mh = [3i8, 12, 48, -64].map(|m| _mm256_set1_epi8(m));
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
            let y = load32(yq, 128 * h + 32 * k);
            v[4 * h + k] = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), ones);
        }
    }
    let (u0, u1) = half_sums(v);
    // Scale bytes reordered as [0, 2, 4, 6, 1, 3, 5, 7, 8, ...]: the half
    // sums' order.
    let order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    let sc = _mm_shuffle_epi8(_mm256_extracti128_si256(load32(blk, 176), 1), order);
    let s0 = _mm256_cvtepi8_epi32(sc);
    let s1 = _mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8));
    let p0 = _mm256_mullo_epi32(_mm256_sub_epi32(u0, act.x[0]), s0);
    let p1 = _mm256_mullo_epi32(_mm256_sub_epi32(u1, act.x[1]), s1);
    let sumi = _mm256_add_epi32(
        _mm256_permute2x128_si256(p0, p1, 0x20),
        _mm256_permute2x128_si256(p0, p1, 0x31),
    );
    let f = _mm256_mullo_epi32(act.am, _mm256_set1_epi32(dmw));
    let odd = |x| _mm256_shuffle_epi32(x, 0xF5);
    shifted_pair(
        _mm256_mul_epi32(sumi, f),
        _mm256_mul_epi32(odd(sumi), odd(f)),
        act,
    )
}

/// The rows of `rows` (whole rows of `B`-byte super-blocks, as many as
/// `out`) against the input row `a`, each cell by `row` given the row's
/// bytes and the input's terms; `false` (nothing written) where the
/// lengths do not match or `a` is longer than [`MAX_SUPERS`]
/// super-blocks.
#[target_feature(enable = "avx2")]
#[inline]
fn decode_rows<const B: usize, const Q6: bool>(
    rows: &[u8],
    a: &ActRow<'_>,
    out: &mut [F32],
    row: impl Fn(&[u8], &ActRow<'_>, &[ActSuper]) -> ExactAcc,
) -> bool {
    let n = a.qs.len() / QK_K;
    let fits = n > 0
        && n <= MAX_SUPERS
        && a.qs.len() == QK_K * n
        && a.sc.len() == 8 * n
        && a.ch.len() == (8 * n).div_ceil(CHUNK_BLOCKS)
        && rows.len() == B * n * out.len();
    if !fits {
        return false;
    }
    let z = _mm256_setzero_si256();
    let mut terms = [ActSuper {
        am: z,
        rel: [z; 2],
        x: [z; 2],
    }; MAX_SUPERS];
    for (b, t) in terms[..n].iter_mut().enumerate() {
        *t = act_super::<Q6>(a, b);
    }
    for (w, o) in rows.chunks_exact(B * n).zip(out.iter_mut()) {
        *o = row(w, a, &terms[..n]).finish();
    }
    true
}

/// One Q4_K weight row `row` against `a` with its terms `terms`: chunk by
/// chunk, within the limits the chunk sum ([`q4_k_super`]), beyond them
/// the row kernel's body ([`q4_k_chunk_by_row_kernel`]).
#[target_feature(enable = "avx2")]
#[inline]
fn q4_k_decode_row(row: &[u8], a: &ActRow<'_>, terms: &[ActSuper]) -> ExactAcc {
    const LIMS: (u32, u32) = (kquant::CHUNK_WLIM_Q4_K, kquant::CHUNK_LIM_Q4_K);
    let mut acc = ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    };
    let (blks, ys) = (row.as_chunks::<Q4_K_BYTES>().0, a.qs.as_chunks::<QK_K>().0);
    let chunks = blks.chunks(CHUNK_SUPERS).zip(ys.chunks(CHUNK_SUPERS));
    for (c, ((bc, yc), tc)) in chunks.zip(terms.chunks(CHUNK_SUPERS)).enumerate() {
        let w = chunk_weights::<Q4_K_BYTES, true>(bc, a.ch.get(c), LIMS);
        acc.nonfinite |= w.bad;
        let Some(shift) = w.fit else {
            q4_k_chunk_by_row_kernel(&mut acc, bc.as_flattened(), a, c);
            continue;
        };
        let mut s = _mm256_setzero_si256();
        for (i, ((blk, yq), t)) in bc.iter().zip(yc).zip(tc).enumerate() {
            s = _mm256_add_epi64(s, q4_k_super(blk, yq, t, (w.m[2 * i], w.m[2 * i + 1])));
        }
        acc.sum += shl63(lanes_i128(s), shift);
    }
    acc
}

/// One Q6_K weight row as [`q4_k_decode_row`] ([`q6_k_super`]).
#[target_feature(enable = "avx2")]
#[inline]
fn q6_k_decode_row(row: &[u8], a: &ActRow<'_>, terms: &[ActSuper]) -> ExactAcc {
    const LIMS: (u32, u32) = (kquant::CHUNK_WLIM_Q6_K, kquant::CHUNK_LIM_Q6_K);
    let mut acc = ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    };
    let (blks, ys) = (row.as_chunks::<Q6_K_BYTES>().0, a.qs.as_chunks::<QK_K>().0);
    let chunks = blks.chunks(CHUNK_SUPERS).zip(ys.chunks(CHUNK_SUPERS));
    for (c, ((bc, yc), tc)) in chunks.zip(terms.chunks(CHUNK_SUPERS)).enumerate() {
        let w = chunk_weights::<Q6_K_BYTES, false>(bc, a.ch.get(c), LIMS);
        acc.nonfinite |= w.bad;
        let Some(shift) = w.fit else {
            q6_k_chunk_by_row_kernel(&mut acc, bc.as_flattened(), a, c);
            continue;
        };
        let mut s = _mm256_setzero_si256();
        for (i, ((blk, yq), t)) in bc.iter().zip(yc).zip(tc).enumerate() {
            s = _mm256_add_epi64(s, q6_k_super(blk, yq, t, w.m[i]));
        }
        acc.sum += shl63(lanes_i128(s), shift);
    }
    acc
}

/// Input row `a`'s activations and block scales of chunk `c` (as long as
/// `blks`, `bytes` per super-block), flags cleared, as an input row of
/// its own.
fn chunk_act<'a>(a: &ActRow<'a>, c: usize, blks: &[u8], bytes: usize) -> ActRow<'a> {
    let (b0, n) = (CHUNK_SUPERS * c, blks.len() / bytes);
    ActRow {
        qs: &a.qs[QK_K * b0..QK_K * (b0 + n)],
        sc: &a.sc[8 * b0..8 * (b0 + n)],
        ch: &[],
        flags: 0,
        h: &[],
        f: &[],
    }
}

/// A Q4_K chunk beyond the chunk limits: its super-blocks `blks` against
/// chunk `c` of `a` by the row kernel's body, its sum added to `acc`.
#[target_feature(enable = "avx2")]
#[cold]
#[inline(never)]
fn q4_k_chunk_by_row_kernel(acc: &mut ExactAcc, blks: &[u8], a: &ActRow<'_>, c: usize) {
    let [t] = q4_k_rows_vec([blks], &chunk_act(a, c, blks, Q4_K_BYTES));
    acc.sum += t.sum;
    acc.nonfinite |= t.nonfinite;
}

/// [`q4_k_chunk_by_row_kernel`] for Q6_K.
#[target_feature(enable = "avx2")]
#[cold]
#[inline(never)]
fn q6_k_chunk_by_row_kernel(acc: &mut ExactAcc, blks: &[u8], a: &ActRow<'_>, c: usize) {
    let [t] = q6_k_rows_vec([blks], &chunk_act(a, c, blks, Q6_K_BYTES));
    acc.sum += t.sum;
    acc.nonfinite |= t.nonfinite;
}

/// Builds of the decode kernels for a feature set.
macro_rules! decode_build {
    ($q4:ident, $q6:ident, $features:literal) => {
        #[target_feature(enable = $features)]
        fn $q4(rows: &[u8], a: &ActRow<'_>, out: &mut [F32]) -> bool {
            decode_rows::<Q4_K_BYTES, false>(rows, a, out, |w, a, t| q4_k_decode_row(w, a, t))
        }

        #[target_feature(enable = $features)]
        fn $q6(rows: &[u8], a: &ActRow<'_>, out: &mut [F32]) -> bool {
            decode_rows::<Q6_K_BYTES, true>(rows, a, out, |w, a, t| q6_k_decode_row(w, a, t))
        }
    };
}

decode_build!(q4_k_decode_avx2, q6_k_decode_avx2, "avx2,bmi1,bmi2,lzcnt");
decode_build!(
    q4_k_decode_avx512,
    q6_k_decode_avx512,
    "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw"
);

/// [`kquant::DecodeFn`] entry of [`q4_k_decode_avx2`].
fn q4_k_decode_avx2_entry(rows: &[u8], a: &ActRow<'_>, out: &mut [F32]) -> bool {
    // SAFETY: only handed out by `avx2`, after `simd::level()` returned
    // `Avx2` or wider: AVX2, BMI1, BMI2, LZCNT.
    unsafe { q4_k_decode_avx2(rows, a, out) }
}

/// [`kquant::DecodeFn`] entry of [`q6_k_decode_avx2`].
fn q6_k_decode_avx2_entry(rows: &[u8], a: &ActRow<'_>, out: &mut [F32]) -> bool {
    // SAFETY: as in `q4_k_decode_avx2_entry`.
    unsafe { q6_k_decode_avx2(rows, a, out) }
}

/// [`kquant::DecodeFn`] entry of [`q4_k_decode_avx512`].
fn q4_k_decode_avx512_entry(rows: &[u8], a: &ActRow<'_>, out: &mut [F32]) -> bool {
    // SAFETY: only handed out by `avx512`, after `simd::level()` returned
    // `Avx512` or wider: the AVX2 set and AVX-512 F, CD, VL, DQ, BW.
    unsafe { q4_k_decode_avx512(rows, a, out) }
}

/// [`kquant::DecodeFn`] entry of [`q6_k_decode_avx512`].
fn q6_k_decode_avx512_entry(rows: &[u8], a: &ActRow<'_>, out: &mut [F32]) -> bool {
    // SAFETY: as in `q4_k_decode_avx512_entry`.
    unsafe { q6_k_decode_avx512(rows, a, out) }
}
