//! The AVX2 batched kernel of Q4_1 / Q5_0 / Q8_0: [`WIDE_ROWS`] weight rows
//! (four row groups) against a tile of 2 to [`crate::quant::fast::fused`]'s
//! `WIDE_TILE` input rows per chunk, for a decode step of several
//! sequences, a speculative verify step (1 + k rows) and prefill tiles. It
//! is the AVX2 build's `tile_wide` ([`tile16_avx2`]), run by the wide
//! driver (`super::super::wide`) from [`AVX2_WIDE_MIN_ROWS`] input rows, for
//! Q5_0 ([`avx2_wide_min`]: Q4_1 and Q8_0 measured no faster than their
//! four-row path; the kernel computes them too, and its unit test below
//! checks all three formats).
//!
//! Per chunk the sixteen rows go in two passes of eight, one weight row per
//! 32-bit lane. Per block the eight rows' weights are decoded once, as
//! unsigned bytes, and transposed ([`weights8`]: vector `s`, lane `r` =
//! weights `4s..4s + 4` of row `r`; Q4_1 the nibbles, Q5_0 `q` in `0..=31`
//! for the value `q − 16`, Q8_0 `|x|` with `x` kept for its signs), and
//! their scales decoded in lanes against a base guessed from the chunk's
//! first block ([`f16_rel8`], as the other fused kernels guess it). Then,
//! per input row of the tile, with no horizontal reduction: eight
//! `vpmaddubsw` against the broadcast activation dwords (Q8_0: the
//! activations take the weights' signs, `vpsignb`), the pairs summed in
//! 16 bits where they cannot wrap (Q4_1: all eight, `≤ 8·2·15·127 =
//! 30480`; Q5_0: four at a time, `≤ 4·2·31·127 = 31496`; Q8_0: none, a
//! pair reaches `2·128·127 = 32512`), then `vpmaddwd` by ones to each row's
//! `i32` block sum; Q5_0's bias taken off exactly (`− 16·Σ y`, the
//! activation block's `bsum`); times the activation mantissa in `i32`
//! (`|Σ x·y|·2047 < 2^31`); the even and odd rows' lanes times the weight
//! mantissas in `i64` (`vpmuldq`), shifted by `wrel + arel` (`vpsllvq`; a
//! count beyond 63 gives 0 and only occurs in sums the shift check
//! discards) and added to the row's sums; Q4_1's `mm·sm` (`vpmuldq`,
//! `< 2^22`) shifted by `mrel + srel` likewise. So each block's weight
//! decoding serves every input row of the tile, and an input row costs
//! about half the instructions of the four-row kernel's tile path. Where
//! the chunk is the rows' only one, the cells of Q5_0 / Q8_0 rows are
//! rounded here too ([`round_whole`]), not by the driver.
//!
//! Contract: the sums are the same integers as the portable chunk kernels'
//! (integer addition in another order), reported per group as
//! [`ChunkSums`] with the fit check of the other fused kernels, so the
//! cells are [`crate::quant::dot::dot_row`]'s bits. Verified by the
//! proptests of `tests/kernels/matmul.rs` (which assert this kernel ran:
//! `RowsRun::tiled_rows` on the AVX2 build from two input rows) and by
//! `tests/kernels_guarded.rs` against guard pages.
//!
//! ## Unsafe review
//! * [`tile16_avx2`] is a `#[target_feature]` function called only from
//!   the AVX2 kernel type of `super::blocked`, which exists only inside the
//!   driver handed out after [`crate::simd::level`] confirmed AVX2.
//! * Its loads read the sixteen rows' blocks `b0..b0 + nb` and the tile's
//!   first `nb` activation blocks, after [`tile_in_bounds`] checked that
//!   `16·rb ≤ rows.len()`, `(b0 + nb)·bs ≤ rb` and every input row's
//!   lengths; the loaders taking a raw pointer ([`heads8`], [`transpose8x4`],
//!   [`weights8`]) are `unsafe fn`s stating that bound.
//! * No writes through pointers; prefetches may point past the rows (they
//!   never fault).
#![allow(unsafe_code)]

use super::blocked::{Format, MARGIN_D, MARGIN_M, f16_rel8, tile_in_bounds, to_i64x4, to_u32x8};
use crate::F32;
use crate::float::from_i64_scaled_try;
use crate::quant::act::{ActScale, ChunkScale};
use crate::quant::block::QK;
use crate::quant::fast::chunk::{LIM_Q4_1_M, ROW_GROUP};
use crate::quant::fast::fused::{ActTile, ChunkSums, WIDE_GROUPS, WIDE_ROWS, WideTileOut};
use crate::quant::fast::wide::AVX2_WIDE_MIN_ROWS;
use crate::quant::fixed::QUANTUM_EXP;
use core::arch::x86_64::*;

/// Fewest input rows for which the AVX2 build of format `F` runs
/// [`tile16_avx2`]: Q5_0 from [`AVX2_WIDE_MIN_ROWS`]; Q4_1 and Q8_0 never
/// (and Q4_0, which it does not decode: its batches stay on the four-row
/// fused kernel).
/// Measured (`cargo bench --features std --bench kernels -- blocked_rows`,
/// M = 8 against eight one-row calls, three alternating runs): Q5_0 0.33–0.36
/// against 0.55–0.58 on the four-row group path; Q8_0 0.44–0.49 against
/// 0.55–0.57 on 4864×896 but 0.66–0.82 against 0.57–0.67 on 896×4864 (the
/// 0.5B's output head's width); Q4_1 0.49–0.65 against 0.46–0.59. Q8_0
/// needs a `vpsignb` per product vector and Q4_1's four-row path already
/// sums in 16-bit lanes without a reduction, so the per-chunk work of the
/// wide driver is not paid back for them. Re-measured after the rebase on
/// main (docs/sections/perf.md, "Batched decode"): Q5_0 `m8` / `m1x8` 0.34
/// on 4864 → 896 but 0.43 on 896 → 4864 until [`round_whole`] (then 0.34
/// there too; `m8` 0.69× the build before it); the Q8_0 output head
/// through this kernel (before [`round_whole`]) cost a 9-row verify step
/// 0.88× but a 2-row one 1.15× (`examples/verify_rows.rs`), and with it
/// 1.03× at 2 rows and 0.97× at 9, so Q8_0 stays out.
pub(super) const fn avx2_wide_min<F: Format>() -> usize {
    if F::IS_Q5_0 {
        AVX2_WIDE_MIN_ROWS
    } else {
        usize::MAX
    }
}

/// Weight rows per pass: one per 32-bit lane.
const LANES: usize = 8;

/// The AVX2 build's wide chunk kernel: the [`ChunkSums`] of [`WIDE_ROWS`]
/// weight rows (`[group][input row]`, four groups of [`ROW_GROUP`] back to
/// back at stride `rb` in `rows`) against the first `min(t.n, N)` input
/// rows of the tile (see the module docs). Where the chunk is the rows'
/// only one (`whole`), an input row's sixteen cells come back rounded
/// ([`round_whole`]) when they can.
#[target_feature(enable = "avx2")]
pub(super) fn tile16_avx2<F: Format, const N: usize>(
    rows: &[u8],
    rb: usize,
    (b0, nb, whole): (usize, usize, bool),
    t: &ActTile<'_, N>,
    res: &mut WideTileOut<N>,
) {
    let bs = F::BLOCK_BYTES;
    let n = t.n.min(N);
    res.set_not_computed(n);
    // Q4_0's layout is not decoded here (`avx2_wide_min` never routes it
    // here): left not computed, the driver sums such chunks exactly.
    if F::IS_Q4_0 || !tile_in_bounds((rows, WIDE_ROWS), rb, (b0, nb), bs, t) {
        return;
    }
    for half in 0..WIDE_ROWS / LANES {
        // Rows `8·half..8·half + 8`: their blocks `b0..b0 + nb` lie inside
        // `rows` (`tile_in_bounds`: 16·rb ≤ rows.len(), (b0 + nb)·bs ≤ rb).
        let base = rows[half * LANES * rb..].as_ptr();
        // SAFETY: block b0 of the eight rows at `base` lies inside `rows`
        // (above).
        let mut chunk = Chunk8::start::<F>(unsafe { heads8(base, rb, b0 * bs) });
        let zero = _mm256_setzero_si256();
        let mut acc = [Acc8 {
            d: [zero; 2],
            m: [zero; 2],
        }; N];
        for b in 0..nb {
            let blk = b0 + b;
            for r in 0..LANES {
                let ahead = base.wrapping_add(r * rb + (blk + 4) * bs);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            }
            // SAFETY: block blk < b0 + nb of the eight rows lies inside
            // `rows` (above).
            let (sc, w) = unsafe {
                (
                    chunk.block::<F>(heads8(base, rb, blk * bs)),
                    weights8::<F>(base, rb, blk),
                )
            };
            for (j, acc) in acc.iter_mut().enumerate().take(n) {
                // SAFETY: j < n and b < nb, and `tile_in_bounds` checked
                // t.qs[j].len() ≥ nb·QK and t.sc[j].len() ≥ nb.
                let (y, s) = unsafe {
                    (
                        &*t.qs[j].as_ptr().add(b * QK).cast::<[i8; QK]>(),
                        t.sc[j].get_unchecked(b),
                    )
                };
                acc.add_block::<F>(&w, &sc, y, s);
            }
        }
        let lanes = chunk.lanes();
        for (j, acc) in acc.iter().enumerate().take(n) {
            lanes.results::<F, N>(acc, &t.ch[j], (j, half), &mut res.sums);
        }
    }
    if whole {
        for j in 0..n {
            res.finished[j] = round_whole::<F, N>(&res.sums, j, &mut res.rounded[j]);
        }
    }
}

/// Input row `j`'s sixteen cells rounded to binary32 into `out`, when the
/// chunk is the rows' only one: each cell is then its row's `d` sum alone
/// (`d_sum · 2^d_base` added to a zero cell), which [`from_i64_scaled_try`]
/// rounds to the bits [`crate::quant::fixed::ExactAcc::finish`] gives it.
/// False (`out` unspecified) for Q4_1 (two terms per cell), a group whose
/// sums do not fit `i64`, a non-finite weight scale, or a sum that rounds
/// to no normal binary32 (the driver then adds the sums to cells as
/// usual). Scalar: it replaces the driver's per-cell `i128` add and
/// rounding, which on rows of one chunk (the 0.5B's 896-wide matrices)
/// cost about a third as much as the kernel.
#[inline]
fn round_whole<F: Format, const N: usize>(
    sums: &[[ChunkSums; N]; WIDE_GROUPS],
    j: usize,
    out: &mut [F32; WIDE_ROWS],
) -> bool {
    if F::IS_Q4_1 {
        return false;
    }
    let mut ok = true;
    for (g, group) in sums.iter().enumerate() {
        let s = &group[j];
        ok &= s.fits_i64;
        for i in 0..ROW_GROUP {
            let exp = QUANTUM_EXP.wrapping_add(s.d_base[i] as i32);
            let (v, fine) = from_i64_scaled_try(s.d_sum[i], exp);
            out[g * ROW_GROUP + i] = v;
            ok &= fine & !s.nonfinite[i];
        }
    }
    ok
}

/// The first dword of block `at / bs` of each of the eight rows at stride
/// `rb` from `base`, one per lane (`d`, and Q4_1's `m` above it).
///
/// # Safety
/// `r·rb + at + 4` bytes from `base` lie inside one allocation for `r < 8`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn heads8(base: *const u8, rb: usize, at: usize) -> __m256i {
    // SAFETY: the caller's bound.
    let rd = |r: usize| unsafe { base.add(r * rb + at).cast::<i32>().read_unaligned() };
    _mm256_setr_epi32(rd(0), rd(1), rd(2), rd(3), rd(4), rd(5), rd(6), rd(7))
}

/// The 16 bytes at offset `o` of block `blk` of the eight rows (stride
/// `rb`, blocks of `bs` bytes) as four vectors: vector `k`, dword lane `r`
/// = dword `k` of row `r`'s 16 bytes.
///
/// # Safety
/// `r·rb + blk·bs + o + 16` bytes from `base` lie inside one allocation
/// for `r < 8`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn transpose8x4(
    base: *const u8,
    rb: usize,
    blk: usize,
    bs: usize,
    o: usize,
) -> [__m256i; 4] {
    // SAFETY: r < 8: the caller's bound.
    let ld = |r: usize| unsafe { _mm_loadu_si128(base.add(r * rb + blk * bs + o).cast()) };
    // Rows i and i + 4 in the two 128-bit lanes.
    let z = |i: usize| _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(ld(i)), ld(i + 4));
    let (z0, z1, z2, z3) = (z(0), z(1), z(2), z(3));
    let (a, b) = (_mm256_unpacklo_epi32(z0, z1), _mm256_unpacklo_epi32(z2, z3));
    let (c, d) = (_mm256_unpackhi_epi32(z0, z1), _mm256_unpackhi_epi32(z2, z3));
    [
        _mm256_unpacklo_epi64(a, b),
        _mm256_unpackhi_epi64(a, b),
        _mm256_unpacklo_epi64(c, d),
        _mm256_unpackhi_epi64(c, d),
    ]
}

/// One block of eight weight rows, transposed: `u[s]`, lane `r` = weights
/// `4s..4s + 4` of row `r` as unsigned bytes (Q4_1: the nibbles; Q5_0: `q`
/// in `0..=31` for the value `q − 16`; Q8_0: `|x|`), and for Q8_0 the
/// values `x` themselves in `sgn` (their signs go onto the activations).
#[derive(Clone, Copy)]
struct Weights8 {
    u: [__m256i; 8],
    sgn: [__m256i; 8],
}

/// Block `blk` of the eight rows at stride `rb` from `base`, decoded and
/// transposed ([`Weights8`]).
///
/// # Safety
/// Block `blk` of each row `r < 8` (`F::BLOCK_BYTES` bytes at
/// `r·rb + blk·bs`) lies inside one allocation starting at `base`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn weights8<F: Format>(base: *const u8, rb: usize, blk: usize) -> Weights8 {
    let bs = F::BLOCK_BYTES;
    let zero = _mm256_setzero_si256();
    if F::IS_Q5_0 || F::IS_Q4_1 {
        // Nibbles: dword k of `qs` holds weights 4k.. (low) and 16 + 4k.. (high).
        let at = if F::IS_Q4_1 { 4 } else { 6 };
        // SAFETY: bytes at..at + 16 of each row's block, at + 16 = bs (the
        // caller's bound).
        let q = unsafe { transpose8x4(base, rb, blk, bs, at) };
        let m4 = _mm256_set1_epi8(0x0F);
        let mut u = [zero; 8];
        for (s, us) in u.iter_mut().enumerate() {
            let v = q[s % 4];
            *us = if s < 4 {
                _mm256_and_si256(v, m4)
            } else {
                _mm256_and_si256(_mm256_srli_epi32::<4>(v), m4)
            };
        }
        if F::IS_Q5_0 {
            // Weight 4s + i's fifth bit is bit 4s + i of `qh`: byte s / 2
            // of the lane copied to its four bytes, each tested for its bit.
            // SAFETY: bytes 2..6 of each row's block (the caller's bound).
            let qh = unsafe { heads8(base, rb, blk * bs + 2) };
            let lanes = _mm256_setr_epi32(
                0,
                0x0404_0404,
                0x0808_0808,
                0x0C0C_0C0C,
                0,
                0x0404_0404,
                0x0808_0808,
                0x0C0C_0C0C,
            );
            for (s, us) in u.iter_mut().enumerate() {
                let pick = _mm256_add_epi8(lanes, _mm256_set1_epi8((s / 2) as i8));
                let bytes = _mm256_shuffle_epi8(qh, pick);
                let bits = _mm256_set1_epi32((0x0804_0201u32 << (4 * (s % 2))) as i32);
                let set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bits), bits);
                *us = _mm256_or_si256(*us, _mm256_and_si256(set, _mm256_set1_epi8(16)));
            }
        }
        Weights8 { u, sgn: [zero; 8] }
    } else {
        // SAFETY: bytes 2..18 and 18..34 of each row's block (the caller's
        // bound).
        let (lo, hi) = unsafe {
            (
                transpose8x4(base, rb, blk, bs, 2),
                transpose8x4(base, rb, blk, bs, 18),
            )
        };
        let sgn = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
        let mut u = sgn;
        for x in u.iter_mut() {
            *x = _mm256_abs_epi8(*x);
        }
        Weights8 { u, sgn }
    }
}

/// The odd dwords of `v` copied down to the even ones (`vpshufd`), where
/// `vpmuldq` reads them. (A 64-bit shift right instead let the compiler
/// see zero upper halves and expand each `vpmuldq` into a seven-instruction
/// 64-bit multiply.)
#[target_feature(enable = "avx2")]
#[inline]
fn odd_down(v: __m256i) -> __m256i {
    _mm256_shuffle_epi32::<0xF5>(v)
}

/// One block's scales of the eight weight rows, in lanes: `d`'s mantissas
/// (the odd rows' also moved to the low halves of the 64-bit lanes, for
/// `vpmuldq`) and shifts relative to the guessed base (even and odd rows'
/// in the 64-bit lanes, for `vpsllvq`); likewise Q4_1's min `m`.
#[derive(Clone, Copy)]
struct Scales8 {
    wm: [__m256i; 2],
    wrel: [__m256i; 2],
    mm: [__m256i; 2],
    mrel: [__m256i; 2],
}

/// The chunk's state of the shift checks for eight rows: the guessed bases
/// (plus one) of `d` and `m` per row, the largest relative shift seen per
/// row, and the rows with a non-finite scale (all ones in their lane).
#[derive(Clone, Copy)]
struct Chunk8 {
    base1: __m256i,
    base1_m: __m256i,
    hi: __m256i,
    hi_m: __m256i,
    bad: __m256i,
    bad_m: __m256i,
}

impl Chunk8 {
    /// The bases guessed from the chunk's first block (`head`: its first
    /// dword per row), as the other fused kernels guess them.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn start<F: Format>(head: __m256i) -> Self {
        let zero = _mm256_setzero_si256();
        let guess = |h: __m256i, margin: i32| {
            let (_, rel0, _) = f16_rel8(h, zero);
            _mm256_max_epi32(
                _mm256_sub_epi32(rel0, _mm256_set1_epi32(margin)),
                _mm256_set1_epi32(1),
            )
        };
        Chunk8 {
            base1: guess(_mm256_and_si256(head, _mm256_set1_epi32(0xFFFF)), MARGIN_D),
            base1_m: if F::IS_Q4_1 {
                guess(_mm256_srli_epi32::<16>(head), MARGIN_M)
            } else {
                zero
            },
            hi: zero,
            hi_m: zero,
            bad: zero,
            bad_m: zero,
        }
    }

    /// One block's scales from its first dword per row, `head`, noting their
    /// largest relative shifts and non-finite rows.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn block<F: Format>(&mut self, head: __m256i) -> Scales8 {
        let zero = _mm256_setzero_si256();
        let low_dwords = _mm256_set1_epi64x(0xFFFF_FFFF);
        let halves = |v: __m256i| [_mm256_and_si256(v, low_dwords), _mm256_srli_epi64::<32>(v)];
        let d = _mm256_and_si256(head, _mm256_set1_epi32(0xFFFF));
        let (wm, wrel, bad) = f16_rel8(d, self.base1);
        self.bad = _mm256_or_si256(self.bad, bad);
        self.hi = _mm256_max_epu32(self.hi, wrel);
        let (mm, mrel) = if F::IS_Q4_1 {
            let (mm, mrel, bad) = f16_rel8(_mm256_srli_epi32::<16>(head), self.base1_m);
            self.bad_m = _mm256_or_si256(self.bad_m, bad);
            self.hi_m = _mm256_max_epu32(self.hi_m, mrel);
            (mm, mrel)
        } else {
            (zero, zero)
        };
        Scales8 {
            wm: [wm, odd_down(wm)],
            wrel: halves(wrel),
            mm: [mm, odd_down(mm)],
            mrel: halves(mrel),
        }
    }

    /// The chunk's shift checks and bases per row, read out once for every
    /// input row's [`Self::results`].
    #[target_feature(enable = "avx2")]
    #[inline]
    fn lanes(&self) -> ChunkLanes {
        ChunkLanes {
            hi: to_u32x8(self.hi),
            base1: to_u32x8(self.base1),
            bad: to_u32x8(self.bad),
            hi_m: to_u32x8(self.hi_m),
            base1_m: to_u32x8(self.base1_m),
            bad_m: to_u32x8(self.bad_m),
        }
    }
}

/// [`Chunk8`]'s lanes as arrays, row by row.
struct ChunkLanes {
    hi: [u32; 8],
    base1: [u32; 8],
    bad: [u32; 8],
    hi_m: [u32; 8],
    base1_m: [u32; 8],
    bad_m: [u32; 8],
}

impl ChunkLanes {
    /// Input row `j`'s [`ChunkSums`] for the two groups of this pass
    /// (`half`: groups `2·half` and `2·half + 1`), from its sums `acc` and
    /// chunk ranges `ch`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn results<F: Format, const N: usize>(
        &self,
        acc: &Acc8,
        ch: &ChunkScale,
        (j, half): (usize, usize),
        res: &mut [[ChunkSums; N]; WIDE_GROUPS],
    ) {
        let d = [to_i64x4(acc.d[0]), to_i64x4(acc.d[1])];
        let m = [to_i64x4(acc.m[0]), to_i64x4(acc.m[1])];
        let d_ok = ch.dspread <= F::LIM_D;
        let m_ok = !F::IS_Q4_1 || ch.sspread <= LIM_Q4_1_M;
        let (lim_d, lim_m) = (
            F::LIM_D.saturating_sub(ch.dspread),
            LIM_Q4_1_M.saturating_sub(ch.sspread),
        );
        let groups = LANES / ROW_GROUP;
        for g in 0..groups {
            let r = &mut res[half * groups + g][j];
            let mut fits = d_ok && m_ok;
            for i in 0..ROW_GROUP {
                let row = g * ROW_GROUP + i;
                fits &= self.hi[row] <= lim_d && (!F::IS_Q4_1 || self.hi_m[row] <= lim_m);
                r.d_sum[i] = d[row % 2][row / 2];
                r.d_base[i] = self.base1[row].wrapping_sub(1).wrapping_add(ch.dbase);
                r.m_sum[i] = m[row % 2][row / 2];
                r.m_base[i] = self.base1_m[row].wrapping_sub(1).wrapping_add(ch.sbase);
                r.nonfinite[i] = self.bad[row] != 0 || (F::IS_Q4_1 && self.bad_m[row] != 0);
            }
            r.fits_i64 = fits;
        }
    }
}

/// One input row's chunk sums over eight weight rows: the `d` terms and
/// (Q4_1) the `m` terms, even rows' in `[0]`, odd rows' in `[1]`, one
/// `i64` lane per row pair.
#[derive(Clone, Copy)]
struct Acc8 {
    d: [__m256i; 2],
    m: [__m256i; 2],
}

impl Acc8 {
    /// Adds one block: the eight rows' byte dots with the activations `y`
    /// (see the module docs for the bounds), times the activation mantissa
    /// in `i32`, times the weight mantissas in `i64`, shifted by
    /// `wrel + arel`; Q4_1's `mm·sm << (mrel + srel)` likewise.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn add_block<F: Format>(&mut self, w: &Weights8, sc: &Scales8, y: &[i8; QK], s: &ActScale) {
        let ones = _mm256_set1_epi16(1);
        // SAFETY: 4k + 4 ≤ 32 = y.len().
        let yk = |k: usize| unsafe {
            _mm256_set1_epi32(y.as_ptr().add(4 * k).cast::<i32>().read_unaligned())
        };
        let p = |k: usize| _mm256_maddubs_epi16(w.u[k], yk(k));
        let sumi = if F::IS_Q4_1 {
            let s01 = _mm256_add_epi16(p(0), p(1));
            let s23 = _mm256_add_epi16(p(2), p(3));
            let s45 = _mm256_add_epi16(p(4), p(5));
            let s67 = _mm256_add_epi16(p(6), p(7));
            let all = _mm256_add_epi16(_mm256_add_epi16(s01, s23), _mm256_add_epi16(s45, s67));
            _mm256_madd_epi16(all, ones)
        } else if F::IS_Q5_0 {
            let lo = _mm256_add_epi16(_mm256_add_epi16(p(0), p(1)), _mm256_add_epi16(p(2), p(3)));
            let hi = _mm256_add_epi16(_mm256_add_epi16(p(4), p(5)), _mm256_add_epi16(p(6), p(7)));
            let dot = _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
            _mm256_sub_epi32(dot, _mm256_set1_epi32(s.bsum << 4))
        } else {
            let q = |k: usize| {
                let pk = _mm256_maddubs_epi16(w.u[k], _mm256_sign_epi8(yk(k), w.sgn[k]));
                _mm256_madd_epi16(pk, ones)
            };
            let a = _mm256_add_epi32(_mm256_add_epi32(q(0), q(1)), _mm256_add_epi32(q(2), q(3)));
            let b = _mm256_add_epi32(_mm256_add_epi32(q(4), q(5)), _mm256_add_epi32(q(6), q(7)));
            _mm256_add_epi32(a, b)
        };
        let u = _mm256_mullo_epi32(sumi, _mm256_set1_epi32(s.dm));
        let arel = _mm256_set1_epi64x(s.drel as i64);
        let terms = [
            _mm256_mul_epi32(u, sc.wm[0]),
            _mm256_mul_epi32(odd_down(u), sc.wm[1]),
        ];
        for ((acc, t), rel) in self.d.iter_mut().zip(terms).zip(sc.wrel) {
            *acc = _mm256_add_epi64(*acc, _mm256_sllv_epi64(t, _mm256_add_epi64(rel, arel)));
        }
        if F::IS_Q4_1 {
            // `mm·sm` (`< 2^22`) as `i64` in each row's lane.
            let sm = _mm256_set1_epi32(s.sm);
            let srel = _mm256_set1_epi64x(s.srel as i64);
            let terms = [
                _mm256_mul_epi32(sc.mm[0], sm),
                _mm256_mul_epi32(sc.mm[1], sm),
            ];
            for ((acc, t), rel) in self.m.iter_mut().zip(terms).zip(sc.mrel) {
                *acc = _mm256_add_epi64(*acc, _mm256_sllv_epi64(t, _mm256_add_epi64(rel, srel)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::blocked::{Q4_1Blocks, Q5_0Blocks, Q8_0Blocks, fused_avx2};
    use super::*;
    use crate::quant::act::{ActKind, CHUNK_BLOCKS};
    use crate::quant::fast::fused::{ACT_TILE, WIDE_TILE};
    use crate::quant::fixed::ExactAcc;
    use crate::quant::{QActs, fast::chunk::ROW_GROUP};
    use crate::simd::Level;
    use crate::{Arena, F32};
    use std::vec;
    use std::vec::Vec;

    /// [`tile16_avx2`] gives every group and input row the [`ChunkSums`]
    /// of the four-row kernel ([`fused_avx2`], the AVX2 build's tile path,
    /// itself checked against the portable kernels by the proptests of
    /// `tests/kernels/matmul.rs`) — the same fit verdicts, non-finite flags
    /// and, where the sums fit, the same integers and bases — for Q4_1,
    /// Q5_0 and Q8_0: random weights whose scales spread over up to 24
    /// binades (chunks past the shift limits included), some zero or
    /// non-finite, 1 to 32 input rows of varied magnitudes, chunks of 1 to
    /// 32 blocks at every chunk offset; and where the chunk is the rows'
    /// only one, every input row it rounded itself has the bits
    /// [`ExactAcc::finish`] gives its cells.
    #[test]
    fn tile16_equals_four_row_kernel() {
        if crate::simd::level() < Level::Avx2 {
            return; // no AVX2 on this CPU: nothing to compare
        }
        check::<Q4_1Blocks>(0x51);
        check::<Q5_0Blocks>(0x52);
        check::<Q8_0Blocks>(0x53);
    }

    fn check<F: Format>(seed: u64) {
        let mut next = crate::testutil::lcg(seed);
        let bs = F::BLOCK_BYTES;
        let mut finished = 0usize;
        for round in 0..150u32 {
            let nb_row = 1 + next() as usize % 80;
            let b0 = CHUNK_BLOCKS * (next() as usize % nb_row.div_ceil(CHUNK_BLOCKS));
            let nb = CHUNK_BLOCKS.min(nb_row - b0);
            let rb = nb_row * bs;
            let mut w: Vec<u8> = (0..WIDE_ROWS * rb).map(|_| next() as u8).collect();
            let (centre, spread) = (4 + next() % 16, round % 25);
            let mut scale = || -> [u8; 2] {
                let h = match next() % 300 {
                    0 => 0x7C00 | (next() & 0x3FF) as u16,
                    1..=6 => 0,
                    _ => {
                        let e = (centre + next() % (spread + 1)).clamp(1, 30) as u16;
                        ((next() & 1) as u16) << 15 | e << 10 | (next() & 0x3FF) as u16
                    }
                };
                h.to_le_bytes()
            };
            for blk in w.chunks_mut(bs) {
                blk[..2].copy_from_slice(&scale());
                if F::IS_Q4_1 {
                    blk[2..4].copy_from_slice(&scale());
                }
            }
            let n = 1 + next() as usize % WIDE_TILE;
            let n_in = nb_row * QK;
            let x: Vec<F32> = (0..n * n_in)
                .map(|i| {
                    let e = 100 + (i / QK) as u32 % 7 * 3 + next() % 4;
                    F32::from_bits((next() & 1) << 31 | e << 23 | (next() & 0x7F_FFFF))
                })
                .collect();
            let mut buf = vec![0u8; QActs::bytes_for(ActKind::Q8, n, n_in).unwrap()];
            let mut arena = Arena::new(&mut buf);
            let mut acts = QActs::new(&mut arena, ActKind::Q8, n, n_in).unwrap();
            acts.quantize(&x).unwrap();
            let mut tile = ActTile::<WIDE_TILE>::EMPTY;
            tile.n = n;
            for j in 0..n {
                let a = acts.row(j).unwrap();
                tile.qs[j] = &a.qs[b0 * QK..];
                tile.sc[j] = &a.sc[b0..];
                tile.ch[j] = a.ch[b0 / CHUNK_BLOCKS];
            }
            let whole = b0 == 0 && nb == nb_row;
            let mut got = WideTileOut::<WIDE_TILE>::NOT_COMPUTED;
            // SAFETY: the CPU runs AVX2 (checked by the caller).
            unsafe { tile16_avx2::<F, WIDE_TILE>(&w, rb, (b0, nb, whole), &tile, &mut got) };
            for g in 0..WIDE_GROUPS {
                for j0 in (0..n).step_by(ACT_TILE) {
                    let mut t8 = ActTile::<ACT_TILE>::EMPTY;
                    t8.n = ACT_TILE.min(n - j0);
                    for t in 0..t8.n {
                        (t8.qs[t], t8.sc[t], t8.ch[t]) =
                            (tile.qs[j0 + t], tile.sc[j0 + t], tile.ch[j0 + t]);
                    }
                    let group = &w[g * ROW_GROUP * rb..];
                    // SAFETY: as above.
                    let want = unsafe { fused_avx2::<F, ACT_TILE>(group, rb, b0, nb, &t8) };
                    for (t, want) in want.iter().enumerate().take(t8.n) {
                        let j = j0 + t;
                        let at = (round, g, j);
                        if got.finished[j] {
                            finished += 1;
                            for i in 0..ROW_GROUP {
                                let mut cell = ExactAcc::default();
                                assert!(want.add_to(i, false, false, &mut cell), "{at:?}");
                                let r = got.rounded[j][g * ROW_GROUP + i];
                                assert_eq!(r, cell.finish(), "rounded {at:?} {i}");
                            }
                        }
                        let got = &got.sums[g][j];
                        assert_eq!(got.fits_i64, want.fits_i64, "fit {at:?}");
                        assert_eq!(got.nonfinite, want.nonfinite, "non-finite {at:?}");
                        if want.fits_i64 {
                            assert_eq!(got.d_sum, want.d_sum, "d {at:?}");
                            assert_eq!(got.d_base, want.d_base, "d base {at:?}");
                            if F::IS_Q4_1 {
                                assert_eq!(got.m_sum, want.m_sum, "m {at:?}");
                                assert_eq!(got.m_base, want.m_base, "m base {at:?}");
                            }
                        }
                    }
                }
            }
        }
        // Where the chunk is the rows' only one, Q5_0 and Q8_0 rows must
        // come back rounded some of the time (else the check above is idle).
        assert!(
            F::IS_Q4_1 || finished > 0,
            "no input row rounded in the kernel"
        );
    }
}
