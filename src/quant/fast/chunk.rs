//! The Q4_0 / Q4_1 / Q5_0 / Q8_0 chunks of the blocked matmul: what the drivers
//! need to know of each format ([`BlockedFormat`]), the weight scales of a
//! chunk decoded ([`WeightChunkScales`]), the portable split chunk kernels
//! (the `i64` sums of one chunk of [`ROW_GROUP`] weight rows against one
//! input row) and the exact `i128` fallback per cell ([`chunk_in_i128`]).
//!
//! Contract: a chunk kernel's sums, shifted to their bases and added to a
//! cell, give the same integer as [`crate::quant::dot::dot_row`]'s over the
//! chunk's blocks, wherever the spreads are within the limits below (the
//! drivers check them, else call [`chunk_in_i128`]). Verified by the
//! proptests of `tests/kernels/matmul.rs` (the `Portable` path runs these
//! kernels; random and wild scales) and `tests/kernels/quant_exact.rs`.
//!
//! ## The blocked kernel: exact, but in `i64`
//!
//! A cell's block terms are `t_b · 2^(shw_b + sha_b)` (units of 2^-48), with
//! `t_b = sumi_b · mw_b · ma_b` (and, for Q4_1, the min term
//! `mm_b · ms_b · 2^(shm_b + shs_b)`). Per chunk of [`CHUNK_BLOCKS`] blocks,
//! the weight row's non-zero shifts lie in `wbase ..= wbase + wspread` and the
//! activation's in `abase ..= abase + aspread` (precomputed by
//! [`crate::quant::QActs`]). So each term is `t_b · 2^rel_b · 2^(wbase + abase)` with
//! `rel_b ≤ wspread + aspread`, and
//!
//! | sum | `|t_b|` | 32 terms | limit on `rel` | bound |
//! |---|---|---|---|---|
//! | Q4_1 `d` | `< 2^16 · 2^22` | `< 2^43` | [`LIM_Q4_1_D`] = 19 | `< 2^62` |
//! | Q4_1 `m·s` | `< 2^22` | `< 2^27` | [`LIM_Q4_1_M`] = 35 | `< 2^62` |
//! | Q8_0 `d` | `< 2^19 · 2^22` | `< 2^46` | [`LIM_Q8_0_D`] = 16 | `< 2^62` |
//! | Q5_0 `d` | `< 2^16 · 2^22` | `< 2^43` | [`LIM_Q5_0_D`] = 19 | `< 2^62` |
//! | Q4_0 `d` | `< 2^15 · 2^22` | `< 2^42` | [`LIM_Q4_0_D`] = 20 | `< 2^62` |
//!
//! (Q4_1: `sumi = Σ q·y ≤ 32·15·127 < 2^16`; Q8_0: `|Σ qx·qy| ≤ 32·128·127
//! < 2^19`; Q5_0: `|Σ (q-16)·y| ≤ 32·16·127 < 2^16`; Q4_0: `|Σ (q-8)·y| ≤
//! 32·8·127 < 2^15`; every `|mant| < 2^11`, so
//! `|mw·ma| < 2^22`.)
//!
//! Within the limits the chunk's sum is exact in an `i64` (shifts by `rel`
//! are exact multiplications); it is then added to the cell's `i128` at
//! `2^(wbase + abase)`. A chunk whose spreads exceed a limit (rare: scales
//! spanning 2^16 within 1024 elements) is summed per block in `i128`
//! instead. Either way the cell's integer is the same exact sum as
//! `dot_row`'s, so the rounded result is the same bits, whichever path, SIMD
//! or not, ran.
#![forbid(unsafe_code)]

use crate::quant::GgmlType;
use crate::quant::act::{ActScale, CHUNK_BLOCKS, FLAG_D_NONFINITE, FLAG_S_NONFINITE};
use crate::quant::block::QK;
use crate::quant::dequant::q5_pair;
use crate::quant::dot::{i8_dot, nib_dot};
use crate::quant::fixed::{ExactAcc, f16_fixed, f16_nonfinite};

/// Weight rows the blocked kernels process together.
pub const ROW_GROUP: usize = 4;
/// Largest relative shift of a Q4_1 `d` term in the `i64` chunk sum.
pub const LIM_Q4_1_D: u32 = 19;
/// Largest relative shift of a Q4_1 `m·s` term in the `i64` chunk sum.
pub const LIM_Q4_1_M: u32 = 35;
/// Largest relative shift of a Q8_0 term in the `i64` chunk sum.
pub const LIM_Q8_0_D: u32 = 16;
/// Largest relative shift of a Q5_0 term in the `i64` chunk sum.
pub const LIM_Q5_0_D: u32 = 19;
/// Largest relative shift of a Q4_0 term in the `i64` chunk sum.
pub const LIM_Q4_0_D: u32 = 20;

/// What the blocked kernel needs to know of a weight format.
#[derive(Clone, Copy)]
pub(super) struct BlockedFormat {
    /// Bytes per block.
    pub(super) block_bytes: usize,
    /// Q4_1: a min term per block.
    pub(super) has_m: bool,
    /// [`LIM_Q4_0_D`], [`LIM_Q4_1_D`], [`LIM_Q5_0_D`] or [`LIM_Q8_0_D`].
    pub(super) lim_d: u32,
    /// [`LIM_Q4_1_M`] (no limit for the formats without a min).
    pub(super) lim_m: u32,
    /// The input row's flags that make a cell NaN.
    pub(super) act_flags: u8,
}

impl BlockedFormat {
    /// Q4_0, Q4_1, Q5_0 or Q8_0; `None` for the formats the blocked kernel leaves to
    /// [`dot_row`].
    #[inline(always)]
    pub(super) fn of(ty: GgmlType) -> Option<BlockedFormat> {
        match ty {
            GgmlType::Q4_1 => Some(BlockedFormat {
                block_bytes: 20,
                has_m: true,
                lim_d: LIM_Q4_1_D,
                lim_m: LIM_Q4_1_M,
                act_flags: FLAG_D_NONFINITE | FLAG_S_NONFINITE,
            }),
            GgmlType::Q8_0 => Some(BlockedFormat {
                block_bytes: 34,
                has_m: false,
                lim_d: LIM_Q8_0_D,
                lim_m: u32::MAX,
                act_flags: FLAG_D_NONFINITE,
            }),
            GgmlType::Q5_0 => Some(BlockedFormat {
                block_bytes: 22,
                has_m: false,
                lim_d: LIM_Q5_0_D,
                lim_m: u32::MAX,
                act_flags: FLAG_D_NONFINITE,
            }),
            GgmlType::Q4_0 => Some(BlockedFormat {
                block_bytes: 18,
                has_m: false,
                lim_d: LIM_Q4_0_D,
                lim_m: u32::MAX,
                act_flags: FLAG_D_NONFINITE,
            }),
            _ => None,
        }
    }
}

/// Decoded weight scales of one chunk of a row group, `[block][row]`: each
/// f16 scale as `mant · 2^(base + rel)` ([`f16_fixed`]), `rel` relative to
/// the row's smallest shift in the chunk (`base`), `spread` the largest
/// `rel`. `d` is the block scale, `m` the Q4_1 min (zero for Q8_0).
pub(crate) struct WeightChunkScales {
    pub d_mant: [[i32; ROW_GROUP]; CHUNK_BLOCKS],
    pub d_rel: [[u32; ROW_GROUP]; CHUNK_BLOCKS],
    pub m_mant: [[i32; ROW_GROUP]; CHUNK_BLOCKS],
    pub m_rel: [[u32; ROW_GROUP]; CHUNK_BLOCKS],
    pub d_base: [u32; ROW_GROUP],
    pub d_spread: [u32; ROW_GROUP],
    pub m_base: [u32; ROW_GROUP],
    pub m_spread: [u32; ROW_GROUP],
    /// A scale of the row in this chunk is ±∞ or NaN.
    pub nonfinite: [bool; ROW_GROUP],
}

/// Smallest and largest shift of the non-zero mantissas, as (base, spread).
fn shift_range(m: &[i32], sh: &[u32]) -> (u32, u32) {
    let (mut lo, mut hi) = (u32::MAX, 0);
    for (&m, &s) in m.iter().zip(sh) {
        if m != 0 {
            lo = lo.min(s);
            hi = hi.max(s);
        }
    }
    if lo == u32::MAX {
        (0, 0)
    } else {
        (lo, hi - lo)
    }
}

impl WeightChunkScales {
    /// All zero.
    pub(crate) const ZERO: WeightChunkScales = WeightChunkScales {
        d_mant: [[0; ROW_GROUP]; CHUNK_BLOCKS],
        d_rel: [[0; ROW_GROUP]; CHUNK_BLOCKS],
        m_mant: [[0; ROW_GROUP]; CHUNK_BLOCKS],
        m_rel: [[0; ROW_GROUP]; CHUNK_BLOCKS],
        d_base: [0; ROW_GROUP],
        d_spread: [0; ROW_GROUP],
        m_base: [0; ROW_GROUP],
        m_spread: [0; ROW_GROUP],
        nonfinite: [false; ROW_GROUP],
    };

    /// Decodes blocks `b0..b0 + nb` of the group's rows (`bs` bytes per
    /// block, `d` at byte 0 and, if `has_m`, `m` at byte 2).
    pub(super) fn decode(
        &mut self,
        rows: &[&[u8]; ROW_GROUP],
        bs: usize,
        b0: usize,
        nb: usize,
        has_m: bool,
    ) {
        for (r, row) in rows.iter().enumerate() {
            let mut dm = [0i32; CHUNK_BLOCKS];
            let mut dsh = [0u32; CHUNK_BLOCKS];
            let mut mm = [0i32; CHUNK_BLOCKS];
            let mut msh = [0u32; CHUNK_BLOCKS];
            let mut bad = false;
            for (b, blk) in row.chunks_exact(bs).skip(b0).take(nb).enumerate() {
                let d = u16::from_le_bytes([blk[0], blk[1]]);
                bad |= f16_nonfinite(d);
                (dm[b], dsh[b]) = f16_fixed(d);
                if has_m {
                    let m = u16::from_le_bytes([blk[2], blk[3]]);
                    bad |= f16_nonfinite(m);
                    (mm[b], msh[b]) = f16_fixed(m);
                }
            }
            let (db, ds) = shift_range(&dm[..nb], &dsh[..nb]);
            let (mb, ms) = shift_range(&mm[..nb], &msh[..nb]);
            for b in 0..nb {
                self.d_mant[b][r] = dm[b];
                self.d_rel[b][r] = if dm[b] != 0 { dsh[b] - db } else { 0 };
                self.m_mant[b][r] = mm[b];
                self.m_rel[b][r] = if mm[b] != 0 { msh[b] - mb } else { 0 };
            }
            self.d_base[r] = db;
            self.d_spread[r] = ds;
            self.m_base[r] = mb;
            self.m_spread[r] = ms;
            self.nonfinite[r] = bad;
        }
    }
}

/// A split chunk kernel (the weight scales decoded beforehand into a
/// [`WeightChunkScales`]): `(Σ d terms, Σ m terms)` per row of the group, in
/// `i64`, relative to `2^(weight base + activation base)`; precondition:
/// spreads within the limits.
pub(crate) type ChunkFn = fn(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WeightChunkScales,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]);

/// The portable split kernel for `ty`, if the blocked kernel handles it.
pub(super) fn split_kernel(ty: GgmlType) -> Option<ChunkFn> {
    match ty {
        GgmlType::Q4_1 => Some(chunk_q4_1),
        GgmlType::Q8_0 => Some(chunk_q8_0),
        GgmlType::Q5_0 => Some(chunk_q5_0),
        GgmlType::Q4_0 => Some(chunk_q4_0),
        _ => None,
    }
}

/// Portable Q4_1 chunk kernel.
fn chunk_q4_1(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WeightChunkScales,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    chunk_q4_1_with(rows, b0, nb, w, qs, sc, |blk, y| {
        let mut q = [0u8; 16];
        q.copy_from_slice(blk);
        nib_dot(&q, y)
    })
}

/// The Q4_1 chunk kernel with the block's integer sum `Σ q·y` (`dot` of the
/// block's 16 nibble bytes and its 32 activations) supplied by the build:
/// per row and block that sum times both scales, and the min term, shifted
/// into the row's sums. The scale arithmetic is this one body for every
/// build (the wasm32 SIMD128 leaf passes its lane `nib_dot`).
#[inline(always)]
pub(crate) fn chunk_q4_1_with(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WeightChunkScales,
    qs: &[i8],
    sc: &[ActScale],
    dot: impl Fn(&[u8], &[i8]) -> i32,
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    let mut ad = [0i64; ROW_GROUP];
    let mut am = [0i64; ROW_GROUP];
    for (r, row) in rows.iter().enumerate() {
        let blocks = row.chunks_exact(20).skip(b0).take(nb);
        for (b, ((blk, y), s)) in blocks.zip(qs.chunks_exact(QK)).zip(sc).enumerate() {
            let sumi = dot(&blk[4..20], y);
            let t = sumi as i64 * (w.d_mant[b][r] * s.dm) as i64;
            ad[r] += t << (w.d_rel[b][r] + s.drel);
            am[r] += ((w.m_mant[b][r] * s.sm) as i64) << (w.m_rel[b][r] + s.srel);
        }
    }
    (ad, am)
}

/// The portable chunk kernel of a format with one scale per block (Q8_0,
/// Q5_0, Q4_0): per row and block, the block's integer sum `sumi(block bytes,
/// activations)` times both scales, shifted into the row's sum.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn chunk_one_scale(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WeightChunkScales,
    qs: &[i8],
    sc: &[ActScale],
    block_bytes: usize,
    sumi: impl Fn(&[u8], &[i8]) -> i32,
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    let mut ad = [0i64; ROW_GROUP];
    for (r, row) in rows.iter().enumerate() {
        let blocks = row.chunks_exact(block_bytes).skip(b0).take(nb);
        for (b, ((blk, y), s)) in blocks.zip(qs.chunks_exact(QK)).zip(sc).enumerate() {
            let t = sumi(blk, y) as i64 * (w.d_mant[b][r] * s.dm) as i64;
            ad[r] += t << (w.d_rel[b][r] + s.drel);
        }
    }
    (ad, [0; ROW_GROUP])
}

/// `Σ q·y` of one Q8_0 block (`blk`: its 34 bytes).
#[inline(always)]
fn q8_0_sumi(blk: &[u8], y: &[i8]) -> i32 {
    let mut q = [0i8; 32];
    for (o, &v) in q.iter_mut().zip(&blk[2..34]) {
        *o = v as i8;
    }
    i8_dot(&q, y)
}

/// Portable Q8_0 chunk kernel.
fn chunk_q8_0(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WeightChunkScales,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    chunk_one_scale(rows, b0, nb, w, qs, sc, 34, q8_0_sumi)
}

/// `Σ (q-16)·y` of one Q5_0 block (`blk`: its 22 bytes).
#[inline(always)]
fn q5_0_sumi(blk: &[u8], y: &[i8]) -> i32 {
    let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
    let mut sumi = 0i32;
    for (j, &qs) in blk[6..22].iter().enumerate() {
        let (lo, hi) = q5_pair(qs, qh, j);
        sumi += (lo - 16) * y[j] as i32 + (hi - 16) * y[j + 16] as i32;
    }
    sumi
}

/// Portable Q5_0 chunk kernel.
fn chunk_q5_0(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WeightChunkScales,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    chunk_one_scale(rows, b0, nb, w, qs, sc, 22, q5_0_sumi)
}

/// `Σ (q-8)·y` of one Q4_0 block (`blk`: its 18 bytes).
#[inline(always)]
fn q4_0_sumi(blk: &[u8], y: &[i8]) -> i32 {
    let mut q = [0u8; 16];
    q.copy_from_slice(&blk[2..18]);
    let bsum: i32 = y.iter().map(|&v| v as i32).sum();
    nib_dot(&q, y) - 8 * bsum
}

/// Portable Q4_0 chunk kernel.
fn chunk_q4_0(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WeightChunkScales,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    chunk_one_scale(rows, b0, nb, w, qs, sc, 18, q4_0_sumi)
}

/// One chunk of one cell summed exactly in the cell's `i128` (the fallback
/// when the chunk's spreads are too wide for the `i64` sums).
pub(super) fn chunk_in_i128(
    ty: GgmlType,
    row: &[u8],
    b0: usize,
    nb: usize,
    qs: &[i8],
    sc: &[ActScale],
    acc: &mut ExactAcc,
) {
    let bs = ty.type_size();
    for ((blk, y), s) in row
        .chunks_exact(bs)
        .skip(b0)
        .take(nb)
        .zip(qs.chunks_exact(QK))
        .zip(sc)
    {
        let (dm, dsh) = f16_fixed(u16::from_le_bytes([blk[0], blk[1]]));
        if ty == GgmlType::Q4_1 {
            let mut q = [0u8; 16];
            q.copy_from_slice(&blk[4..20]);
            let (mm, msh) = f16_fixed(u16::from_le_bytes([blk[2], blk[3]]));
            acc.add_shifted(nib_dot(&q, y) as i64 * (dm * s.dm) as i64, dsh + s.dsh);
            acc.add_shifted((mm * s.sm) as i64, msh + s.ssh);
        } else if ty == GgmlType::Q5_0 {
            acc.add_shifted(q5_0_sumi(blk, y) as i64 * (dm * s.dm) as i64, dsh + s.dsh);
        } else if ty == GgmlType::Q4_0 {
            acc.add_shifted(q4_0_sumi(blk, y) as i64 * (dm * s.dm) as i64, dsh + s.dsh);
        } else {
            let mut q = [0i8; 32];
            for (o, &v) in q.iter_mut().zip(&blk[2..34]) {
                *o = v as i8;
            }
            acc.add_shifted(i8_dot(&q, y) as i64 * (dm * s.dm) as i64, dsh + s.dsh);
        }
    }
}
