//! The fused Q4_0 / Q4_1 / Q5_0 / Q8_0 chunk kernels of the blocked
//! matmul, hand-written in AVX2 and AVX-512 VNNI intrinsics (x86-64,
//! feature `std`),
//! as ggml keeps `arch/x86/quants.c` beside its portable `quants.c`, and
//! each instruction set's build of the blocked drivers with them inlined
//! ([`avx2_rows`], [`vnni_rows`]: handed out where the CPU runs them;
//! `super::super::dispatch` picks which). With [`super::kquant`] (the
//! K-quant ones), `crate::pool` and the expansion of
//! `crate::simd::multiversion!`, the only code of the crate allowed
//! `unsafe`.
//!
//! Contract: they compute exactly the `i64` chunk sums of the portable
//! kernels of `super::super` — same integers, another instruction sequence — so
//! results are the same bits; `tests/kernels/matmul.rs` checks that by
//! proptest (every path, and that this one ran where the CPU has it).
//!
//! Per block and group of four weight rows: the 32 weights are widened to
//! unsigned bytes (Q4_1: nibbles `q`; Q8_0: `|x|` with the sign moved onto the
//! activation by `vpsignb`; Q5_0: its values `q - 16` in `-16..=15` decoded to
//! signed bytes — nibbles, plus `0x10` where the block's `qh` bit is set,
//! minus 16 — then as Q8_0; Q4_0: its nibbles minus 8, then as Q8_0), `vpmaddubsw` against the 32 activation bytes
//! (pairs of products, `|pair| ≤ 2·128·127 < 2^15`, never saturating because
//! activations are in `-127..=127`), then the four rows' block sums: Q8_0
//! after `vpmaddwd` by ones to `i32` lanes, by an unpack-and-add tree; Q4_1,
//! whose pairs are at most 2·15·127, in 16-bit lanes (at most 8 pairs per
//! lane, < 2^15) and one `vpmaddwd` — for a tile of input rows with the
//! block's weights transposed once so that each row's pairs land in their own
//! 64-bit lane and no tree is needed ([`block_dots4_avx2`]). Then `sumi · (mw·ma)` as `i64`
//! (`vpmuldq`) shifted by the relative exponent (`vpsllvq`) and added. A tile
//! of input rows does every block's byte dots for all its rows first (kept,
//! with the block's decoded scales, in a chunk-sized scratch), then each
//! row's exact scaling over the blocks with its two sums in registers. The
//! VNNI build runs [`tile_vnni512`] instead, for one input row and for a
//! tile: 512-bit vectors, two blocks at a time, `vpdpbusd`, the four rows'
//! dots of an input row reduced together and scaled exactly eight cells per
//! instruction. With many input rows (prefill), weight rows go sixteen at a
//! time through [`tile16_vnni512`] instead: one
//! weight row per 32-bit lane, the weights as unsigned bytes (Q5_0 and
//! Q8_0 biased, the bias taken off with the activation block's exact sum) and transposed
//! once per block, so that eight `vpdpbusd` against broadcast activation
//! dwords leave each row's block sum in its own lane with no reduction,
//! and the exact scaling runs sixteen cells per two instructions.
//!
//! ## Unsafe review
//! * Every `unsafe` block is a call of a `#[target_feature]` function, made
//!   only through a function pointer that [`avx2_rows`] or [`vnni_rows`]
//!   hands out after [`crate::simd::level`] confirmed each of its features
//!   ([`Level::Avx2`]: AVX2, BMI1, BMI2, LZCNT; for the `vpdpbusd` kernels
//!   [`Level::Avx512Vnni`], which includes AVX-512 F, BW, DQ, VL and VNNI), or from
//!   inside such a function (the kernel types [`Avx2Kernel`] and
//!   [`VnniKernel`] are built only there), or an unaligned load.
//! * Loads (`_mm_loadu_si128`, `_mm256_loadu_si256`, `_mm512_loadu_si512`, `read_unaligned`,
//!   `get_unchecked`) read from slices whose length was checked, at the top
//!   of the kernel, to cover every byte the loop reads (each such block
//!   states the inequality). The loaders that take a raw pointer
//!   (`block_weights_avx2`, `pair_weights`, `transpose16x4`,
//!   `wide_weights`) are `unsafe fn`s stating that bound as their
//!   precondition; their callers check it first (`tile_in_bounds`).
//! * No pointer arithmetic beyond those checked slices, no writes through
//!   pointers. Uninitialised memory only in the tile kernel's scratch
//!   (`MaybeUninit`), whose entries `(b < nb, j < n)` the block loop writes
//!   before the scaling loop, over the same bounds, reads them.
//! * The wide kernel's gathers read one dword per row at offsets below
//!   `16·rb`, which fits an `i32` (checked with its other bounds at entry).
#![allow(unsafe_code)]

use super::batch::{avx2_wide_min, tile16_avx2};
use crate::F32;
use crate::quant::GgmlType;
use crate::quant::act::{ActScale, CHUNK_BLOCKS, ChunkScale};
use crate::quant::block::QK;
use crate::quant::fast::blocked::{BlockedRowsFn, blocked_rows, groups_single_input};
use crate::quant::fast::chunk::{
    LIM_Q4_0_D, LIM_Q4_1_D, LIM_Q4_1_M, LIM_Q5_0_D, LIM_Q8_0_D, ROW_GROUP,
};
use crate::quant::fast::fused::{
    ACT_TILE, ActTile, ChunkSums, FusedChunkKernel, WIDE_GROUPS, WIDE_ROWS, WIDE_TILE, WideTileOut,
};
use crate::quant::fast::group::GroupKernel;
use crate::quant::fast::wide::WIDE_MIN_ROWS;
use crate::quant::fixed::QUANTUM_EXP;
use crate::quant::{QActs, QMatrix};
use crate::simd::Level;
use core::arch::x86_64::*;

/// The weight formats of the fused kernels, as types (a const generic
/// cannot be an enum on stable Rust).
pub(super) trait Format {
    /// Q4_1 (unsigned nibbles, a min per block) rather than Q8_0 or Q5_0
    /// (signed bytes, no min).
    const IS_Q4_1: bool;
    /// Q5_0 (signed 5-bit values from nibbles and a `qh` word) rather than
    /// Q8_0 (signed bytes as stored).
    const IS_Q5_0: bool;
    /// Q4_0 (signed 4-bit values `q - 8` from nibbles).
    const IS_Q4_0: bool = false;
    /// Bytes per block.
    const BLOCK_BYTES: usize;
    /// Largest relative shift of a `d` term (`super::super`'s table).
    const LIM_D: u32;
}

/// Q4_1 blocks: `f16 d; f16 m; u8 qs[16]`.
#[allow(non_camel_case_types)]
pub(super) enum Q4_1Blocks {}

impl Format for Q4_1Blocks {
    const IS_Q4_1: bool = true;
    const IS_Q5_0: bool = false;
    const BLOCK_BYTES: usize = 20;
    const LIM_D: u32 = LIM_Q4_1_D;
}

/// Q8_0 blocks: `f16 d; i8 qs[32]`.
#[allow(non_camel_case_types)]
pub(super) enum Q8_0Blocks {}

impl Format for Q8_0Blocks {
    const IS_Q4_1: bool = false;
    const IS_Q5_0: bool = false;
    const BLOCK_BYTES: usize = 34;
    const LIM_D: u32 = LIM_Q8_0_D;
}

/// Q5_0 blocks: `f16 d; u8 qh[4]; u8 qs[16]`.
#[allow(non_camel_case_types)]
pub(super) enum Q5_0Blocks {}

impl Format for Q5_0Blocks {
    const IS_Q4_1: bool = false;
    const IS_Q5_0: bool = true;
    const BLOCK_BYTES: usize = 22;
    const LIM_D: u32 = LIM_Q5_0_D;
}

/// Q4_0 blocks: `f16 d; u8 qs[16]`.
#[allow(non_camel_case_types)]
enum Q4_0Blocks {}

impl Format for Q4_0Blocks {
    const IS_Q4_1: bool = false;
    const IS_Q5_0: bool = false;
    const IS_Q4_0: bool = true;
    const BLOCK_BYTES: usize = 18;
    const LIM_D: u32 = LIM_Q4_0_D;
}

/// The AVX2 build of the blocked-matmul drivers with `ty`'s fused kernels
/// built in, if `ty` has them (Q4_0, Q4_1, Q5_0, Q8_0) and this CPU runs
/// [`Level::Avx2`] (the drivers inline the cell rounding, which uses BMI1/2
/// and LZCNT, part of that level).
pub(in crate::quant::fast) fn avx2_rows(ty: GgmlType) -> Option<BlockedRowsFn> {
    if crate::simd::level() < Level::Avx2 {
        return None;
    }
    match ty {
        GgmlType::Q4_1 => Some(avx2_entry::<Q4_1Blocks>),
        GgmlType::Q8_0 => Some(avx2_entry::<Q8_0Blocks>),
        GgmlType::Q5_0 => Some(avx2_entry::<Q5_0Blocks>),
        GgmlType::Q4_0 => Some(avx2_entry::<Q4_0Blocks>),
        _ => None,
    }
}

/// [`avx2_rows`] for the AVX-512 VNNI build (`vpdpbusd`), if this CPU runs
/// [`Level::Avx512Vnni`] (Q4_0, Q4_1, Q5_0, Q8_0).
pub(in crate::quant::fast) fn vnni_rows(ty: GgmlType) -> Option<BlockedRowsFn> {
    if crate::simd::level() < Level::Avx512Vnni {
        return None;
    }
    match ty {
        GgmlType::Q4_1 => Some(vnni_entry::<Q4_1Blocks>),
        GgmlType::Q8_0 => Some(vnni_entry::<Q8_0Blocks>),
        GgmlType::Q5_0 => Some(vnni_entry::<Q5_0Blocks>),
        GgmlType::Q4_0 => Some(vnni_entry::<Q4_0Blocks>),
        _ => None,
    }
}

/// [`BlockedRowsFn`] entry of the AVX2 drivers.
fn avx2_entry<F: Format>(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
) -> (usize, usize) {
    // SAFETY: only handed out by `avx2_rows`, after `simd::level()`
    // returned `Avx2` or wider: AVX2, BMI1, BMI2, LZCNT.
    unsafe { rows_avx2::<F>(w, r0, x, out) }
}

/// [`BlockedRowsFn`] entry of the VNNI drivers.
fn vnni_entry<F: Format>(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
) -> (usize, usize) {
    // SAFETY: only handed out by `vnni_rows`, after `simd::level()`
    // returned `Avx512Vnni`: the AVX2 set and AVX-512 F, CD, VL, DQ, BW
    // and VNNI.
    unsafe { rows_vnni::<F>(w, r0, x, out) }
}

/// A tile holding one input row.
#[inline(always)]
fn one_row<'x>(qs: &'x [i8], sc: &'x [ActScale], ch: &ChunkScale) -> ActTile<'x, 1> {
    ActTile {
        n: 1,
        qs: [qs],
        sc: [sc],
        ch: [*ch],
    }
}

/// Stamps the [`FusedChunkKernel`] of one instruction set (`$kernel`, a type
/// generic over the [`Format`]) calling the chunk kernel `$chunk` (with
/// `N = 1` for one input row, `N = ACT_TILE` for a tile), and its
/// driver `$rows`: [`groups_single_input`] for one input row, else
/// [`blocked_rows`], with the kernel inlined. A value of `$kernel` exists
/// only inside `$rows`, which runs only where its features were detected.
macro_rules! isa_build {
    ($(#[$doc:meta])* $kernel:ident, $rows:ident, $features:literal, $chunk:ident $(, wide: $wide:ident from $from:expr)?) => {
        $(#[$doc])*
        struct $kernel<F>(core::marker::PhantomData<F>);

        impl<F> Clone for $kernel<F> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<F> Copy for $kernel<F> {}

        impl<F: Format> FusedChunkKernel for $kernel<F> {
            #[inline(always)]
            fn one_input(
                self,
                group: &[u8],
                rb: usize,
                b0: usize,
                nb: usize,
                qs: &[i8],
                sc: &[ActScale],
                ch: &ChunkScale,
            ) -> ChunkSums {
                let t = one_row(qs, sc, ch);
                // SAFETY: see the module's unsafe review (a value of this
                // type exists only inside its driver).
                let [r] = unsafe { $chunk::<F, 1>(group, rb, b0, nb, &t) };
                r
            }

            #[inline(always)]
            fn tile(
                self,
                group: &[u8],
                rb: usize,
                b0: usize,
                nb: usize,
                t: &ActTile<'_>,
            ) -> [ChunkSums; ACT_TILE] {
                // SAFETY: as in `one_input`.
                unsafe { $chunk::<F, ACT_TILE>(group, rb, b0, nb, t) }
            }
            $(
                const HAS_WIDE: bool = true;
                const WIDE_MIN: usize = $from;

                #[inline(always)]
                fn tile_wide(
                    self,
                    rows: &[u8],
                    rb: usize,
                    chunk: (usize, usize, bool),
                    t: &ActTile<'_, WIDE_TILE>,
                    out: &mut WideTileOut<WIDE_TILE>,
                ) {
                    // SAFETY: as in `one_input`.
                    unsafe { $wide::<F, WIDE_TILE>(rows, rb, chunk, t, out) }
                }
            )?
        }

        #[target_feature(enable = $features)]
        fn $rows<F: Format>(
            w: &QMatrix<'_>,
            r0: usize,
            x: &QActs<'_>,
            out: &mut [F32],
        ) -> (usize, usize) {
            let k = $kernel::<F>(core::marker::PhantomData);
            if x.rows() <= 1 {
                (groups_single_input(w, r0, x, out, k).unwrap_or(0), 0)
            } else {
                blocked_rows(w, r0, x, out, GroupKernel::Fused(k))
            }
        }
    };
}

isa_build!(
    /// The AVX2 fused kernels ([`fused_avx2`]; with several input rows the
    /// batched kernel, [`tile16_avx2`]).
    Avx2Kernel,
    rows_avx2,
    "avx2,bmi1,bmi2,lzcnt",
    fused_avx2,
    wide: tile16_avx2 from avx2_wide_min::<F>()
);
isa_build!(
    /// The AVX-512 VNNI kernels ([`tile_vnni512`], for one input row too).
    VnniKernel,
    rows_vnni,
    "avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,bmi1,bmi2,lzcnt",
    tile_vnni512,
    wide: tile16_vnni512 from WIDE_MIN_ROWS
);

/// Whether a chunk kernel may read blocks `b0..b0 + nb` (of `bs` bytes) of
/// the `n_rows` weight rows at stride `rb` in `group` and the tile's input
/// rows: every byte offset below `n_rows·rb` fits an `i32` (the wide
/// kernel's gathers take them as lanes), the rows and blocks lie inside
/// `group`, the chunk is non-empty and at most [`CHUNK_BLOCKS`], and every
/// input row has `nb` blocks of values and scales. The bound the kernels'
/// loads rely on.
#[inline(always)]
pub(super) fn tile_in_bounds<const N: usize>(
    (group, n_rows): (&[u8], usize),
    rb: usize,
    (b0, nb): (usize, usize),
    bs: usize,
    t: &ActTile<'_, N>,
) -> bool {
    let n = t.n.min(N);
    rb <= (i32::MAX as usize) / n_rows.max(1)
        && group.len() >= n_rows * rb
        && (b0 + nb) * bs <= rb
        && nb > 0
        && nb <= CHUNK_BLOCKS
        && n >= 1
        && (0..n).all(|j| t.qs[j].len() >= nb * QK && t.sc[j].len() >= nb)
}

/// Byte dot of one weight row's block with the activations, as 8 `i32`
/// lanes: `vpmaddubsw` pairs (never saturating, see the module docs) summed
/// by `vpmaddwd`.
#[target_feature(enable = "avx2")]
fn dot_madd(w: __m256i, y: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(w, y), _mm256_set1_epi16(1))
}

/// The four weight rows' bytes of a block as the AVX2 Q4_1 dots want them:
/// `W_k` holds elements `8k..8k + 8` of rows 0–3, one row per 64-bit lane
/// (a 4×4 transpose of the rows' qwords). Other kernels take the rows as
/// they are.
#[target_feature(enable = "avx2")]
fn arrange_avx2<F: Format>(w: [__m256i; 4], tile: bool) -> [__m256i; 4] {
    if !(F::IS_Q4_1 && tile) {
        return w;
    }
    let t0 = _mm256_unpacklo_epi64(w[0], w[1]);
    let t1 = _mm256_unpackhi_epi64(w[0], w[1]);
    let t2 = _mm256_unpacklo_epi64(w[2], w[3]);
    let t3 = _mm256_unpackhi_epi64(w[2], w[3]);
    [
        _mm256_permute2x128_si256::<0x20>(t0, t2),
        _mm256_permute2x128_si256::<0x20>(t1, t3),
        _mm256_permute2x128_si256::<0x31>(t0, t2),
        _mm256_permute2x128_si256::<0x31>(t1, t3),
    ]
}

/// The byte dots of one block of four weight rows (`w` from the kernel's
/// `arrange`: unsigned bytes; for Q8_0 `sgn` holds the signs to move onto the
/// activations) with the block's 32 activations `y`: row `r`'s `i32` sum in
/// the low dword of 64-bit lane `r` (what `vpmuldq` reads).
///
/// Q4_1 (weights transposed by [`arrange_avx2`]): `vpmaddubsw` of `W_k`
/// against activations `8k..8k + 8` broadcast to every lane gives each
/// row's pairs in its own lane, so the four products add up in 16-bit
/// lanes (a pair is at most 2·15·127, a lane of the sum adds 4 pairs:
/// ≤ 15240 < 2^15, nothing wraps), then one `vpmaddwd` and one add of
/// neighbouring dwords. Q8_0 pairs reach 2·128·127, so each row's pairs are
/// widened to 32 bits and reduced by unpacks and adds.
#[target_feature(enable = "avx2")]
fn block_dots4_avx2<F: Format>(
    w: &[__m256i; 4],
    sgn: &[__m256i; 4],
    y: &[i8; 32],
    tile: bool,
) -> __m256i {
    if F::IS_Q4_1 && !tile {
        // SAFETY: 32 bytes.
        let y = unsafe { _mm256_loadu_si256(y.as_ptr().cast()) };
        let p = |r: usize| _mm256_maddubs_epi16(w[r], y);
        let s = reduce4_by::<true>(p(0), p(1), p(2), p(3));
        _mm256_cvtepi32_epi64(_mm_madd_epi16(s, _mm_set1_epi16(1)))
    } else if F::IS_Q4_1 {
        // SAFETY: 8k + 8 ≤ 32 bytes of `y`.
        let yk = |k: usize| unsafe {
            _mm256_set1_epi64x(y.as_ptr().add(8 * k).cast::<i64>().read_unaligned())
        };
        let p = |k: usize| _mm256_maddubs_epi16(w[k], yk(k));
        let s = _mm256_add_epi16(_mm256_add_epi16(p(0), p(1)), _mm256_add_epi16(p(2), p(3)));
        let s = _mm256_madd_epi16(s, _mm256_set1_epi16(1));
        _mm256_add_epi32(s, _mm256_srli_epi64(s, 32))
    } else {
        // SAFETY: 32 bytes.
        let y = unsafe { _mm256_loadu_si256(y.as_ptr().cast()) };
        let d = |r: usize| dot_madd(w[r], _mm256_sign_epi8(y, sgn[r]));
        _mm256_cvtepi32_epi64(reduce4_by::<false>(d(0), d(1), d(2), d(3)))
    }
}

/// Guessed base below the first block's shift: weight scales of one row
/// within a chunk rarely lie more than this many binades below it.
pub(super) const MARGIN_D: i32 = 8;
/// The same for Q4_1 mins (the `m·s` sum has more headroom).
pub(super) const MARGIN_M: i32 = 16;

/// Eight binary16 values (zero-extended in 32-bit lanes) against per-lane
/// bases `base1 = base + 1`: `(mant, rel, nonfinite)`, where `mant` is the
/// signed mantissa of [`crate::quant::fixed::f16_fixed`] and `rel = sh - base`
/// (forced to 0 where `mant == 0`; negative values read as huge unsigned).
#[target_feature(enable = "avx2")]
pub(super) fn f16_rel8(h: __m256i, base1: __m256i) -> (__m256i, __m256i, __m256i) {
    let one = _mm256_set1_epi32(1);
    let e = _mm256_and_si256(_mm256_srli_epi32(h, 10), _mm256_set1_epi32(31));
    let frac = _mm256_and_si256(h, _mm256_set1_epi32(0x3FF));
    let mant = _mm256_or_si256(frac, _mm256_slli_epi32(_mm256_min_epu32(e, one), 10));
    let rel = _mm256_sub_epi32(_mm256_max_epu32(e, one), base1);
    let rel = _mm256_andnot_si256(_mm256_cmpeq_epi32(mant, _mm256_setzero_si256()), rel);
    // The sign of h moved to bit 31: vpsignd negates where it is set (h = 0
    // only for mant = 0, where zeroing is right too).
    let mant = _mm256_sign_epi32(mant, _mm256_slli_epi32(h, 16));
    (mant, rel, _mm256_cmpeq_epi32(e, _mm256_set1_epi32(31)))
}

#[target_feature(enable = "avx2")]
pub(super) fn to_u32x8(v: __m256i) -> [u32; 8] {
    let mut o = [0u32; 8];
    // SAFETY: 32 writable bytes.
    unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), v) };
    o
}

/// Both halves of an activation scale pair, `(lo, hi)` in every 64-bit lane.
#[target_feature(enable = "avx2")]
fn lane_pairs(lo: i32, hi: i32) -> __m256i {
    _mm256_set1_epi64x(((hi as i64) << 32) | (lo as u32 as i64))
}

/// One input row's [`ChunkSums`] from a fused kernel's chunk: `hi`, `base1`
/// and `bad` its weight lanes `[d0 m0 d1 m1 d2 m2 d3 m3]` (largest `rel`,
/// guessed base + 1, non-finite), `d` and `m` the four rows' `i64` sums.
#[target_feature(enable = "avx2")]
fn chunk_result<F: Format>(
    ch: &ChunkScale,
    hi: &[u32; 8],
    base1: &[u32; 8],
    bad: &[u32; 8],
    d: __m256i,
    m: __m256i,
) -> ChunkSums {
    let (lim_d, lim_m) = (F::LIM_D, if F::IS_Q4_1 { LIM_Q4_1_M } else { 0 });
    let mut r = ChunkSums::NOT_COMPUTED;
    // `hi` holds the largest rel as unsigned: a negative one (a shift
    // below the guessed base) reads as huge and fails too.
    r.fits_i64 = (0..ROW_GROUP).all(|i| {
        hi[2 * i] <= lim_d.saturating_sub(ch.dspread)
            && (!F::IS_Q4_1 || hi[2 * i + 1] <= lim_m.saturating_sub(ch.sspread))
    }) && ch.dspread <= lim_d
        && (!F::IS_Q4_1 || ch.sspread <= lim_m);
    for i in 0..ROW_GROUP {
        r.d_base[i] = base1[2 * i] - 1 + ch.dbase;
        r.m_base[i] = base1[2 * i + 1] - 1 + ch.sbase;
        r.nonfinite[i] = bad[2 * i] != 0 || (F::IS_Q4_1 && bad[2 * i + 1] != 0);
    }
    r.d_sum = to_i64x4(d);
    r.m_sum = to_i64x4(m);
    r
}

/// Single pass over one chunk of a group of four rows (of format `F`: Q4_1,
/// Q5_0 or Q8_0) for the first `min(t.n, N)` input rows of the tile: decodes the
/// weight scales against guessed bases, checks the relative shifts, sums in
/// `i64`. Each weight block's scales and bytes are decoded once and used for
/// every row of the tile, so the per-row work is only the byte dots and the
/// exact accumulation; `N = 1` is the single-row kernel.
///
/// Scales travel as eight 32-bit lanes `[d0 m0 d1 m1 d2 m2 d3 m3]` (rows 0–3;
/// for Q8_0 the `m` lanes are zero), so one instruction serves both sums:
/// `vpmuldq` reads the even (`d`) lanes, and the `m` lanes are moved down.
#[target_feature(enable = "avx2")]
pub(super) fn fused_avx2<F: Format, const N: usize>(
    group: &[u8],
    rb: usize,
    b0: usize,
    nb: usize,
    t: &ActTile<'_, N>,
) -> [ChunkSums; N] {
    let bs: usize = F::BLOCK_BYTES;
    let mut res = [ChunkSums::NOT_COMPUTED; N];
    let n = t.n.min(N);
    if !tile_in_bounds((group, ROW_GROUP), rb, (b0, nb), bs, t) {
        return res;
    }
    let base_ptr = group.as_ptr();
    // The four rows' (d, m) f16 pairs of block b as [d0 m0 d1 m1 d2 m2 d3 m3].
    let keep = if F::IS_Q4_1 {
        _mm_set1_epi32(-1)
    } else {
        _mm_set1_epi32(0xFFFF)
    };
    let head = |b: usize| {
        let o = b * bs;
        // SAFETY: r·rb + b·bs + 4 ≤ 4·rb ≤ group.len() (checked above).
        let rd = |r: usize| unsafe { base_ptr.add(r * rb + o).cast::<i32>().read_unaligned() };
        _mm256_cvtepu16_epi32(_mm_and_si128(
            _mm_setr_epi32(rd(0), rd(1), rd(2), rd(3)),
            keep,
        ))
    };
    let zero = _mm256_setzero_si256();
    let (_, rel0, _) = f16_rel8(head(b0), zero);
    // rel0 = sh + 1 of the first block; base + 1 = max(sh + 1 - margin, 1).
    let margin = lane_pairs(MARGIN_D, MARGIN_M);
    let base1 = _mm256_max_epi32(_mm256_sub_epi32(rel0, margin), _mm256_set1_epi32(1));
    let mut hi = zero;
    let mut bad = zero;
    let mut acc_d = [zero; N];
    let mut acc_m = [zero; N];
    // A tile's per-block weight scales and dots (N > 1; else unused).
    use core::mem::MaybeUninit;
    let uninit = MaybeUninit::<__m256i>::uninit();
    let mut tile_w = [uninit; CHUNK_BLOCKS];
    let mut tile_rel = [uninit; CHUNK_BLOCKS];
    let mut tile_sums = [[uninit; N]; CHUNK_BLOCKS];
    for b in 0..nb {
        let blk = b0 + b;
        let (wm, rel, wbad) = f16_rel8(head(blk), base1);
        bad = _mm256_or_si256(bad, wbad);
        hi = _mm256_max_epu32(hi, rel);
        prefetch_next_group::<F>(base_ptr, rb, blk);
        // SAFETY: block blk < b0 + nb of the four rows lies inside `group`
        // (`tile_in_bounds`).
        let (w, sgn) = unsafe { block_weights_avx2::<F>(base_ptr, rb, blk) };
        let w = arrange_avx2::<F>(w, N > 1);
        if N > 1 {
            // A tile: this block's dots of every input row now, the
            // exact scaling per input row after the last block, with
            // its sums in registers.
            tile_w[b].write(wm);
            tile_rel[b].write(rel);
            for (j, sum) in tile_sums[b].iter_mut().enumerate().take(n) {
                // SAFETY: j < n and b < nb, and `in_bounds` checked
                // t.qs[j].len() ≥ nb·QK, so b·QK + 32 bytes are there.
                let y = unsafe { &*t.qs[j].as_ptr().add(b * QK).cast::<[i8; 32]>() };
                sum.write(block_dots4_avx2::<F>(&w, &sgn, y, true));
            }
            continue;
        }
        // SAFETY: b < nb, and `in_bounds` checked t.qs[0].len() ≥ nb·QK.
        let y = unsafe { &*t.qs[0].as_ptr().add(b * QK).cast::<[i8; 32]>() };
        let sumi = block_dots4_avx2::<F>(&w, &sgn, y, false);
        // SAFETY: b < nb, and `in_bounds` checked t.sc[0].len() ≥ nb.
        let s = unsafe { t.sc[0].get_unchecked(b) };
        (acc_d[0], acc_m[0]) = scale_block_avx2::<F>((acc_d[0], acc_m[0]), wm, rel, sumi, s);
    }
    if N > 1 {
        for j in 0..n {
            let (mut ad, mut am) = (zero, zero);
            for b in 0..nb {
                // SAFETY: j < n and b < nb, and `in_bounds` checked
                // t.sc[j].len() ≥ nb.
                let s = unsafe { t.sc[j].get_unchecked(b) };
                // SAFETY: the block loop above wrote entry b of
                // `tile_w` and `tile_rel` and entry (b, j) of
                // `tile_sums` for every b < nb and j < n.
                let (wm, rel, sumi) = unsafe {
                    (
                        tile_w[b].assume_init(),
                        tile_rel[b].assume_init(),
                        tile_sums[b][j].assume_init(),
                    )
                };
                (ad, am) = scale_block_avx2::<F>((ad, am), wm, rel, sumi, s);
            }
            (acc_d[j], acc_m[j]) = (ad, am);
        }
    }
    let (hi, base1, badv) = (to_u32x8(hi), to_u32x8(base1), to_u32x8(bad));
    for j in 0..n {
        res[j] = chunk_result::<F>(&t.ch[j], &hi, &base1, &badv, acc_d[j], acc_m[j]);
    }
    res
}

/// Prefetches the next group's share of block `blk` of a group of four
/// rows at stride `rb`: the next group's bytes (contiguous), front to back,
/// a block's share at a time (Q4_1: 80 bytes, two prefetches 64 bytes
/// apart; Q8_0: 136, three). One prefetch per row at the same block, as
/// before, left the 30 MB Q8_0 head ≈ 25 % slower and decode ≈ 6 % slower
/// on the AVX2 VM. (A prefetch never faults: the address may lie past the
/// matrix.)
#[target_feature(enable = "avx2")]
#[inline]
fn prefetch_next_group<F: Format>(base_ptr: *const u8, rb: usize, blk: usize) {
    let bs = F::BLOCK_BYTES;
    let next = ROW_GROUP * rb + ROW_GROUP * bs * blk;
    for o in (0..ROW_GROUP * bs).step_by(64) {
        let p = base_ptr.wrapping_add(next + o);
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
}

/// The four weight rows' bytes of block `blk` (rows at stride `rb` from
/// `base_ptr`), decoded once for a whole tile of input rows as
/// [`block_dots4_avx2`] takes them: Q4_1 nibbles as unsigned bytes (and no
/// signs); Q4_0, Q5_0 and Q8_0 the magnitudes of their signed values, and the
/// values themselves, whose signs move onto the activations.
///
/// # Safety
/// Block `blk` of each row `r < 4` (`F::BLOCK_BYTES` bytes at
/// `r·rb + blk·bs`) lies inside one allocation starting at `base_ptr`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn block_weights_avx2<F: Format>(
    base_ptr: *const u8,
    rb: usize,
    blk: usize,
) -> ([__m256i; ROW_GROUP], [__m256i; ROW_GROUP]) {
    let bs = F::BLOCK_BYTES;
    let mask = _mm256_set1_epi8(0x0F);
    let nib_shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    let at = |r: usize, o: usize| r * rb + blk * bs + o;
    if F::IS_Q4_1 {
        // The 16 bytes in both halves; the upper half's dwords shifted
        // by 4, so after the mask it holds the high nibbles.
        // SAFETY: at(r, 4) + 16 ≤ at(r, bs), inside the allocation (the
        // caller's bound).
        let ld = |r: usize| unsafe {
            _mm256_broadcastsi128_si256(_mm_loadu_si128(base_ptr.add(at(r, 4)).cast()))
        };
        let un = |q: __m256i| _mm256_and_si256(_mm256_srlv_epi32(q, nib_shift), mask);
        (
            [un(ld(0)), un(ld(1)), un(ld(2)), un(ld(3))],
            [_mm256_setzero_si256(); ROW_GROUP],
        )
    } else {
        let ld = |r: usize| {
            if F::IS_Q4_0 {
                // SAFETY: at(r, 2) + 16 = at(r, bs), inside the allocation
                // (the caller's bound).
                let qs = unsafe {
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(base_ptr.add(at(r, 2)).cast()))
                };
                let nib = _mm256_and_si256(_mm256_srlv_epi32(qs, nib_shift), mask);
                _mm256_sub_epi8(nib, _mm256_set1_epi8(8))
            } else if F::IS_Q5_0 {
                // SAFETY: at(r, 6) + 16 = at(r, bs), and at(r, 2) + 4 ≤
                // at(r, bs) for the `qh` word: inside the allocation (the
                // caller's bound).
                let (qs, qh) = unsafe {
                    (
                        _mm256_broadcastsi128_si256(_mm_loadu_si128(base_ptr.add(at(r, 6)).cast())),
                        base_ptr.add(at(r, 2)).cast::<u32>().read_unaligned(),
                    )
                };
                let nib = _mm256_and_si256(_mm256_srlv_epi32(qs, nib_shift), mask);
                let high = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
                _mm256_sub_epi8(_mm256_or_si256(nib, high), _mm256_set1_epi8(16))
            } else {
                // SAFETY: at(r, 2) + 32 = at(r, bs), inside the allocation
                // (the caller's bound).
                unsafe { _mm256_loadu_si256(base_ptr.add(at(r, 2)).cast()) }
            }
        };
        let x = [ld(0), ld(1), ld(2), ld(3)];
        // Written out: `x.map(..)` was sometimes left a call.
        let abs = |i: usize| _mm256_sign_epi8(x[i], x[i]);
        ([abs(0), abs(1), abs(2), abs(3)], x)
    }
}

/// One block's exact terms added to an input row's sums `(ad, am)`:
/// `c = [dm·sdm, mm·ssm]` per weight row (`wm`: the weight mantissas in
/// lanes `[d0 m0 d1 m1 d2 m2 d3 m3]`, `rel` their shifts; `s`: the
/// activation block's scales) times the block sums `sumi` (`vpmuldq`),
/// shifted by `[drel + sdrel, mrel + ssrel]` (`vpsllvq`). Shift counts
/// masked to 0..=63: a wider count only occurs in a chunk reported not ok
/// (its sums are discarded), and the mask lets the shifts compile to a bare
/// `vpsllvq`.
#[target_feature(enable = "avx2")]
#[inline]
fn scale_block_avx2<F: Format>(
    (ad, am): (__m256i, __m256i),
    wm: __m256i,
    rel: __m256i,
    sumi: __m256i,
    s: &ActScale,
) -> (__m256i, __m256i) {
    let six = _mm256_set1_epi64x(63);
    let c = _mm256_mullo_epi32(wm, lane_pairs(s.dm, s.sm));
    let sh = _mm256_add_epi32(rel, lane_pairs(s.drel as i32, s.srel as i32));
    let td = _mm256_mul_epi32(c, sumi);
    let ad = _mm256_add_epi64(ad, _mm256_sllv_epi64(td, _mm256_and_si256(sh, six)));
    if !F::IS_Q4_1 {
        return (ad, am);
    }
    let tm = _mm256_mul_epi32(_mm256_srli_epi64(c, 32), _mm256_set1_epi64x(1));
    let shm = _mm256_and_si256(_mm256_srli_epi64(sh, 32), six);
    (ad, _mm256_add_epi64(am, _mm256_sllv_epi64(tm, shm)))
}

/// Dword index of `ActScale` field at byte `off` (the struct is `repr(C)`,
/// 32 bytes of 4-byte-aligned fields after its two `u16`).
const fn dw(off: usize) -> i32 {
    (off / 4) as i32
}
const _: () = assert!(size_of::<ActScale>() == 32);
const _: () = assert!(core::mem::offset_of!(ActScale, dm) % 4 == 0);
const _: () = assert!(core::mem::offset_of!(ActScale, sm) % 4 == 0);
const _: () = assert!(core::mem::offset_of!(ActScale, drel) % 4 == 0);
const _: () = assert!(core::mem::offset_of!(ActScale, srel) % 4 == 0);

/// `vpermd` indices putting dword `i` of the first 32 bytes of a vector in
/// every dword of its low half, and dword `8 + i` in every dword of its
/// high half: the field at dword `i` of two consecutive `ActScale`s, one per
/// half.
#[target_feature(enable = "avx512f")]
fn halves_of(i: i32) -> __m512i {
    let (a, b) = (_mm256_set1_epi32(i), _mm256_set1_epi32(8 + i));
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b)
}

/// The VNNI build's chunk kernel: [`fused_avx2`]'s sums for the first
/// `min(t.n, N)` input rows of a tile (`N = 1`: one input row, as in decode)
/// in 512-bit vectors, two blocks at a time with `vpdpbusd`: the same
/// integers, about half the instructions.
///
/// Per pair of blocks `(b, b + 1)` the four weight rows' bytes of both
/// blocks are decoded once into one 64-byte vector per row (Q8_0: `|x|`
/// and a mask of the negative bytes, whose activations are negated by a
/// masked `vpsubb` — as `vpsignb` did; Q4_0: `|nibble - 8|` and the
/// mask of the nibbles below 8, likewise; Q5_0: the nibbles plus 16 where the
/// `qh` bit is set (then `q - 16 ≥ 0`), else `16 - nibble` with the
/// activation negated; Q4_1: the nibbles), and their scales into 64-bit
/// lanes `[b: rows 0–3 | b + 1: rows 0–3]`. Per input row, one load of its
/// 64 activation bytes, four `vpdpbusd` (each lane the sum of four products,
/// `≤ 4·255·127`, exact in `i32`), one reduction of the four rows' 16 lanes
/// each to the eight block sums in that lane order (unpacks and adds within
/// 128-bit lanes, then the two lanes of a block added), and the exact
/// scaling of eight cells at once: `c = mw·ma` (`vpmuldq`, `< 2^22`),
/// `sumi·c` (`vpmuldq`), shifted left by `wrel + arel` (`vpsllvq`; counts
/// masked to 0..=63 as in [`fused_avx2`]) and added to the row's eight
/// `i64` lanes; Q4_1's `mm·sm << (mrel + srel)` likewise. The activation
/// scales of both blocks come from one 64-byte load of two consecutive
/// `ActScale`s, spread to the lanes by `vpermd`. After the chunk each row's
/// two halves are added: row `r`'s sum in lane `r`, the same integer as
/// [`fused_avx2`]'s (integer addition is associative). An odd last block
/// runs with the second block's weights, scales and activations zero.
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
fn tile_vnni512<F: Format, const N: usize>(
    group: &[u8],
    rb: usize,
    b0: usize,
    nb: usize,
    t: &ActTile<'_, N>,
) -> [ChunkSums; N] {
    let bs: usize = F::BLOCK_BYTES;
    let mut res = [ChunkSums::NOT_COMPUTED; N];
    let n = t.n.min(N);
    if !tile_in_bounds((group, ROW_GROUP), rb, (b0, nb), bs, t) {
        return res;
    }
    let base_ptr = group.as_ptr();
    let keep = if F::IS_Q4_1 {
        _mm_set1_epi32(-1)
    } else {
        _mm_set1_epi32(0xFFFF)
    };
    // The four rows' (d, m) f16 pairs of block `blk` (< b0 + nb).
    let head = |blk: usize| {
        let o = blk * bs;
        // SAFETY: r·rb + blk·bs + 4 ≤ 4·rb ≤ group.len() (checked above).
        let rd = |r: usize| unsafe { base_ptr.add(r * rb + o).cast::<i32>().read_unaligned() };
        _mm256_cvtepu16_epi32(_mm_and_si128(
            _mm_setr_epi32(rd(0), rd(1), rd(2), rd(3)),
            keep,
        ))
    };
    let zero = _mm256_setzero_si256();
    let (_, rel0, _) = f16_rel8(head(b0), zero);
    let margin = lane_pairs(MARGIN_D, MARGIN_M);
    let base1 = _mm256_max_epi32(_mm256_sub_epi32(rel0, margin), _mm256_set1_epi32(1));
    let mut hi = zero;
    let mut bad = zero;
    let z = _mm512_setzero_si512();
    let mut acc_d = [z; N];
    let mut acc_m = [z; N];
    let six = _mm512_set1_epi64(63);
    for b in (0..nb).step_by(2) {
        let two = b + 1 < nb;
        let blk = b0 + b;
        let (wm0, rel0, bad0) = f16_rel8(head(blk), base1);
        bad = _mm256_or_si256(bad, bad0);
        hi = _mm256_max_epu32(hi, rel0);
        let (wm1, rel1) = if two {
            let (wm1, rel1, bad1) = f16_rel8(head(blk + 1), base1);
            bad = _mm256_or_si256(bad, bad1);
            hi = _mm256_max_epu32(hi, rel1);
            (wm1, rel1)
        } else {
            (zero, zero)
        };
        // Lanes [b: rows 0–3 | b + 1: rows 0–3]: mantissas (d low dword, m
        // high) and shifts.
        let wm = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(wm0), wm1);
        let wr = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(rel0), rel1);
        let wrd = _mm512_and_si512(wr, six);
        let wmm = _mm512_srli_epi64::<32>(wm);
        let wrm = _mm512_and_si512(_mm512_srli_epi64::<32>(wr), six);
        // Prefetch the next group's share of these two blocks (as in
        // `fused_avx2`, one block's share at a time).
        for k in 0..2 {
            let next = ROW_GROUP * rb + ROW_GROUP * bs * (blk + k);
            for o in (0..ROW_GROUP * bs).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(base_ptr.wrapping_add(next + o).cast());
            }
        }
        // SAFETY: blocks blk (and, if `two`, blk + 1) < b0 + nb of the four
        // rows lie inside `group` (`tile_in_bounds`).
        let (w, neg) = unsafe { pair_weights::<F>(base_ptr, rb, blk, two) };
        for j in 0..N {
            if j >= n {
                break;
            }
            // SAFETY: j < n, b + 1 < nb when `two` (else only b < nb), and
            // `in_bounds` checked t.qs[j].len() ≥ nb·QK and t.sc[j].len() ≥
            // nb: 64 (32) bytes of activations and two (one) scales there.
            let (y, a) = unsafe {
                let yp = t.qs[j].as_ptr().add(b * QK);
                let ap = t.sc[j].as_ptr().add(b);
                if two {
                    (_mm512_loadu_si512(yp.cast()), _mm512_loadu_si512(ap.cast()))
                } else {
                    (
                        _mm512_zextsi256_si512(_mm256_loadu_si256(yp.cast())),
                        _mm512_zextsi256_si512(_mm256_loadu_si256(ap.cast())),
                    )
                }
            };
            let d = |r: usize| {
                let yr = if F::IS_Q4_1 {
                    y
                } else {
                    _mm512_mask_sub_epi8(y, neg[r], z, y)
                };
                _mm512_dpbusd_epi32(z, w[r], yr)
            };
            let sumi = pair_block_sums([d(0), d(1), d(2), d(3)]);
            let (d, m) = pair_terms::<F>(sumi, a, [wm, wrd, wmm, wrm]);
            acc_d[j] = _mm512_add_epi64(acc_d[j], d);
            acc_m[j] = _mm512_add_epi64(acc_m[j], m);
        }
    }
    let (hi, base1, badv) = (to_u32x8(hi), to_u32x8(base1), to_u32x8(bad));
    let fold =
        |v: __m512i| _mm256_add_epi64(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
    for j in 0..n {
        res[j] = chunk_result::<F>(&t.ch[j], &hi, &base1, &badv, fold(acc_d[j]), fold(acc_m[j]));
    }
    res
}

/// The four weight rows' bytes of blocks `blk` and (if `two`) `blk + 1`,
/// one 64-byte vector per row, and the masks of the bytes whose
/// activations [`tile_vnni512`] negates (its docs give the encoding per
/// format; a missing second block is zero).
///
/// # Safety
/// The blocks read (`F::BLOCK_BYTES` bytes at `r·rb + (blk + k)·bs`, rows
/// `r < 4`, `k = 0` and, if `two`, 1) lie inside one allocation starting
/// at `base_ptr`.
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
#[inline]
unsafe fn pair_weights<F: Format>(
    base_ptr: *const u8,
    rb: usize,
    blk: usize,
    two: bool,
) -> ([__m512i; 4], [__mmask64; 4]) {
    let bs = F::BLOCK_BYTES;
    let zero = _mm256_setzero_si256();
    let mask = _mm512_set1_epi8(0x0F);
    let c16 = _mm512_set1_epi8(16);
    // 64-bit shift counts: qwords 2, 3, 6, 7 (the high nibbles' 128-bit lanes) by 4.
    let nib_shift = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    let dup_lanes = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
    let at = |r: usize, k: usize, o: usize| r * rb + (blk + k) * bs + o;
    // 16 bytes at `at(r, k, o)`, zero for the missing second block.
    let ld16 = |r: usize, k: usize, o: usize| {
        if k == 0 || two {
            // SAFETY: at(r, k, o) + 16 ≤ at(r, k, bs) ≤ 4·rb ≤ group.len()
            // (o + 16 ≤ bs for Q4_0, Q4_1 and Q5_0; block blk + k < b0 + nb).
            unsafe { _mm_loadu_si128(base_ptr.add(at(r, k, o)).cast()) }
        } else {
            _mm_setzero_si128()
        }
    };
    // The 16 nibble bytes of both blocks: low nibbles then high ones of b,
    // then of b + 1.
    let nibbles = |r: usize, o: usize| {
        let q = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(ld16(r, 0, o)), ld16(r, 1, o));
        let q = _mm512_permutexvar_epi64(dup_lanes, _mm512_castsi256_si512(q));
        _mm512_and_si512(_mm512_srlv_epi64(q, nib_shift), mask)
    };
    // Per row: unsigned bytes and the mask of bytes whose activation is
    // negated.
    if F::IS_Q4_1 {
        (core::array::from_fn(|r| nibbles(r, 4)), [0; 4])
    } else if F::IS_Q4_0 {
        // The values `nibble - 8` as magnitudes and signs, as Q8_0's.
        let c8 = _mm512_set1_epi8(8);
        let x: [__m512i; 4] = core::array::from_fn(|r| _mm512_sub_epi8(nibbles(r, 2), c8));
        (
            core::array::from_fn(|r| _mm512_abs_epi8(x[r])),
            core::array::from_fn(|r| _mm512_movepi8_mask(x[r])),
        )
    } else if F::IS_Q5_0 {
        let qh = |r: usize, k: usize| {
            if k == 0 || two {
                // SAFETY: at(r, k, 2) + 4 ≤ at(r, k, bs) ≤ 4·rb ≤ group.len().
                unsafe { base_ptr.add(at(r, k, 2)).cast::<u32>().read_unaligned() as u64 }
            } else {
                0
            }
        };
        let neg: [__mmask64; 4] = core::array::from_fn(|r| !(qh(r, 0) | (qh(r, 1) << 32)));
        let w = core::array::from_fn(|r| {
            let nib = nibbles(r, 6);
            // Set bit: q - 16 = nibble; clear: -(16 - nibble).
            _mm512_mask_sub_epi8(nib, neg[r], c16, nib)
        });
        (w, neg)
    } else {
        let x: [__m512i; 4] = core::array::from_fn(|r| {
            // SAFETY: at(r, k, 2) + 32 = at(r, k, bs) ≤ 4·rb ≤ group.len()
            // for k = 0 and, if `two`, k = 1.
            let lo = unsafe { _mm256_loadu_si256(base_ptr.add(at(r, 0, 2)).cast()) };
            let up = if two {
                // SAFETY: as above.
                unsafe { _mm256_loadu_si256(base_ptr.add(at(r, 1, 2)).cast()) }
            } else {
                zero
            };
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), up)
        });
        (
            core::array::from_fn(|r| _mm512_abs_epi8(x[r])),
            core::array::from_fn(|r| _mm512_movepi8_mask(x[r])),
        )
    }
}

/// The four rows' `vpdpbusd` lanes `p` of a block pair reduced to the
/// eight block sums, one per 64-bit lane `[b: rows 0–3 | b + 1: rows 0–3]`
/// (in its low dword): unpacks and adds within 128-bit lanes, then the two
/// lanes of each block added.
#[target_feature(enable = "avx512f")]
#[inline]
fn pair_block_sums([p0, p1, p2, p3]: [__m512i; 4]) -> __m512i {
    let t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    let t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
    let h = _mm512_add_epi32(
        _mm512_unpacklo_epi64(t01, t23),
        _mm512_unpackhi_epi64(t01, t23),
    );
    // 128-bit lane pairs (0, 1) and (2, 3) hold one block each.
    let h = _mm512_add_epi32(h, _mm512_shuffle_i64x2::<0b10_11_00_01>(h, h));
    let idx_sum = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 8, 8, 9, 9, 10, 10, 11, 11);
    _mm512_permutexvar_epi32(idx_sum, h)
}

/// A block pair's exact terms for one input row: the block sums `sumi`
/// times `mw·ma` (`vpmuldq`, `< 2^22`) shifted by `wrel + arel` (counts
/// masked to 0..=63), and Q4_1's `mm·sm << (mrel + srel)` (zero for the
/// other formats), from the two activation scales `a` (two `ActScale`s,
/// their fields spread to the lanes by `vpermd`) and the weight lanes
/// `[wm, wrd, wmm, wrm]` (mantissas of `d` with their shifts, of `m` with
/// theirs).
#[target_feature(enable = "avx512f")]
#[inline]
fn pair_terms<F: Format>(sumi: __m512i, a: __m512i, w: [__m512i; 4]) -> (__m512i, __m512i) {
    let [wm, wrd, wmm, wrm] = w;
    let six = _mm512_set1_epi64(63);
    // Even dwords only: the shift counts' high halves zero.
    let even: __mmask16 = 0x5555;
    let field = |off: usize| halves_of(dw(off));
    let c = _mm512_mul_epi32(
        wm,
        _mm512_permutexvar_epi32(field(core::mem::offset_of!(ActScale, dm)), a),
    );
    let drel =
        _mm512_maskz_permutexvar_epi32(even, field(core::mem::offset_of!(ActScale, drel)), a);
    let sh = _mm512_and_si512(_mm512_add_epi64(wrd, drel), six);
    let d = _mm512_sllv_epi64(_mm512_mul_epi32(sumi, c), sh);
    if !F::IS_Q4_1 {
        return (d, _mm512_setzero_si512());
    }
    let cm = _mm512_mul_epi32(
        wmm,
        _mm512_permutexvar_epi32(field(core::mem::offset_of!(ActScale, sm)), a),
    );
    let srel =
        _mm512_maskz_permutexvar_epi32(even, field(core::mem::offset_of!(ActScale, srel)), a);
    let shm = _mm512_and_si512(_mm512_add_epi64(wrm, srel), six);
    (d, _mm512_sllv_epi64(cm, shm))
}

/// The 32 bits of `qh` as 32 bytes, byte `i` all ones where bit `i` is set
/// and zero where it is clear: byte `i` gets byte `i / 8` of `qh`
/// (`vpshufb`), is ORed with a mask of every bit but `i % 8`, and compared
/// with all ones.
#[target_feature(enable = "avx2")]
fn bits_to_bytes(qh: u32) -> __m256i {
    let spread = _mm256_setr_epi64x(
        0x0000_0000_0000_0000,
        0x0101_0101_0101_0101,
        0x0202_0202_0202_0202,
        0x0303_0303_0303_0303,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(qh as i32), spread);
    let others = _mm256_set1_epi64x(0x7FBF_DFEF_F7FB_FDFE);
    _mm256_cmpeq_epi8(_mm256_or_si256(bytes, others), _mm256_set1_epi8(-1))
}

/// Sums of the 8 dwords of each of p0..p3, as 4 dwords (`W16`: each dword
/// holds two 16-bit lanes, summed lane-wise in 16 bits; the caller bounds
/// them).
#[target_feature(enable = "avx2")]
fn reduce4_by<const W16: bool>(p0: __m256i, p1: __m256i, p2: __m256i, p3: __m256i) -> __m128i {
    let add = |a, b| {
        if W16 {
            _mm256_add_epi16(a, b)
        } else {
            _mm256_add_epi32(a, b)
        }
    };
    let t01 = add(_mm256_unpacklo_epi32(p0, p1), _mm256_unpackhi_epi32(p0, p1));
    let t23 = add(_mm256_unpacklo_epi32(p2, p3), _mm256_unpackhi_epi32(p2, p3));
    let h = add(
        _mm256_unpacklo_epi64(t01, t23),
        _mm256_unpackhi_epi64(t01, t23),
    );
    let (lo, hi) = (_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    if W16 {
        _mm_add_epi16(lo, hi)
    } else {
        _mm_add_epi32(lo, hi)
    }
}

#[target_feature(enable = "avx2")]
pub(super) fn to_i64x4(v: __m256i) -> [i64; 4] {
    let mut o = [0i64; 4];
    // SAFETY: 32 writable bytes.
    unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), v) };
    o
}

/// Sixteen binary16 values (zero-extended in 32-bit lanes) against per-lane
/// bases `base1`: [`f16_rel8`] in 512-bit lanes, the non-finite lanes as a
/// mask.
#[target_feature(enable = "avx512f")]
fn f16_rel16(h: __m512i, base1: __m512i) -> (__m512i, __m512i, __mmask16) {
    let (zero, one) = (_mm512_setzero_si512(), _mm512_set1_epi32(1));
    let e = _mm512_and_si512(_mm512_srli_epi32::<10>(h), _mm512_set1_epi32(31));
    let frac = _mm512_and_si512(h, _mm512_set1_epi32(0x3FF));
    let mant = _mm512_or_si512(frac, _mm512_slli_epi32::<10>(_mm512_min_epu32(e, one)));
    let rel = _mm512_sub_epi32(_mm512_max_epu32(e, one), base1);
    let rel = _mm512_maskz_mov_epi32(_mm512_cmpneq_epi32_mask(mant, zero), rel);
    let negative = _mm512_test_epi32_mask(h, _mm512_set1_epi32(0x8000));
    let mant = _mm512_mask_sub_epi32(mant, negative, zero, mant);
    (mant, rel, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(31)))
}

/// The 16 bytes at offset `o` of block `blk` of the sixteen rows (stride
/// `rb`, blocks of `bs` bytes) as four vectors: vector `k`, dword lane `r`
/// = dword `k` of row `r`'s 16 bytes. Callers guarantee
/// `15·rb + blk·bs + o + 16 ≤ rows.len()`.
///
/// # Safety
/// The sixteen 16-byte reads lie inside one allocation.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn transpose16x4(
    base: *const u8,
    rb: usize,
    blk: usize,
    bs: usize,
    o: usize,
) -> [__m512i; 4] {
    // SAFETY: r ≤ 15, so r·rb + blk·bs + o + 16 ≤ rows.len() (the caller's bound).
    let ld = |r: usize| unsafe { _mm_loadu_si128(base.add(r * rb + blk * bs + o).cast()) };
    // Rows i, i + 4, i + 8, i + 12 in the four 128-bit lanes.
    let z = |i: usize| {
        let v = _mm512_castsi128_si512(ld(i));
        let v = _mm512_inserti32x4::<1>(v, ld(i + 4));
        let v = _mm512_inserti32x4::<2>(v, ld(i + 8));
        _mm512_inserti32x4::<3>(v, ld(i + 12))
    };
    let (z0, z1, z2, z3) = (z(0), z(1), z(2), z(3));
    let (a, b) = (_mm512_unpacklo_epi32(z0, z1), _mm512_unpacklo_epi32(z2, z3));
    let (c, d) = (_mm512_unpackhi_epi32(z0, z1), _mm512_unpackhi_epi32(z2, z3));
    [
        _mm512_unpacklo_epi64(a, b),
        _mm512_unpackhi_epi64(a, b),
        _mm512_unpacklo_epi64(c, d),
        _mm512_unpackhi_epi64(c, d),
    ]
}

/// Block `blk`'s 32 weights of the sixteen rows as unsigned bytes
/// transposed for `vpdpbusd`: vector `s`, dword lane `r` = weights
/// `4s..4s + 4` of row `r`, biased by [`wide_bias_shift`] (Q4_1: the
/// nibbles; Q4_0: the nibbles `q` for the value `q - 8`; Q5_0: `q` in
/// `0..=31` for the value `q - 16`; Q8_0: `x + 128`). Callers guarantee
/// the sixteen rows' block lies inside the slice at `base`.
///
/// # Safety
/// Block `blk` of each row `r < 16` (`bs` bytes at `r·rb + blk·bs`) lies
/// inside one allocation starting at `base`.
#[target_feature(enable = "avx2,avx512f,avx512bw")]
#[inline]
unsafe fn wide_weights<F: Format>(
    base: *const u8,
    rb: usize,
    blk: usize,
    qh: __m512i,
) -> [__m512i; 8] {
    let bs = F::BLOCK_BYTES;
    if F::IS_Q5_0 || F::IS_Q4_1 || F::IS_Q4_0 {
        // Nibbles: dword k of `qs` holds weights 4k.. (low) and 16 + 4k.. (high).
        let at = if F::IS_Q4_1 {
            4
        } else if F::IS_Q4_0 {
            2
        } else {
            6
        };
        // SAFETY: bytes at..at + 16 of each row's block, at + 16 = bs (the
        // caller's bound).
        let q = unsafe { transpose16x4(base, rb, blk, bs, at) };
        let m4 = _mm512_set1_epi8(0x0F);
        let mut w: [__m512i; 8] = core::array::from_fn(|s| {
            let v = q[s % 4];
            if s < 4 {
                _mm512_and_si512(v, m4)
            } else {
                _mm512_and_si512(_mm512_srli_epi32::<4>(v), m4)
            }
        });
        if F::IS_Q4_1 || F::IS_Q4_0 {
            return w;
        }
        // Weight 4s + i's fifth bit is bit 4s + i of `qh`: byte s / 2 of
        // the lane copied to its four bytes, each tested for its bit.
        let lanes =
            _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x0404_0404, 0x0808_0808, 0x0C0C_0C0C));
        for (s, ws) in w.iter_mut().enumerate() {
            let pick = _mm512_add_epi8(lanes, _mm512_set1_epi8((s / 2) as i8));
            let bytes = _mm512_shuffle_epi8(qh, pick);
            let bits = 0x0804_0201u32 << (4 * (s % 2));
            let set = _mm512_test_epi8_mask(bytes, _mm512_set1_epi32(bits as i32));
            *ws = _mm512_mask_add_epi8(*ws, set, *ws, _mm512_set1_epi8(16));
        }
        w
    } else {
        // SAFETY: bytes 2..18 and 18..34 of each row's block (the caller's bound).
        let (lo, hi) = unsafe {
            (
                transpose16x4(base, rb, blk, bs, 2),
                transpose16x4(base, rb, blk, bs, 18),
            )
        };
        let flip = _mm512_set1_epi8(-128);
        core::array::from_fn(|s| _mm512_xor_si512(if s < 4 { lo[s] } else { hi[s - 4] }, flip))
    }
}

/// `log2` of the bias [`wide_weights`] adds to each weight (Q4_0: 8,
/// Q5_0: 16, Q8_0: 128; Q4_1's nibbles need none): a block's biased dot
/// minus `bias · Σ y` is its dot.
const fn wide_bias_shift<F: Format>() -> Option<u32> {
    if F::IS_Q4_1 {
        None
    } else if F::IS_Q4_0 {
        Some(3)
    } else if F::IS_Q5_0 {
        Some(4)
    } else {
        Some(7)
    }
}

/// The VNNI build's wide chunk kernel: the
/// [`ChunkSums`] of [`WIDE_ROWS`] weight rows (`[group][input row]`, four
/// groups of [`ROW_GROUP`] back to back at stride `rb` in `rows`) against
/// the first `min(t.n, N)` input rows of a tile — the same integers as
/// [`tile_vnni512`]'s for each group, with one weight row per 32-bit lane
/// so that no sum needs a horizontal reduction.
///
/// Per block the sixteen rows' weights are decoded once, biased to
/// unsigned bytes and transposed ([`wide_weights`]: vector `s`, lane `r`,
/// weights `4s..4s + 4` of row `r`), and their scales decoded in lanes
/// ([`f16_rel16`], the base guessed from the chunk's first block as
/// [`tile_vnni512`] does). Per input row: eight `vpdpbusd` against the
/// broadcast activation dwords (a lane sums the block's 32 products,
/// `≤ 32·255·127 < 2^31`), the bias taken off exactly (`− 2^k·Σ y`, the
/// activation block's `bsum`), times the activation mantissa in `i32`
/// (`|Σ (q-16)·y|·2047 < 2^27`, `|Σ x·y|·2047 < 2^31`), then the even and
/// odd rows' lanes times the weight mantissas in `i64` (`vpmuldq`) shifted
/// by `wrel + arel` (`vpsllvq`; a count beyond 63 gives 0 and only occurs
/// in sums the shift check discards) and added to the row's sum; Q4_1's
/// min terms `mm·sm` (`< 2^22`, `i32`) likewise, shifted by `mrel + srel`.
///
/// Where the chunk is the rows' only one (`whole`), an input row's sixteen
/// sums are rounded in lanes as well ([`WideChunk::finished`]) when they
/// allow it; the other rows get their [`ChunkSums`].
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni")]
fn tile16_vnni512<F: Format, const N: usize>(
    rows: &[u8],
    rb: usize,
    (b0, nb, whole): (usize, usize, bool),
    t: &ActTile<'_, N>,
    res: &mut WideTileOut<N>,
) {
    let bs = F::BLOCK_BYTES;
    let n = t.n.min(N);
    if !tile_in_bounds((rows, WIDE_ROWS), rb, (b0, nb), bs, t) {
        res.set_not_computed(n);
        return;
    }
    let base = rows.as_ptr();
    let row_at = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(rb as i32),
    );
    // Dword `o..o + 4` of block `blk` of every row, one per lane.
    let gather = |blk: usize, o: usize| {
        let at = _mm512_add_epi32(row_at, _mm512_set1_epi32((blk * bs + o) as i32));
        // SAFETY: lane r reads r·rb + blk·bs + o .. + 4 ≤ 15·rb + (blk + 1)·bs
        // ≤ 16·rb ≤ rows.len() (o + 4 ≤ bs; `tile_in_bounds`), offsets < 2^31.
        unsafe { _mm512_i32gather_epi32::<1>(at, base.cast()) }
    };
    let mut chunk = WideChunk::start::<F>(gather(b0, 0));
    let zero = _mm512_setzero_si512();
    let mut acc = [WideAcc {
        d: [zero; 2],
        m: [zero; 2],
    }; N];
    for b in 0..nb {
        let blk = b0 + b;
        // Prefetch each row's block four ahead (may point past the chunk:
        // a prefetch never faults).
        for r in 0..WIDE_ROWS {
            let ahead = base.wrapping_add(r * rb + (blk + 4) * bs);
            _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
        }
        let scales = chunk.block::<F>(gather(blk, 0));
        let qh = if F::IS_Q5_0 { gather(blk, 2) } else { zero };
        // SAFETY: block blk < b0 + nb of each of the sixteen rows lies
        // inside `rows` (`tile_in_bounds`).
        let w = unsafe { wide_weights::<F>(base, rb, blk, qh) };
        for (j, acc) in acc.iter_mut().enumerate().take(n) {
            // SAFETY: j < n and b < nb, and `tile_in_bounds` checked
            // t.qs[j].len() ≥ nb·QK and t.sc[j].len() ≥ nb.
            let (y, s) = unsafe {
                (
                    &*t.qs[j].as_ptr().add(b * QK).cast::<[i8; QK]>(),
                    t.sc[j].get_unchecked(b),
                )
            };
            acc.add_block::<F>(&w, &scales, y, s);
        }
    }
    for (j, acc) in acc.iter().enumerate().take(n) {
        res.finished[j] = whole && chunk.finished::<F>(acc, &t.ch[j], &mut res.rounded[j]);
        if !res.finished[j] {
            chunk.results::<F, N>(acc, &t.ch[j], j, &mut res.sums);
        }
    }
}

/// One block's scales of the sixteen weight rows, in lanes: `d`'s
/// mantissas and shifts relative to the guessed base, the odd rows' moved
/// to the low halves of the 64-bit lanes (for `vpmuldq` and `vpsllvq`);
/// likewise Q4_1's min `m`.
#[derive(Clone, Copy)]
struct WideScales {
    wm: __m512i,
    wm_odd: __m512i,
    wrel: [__m512i; 2],
    mm: __m512i,
    mrel: [__m512i; 2],
}

/// The chunk's state of the shift checks: the guessed bases (plus one) of
/// `d` and `m` per row, the largest relative shift seen per row, and the
/// rows with a non-finite scale.
struct WideChunk {
    base1: __m512i,
    base1_m: __m512i,
    hi: __m512i,
    hi_m: __m512i,
    bad: __mmask16,
}

impl WideChunk {
    /// The bases guessed from the chunk's first block (its first dword per
    /// row, `head`: `d`, and Q4_1's `m` above it), as [`tile_vnni512`]
    /// guesses them.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn start<F: Format>(head: __m512i) -> Self {
        let zero = _mm512_setzero_si512();
        let guess = |h: __m512i, margin: i32| {
            let (_, rel0, _) = f16_rel16(h, zero);
            _mm512_max_epi32(
                _mm512_sub_epi32(rel0, _mm512_set1_epi32(margin)),
                _mm512_set1_epi32(1),
            )
        };
        WideChunk {
            base1: guess(wide_d(head), MARGIN_D),
            base1_m: if F::IS_Q4_1 {
                guess(wide_m(head), MARGIN_M)
            } else {
                zero
            },
            hi: zero,
            hi_m: zero,
            bad: 0,
        }
    }

    /// One block's scales from its first dword per row, `head`, noting their
    /// largest relative shifts and non-finite rows.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn block<F: Format>(&mut self, head: __m512i) -> WideScales {
        let zero = _mm512_setzero_si512();
        let (wm, wrel, bad) = f16_rel16(wide_d(head), self.base1);
        self.bad |= bad;
        self.hi = _mm512_max_epu32(self.hi, wrel);
        let (mm, mrel) = if F::IS_Q4_1 {
            let (mm, mrel, bad) = f16_rel16(wide_m(head), self.base1_m);
            self.bad |= bad;
            self.hi_m = _mm512_max_epu32(self.hi_m, mrel);
            (mm, mrel)
        } else {
            (zero, zero)
        };
        let low_dwords = _mm512_set1_epi64(0xFFFF_FFFF);
        let halves = |v: __m512i| [_mm512_and_si512(v, low_dwords), _mm512_srli_epi64::<32>(v)];
        WideScales {
            wm,
            wm_odd: _mm512_srli_epi64::<32>(wm),
            wrel: halves(wrel),
            mm,
            mrel: halves(mrel),
        }
    }

    /// Input row `j`'s [`ChunkSums`] for each of the four groups, from its
    /// sums `acc` and chunk ranges `ch`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn results<F: Format, const N: usize>(
        &self,
        acc: &WideAcc,
        ch: &ChunkScale,
        j: usize,
        res: &mut [[ChunkSums; N]; WIDE_GROUPS],
    ) {
        let (hi, base1) = (to_u32x16(self.hi), to_u32x16(self.base1));
        let (hi_m, base1_m) = (to_u32x16(self.hi_m), to_u32x16(self.base1_m));
        let d = acc.d.map(|v| to_i64x8(v));
        let m = acc.m.map(|v| to_i64x8(v));
        let lane = |v: &[[i64; 8]; 2], row: usize| v[row % 2][row / 2];
        let d_fits = |row: usize| ch.dspread <= F::LIM_D && hi[row] <= F::LIM_D - ch.dspread;
        let m_fits = |row: usize| {
            !F::IS_Q4_1 || (ch.sspread <= LIM_Q4_1_M && hi_m[row] <= LIM_Q4_1_M - ch.sspread)
        };
        for (g, sums) in res.iter_mut().enumerate() {
            let r = &mut sums[j];
            let rows = g * ROW_GROUP..(g + 1) * ROW_GROUP;
            r.fits_i64 = rows.clone().all(|row| d_fits(row) && m_fits(row));
            for (i, row) in rows.enumerate() {
                r.d_sum[i] = lane(&d, row);
                r.d_base[i] = base1[row] - 1 + ch.dbase;
                r.m_sum[i] = lane(&m, row);
                r.m_base[i] = base1_m[row].wrapping_sub(1).wrapping_add(ch.sbase);
                r.nonfinite[i] = (self.bad >> row) & 1 != 0;
            }
        }
    }
}

impl WideChunk {
    /// The sixteen rows' cells of one input row rounded to binary32 into
    /// `out`, when the chunk is the rows' only one: each row's `d` sum
    /// `acc.d` in units of `2^(base − 1 + dbase − 48)` (the [`ChunkSums`]
    /// that [`Self::results`] would give, added to a zero cell), rounded by
    /// [`round_lanes`]. False (`out` unspecified) for Q4_1 (two terms per
    /// cell), a row whose shifts did not stay in range or with a non-finite
    /// scale, and a sum that is zero or does not round to a normal binary32.
    #[target_feature(enable = "avx512f,avx512cd,avx512dq")]
    #[inline]
    fn finished<F: Format>(
        &self,
        acc: &WideAcc,
        ch: &ChunkScale,
        out: &mut [F32; WIDE_ROWS],
    ) -> bool {
        if F::IS_Q4_1 || self.bad != 0 || ch.dspread > F::LIM_D {
            return false;
        }
        let limit = _mm512_set1_epi32((F::LIM_D - ch.dspread) as i32);
        if _mm512_cmpgt_epu32_mask(self.hi, limit) != 0 {
            return false;
        }
        let unit = ch.dbase as i32 - 1 + QUANTUM_EXP;
        let exp = _mm512_add_epi32(self.base1, _mm512_set1_epi32(unit));
        let even_exp = _mm512_srai_epi64::<32>(_mm512_slli_epi64::<32>(exp));
        let (even, even_ok) = round_lanes(acc.d[0], even_exp);
        let (odd, odd_ok) = round_lanes(acc.d[1], _mm512_srai_epi64::<32>(exp));
        if even_ok & odd_ok != 0xFF {
            return false;
        }
        let low_dwords = _mm512_set1_epi64(0xFFFF_FFFF);
        let bits = _mm512_or_si512(
            _mm512_and_si512(even, low_dwords),
            _mm512_slli_epi64::<32>(odd),
        );
        *out = to_u32x16(bits).map(F32::from_bits);
        true
    }
}

/// `t · 2^e` rounded to binary32 (to nearest, ties to even) in each `i64`
/// lane, the bits in the lane's low half, and the lanes where that is the
/// answer: `t ≠ 0` and the result a normal binary32 (not a subnormal, not
/// ∞), as [`crate::F32::from_i128_scaled`] rounds it (`|e| < 2^20`). The
/// significand `|t|` is cut to 24 bits at its leading one (`vplzcntq`);
/// the bits below decide the rounding.
#[target_feature(enable = "avx512f,avx512cd,avx512dq")]
#[inline]
fn round_lanes(t: __m512i, e: __m512i) -> (__m512i, __mmask8) {
    let (zero, one) = (_mm512_setzero_si512(), _mm512_set1_epi64(1));
    let negative = _mm512_cmplt_epi64_mask(t, zero);
    let mag = _mm512_abs_epi64(t); // |i64::MIN| = 2^63 read unsigned
    let bits_in = _mm512_sub_epi64(_mm512_set1_epi64(64), _mm512_lzcnt_epi64(mag));
    let cut = _mm512_sub_epi64(bits_in, _mm512_set1_epi64(24));
    let right = _mm512_max_epi64(cut, zero);
    let left = _mm512_max_epi64(_mm512_sub_epi64(zero, cut), zero);
    let q = _mm512_srlv_epi64(mag, right);
    let rem = _mm512_sub_epi64(mag, _mm512_sllv_epi64(q, right));
    let half = _mm512_srli_epi64::<1>(_mm512_sllv_epi64(one, right));
    let odd = _mm512_test_epi64_mask(q, one);
    let tie = _mm512_cmpeq_epi64_mask(rem, half) & odd & _mm512_cmpgt_epi64_mask(right, zero);
    let up = _mm512_cmpgt_epu64_mask(rem, half) | tie;
    let q = _mm512_sllv_epi64(_mm512_mask_add_epi64(q, up, q, one), left);
    // q in [2^23, 2^24]: its leading bit bumps the field to the exponent.
    let field = _mm512_add_epi64(_mm512_add_epi64(e, cut), _mm512_set1_epi64(149));
    let bits = _mm512_add_epi64(_mm512_slli_epi64::<23>(field), q);
    let normal = _mm512_cmpge_epi64_mask(field, zero)
        & _mm512_cmplt_epi64_mask(bits, _mm512_set1_epi64(0x7F80_0000))
        & _mm512_test_epi64_mask(mag, mag);
    let sign = _mm512_maskz_mov_epi64(negative, _mm512_set1_epi64(0x8000_0000));
    (_mm512_or_si512(bits, sign), normal)
}

/// The `d` of each row from its block's first dword.
#[target_feature(enable = "avx512f")]
#[inline]
fn wide_d(head: __m512i) -> __m512i {
    _mm512_and_si512(head, _mm512_set1_epi32(0xFFFF))
}

/// Q4_1's min `m` of each row from its block's first dword.
#[target_feature(enable = "avx512f")]
#[inline]
fn wide_m(head: __m512i) -> __m512i {
    _mm512_srli_epi32::<16>(head)
}

/// One input row's chunk sums over the sixteen weight rows: the `d` terms
/// and (Q4_1) the `m` terms, even rows' in `[0]`, odd rows' in `[1]`, one
/// `i64` lane per row pair.
#[derive(Clone, Copy)]
struct WideAcc {
    d: [__m512i; 2],
    m: [__m512i; 2],
}

impl WideAcc {
    /// Adds one block: the sixteen rows' byte dots with the activations
    /// `y` (eight `vpdpbusd`), the bias taken off, times the
    /// activation mantissa in `i32`, times the weight mantissas in `i64`,
    /// shifted by `wrel + arel`; Q4_1's `mm·sm << (mrel + srel)` likewise.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    fn add_block<F: Format>(
        &mut self,
        w: &[__m512i; 8],
        sc: &WideScales,
        y: &[i8; QK],
        s: &ActScale,
    ) {
        let zero = _mm512_setzero_si512();
        let mut dot = zero;
        for (k, &ws) in w.iter().enumerate() {
            // SAFETY: 4k + 4 ≤ 32 = y.len().
            let yk = unsafe { y.as_ptr().add(4 * k).cast::<i32>().read_unaligned() };
            dot = _mm512_dpbusd_epi32(dot, ws, _mm512_set1_epi32(yk));
        }
        let sumi = match wide_bias_shift::<F>() {
            Some(k) => _mm512_sub_epi32(dot, _mm512_set1_epi32(s.bsum << k)),
            None => dot,
        };
        let u = _mm512_mullo_epi32(sumi, _mm512_set1_epi32(s.dm));
        let arel = _mm512_set1_epi64(s.drel as i64);
        let terms = [
            _mm512_mul_epi32(u, sc.wm),
            _mm512_mul_epi32(_mm512_srli_epi64::<32>(u), sc.wm_odd),
        ];
        for ((acc, t), rel) in self.d.iter_mut().zip(terms).zip(sc.wrel) {
            *acc = _mm512_add_epi64(*acc, _mm512_sllv_epi64(t, _mm512_add_epi64(rel, arel)));
        }
        if F::IS_Q4_1 {
            // `mm·sm` (`< 2^22`) sign-extended to the lanes' halves.
            let um = _mm512_mullo_epi32(sc.mm, _mm512_set1_epi32(s.sm));
            let srel = _mm512_set1_epi64(s.srel as i64);
            let terms = [
                _mm512_srai_epi64::<32>(_mm512_slli_epi64::<32>(um)),
                _mm512_srai_epi64::<32>(um),
            ];
            for ((acc, t), rel) in self.m.iter_mut().zip(terms).zip(sc.mrel) {
                *acc = _mm512_add_epi64(*acc, _mm512_sllv_epi64(t, _mm512_add_epi64(rel, srel)));
            }
        }
    }
}

#[target_feature(enable = "avx512f")]
fn to_u32x16(v: __m512i) -> [u32; 16] {
    let mut o = [0u32; 16];
    // SAFETY: 64 writable bytes.
    unsafe { _mm512_storeu_si512(o.as_mut_ptr().cast(), v) };
    o
}

#[target_feature(enable = "avx512f")]
fn to_i64x8(v: __m512i) -> [i64; 8] {
    let mut o = [0i64; 8];
    // SAFETY: 64 writable bytes.
    unsafe { _mm512_storeu_si512(o.as_mut_ptr().cast(), v) };
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`round_lanes`] equals [`F32::from_i128_scaled`] in every lane it
    /// answers, and answers every lane whose result is a normal binary32:
    /// significands of every length from 1 to 64 bits (ties and carries to
    /// the next binade included), both signs, `i64::MIN`, zero, and
    /// exponents from deep in the subnormals to past overflow.
    #[test]
    fn round_lanes_equals_from_i128_scaled() {
        if crate::simd::level() != Level::Avx512Vnni {
            return; // no AVX-512 on this CPU: nothing to compare
        }
        let mut next = crate::testutil::lcg(0x05EE_D0F1_A4E5_u64);
        for round in 0..20_000u32 {
            let t: [i64; 8] = core::array::from_fn(|i| {
                let r = (next() as u64) << 32 | next() as u64;
                let bits = 1 + (round as usize * 8 + i) % 64;
                let v = (r >> (64 - bits)) as i64;
                match (round + i as u32) % 97 {
                    0 => 0,
                    1 => i64::MIN,
                    // A tie: an odd or even 24-bit head, then 100…0.
                    2 => ((r as i64 >> 40) | 1 << 23) << 20 | 1 << 19,
                    _ if r & 1 == 0 => -v,
                    _ => v,
                }
            });
            let e: [i64; 8] =
                core::array::from_fn(|i| -260 + ((next() as i64).rem_euclid(400) + i as i64) % 400);
            // SAFETY: the CPU has AVX-512 (F, CD, DQ), checked above; each
            // array is 64 readable bytes.
            let (bits, ok) = unsafe {
                let (tv, ev) = (
                    _mm512_loadu_si512(t.as_ptr().cast()),
                    _mm512_loadu_si512(e.as_ptr().cast()),
                );
                (to_i64x8(round_lanes(tv, ev).0), round_lanes(tv, ev).1)
            };
            for l in 0..8 {
                let want = F32::from_i128_scaled(t[l] as i128, e[l] as i32);
                let normal = want.to_bits() & 0x7F80_0000;
                let answerable = normal != 0 && normal != 0x7F80_0000;
                let answered = ok >> l & 1 == 1;
                assert_eq!(answered, answerable, "t {} e {}", t[l], e[l]);
                if answered {
                    assert_eq!(bits[l] as u32, want.to_bits(), "t {} e {}", t[l], e[l]);
                }
            }
        }
    }
}
