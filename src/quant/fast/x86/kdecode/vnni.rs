//! The AVX-512 VNNI build of the Q4_K, Q5_K and Q6_K decode kernels
//! (x86-64, feature `std`): [`super`]'s chunk loop and limits, with each
//! super-block's 256 products taken by four 512-bit `vpdpbusd` and reduced
//! to the eight sub-block sums (Q6_K: the sixteen half sums) by one 512-bit
//! tree ([`sub_block_sums`], [`lane_sums`]), and the eight sub-blocks'
//! terms scaled in the eight `i64` lanes of one vector. One input row by
//! [`decode_row_v`]; several by [`group`] (each weight super-block's
//! values and factors and each weight row's chunk scales taken once for
//! all of them) — the driver hands it the input rows
//! `kquant::vnni_decode_takes` (up to `VNNI_DECODE_MAX_ROWS`, or up to
//! `DECODE_PASS_ROWS` of short rows), the VNNI tile more.
//!
//! Contract: as [`super`]'s — each cell is `q4_k_row(row, a).finish()`
//! (`q5_k_row`, `q6_k_row`), the same bits as
//! [`crate::quant::dot::dot_row`]; `false`, nothing written, for what the
//! AVX-512 build would refuse. Verified by
//! `tests/kernels/matmul.rs` (every path asserted to run the kernel it
//! should, on this CPU this one at M = 1, and to give the reference's
//! bits; `kquant_chunk_limits_agree` at and one past each limit;
//! `kquant_extreme_blocks_agree`), `tests/kernels_guarded.rs` (guard
//! pages).
//!
//! ## Layout
//!
//! A Q4_K super-block's 128 bytes of nibbles are four 32-byte groups `c`,
//! the low nibbles sub-block `2c`, the high ones `2c + 1`. Loaded as two
//! 64-byte vectors, the low nibbles of the first are sub-blocks 0 and 2
//! (one per 256-bit half), its high ones 1 and 3; the second's 4 and 6, 5
//! and 7. The activations are laid out alike by two `vshufi64x2` per 128
//! of them ([`acts_paired`]), once per call with the input's other terms
//! ([`ActSuperV::y`]), not per weight row. The reduction leaves the
//! sub-block sums in the lane order [`ORDER`] (`[0, 1, 4, 5, 2, 3, 6,
//! 7]`); the input's terms are taken in that order once per call
//! ([`ActSuperV`]) and the weight's scale bytes put in it by two `pdep`
//! ([`scales_in_order`]).
//!
//! ## Why it is exact
//!
//! `vpdpbusd` adds four products of a value (`0..=15`, Q5_K `0..=31`) and
//! an activation (`-127..=127`) to an `i32` lane: at most `4·31·127`;
//! each sub-block sum `sumq_j ≤ 32·31·127 < 2^17`, as [`super`]'s. The
//! terms are [`super`]'s, `((sumq·am)·(sc·dm << wrel_d) − (bsum·am)·(mn·nm
//! << wrel_n)) << drel < 2^59.97` within the same chunk limits, each in
//! its own `i64` lane: four a chunk, below 2^61.97; at the chunk's end the
//! two 256-bit halves are added (below 2^62.97) and the four lanes summed
//! in `i128` at `2^(wbase + dbase)`, as there. Q6_K: each lane adds four
//! products of `q + 32` (`0..=63`) and an activation, at most `4·63·127`;
//! each half sum less the input's `32·Σ y` is `Σ q·y`, `|·| ≤ 16·32·127`,
//! times its signed scale and the halves added, `|sumi_j| < 2^24`, and the
//! term `(sumi·((dm << wrel)·am)) << drel < 2^60` ([`super`]'s): four a
//! lane a chunk, eight once the halves are added, below 2^63. Integer
//! addition being associative, that is the row kernel's integer.
//!
//! ## Unsafe review
//! * Every `unsafe` block is a call of a `#[target_feature]` function, made
//!   only through a function pointer that [`vnni`] hands out after
//!   [`crate::simd::level`] confirmed each of its features
//!   ([`Level::Avx512Vnni`]: AVX2, BMI1, BMI2, LZCNT, AVX-512 F, CD, VL,
//!   DQ, BW and VNNI).
//! * Loads go through `load64` (length asserted at the load); there is no
//!   pointer arithmetic, no write through a pointer, no uninitialised
//!   memory.

use super::super::kquant::load64;
use super::{
    ChunkWeights, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES, chunk_weights, decode_rows_with, lanes_i128,
    prefetch_ahead, q4_k_chunk_by_row_kernel, q5_k_chunk_by_row_kernel, q6_k_chunk_by_row_kernel,
};
use crate::F32;
use crate::quant::GgmlType;
use crate::quant::act::{ActRow, FLAG_D_NONFINITE};
use crate::quant::block::QK_K;
use crate::quant::fast::kquant::{self, CHUNK_SUPERS};
use crate::quant::fixed::ExactAcc;
use crate::simd::Level;
use core::arch::x86_64::*;

mod group;

/// The VNNI decode kernel of Q4_K or Q5_K if this CPU runs
/// [`Level::Avx512Vnni`]; `None` for other formats.
pub(in crate::quant::fast) fn vnni(ty: GgmlType) -> Option<kquant::DecodeFn> {
    if crate::simd::level() < Level::Avx512Vnni {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some(q4_k_decode_vnni_entry),
        GgmlType::Q5_K => Some(q5_k_decode_vnni_entry),
        GgmlType::Q6_K => Some(q6_k_decode_vnni_entry),
        _ => None,
    }
}

/// The lane order of [`sub_block_sums`]: lane `k` holds sub-block
/// `ORDER[k]`.
const ORDER: [usize; 8] = [0, 1, 4, 5, 2, 3, 6, 7];

/// One super-block's input terms, taken once per call, in [`ORDER`]: the
/// mantissas `am_j` (`i32` lanes), `bsum_j·am_j` (`< 2^23`) and the
/// `vpsllvq` counts `drel_j` (`i64` lanes); and its 256 activations in
/// [`acts_paired`]'s layout (`y`: four shuffles a super-block saved on
/// every weight row, +2–10 % bytes/s in `kquant_m1`).
#[derive(Clone, Copy)]
struct ActSuperV {
    am: __m256i,
    x: __m512i,
    rel: __m512i,
    y: [__m512i; 4],
}

impl ActSuperV {
    /// The terms array's initial value.
    #[target_feature(enable = "avx2,avx512f")]
    #[inline]
    fn zero() -> Self {
        Self {
            am: _mm256_setzero_si256(),
            x: _mm512_setzero_si512(),
            rel: _mm512_setzero_si512(),
            y: [_mm512_setzero_si512(); 4],
        }
    }
}

/// The [`ActSuperV`] of super-block `b` of `a` (the caller checks that `a`
/// has it).
#[target_feature(enable = "avx2,avx512f")]
#[inline]
fn act_super_v(a: &ActRow<'_>, b: usize) -> ActSuperV {
    let s = ORDER.map(|j| a.sc[8 * b + j]);
    // `drel` is 0 where `dm` is (`fill_chunks`): that term is 0.
    let am = s.map(|s| s.dm);
    let x = s.map(|s| i64::from(s.bsum) * i64::from(s.dm));
    let rel = s.map(|s| i64::from(s.drel));
    ActSuperV {
        am: _mm256_setr_epi32(am[0], am[1], am[2], am[3], am[4], am[5], am[6], am[7]),
        x: _mm512_setr_epi64(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]),
        rel: _mm512_setr_epi64(
            rel[0], rel[1], rel[2], rel[3], rel[4], rel[5], rel[6], rel[7],
        ),
        y: acts_paired(&a.qs.as_chunks::<QK_K>().0[b]),
    }
}

/// One Q4_K (Q5_K) super-block of one weight row: the values as
/// [`acts_paired`] lays out the activations, the weight factors `sc·dmw`
/// and `mn·nmw` in [`ORDER`] (`i64` lanes, each `< 2^31`).
struct Q4kSuperV {
    q: [__m512i; 4],
    wd: __m512i,
    wn: __m512i,
}

/// `lo`'s two 16-bit halves at bytes 0–1 and 4–5, `hi`'s at 2–3 and 6–7:
/// scale bytes `0..4` and `4..8` of a sub-block row in [`ORDER`].
#[target_feature(enable = "bmi2")]
#[inline]
fn scales_in_order(lo: u32, hi: u32) -> u64 {
    _pdep_u64(u64::from(lo), 0x0000_FFFF_0000_FFFF)
        | _pdep_u64(u64::from(hi), 0xFFFF_0000_FFFF_0000)
}

/// The weight factors of `blk` (Q4_K's or Q5_K's 6-bit scales and mins,
/// `get_scale_min_k4` as [`super::q4_k_scales`]) times `(dmw, nmw)`, in
/// [`ORDER`].
#[target_feature(enable = "avx2,bmi2,avx512f")]
#[inline]
fn factors<const B: usize>(blk: &[u8; B], (dmw, nmw): (i32, i32)) -> (__m512i, __m512i) {
    let w = |i: usize| u32::from_le_bytes([blk[i], blk[i + 1], blk[i + 2], blk[i + 3]]);
    let (s0, s1, s2) = (w(4), w(8), w(12));
    let (m6, m4, m2) = (0x3F3F_3F3F, 0x0F0F_0F0F, 0x0303_0303);
    let sc = scales_in_order(s0 & m6, (s2 & m4) | ((s0 >> 6) & m2) << 4);
    let mn = scales_in_order(s1 & m6, ((s2 >> 4) & m4) | ((s1 >> 6) & m2) << 4);
    let lanes = |x: u64| _mm512_cvtepu8_epi64(_mm_cvtsi64_si128(x as i64));
    (
        _mm512_mul_epi32(lanes(sc), _mm512_set1_epi64(i64::from(dmw))),
        _mm512_mul_epi32(lanes(mn), _mm512_set1_epi64(i64::from(nmw))),
    )
}

/// The nibbles of the 128 bytes of `blk` at `at` (Q4_K 16, Q5_K 48) as
/// [`Q4kSuperV::q`]: vector `2h` the low nibbles of bytes `at + 64h..`
/// (sub-blocks `4h`, `4h + 2`), `2h + 1` their high ones (`4h + 1`, `4h +
/// 3`).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn nibbles<const B: usize>(blk: &[u8; B], at: usize) -> [__m512i; 4] {
    let m4 = _mm512_set1_epi8(15);
    let (l0, l1) = (load64(blk, at), load64(blk, at + 64));
    [
        _mm512_and_si512(l0, m4),
        _mm512_and_si512(_mm512_srli_epi16(l0, 4), m4),
        _mm512_and_si512(l1, m4),
        _mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
    ]
}

/// The [`Q4kSuperV`] of a Q4_K super-block.
#[target_feature(enable = "avx2,bmi2,avx512f,avx512bw")]
#[inline]
fn q4_k_weights_v(blk: &[u8; Q4_K_BYTES], f: (i32, i32)) -> Q4kSuperV {
    let (wd, wn) = factors(blk, f);
    Q4kSuperV {
        q: nibbles(blk, 16),
        wd,
        wn,
    }
}

/// The [`Q4kSuperV`] of a Q5_K super-block: its nibbles (at 48) with 16
/// added where the sub-block's bit of `qh` (32 bytes at 16) is set, that
/// bit moved to bit 4 of its byte by a 16-bit shift (left by `4 − k` for
/// sub-blocks `k < 4`, right by `k − 4` for the others; a byte's bit moves
/// within its byte for these counts), one count per 256-bit half.
#[target_feature(enable = "avx2,bmi2,avx512f,avx512bw")]
#[inline]
fn q5_k_weights_v(blk: &[u8; Q5_K_BYTES], f: (i32, i32)) -> Q4kSuperV {
    let (wd, wn) = factors(blk, f);
    let q = nibbles(blk, 48);
    let qh = _mm512_broadcast_i64x4(super::load32(blk, 16));
    let counts = |a: i16, b: i16| _mm512_inserti64x4(_mm512_set1_epi16(a), _mm256_set1_epi16(b), 1);
    // Vector `v` holds sub-blocks `[0, 2]`, `[1, 3]`, `[4, 6]`, `[5, 7]`.
    let high = [
        _mm512_sllv_epi16(qh, counts(4, 2)),
        _mm512_sllv_epi16(qh, counts(3, 1)),
        _mm512_srlv_epi16(qh, counts(0, 2)),
        _mm512_srlv_epi16(qh, counts(1, 3)),
    ];
    let bit4 = _mm512_set1_epi8(16);
    Q4kSuperV {
        q: core::array::from_fn(|v| _mm512_or_si512(q[v], _mm512_and_si512(high[v], bit4))),
        wd,
        wn,
    }
}

/// The 256 activations `yq` laid out as [`Q4kSuperV::q`]: vector `2h` the
/// 32 bytes of sub-blocks `4h` and `4h + 2`, `2h + 1` those of `4h + 1`
/// and `4h + 3`.
#[target_feature(enable = "avx512f")]
#[inline]
fn acts_paired(yq: &[i8; QK_K]) -> [__m512i; 4] {
    let y: [__m512i; 4] = core::array::from_fn(|k| load64(yq, 64 * k));
    [
        _mm512_shuffle_i64x2(y[0], y[1], 0x44),
        _mm512_shuffle_i64x2(y[0], y[1], 0xEE),
        _mm512_shuffle_i64x2(y[2], y[3], 0x44),
        _mm512_shuffle_i64x2(y[2], y[3], 0xEE),
    ]
}

/// The sums of each 128-bit lane of each of `p`: `i32` lane `4l + k` the
/// sum of `p[k]`'s four lanes in 128-bit lane `l` (pairs of lanes added
/// within each 128-bit lane twice).
#[target_feature(enable = "avx512f")]
#[inline]
fn lane_sums(p: [__m512i; 4]) -> __m512i {
    let pair = |a, b| _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    let (t0, t1) = (pair(p[0], p[1]), pair(p[2], p[3]));
    _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1))
}

/// 128-bit lanes 0 and 1 of `u` added, and 2 and 3: `i32` lane `k < 4`
/// the first sum of lane `k` of each, `4 + k` the second.
#[target_feature(enable = "avx2,avx512f")]
#[inline]
fn lanes_paired(u: __m512i) -> __m256i {
    // 128-bit lanes [0, 2, 1, 3]: each pair one above the other.
    let s = _mm512_shuffle_i64x2(u, u, 0xD8);
    _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1))
}

/// The eight `i32` sums of the two 256-bit halves of each of `p` (each
/// half one sub-block's eight partial sums) in [`ORDER`] (lane `k < 4`:
/// `p[k]`'s low half, `4 + k`: its high half; with `p` as
/// [`acts_paired`] lays it out, sub-blocks `[0, 1, 4, 5, 2, 3, 6, 7]`).
#[target_feature(enable = "avx2,avx512f")]
#[inline]
fn sub_block_sums(p: [__m512i; 4]) -> __m256i {
    lanes_paired(lane_sums(p))
}

/// One Q4_K (Q5_K) super-block `w` against the activations of `act` (its
/// `y`; the natural order `_yq` is not read): the eight terms of
/// [`super`] in `i64` lanes, in [`ORDER`].
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vnni")]
#[inline]
fn q4_k_super_v(w: &Q4kSuperV, _yq: &[i8; QK_K], act: &ActSuperV) -> __m512i {
    let y = &act.y;
    let z = _mm512_setzero_si512();
    let p: [__m512i; 4] = core::array::from_fn(|k| _mm512_dpbusd_epi32(z, w.q[k], y[k]));
    let u = _mm512_cvtepi32_epi64(_mm256_mullo_epi32(sub_block_sums(p), act.am));
    let e = _mm512_sub_epi64(_mm512_mul_epi32(u, w.wd), _mm512_mul_epi32(act.x, w.wn));
    _mm512_sllv_epi64(e, act.rel)
}

/// The lane order of the Q6_K sub-block sums ([`lanes_paired`] of
/// [`lane_sums`] with vector `k` sub-blocks `2k`, `2k + 1`): lane `k`
/// holds sub-block `ORDER6[k]`.
const ORDER6: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];

/// One super-block's Q6_K input terms, taken once per call: `32·Σ y` over
/// each 16-element half in [`lane_sums`]' layout (`i32` lane `4l + k`:
/// sub-block `2k + l / 2`, half `l % 2`), the mantissas `am_j` and the
/// `vpsllvq` counts `drel_j` in [`ORDER6`] (`i64` lanes).
#[derive(Clone, Copy)]
struct ActSuperV6 {
    x: __m512i,
    am: __m512i,
    rel: __m512i,
}

impl ActSuperV6 {
    /// The terms array's initial value.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn zero() -> Self {
        let z = _mm512_setzero_si512();
        Self {
            x: z,
            am: z,
            rel: z,
        }
    }
}

/// The [`ActSuperV6`] of super-block `b` of `a` (the caller checks that
/// `a` has it).
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vnni")]
#[inline]
fn act_super_v6(a: &ActRow<'_>, b: usize) -> ActSuperV6 {
    let (c32, z) = (_mm512_set1_epi8(32), _mm512_setzero_si512());
    let p = core::array::from_fn(|k| _mm512_dpbusd_epi32(z, c32, load64(a.qs, QK_K * b + 64 * k)));
    let s = ORDER6.map(|j| a.sc[8 * b + j]);
    // `drel` is 0 where `dm` is (`fill_chunks`): that term is 0.
    let am = s.map(|s| i64::from(s.dm));
    let rel = s.map(|s| i64::from(s.drel));
    ActSuperV6 {
        x: lane_sums(p),
        am: _mm512_setr_epi64(am[0], am[1], am[2], am[3], am[4], am[5], am[6], am[7]),
        rel: _mm512_setr_epi64(
            rel[0], rel[1], rel[2], rel[3], rel[4], rel[5], rel[6], rel[7],
        ),
    }
}

/// One Q6_K super-block of one weight row: its values plus 32 (`0..=63`),
/// vector `k` sub-blocks `2k` and `2k + 1` (as the activations lie); its
/// sixteen signed scales in [`lane_sums`]' layout; the factor `dmw`.
struct Q6kSuperV {
    q: [__m512i; 4],
    s: __m512i,
    dmw: i32,
}

/// Two byte vectors as the halves of one.
#[target_feature(enable = "avx512f")]
#[inline]
fn halves(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)
}

/// The [`Q6kSuperV`] of `blk` with the weight factor `dmw`: sub-block `j =
/// 4h + k` takes its low bits from the 32 bytes of `ql` at `64h + 32(k %
/// 2)` (low nibbles for `k < 2`) and its high bits from bits `2k..2k + 2`
/// of `qh`'s 32 bytes at `128 + 32h` (masked, then moved to bits 4..6 by
/// a 16-bit shift that keeps them in their byte), as [`super::super::kquant::q6_k_unpack`].
#[target_feature(enable = "avx2,avx512f,avx512bw")]
#[inline]
fn q6_k_weights_v(blk: &[u8; Q6_K_BYTES], dmw: i32) -> Q6kSuperV {
    let m4 = _mm512_set1_epi8(15);
    let set = |a: i8, b: i8| halves(_mm256_set1_epi8(a), _mm256_set1_epi8(b));
    let count = |a: i16, b: i16| halves(_mm256_set1_epi16(a), _mm256_set1_epi16(b));
    let (mask_lo, mask_hi) = (set(3, 12), set(48, -64));
    let (up, down) = (count(4, 2), count(0, 2));
    let mut q = [_mm512_setzero_si512(); 4];
    for h in 0..2 {
        let ql = load64(blk, 64 * h);
        let qh = _mm512_broadcast_i64x4(super::load32(blk, 128 + 32 * h));
        let hi_lo = _mm512_sllv_epi16(_mm512_and_si512(qh, mask_lo), up);
        let hi_hi = _mm512_srlv_epi16(_mm512_and_si512(qh, mask_hi), down);
        q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), hi_lo);
        q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hi_hi);
    }
    // Scale `4k + l` (sub-block `2k + l / 2`, half `l % 2`) to lane `4l + k`.
    let word = |at: usize| i64::from_le_bytes(core::array::from_fn(|i| blk[at + i]));
    let sc = _mm_set_epi64x(word(200), word(192));
    let order = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    Q6kSuperV {
        q,
        s: _mm512_cvtepi8_epi32(_mm_shuffle_epi8(sc, order)),
        dmw,
    }
}

/// One Q6_K super-block `w` against activations `yq`: per 16-element half
/// `Σ (q + 32)·y` by `vpdpbusd` (each lane at most `4·63·127`) and
/// [`lane_sums`], less the input's `32·Σ y` (`|Σ q·y| ≤ 16·32·127`), times
/// the half's signed scale, the halves added ([`lanes_paired`]): `sumi_j`
/// of `q6_k_sumi` (`< 2^24`); then `(sumi·((dm << wrel)·am)) << drel` of
/// [`super`] in `i64` lanes, in [`ORDER6`].
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vnni")]
#[inline]
fn q6_k_super_v(w: &Q6kSuperV, yq: &[i8; QK_K], act: &ActSuperV6) -> __m512i {
    let z = _mm512_setzero_si512();
    let p = core::array::from_fn(|k| _mm512_dpbusd_epi32(z, w.q[k], load64(yq, 64 * k)));
    let h = _mm512_mullo_epi32(_mm512_sub_epi32(lane_sums(p), act.x), w.s);
    let sumi = _mm512_cvtepi32_epi64(lanes_paired(h));
    let f = _mm512_mul_epi32(act.am, _mm512_set1_epi64(i64::from(w.dmw)));
    _mm512_sllv_epi64(_mm512_mul_epi32(sumi, f), act.rel)
}

/// One weight row `row` (`B`-byte super-blocks; `Q4`: Q4_K or Q5_K, else
/// Q6_K) against one input row `a` (its terms `terms`):
/// [`super::decode_row_one`]'s loop — per chunk the row's scales once, per
/// super-block its values and factors (`weights`, given the chunk's
/// scales and the super-block's index in it) and its terms in `i64` lanes
/// (`dot`), beyond the chunk limits `lims` the row kernel's body
/// (`by_row_kernel`).
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
#[inline]
fn decode_row_v<const B: usize, const Q4: bool, W, T>(
    (row, a, terms): (&[u8], &ActRow<'_>, &[T]),
    lims: (u32, u32),
    weights: impl Fn(&[u8; B], &ChunkWeights, usize) -> W,
    dot: impl Fn(&W, &[i8; QK_K], &T) -> __m512i,
    by_row_kernel: impl Fn(&mut ExactAcc, &[u8], &ActRow<'_>, usize),
) -> ExactAcc {
    let mut acc = ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    };
    let (blks, ys) = (row.as_chunks::<B>().0, a.qs.as_chunks::<QK_K>().0);
    let chunks = blks.chunks(CHUNK_SUPERS).zip(ys.chunks(CHUNK_SUPERS));
    for (c, ((bc, yc), tc)) in chunks.zip(terms.chunks(CHUNK_SUPERS)).enumerate() {
        let w = chunk_weights::<B, Q4>(bc);
        acc.nonfinite |= w.bad;
        let Some(shift) = w.fit(a.ch.get(c), lims) else {
            by_row_kernel(&mut acc, bc.as_flattened(), a, c);
            continue;
        };
        let mut s = _mm512_setzero_si512();
        for (i, ((blk, yq), t)) in bc.iter().zip(yc).zip(tc).enumerate() {
            prefetch_ahead::<B>(blk);
            s = _mm512_add_epi64(s, dot(&weights(blk, &w, i), yq, t));
        }
        let halves = _mm256_add_epi64(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
        acc.sum += super::shl63(lanes_i128(halves), shift);
    }
    acc
}

/// The kernel's checks and passes ([`decode_rows_with`]) for one input row
/// and the row function `row`; several input rows to `several` (the
/// [`group`] kernels).
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
#[inline]
fn decode_v<const B: usize, T: Copy>(
    (rows, acts, out, col): (&[u8], &[ActRow<'_>], &mut [F32], usize),
    (zero, term): (T, impl Fn(&ActRow<'_>, usize) -> T),
    row: impl Fn(&[u8], &ActRow<'_>, &[T]) -> ExactAcc,
    several: impl Fn(&[u8], &[ActRow<'_>], &mut [F32], usize) -> bool,
) -> bool {
    if acts.len() != 1 {
        return several(rows, acts, out, col);
    }
    decode_rows_with::<B, 1, T>(rows, acts, (out, col), (zero, term), |w, a, t| {
        [row(w, &a[0], t)]
    })
}

/// [`kquant::DecodeFn`] of Q4_K on AVX-512 VNNI.
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
fn q4_k_decode_vnni(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    decode_v::<Q4_K_BYTES, ActSuperV>(
        (rows, acts, out, col),
        (ActSuperV::zero(), |a, b| act_super_v(a, b)),
        |w, a, t| {
            decode_row_v::<Q4_K_BYTES, true, _, _>(
                (w, a, t),
                (kquant::CHUNK_WLIM_Q4_K, kquant::CHUNK_LIM_Q4_K),
                |blk, w, i| q4_k_weights_v(blk, (w.m[2 * i], w.m[2 * i + 1])),
                |w, yq, t| q4_k_super_v(w, yq, t),
                |acc, blks, a, c| q4_k_chunk_by_row_kernel(acc, blks, a, c),
            )
        },
        |rows, acts, out, col| group::q4_k_decode(rows, acts, out, col),
    )
}

/// [`kquant::DecodeFn`] of Q5_K on AVX-512 VNNI.
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
fn q5_k_decode_vnni(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    decode_v::<Q5_K_BYTES, ActSuperV>(
        (rows, acts, out, col),
        (ActSuperV::zero(), |a, b| act_super_v(a, b)),
        |w, a, t| {
            decode_row_v::<Q5_K_BYTES, true, _, _>(
                (w, a, t),
                (kquant::CHUNK_WLIM_Q5_K, kquant::CHUNK_LIM_Q5_K),
                |blk, w, i| q5_k_weights_v(blk, (w.m[2 * i], w.m[2 * i + 1])),
                |w, yq, t| q4_k_super_v(w, yq, t),
                |acc, blks, a, c| q5_k_chunk_by_row_kernel(acc, blks, a, c),
            )
        },
        |rows, acts, out, col| group::q5_k_decode(rows, acts, out, col),
    )
}

/// [`kquant::DecodeFn`] of Q6_K on AVX-512 VNNI.
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
fn q6_k_decode_vnni(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    decode_v::<Q6_K_BYTES, ActSuperV6>(
        (rows, acts, out, col),
        (ActSuperV6::zero(), |a, b| act_super_v6(a, b)),
        |w, a, t| {
            decode_row_v::<Q6_K_BYTES, false, _, _>(
                (w, a, t),
                (kquant::CHUNK_WLIM_Q6_K, kquant::CHUNK_LIM_Q6_K),
                |blk, w, i| q6_k_weights_v(blk, w.m[i]),
                |w, yq, t| q6_k_super_v(w, yq, t),
                |acc, blks, a, c| q6_k_chunk_by_row_kernel(acc, blks, a, c),
            )
        },
        |rows, acts, out, col| group::q6_k_decode(rows, acts, out, col),
    )
}

/// [`kquant::DecodeFn`] entry of [`q4_k_decode_vnni`].
fn q4_k_decode_vnni_entry(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    // SAFETY: only handed out by `vnni`, after `simd::level()` returned
    // `Avx512Vnni`: AVX2, BMI1, BMI2, LZCNT and AVX-512 F, CD, VL, DQ, BW
    // and VNNI.
    unsafe { q4_k_decode_vnni(rows, acts, out, col) }
}

/// [`kquant::DecodeFn`] entry of [`q5_k_decode_vnni`].
fn q5_k_decode_vnni_entry(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    // SAFETY: as in `q4_k_decode_vnni_entry`.
    unsafe { q5_k_decode_vnni(rows, acts, out, col) }
}

/// [`kquant::DecodeFn`] entry of [`q6_k_decode_vnni`].
fn q6_k_decode_vnni_entry(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    // SAFETY: as in `q4_k_decode_vnni_entry`.
    unsafe { q6_k_decode_vnni(rows, acts, out, col) }
}
