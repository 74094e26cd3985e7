//! Row kernels for the K-quant weights (Q4_K, Q5_K, Q6_K): the exact dot of one
//! weight row with one Q8 activation row, the same integer as
//! [`crate::quant::dot::dot_row`] summed in fewer, wider steps, so the
//! rounded result is the same bits.
//!
//! Contract: for every input, `q4_k_row` / `q5_k_row` / `q6_k_row` return the
//! [`ExactAcc`] whose [`ExactAcc::finish`] is `dot_row`'s result (same sum,
//! same non-finite flag). Verified by proptest in `tests/kernels/matmul.rs`
//! (every [`super::KernelPath`], random and wild scales) and
//! `tests/kernels/quant_exact.rs` (extreme blocks), and by the `kernel.matmul`
//! self-test digest, which these kernels now produce.
//!
//! ## Why it is exact
//!
//! `dot_row` adds, per 32-sub-block `j` of a super-block, the term
//! `t_j · 2^(dsh + ash_j)` to an `i128` (units of 2^-48): `t_j = (sc_j ·
//! sumq_j) · (dm · am_j)` for the scale term (`dm`, `dsh`: the super-block's
//! f16 `d`; `am_j`, `ash_j`: the activation block's), and for Q4_K also
//! `−(mn_j · bsum_j) · (nm · am_j) · 2^(nsh + ash_j)` (Q5_K likewise). Here, with `base` the
//! smallest `ash_j` of the super-block's non-zero activation scales and
//! `rel_j = ash_j − base ≤ spread`, the sums
//!
//! `I = Σ_j (sc_j · sumq_j · am_j) << rel_j`, `M = Σ_j (mn_j · bsum_j · am_j) << rel_j`
//!
//! are taken in `i64`, and `I · dm · 2^(dsh + base) − M · nm · 2^(nsh + base)`
//! is added to the `i128`: the same integer (integer products and shifts are
//! exact). Bounds (`|am| < 2^11`, activations in `-127..=127`):
//!
//! | format | `|sc·sumq|` | 8 terms of `I` | limit on `spread` | bound |
//! |---|---|---|---|---|
//! | Q4_K | `≤ 63·32·15·127 < 2^22` | `< 2^36 · 2^rel` | [`LIM_Q4_K`] = 26 | `< 2^62` |
//! | Q5_K | `≤ 63·32·31·127 < 2^23` | `< 2^37 · 2^rel` | [`LIM_Q5_K`] = 25 | `< 2^62` |
//! | Q6_K | `≤ 2·128·16·32·127 < 2^24` | `< 2^38 · 2^rel` | [`LIM_Q6_K`] = 24 | `< 2^62` |
//!
//! (`M` is smaller: `63·4064·2^11 < 2^29` per term.) A super-block whose
//! activation scales span more than the limit (rare: 2^24 within 256
//! elements) is summed per sub-block in the `i128`, as `dot_row` does. The
//! `i128` never overflows: `I · dm · 2^(dsh + base)` is the sum of
//! `dot_row`'s eight terms, each below 2^104.
//!
//! The bodies are portable Rust written for auto-vectorization; the
//! crate's `multiversion!` compiles each for AVX2 and AVX-512 (same
//! operations, same bits). On x86-64 with `std`, Q4_K and Q6_K use
//! hand-written builds instead (`super::x86::kquant`, chosen by
//! `super::dispatch`): the per-sub-block integer
//! sums by AVX2 intrinsics (the auto-vectorized bodies spent most of their
//! time in one horizontal reduction per sub-block), and `I` and `M` above
//! in vectors — the same integers, then the same `i128` steps; on AVX-512
//! VNNI with several input rows, one or four tiles of four weight rows by
//! up to 32 input rows (`MultiTileFn`), their sums scaled in `i64` lanes
//! over a chunk of [`CHUNK_SUPERS`] super-blocks within the `CHUNK_*`
//! limits (bounds there). That expansion is this file's only `unsafe`
//! (reviewed in [`crate::simd`]), so the file cannot carry
//! `forbid(unsafe_code)`; the crate's `deny(unsafe_code)` covers the rest.

use crate::F32;
use crate::quant::GgmlType;
use crate::quant::act::{ActRow, ActScale, FLAG_D_NONFINITE};
use crate::quant::block::QK_K;
use crate::quant::fixed::{ExactAcc, f16_fixed, f16_nonfinite};
use crate::simd::Level;

/// Largest activation-shift spread within a Q4_K super-block summed in `i64`.
pub const LIM_Q4_K: u32 = 26;
/// Largest activation-shift spread within a Q5_K super-block summed in `i64`.
pub const LIM_Q5_K: u32 = 25;
/// Largest activation-shift spread within a Q6_K super-block summed in `i64`.
pub const LIM_Q6_K: u32 = 24;

/// Super-blocks of one `i64` accumulation in the AVX-512 VNNI tile: one
/// activation chunk ([`crate::quant::act::CHUNK_BLOCKS`] 32-blocks).
pub const CHUNK_SUPERS: usize = 4;
/// Largest spread of a Q4_K weight row's non-zero `d` and `dmin` shifts
/// over a chunk for the VNNI tile's chunk sum (`sc·dm`, `mn·nm` shifted
/// within an `i32`).
pub const CHUNK_WLIM_Q4_K: u32 = 14;
/// Largest weight plus activation shift spread of a Q4_K chunk sum.
pub const CHUNK_LIM_Q4_K: u32 = 16;
/// [`CHUNK_WLIM_Q4_K`] for Q5_K (the same weight factors).
pub const CHUNK_WLIM_Q5_K: u32 = 14;
/// [`CHUNK_LIM_Q4_K`] for Q5_K: one less, its sub-block sums reaching
/// `32·31·127` where Q4_K's reach `32·15·127`.
pub const CHUNK_LIM_Q5_K: u32 = 15;
/// [`CHUNK_WLIM_Q4_K`] for Q6_K's `d` (`dm·am` shifted within an `i32`).
pub const CHUNK_WLIM_Q6_K: u32 = 9;
/// [`CHUNK_LIM_Q4_K`] for Q6_K.
pub const CHUNK_LIM_Q6_K: u32 = 14;

/// Bytes of a Q6_K super-block.
const Q6_K_BYTES: usize = 210;

/// Smallest shift of the non-zero activation scales of a super-block and
/// the spread above it (`(0, 0)` if all are zero).
#[inline(always)]
pub(super) fn act_base(ys: &[ActScale]) -> (u32, u32) {
    let (mut lo, mut hi) = (u32::MAX, 0u32);
    for s in ys {
        if s.dm != 0 {
            lo = lo.min(s.dsh);
            hi = hi.max(s.dsh);
        }
    }
    if lo == u32::MAX {
        (0, 0)
    } else {
        (lo, hi - lo)
    }
}

/// `rel_j` of an activation scale against `base` (0 where `dm == 0`, whose
/// terms are zero).
#[inline(always)]
pub(super) fn rel(s: &ActScale, base: u32) -> u32 {
    if s.dm != 0 { s.dsh - base } else { 0 }
}

/// `(scale, min)` of sub-block `j` (0..8) from the 12 packed bytes
/// (`get_scale_min_k4`).
#[inline(always)]
pub(super) fn scale_min(s: &[u8], j: usize) -> (i32, i32) {
    if j < 4 {
        ((s[j] & 63) as i32, (s[j + 4] & 63) as i32)
    } else {
        (
            ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4)) as i32,
            ((s[j + 4] >> 4) | ((s[j] >> 6) << 4)) as i32,
        )
    }
}

/// The eight 6-bit scales and eight 6-bit mins of a Q4_K / Q5_K
/// super-block from its 12 packed bytes (`get_scale_min_k4` for every `j`
/// at once), four per `u32` operation: with `a`, `b`, `c` the three
/// little-endian words, sub-blocks 0..4 are the low six bits of `a`'s
/// bytes (scales) and `b`'s (mins); sub-blocks 4..8 take their low four
/// bits from `c`'s low (scales) or high (mins) nibbles and their top two
/// from bits 6..8 of `a`'s (scales) or `b`'s (mins) bytes. Every mask
/// keeps a byte lane's bits within that lane.
#[inline(always)]
fn scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    const LOW6: u32 = 0x3F3F_3F3F;
    const LOW4: u32 = 0x0F0F_0F0F;
    const LOW2: u32 = 0x0303_0303;
    let w = |at: usize| u32::from_le_bytes([s[at], s[at + 1], s[at + 2], s[at + 3]]);
    let (a, b, c) = (w(0), w(4), w(8));
    let sc_hi = (c & LOW4) | (((a >> 6) & LOW2) << 4);
    let mn_hi = ((c >> 4) & LOW4) | (((b >> 6) & LOW2) << 4);
    let join = |lo: u32, hi: u32| (u64::from(lo) | (u64::from(hi) << 32)).to_le_bytes();
    (join(a & LOW6, sc_hi), join(b & LOW6, mn_hi))
}

/// The exact dot of one Q4_K row (`row`: whole super-blocks) with `a`
/// (its `qs` and `sc` as long as the row); the caller checks the lengths.
#[inline(always)]
pub(crate) fn q4_k_row(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    q4_5_k_row::<false>(row, a)
}

/// [`q4_k_row`] for Q5_K.
#[inline(always)]
pub(crate) fn q5_k_row(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    q4_5_k_row::<true>(row, a)
}

/// [`q4_k_row`] (`Q5` false: 144-byte blocks, nibbles at 16) or Q5_K (176
/// bytes, `qh` at 16, nibbles at 48).
#[inline(always)]
fn q4_5_k_row<const Q5: bool>(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    q4_5_k_row_with::<Q5>(row, a, q4_5_k_sumq::<Q5>)
}

/// The eight sub-block sums `Σ q·y` of one Q4_K (`Q5` false) or Q5_K
/// super-block `blk` with its 256 activations `yq`, in portable Rust: the
/// quants unpacked eight per `u64` operation ([`unpack_q4_5`]), then one
/// plain loop per sub-block that the compiler vectorizes.
#[inline(always)]
fn q4_5_k_sumq<const Q5: bool>(blk: &[u8], yq: &[i8]) -> [i32; 8] {
    sub_sums(&unpack_q4_5::<Q5>(blk), yq)
}

/// Eight one-bit lanes of a `u64` (bit 0 of each byte).
const LANES_1: u64 = 0x0101_0101_0101_0101;
/// Eight two-bit lanes of a `u64`.
const LANES_2: u64 = 0x0303_0303_0303_0303;
/// Eight four-bit lanes of a `u64`.
const LANES_4: u64 = 0x0F0F_0F0F_0F0F_0F0F;

/// The `u64` of the eight bytes of `b` at `at` (little-endian; the caller
/// keeps `at + 8` within the block).
#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The 256 quants of a Q4_K (`Q5` false: `0..=15`) or Q5_K (`0..=31`)
/// super-block, one byte each, in activation order (sub-block `2c` the low
/// nibbles of bytes `32c..32c + 32`, `2c + 1` their high nibbles; Q5_K's
/// fifth bit `2c` / `2c + 1` of `qh[l]`). Each `u64` step takes eight
/// quants: the masks keep every byte lane within its own bits (a nibble, or
/// a nibble or-ed with one bit moved above it), so no lane carries into
/// the next.
#[inline(always)]
fn unpack_q4_5<const Q5: bool>(blk: &[u8]) -> [u8; QK_K] {
    let qs_at = if Q5 { 48 } else { 16 };
    let mut q = [0u8; QK_K];
    for (c, out) in q.chunks_exact_mut(64).enumerate() {
        for w in 0..4 {
            let x = word(blk, qs_at + 32 * c + 8 * w);
            let (mut lo, mut hi) = (x & LANES_4, (x >> 4) & LANES_4);
            if Q5 {
                let h = word(blk, 16 + 8 * w);
                lo |= ((h >> (2 * c)) & LANES_1) << 4;
                hi |= ((h >> (2 * c + 1)) & LANES_1) << 4;
            }
            out[8 * w..8 * w + 8].copy_from_slice(&lo.to_le_bytes());
            out[32 + 8 * w..40 + 8 * w].copy_from_slice(&hi.to_le_bytes());
        }
    }
    q
}

/// `Σ q·y` over each 32-element sub-block of the unpacked quants `q` and
/// the activations `yq` (`|Σ| ≤ 32·63·127 < 2^18`: no `i32` overflow).
#[inline(always)]
fn sub_sums(q: &[u8; QK_K], yq: &[i8]) -> [i32; 8] {
    let mut sums = [0i32; 8];
    for (s, (q, y)) in sums
        .iter_mut()
        .zip(q.chunks_exact(32).zip(yq.chunks_exact(32)))
    {
        *s = dot_u8_i8(q, y);
    }
    sums
}

/// `Σ q·y` of two equal-length runs, in `i32` (the callers' runs are at
/// most 32 long, `q ≤ 63`: the sum is below 2^18).
#[inline(always)]
fn dot_u8_i8(q: &[u8], y: &[i8]) -> i32 {
    q.iter().zip(y).map(|(&q, &y)| q as i32 * y as i32).sum()
}

/// [`q4_5_k_row`] with the sub-block sums taken by `sumq` (given the whole
/// super-block and its 256 activations; it must return
/// [`q4_5_k_sumq`]'s integers).
#[inline(always)]
fn q4_5_k_row_with<const Q5: bool>(
    row: &[u8],
    a: &ActRow<'_>,
    sumq: impl Fn(&[u8], &[i8]) -> [i32; 8],
) -> ExactAcc {
    let (bytes, lim) = if Q5 { (176, LIM_Q5_K) } else { (144, LIM_Q4_K) };
    let mut acc = ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    };
    let sbs = a.qs.chunks_exact(QK_K).zip(a.sc.chunks_exact(8));
    for (blk, (yq, ys)) in row.chunks_exact(bytes).zip(sbs) {
        let d = u16::from_le_bytes([blk[0], blk[1]]);
        let dmin = u16::from_le_bytes([blk[2], blk[3]]);
        acc.nonfinite |= f16_nonfinite(d) | f16_nonfinite(dmin);
        let (dm, dsh) = f16_fixed(d);
        let (nm, nsh) = f16_fixed(dmin);
        let (sc, mn) = scales_mins(&blk[4..16]);
        let sumq = sumq(blk, yq);
        let (base, spread) = act_base(ys);
        if spread <= lim {
            let (mut id, mut im) = (0i64, 0i64);
            for (j, s) in ys.iter().enumerate() {
                // `|am| < 2^11 · 2^spread ≤ 2^37`; the products are
                // `dot_row`'s terms shifted by `rel`, bounded above.
                let am = (s.dm as i64) << rel(s, base);
                id += (sc[j] as i32 * sumq[j]) as i64 * am;
                im += (mn[j] as i32 * s.bsum) as i64 * am;
            }
            acc.sum += (id as i128 * dm as i128) << (dsh + base);
            acc.sum -= (im as i128 * nm as i128) << (nsh + base);
        } else {
            for (j, s) in ys.iter().enumerate() {
                let (sc, mn) = (sc[j] as i32, mn[j] as i32);
                acc.add_shifted((sc * sumq[j]) as i64 * (dm * s.dm) as i64, dsh + s.dsh);
                acc.add_shifted(-((mn * s.bsum) as i64 * (nm * s.dm) as i64), nsh + s.dsh);
            }
        }
    }
    acc
}

/// [`q4_k_row`] for Q6_K.
#[inline(always)]
pub(crate) fn q6_k_row(row: &[u8], a: &ActRow<'_>) -> ExactAcc {
    q6_k_row_with(row, a, q6_k_sumi)
}

/// The eight scaled sub-block sums `sc_2j·Σ q·y + sc_2j+1·Σ q·y` (over the
/// two 16-element halves of sub-block `j`, `q` in `-32..=31`) of one Q6_K
/// super-block `blk` with its 256 activations `yq`, in portable Rust: the
/// quants unpacked eight per `u64` operation ([`unpack_q6`], offset by 32),
/// then one plain loop per half.
#[inline(always)]
fn q6_k_sumi(blk: &[u8], yq: &[i8]) -> [i32; 8] {
    let q = unpack_q6(blk);
    let scales = &blk[192..208];
    let mut sumi = [0i32; 8];
    for (j, (s, (q, y))) in sumi
        .iter_mut()
        .zip(q.chunks_exact(32).zip(yq.chunks_exact(32)))
        .enumerate()
    {
        let s0 = dot_u6_i8(&q[..16], &y[..16]);
        let s1 = dot_u6_i8(&q[16..], &y[16..]);
        *s = scales[2 * j] as i8 as i32 * s0 + scales[2 * j + 1] as i8 as i32 * s1;
    }
    sumi
}

/// `Σ (q − 32)·y` of two equal-length runs of 16 (`|Σ| ≤ 16·32·127 <
/// 2^16`).
#[inline(always)]
fn dot_u6_i8(q: &[u8], y: &[i8]) -> i32 {
    q.iter()
        .zip(y)
        .map(|(&q, &y)| (q as i32 - 32) * y as i32)
        .sum()
}

/// The 256 quants of a Q6_K super-block plus 32 (`0..=63`), one byte
/// each, in activation order: sub-block `4h + k`, element `l`, is nibble
/// `k / 2` of `ql[64h + 32(k % 2) + l]` with bits `2k..2k + 2` of
/// `qh[32h + l]` above it. Each `u64` step takes eight quants: a masked
/// nibble or-ed with a masked two-bit field shifted to bits 4..6 of the
/// same byte lane, so no lane carries into the next.
#[inline(always)]
fn unpack_q6(blk: &[u8]) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for (h, out) in q.chunks_exact_mut(128).enumerate() {
        for w in 0..4 {
            let l0 = word(blk, 64 * h + 8 * w);
            let l1 = word(blk, 64 * h + 32 + 8 * w);
            let hb = word(blk, 128 + 32 * h + 8 * w);
            let parts = [
                (l0 & LANES_4) | ((hb & LANES_2) << 4),
                (l1 & LANES_4) | (((hb >> 2) & LANES_2) << 4),
                ((l0 >> 4) & LANES_4) | (((hb >> 4) & LANES_2) << 4),
                ((l1 >> 4) & LANES_4) | (((hb >> 6) & LANES_2) << 4),
            ];
            for (k, p) in parts.iter().enumerate() {
                out[32 * k + 8 * w..32 * k + 8 * w + 8].copy_from_slice(&p.to_le_bytes());
            }
        }
    }
    q
}

/// [`q6_k_row`] with the scaled sub-block sums taken by `sumi` (given the
/// whole super-block and its 256 activations; it must return
/// [`q6_k_sumi`]'s integers).
#[inline(always)]
fn q6_k_row_with(row: &[u8], a: &ActRow<'_>, sumi: impl Fn(&[u8], &[i8]) -> [i32; 8]) -> ExactAcc {
    let mut acc = ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    };
    let sbs = a.qs.chunks_exact(QK_K).zip(a.sc.chunks_exact(8));
    for (blk, (yq, ys)) in row.chunks_exact(Q6_K_BYTES).zip(sbs) {
        let d = u16::from_le_bytes([blk[208], blk[209]]);
        acc.nonfinite |= f16_nonfinite(d);
        let (dm, dsh) = f16_fixed(d);
        let sumi = sumi(blk, yq);
        let (base, spread) = act_base(ys);
        if spread <= LIM_Q6_K {
            let mut id = 0i64;
            for (j, s) in ys.iter().enumerate() {
                id += (sumi[j] as i64 * s.dm as i64) << rel(s, base);
            }
            acc.sum += (id as i128 * dm as i128) << (dsh + base);
        } else {
            for (j, s) in ys.iter().enumerate() {
                acc.add_shifted(sumi[j] as i64 * (dm * s.dm) as i64, dsh + s.dsh);
            }
        }
    }
    acc
}

crate::simd::multiversion! {
    /// Builds of [`q4_k_row`].
    mod q4_k_builds = q4_k_row(row: &[u8], a: &ActRow<'_>) -> ExactAcc;
}

crate::simd::multiversion! {
    /// Builds of [`q5_k_row`].
    mod q5_k_builds = q5_k_row(row: &[u8], a: &ActRow<'_>) -> ExactAcc;
}

crate::simd::multiversion! {
    /// Builds of [`q6_k_row`].
    mod q6_k_builds = q6_k_row(row: &[u8], a: &ActRow<'_>) -> ExactAcc;
}

/// Weight rows of a tile kernel: the x86 Q4_K and Q6_K builds take this many
/// weight rows against one input row (`RowsRun::tiled_rows` counts them).
pub const TILE: usize = 4;

/// A row kernel over [`TILE`] weight rows against one input row (each
/// cell the same integers as the row kernel's; the x86 Q4_K and Q6_K builds).
pub(crate) type TileFn = fn([&[u8]; TILE], &ActRow<'_>) -> [ExactAcc; TILE];

/// Input rows per call of a [`MultiTileFn`]: the kernel decodes each
/// weight super-block once per call, so once per this many input rows.
pub(crate) const WIDE_ACT_TILE: usize = 32;

/// Tiles of [`TILE`] weight rows per call of a [`MultiTileFns`]' second
/// kernel: each input row's terms are taken once for all of them. (The
/// call's cells, `WIDE_GROUPS · TILE · WIDE_ACT_TILE` accumulators of 32
/// bytes, 16 KiB, are set up once per matrix by the driver and reused by
/// every call.)
pub(crate) const WIDE_GROUPS: usize = 4;

/// One tile's cells of a [`MultiTileFn`] call, `[weight row][input row]`.
pub(crate) type TileCells = [[ExactAcc; WIDE_ACT_TILE]; TILE];

/// A tile kernel over `G` tiles of [`TILE`] weight rows (whole
/// super-blocks, all the same length) against up to [`WIDE_ACT_TILE`]
/// input rows (each with its `qs` and `sc` as long as the rows): fills
/// cell `[g][k][j]` of the first `acts.len()` columns with the same
/// integers as the row kernel's for weight row `k` of tile `g` and input
/// row `j` (the x86 AVX-512 VNNI Q4_K and Q6_K builds).
pub(crate) type MultiTileFn<const G: usize> =
    fn([[&[u8]; TILE]; G], &[ActRow<'_>], &mut [TileCells; G]);

/// A format's [`MultiTileFn`] for one tile and for [`WIDE_GROUPS`] tiles.
pub(crate) type MultiTileFns = (MultiTileFn<1>, MultiTileFn<WIDE_GROUPS>);

/// A row kernel: [`q4_k_row`], [`q5_k_row`] or [`q6_k_row`], one of their builds.
pub(crate) type RowFn = fn(&[u8], &ActRow<'_>) -> ExactAcc;

/// A decode kernel: every weight row of `rows` (whole rows) against the
/// input rows (one to [`DECODE_ROWS`]), the cells `(row, col + j)` of
/// `out` (rows, a stride of `out.len() / rows` cells, at least `col + M`)
/// set to the row kernel's sum rounded once ([`ExactAcc::finish`]), the
/// other cells untouched; `false`, nothing written, for input rows it does
/// not take or a shape that does not match (the x86 Q4_K, Q5_K and Q6_K builds).
pub(crate) type DecodeFn = fn(&[u8], &[ActRow<'_>], &mut [F32], usize) -> bool;

/// Most input rows the x86 AVX-512 VNNI build hands the decode kernel
/// rather than the VNNI tile (a step of a few sequences, or a speculative
/// verify step: each weight super-block decoded once for all of them,
/// every weight row's chunk scales once; the tile takes more).
pub const VNNI_DECODE_MAX_ROWS: usize = 4;

/// Input rows × super-blocks a row up to which the VNNI build also hands
/// the decode kernel up to [`DECODE_PASS_ROWS`] input rows: one pass's
/// input terms then fit the kernel's small terms array (`x86::kdecode`'s
/// `FEW_TERMS`), as eight rows of the 1536- and 2048-wide matrices of a
/// 1.5B model do. Longer rows, whose passes would split and whose terms
/// would fill the large array, stay with the VNNI tile (measured: eight
/// rows of the 1.5B's 8960-wide FFN down projection on the decode kernel
/// made a batch-8 step slower, of its 1536-wide matrices faster).
pub const VNNI_DECODE_PASS_TERMS: usize = 64;

/// Whether the VNNI build gives `m` input rows of `n_in` elements to the
/// decode kernel rather than the VNNI tile: up to [`VNNI_DECODE_MAX_ROWS`],
/// or up to [`DECODE_PASS_ROWS`] while `m` rows' terms fit
/// [`VNNI_DECODE_PASS_TERMS`].
pub const fn vnni_decode_takes(m: usize, n_in: usize) -> bool {
    m <= VNNI_DECODE_MAX_ROWS
        || (m <= DECODE_PASS_ROWS && m * n_in.div_ceil(QK_K) <= VNNI_DECODE_PASS_TERMS)
}

// Eight rows of 2048 go to the decode kernel, of 2304 or 8960 to the tile;
// four rows of any length to the decode kernel.
const _: () = assert!(vnni_decode_takes(8, 2048) && !vnni_decode_takes(8, 2304));
const _: () = assert!(!vnni_decode_takes(8, 8960) && vnni_decode_takes(4, 65536));

/// Input rows the x86 decode kernels take in one pass over the weight
/// rows of a call (each weight super-block decoded once for all of them).
pub const DECODE_PASS_ROWS: usize = 8;

/// Most input rows an x86 Q4_K / Q5_K / Q6_K decode kernel call takes; the
/// driver gives it more, where there is no VNNI tile, in calls of this
/// many.
pub const DECODE_ROWS: usize = 16;

/// A tile kernel: [`TILE`] weight rows against one input row, or against
/// up to [`WIDE_ACT_TILE`] (the VNNI build). (Only the x86 builds make
/// one.)
#[derive(Clone, Copy)]
#[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
pub(crate) enum KTile {
    /// One input row per call (the AVX2 / AVX-512 builds).
    One(TileFn),
    /// Up to [`WIDE_ACT_TILE`] input rows per call, one tile or
    /// [`WIDE_GROUPS`] tiles of weight rows.
    Wide(MultiTileFns),
}

/// A K-quant matrix's kernels, as `super::dispatch` picks them: the row
/// kernel and its build's level, the tile kernel where the CPU has one
/// (the driver uses it with several input rows) and the decode kernel of
/// the same build where there is one (with one input row).
#[derive(Clone, Copy)]
pub(crate) struct KQuantKernels {
    pub row: RowFn,
    pub build: Level,
    pub tile: Option<KTile>,
    pub decode: Option<DecodeFn>,
    /// The decode kernel's build: the row kernel's, or
    /// [`Level::Avx512Vnni`] (Q4_K, Q5_K and Q6_K on AVX-512 VNNI).
    pub decode_build: Level,
}

/// The portable body of the row kernel for `ty`, if it has one, and the
/// `[AVX-512, AVX2]` builds of it by `multiversion!` that this CPU runs.
pub(crate) fn row_kernels(ty: GgmlType) -> Option<(RowFn, [Option<RowFn>; 2])> {
    match ty {
        GgmlType::Q4_K => Some((q4_k_row, q4_k_builds::builds())),
        GgmlType::Q5_K => Some((q5_k_row, q5_k_builds::builds())),
        GgmlType::Q6_K => Some((q6_k_row, q6_k_builds::builds())),
        _ => None,
    }
}
