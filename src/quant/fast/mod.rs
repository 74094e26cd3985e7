//! Blocked matmul kernels: several weight rows per pass over the activations.
//!
//! `rows_kernel(w, r0, x, out)` fills `out` (rows, M) with the cells of weight
//! rows `r0..r0 + rows`. For Q4_1, Q5_0 and Q8_0 weights it runs a blocked kernel
//! over [`ROW_GROUP`] rows at a time; every other case (other formats, tail
//! rows) is [`super::dot::dot_row`] per cell.
//!
//! This module holds the portable drivers and chunk kernels; `x86` (x86-64
//! with `std`) holds the hand-written AVX2 / AVX-512 VNNI chunk kernels (and
//! `x86::kquant` the K-quant ones) that
//! the same drivers inline ("fused": the weight scales decoded on the fly),
//! chosen by `dispatch` for [`crate::simd::level`].
//!
//! | weights | [`KernelPath::Reference`] | `Portable` | `Auto` | `Avx2` |
//! |---|---|---|---|---|
//! | Q4_1, Q5_0, Q8_0 | `dot_row` | blocked, portable | blocked, widest fused build (VNNI, AVX2) or portable; on VNNI with at least [`WIDE_MIN_ROWS`] input rows, sixteen weight rows at a time ([`WIDE_GROUPS`] groups) | blocked, AVX2 fused build or portable |
//! | Q4_K, Q5_K, Q6_K | `dot_row` | [`kquant`] row kernel, portable body | row kernel, widest build (AVX-512, AVX2; Q4_K and Q6_K: hand-written in `x86::kquant`, with several input rows four weight rows at a time — on AVX-512 VNNI sixteen (else four) weight rows against up to 32 input rows at a time) or portable | row kernel, AVX2 build (Q4_K and Q6_K likewise tiled, one input row at a time) or portable |
//! | any other | `dot_row` | `dot_row` | `dot_row` | `dot_row` |
//!
//! [`rows_kernel_with`] reports which of them ran ([`RowsRun`], with the rows
//! the tile kernels did);
//! `tests/kernels_matmul.rs` asserts it and that all give the same bits.
//!
//! ## The blocked kernel: exact, but in `i64`
//!
//! A cell's block terms are `t_b · 2^(shw_b + sha_b)` (units of 2^-48), with
//! `t_b = sumi_b · mw_b · ma_b` (and, for Q4_1, the min term
//! `mm_b · ms_b · 2^(shm_b + shs_b)`). Per chunk of [`CHUNK_BLOCKS`] blocks,
//! the weight row's non-zero shifts lie in `wbase ..= wbase + wspread` and the
//! activation's in `abase ..= abase + aspread` (precomputed by
//! [`super::QActs`]). So each term is `t_b · 2^rel_b · 2^(wbase + abase)` with
//! `rel_b ≤ wspread + aspread`, and
//!
//! | sum | `|t_b|` | 32 terms | limit on `rel` | bound |
//! |---|---|---|---|---|
//! | Q4_1 `d` | `< 2^16 · 2^22` | `< 2^43` | [`LIM_Q4_1_D`] = 19 | `< 2^62` |
//! | Q4_1 `m·s` | `< 2^22` | `< 2^27` | [`LIM_Q4_1_M`] = 35 | `< 2^62` |
//! | Q8_0 `d` | `< 2^19 · 2^22` | `< 2^46` | [`LIM_Q8_0_D`] = 16 | `< 2^62` |
//! | Q5_0 `d` | `< 2^16 · 2^22` | `< 2^43` | [`LIM_Q5_0_D`] = 19 | `< 2^62` |
//!
//! (Q4_1: `sumi = Σ q·y ≤ 32·15·127 < 2^16`; Q8_0: `|Σ qx·qy| ≤ 32·128·127
//! < 2^19`; Q5_0: `|Σ (q-16)·y| ≤ 32·16·127 < 2^16`; every `|mant| < 2^11`, so
//! `|mw·ma| < 2^22`.)
//!
//! Within the limits the chunk's sum is exact in an `i64` (shifts by `rel`
//! are exact multiplications); it is then added to the cell's `i128` at
//! `2^(wbase + abase)`. A chunk whose spreads exceed a limit (rare: scales
//! spanning 2^16 within 1024 elements) is summed per block in `i128`
//! instead. Either way the cell's integer is the same exact sum as
//! `dot_row`'s, so the rounded result is the same bits, whichever path, SIMD
//! or not, ran.

use super::GgmlType;
use super::act::{ActRow, ActScale, CHUNK_BLOCKS, ChunkScale, FLAG_D_NONFINITE, FLAG_S_NONFINITE};
use super::block::QK;
use super::dequant::q5_pair;
use super::dot::{dot_row, i8_dot, nib_dot};
use super::fixed::{ExactAcc, f16_fixed, f16_nonfinite};
use super::{QActs, QMatrix};
use crate::F32;
use crate::simd::Level;
use dispatch::{KQuantKernels, Plan};
use kquant::KTile;

mod dispatch;
pub mod kquant;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod x86;

/// Weight rows the blocked kernels process together.
pub const ROW_GROUP: usize = 4;
/// Input rows whose cells one decoded weight chunk serves before the next
/// chunk is decoded (the split kernels; the fused ones take [`ACT_TILE`]).
const ACT_ROWS_PER_DECODE: usize = 8;
/// Largest relative shift of a Q4_1 `d` term in the `i64` chunk sum.
pub const LIM_Q4_1_D: u32 = 19;
/// Largest relative shift of a Q4_1 `m·s` term in the `i64` chunk sum.
pub const LIM_Q4_1_M: u32 = 35;
/// Largest relative shift of a Q8_0 term in the `i64` chunk sum.
pub const LIM_Q8_0_D: u32 = 16;
/// Largest relative shift of a Q5_0 term in the `i64` chunk sum.
pub const LIM_Q5_0_D: u32 = 19;

/// Which implementation computes the cells (all give the same bits; the
/// module docs' table says which exist per format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelPath {
    /// [`dot_row`] per cell (the reference).
    Reference,
    /// The blocked kernel in portable Rust.
    Portable,
    /// The blocked kernel with the best SIMD the CPU has (falls back to
    /// `Portable` where there is none).
    Auto,
    /// The blocked kernel's AVX2 version even where a wider one exists
    /// (falls back to `Portable` without AVX2), so tests cover both.
    Avx2,
}

/// What one [`rows_kernel_with`] call ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowsRun {
    /// Weight rows computed by the blocked kernel (whole groups of
    /// [`ROW_GROUP`]) or, for Q4_K / Q5_K / Q6_K, by the [`kquant`] row kernel
    /// (every row); the others went through [`dot_row`] per cell.
    pub blocked_rows: usize,
    /// The fast kernel's build: [`Level::Portable`] for the portable
    /// split kernels and row kernels, [`Level::Avx2`] or
    /// [`Level::Avx512Vnni`] for the fused SIMD ones, [`Level::Avx2`] or
    /// [`Level::Avx512`] for the row kernels' `multiversion!` builds,
    /// [`Level::Avx512Vnni`] when the Q4_K / Q6_K VNNI tile did a tile
    /// (`Portable` too when no row was done by a fast kernel).
    pub build: Level,
    /// Of `blocked_rows`, the Q4_K / Q6_K weight rows done by the x86 tile
    /// kernel, [`kquant::TILE`] at a time (several input rows, every input
    /// row well-formed), or the Q4_1 / Q5_0 / Q8_0 rows done by the VNNI build's
    /// wide kernel, [`WIDE_GROUPS`]·[`ROW_GROUP`] at a time (at least
    /// [`WIDE_MIN_ROWS`] input rows); 0 elsewhere.
    pub tiled_rows: usize,
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
    fn decode(&mut self, rows: &[&[u8]; ROW_GROUP], bs: usize, b0: usize, nb: usize, has_m: bool) {
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

/// Portable Q4_1 chunk kernel.
fn chunk_q4_1(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WeightChunkScales,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    let mut ad = [0i64; ROW_GROUP];
    let mut am = [0i64; ROW_GROUP];
    for (r, row) in rows.iter().enumerate() {
        let blocks = row.chunks_exact(20).skip(b0).take(nb);
        for (b, ((blk, y), s)) in blocks.zip(qs.chunks_exact(QK)).zip(sc).enumerate() {
            let mut q = [0u8; 16];
            q.copy_from_slice(&blk[4..20]);
            let sumi = nib_dot(&q, y);
            let t = sumi as i64 * (w.d_mant[b][r] * s.dm) as i64;
            ad[r] += t << (w.d_rel[b][r] + s.drel);
            am[r] += ((w.m_mant[b][r] * s.sm) as i64) << (w.m_rel[b][r] + s.srel);
        }
    }
    (ad, am)
}

/// The portable chunk kernel of a format with one scale per block (Q8_0,
/// Q5_0): per row and block, the block's integer sum `sumi(block bytes,
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

/// One chunk of one cell summed exactly in the cell's `i128` (the fallback
/// when the chunk's spreads are too wide for the `i64` sums).
fn chunk_in_i128(
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
        } else {
            let mut q = [0i8; 32];
            for (o, &v) in q.iter_mut().zip(&blk[2..34]) {
                *o = v as i8;
            }
            acc.add_shifted(i8_dot(&q, y) as i64 * (dm * s.dm) as i64, dsh + s.dsh);
        }
    }
}

/// What a fused chunk kernel returns for one row group and one input row.
#[derive(Clone, Copy)]
pub(crate) struct ChunkSums {
    /// False when a relative shift fell outside the `i64`-exact range; the
    /// caller then sums the chunk in `i128` ([`chunk_in_i128`]).
    pub fits_i64: bool,
    /// Σ d terms per row, in units of `2^d_base[r]` (×2^-48).
    pub d_sum: [i64; ROW_GROUP],
    /// Base shift of `d_sum` per row (weight base + activation chunk base).
    pub d_base: [u32; ROW_GROUP],
    /// Σ m·s terms per row (Q4_1), in units of `2^m_base[r]`.
    pub m_sum: [i64; ROW_GROUP],
    /// Base shift of `m_sum`.
    pub m_base: [u32; ROW_GROUP],
    /// A weight scale of the chunk is ±∞/NaN (valid even when `!fits_i64`).
    pub nonfinite: [bool; ROW_GROUP],
}

impl ChunkSums {
    /// Zero sums that fit: adding them changes no cell.
    pub const ZERO: ChunkSums = ChunkSums {
        fits_i64: true,
        ..ChunkSums::NOT_COMPUTED
    };

    /// "Not computed": the caller sums the chunk in `i128` instead.
    pub const NOT_COMPUTED: ChunkSums = ChunkSums {
        fits_i64: false,
        d_sum: [0; ROW_GROUP],
        d_base: [0; ROW_GROUP],
        m_sum: [0; ROW_GROUP],
        m_base: [0; ROW_GROUP],
        nonfinite: [false; ROW_GROUP],
    };

    /// Adds row `r`'s sums to `cell` if they fit `i64` (returns whether
    /// they did; else the caller sums the chunk in `i128`), and its
    /// non-finite flag (with the input row's, `act_bad`) either way.
    #[inline(always)]
    fn add_to(&self, r: usize, has_m: bool, act_bad: bool, cell: &mut ExactAcc) -> bool {
        if self.fits_i64 {
            cell.add_shifted(self.d_sum[r], self.d_base[r]);
            if has_m {
                cell.add_shifted(self.m_sum[r], self.m_base[r]);
            }
        }
        cell.nonfinite |= self.nonfinite[r] || act_bad;
        self.fits_i64
    }
}

/// Input rows a multi-row fused kernel takes per pass over a weight chunk.
pub(crate) const ACT_TILE: usize = 8;

/// Row groups a wide fused kernel (the AVX-512 VNNI build's, for Q4_1,
/// Q5_0 and Q8_0) takes at once: sixteen weight rows, one per 32-bit lane.
pub const WIDE_GROUPS: usize = 4;

/// Input rows a wide kernel takes per pass over a weight chunk.
pub(crate) const WIDE_TILE: usize = 32;

/// Fewest input rows in a tile for which the drivers run a wide kernel
/// (fewer: the group kernel per group, whose weight decoding costs less
/// where it serves few rows).
pub const WIDE_MIN_ROWS: usize = 12;

/// One chunk of up to `T` (by default [`ACT_TILE`]) input rows: quantized
/// values, block scales and chunk ranges of rows `0..n`.
pub(crate) struct ActTile<'x, const T: usize = ACT_TILE> {
    #[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
    pub n: usize,
    pub qs: [&'x [i8]; T],
    pub sc: [&'x [ActScale]; T],
    pub ch: [ChunkScale; T],
}

/// A pair of fused chunk kernels (the weight scales decoded on the fly
/// against guessed bases, each input row told whether every shift stayed
/// in range): one input row, and up to [`ACT_TILE`] rows per pass over a
/// weight chunk. `group` holds the four weight rows back to back (`rb`
/// bytes each). The drivers below are generic over it so that a SIMD build
/// of them inlines the kernels and the cell rounding into one loop.
pub(crate) trait FusedChunkKernel: Copy {
    /// The chunk sums for one input row.
    #[allow(clippy::too_many_arguments)]
    fn one_input(
        self,
        group: &[u8],
        rb: usize,
        b0: usize,
        nb: usize,
        qs: &[i8],
        sc: &[ActScale],
        ch: &ChunkScale,
    ) -> ChunkSums;
    /// The chunk sums for each of the tile's input rows.
    fn tile(
        self,
        group: &[u8],
        rb: usize,
        b0: usize,
        nb: usize,
        t: &ActTile<'_>,
    ) -> [ChunkSums; ACT_TILE];
    /// Whether [`Self::tile_wide`] computes anything.
    const HAS_WIDE: bool = false;
    /// [`Self::tile`] for [`WIDE_GROUPS`] groups back to back in `rows`,
    /// into `out`; where the chunk is the rows' only one (`whole`), an input
    /// row's cells may come back rounded instead ([`WideTileOut`]). Sets
    /// the entries of the tile's input rows and no others. By default
    /// nothing computed (the drivers call it only where [`Self::HAS_WIDE`]).
    fn tile_wide(
        self,
        rows: &[u8],
        rb: usize,
        (b0, nb, whole): (usize, usize, bool),
        t: &ActTile<'_, WIDE_TILE>,
        out: &mut WideTileOut<WIDE_TILE>,
    ) {
        let _ = (self, rows, rb, b0, nb, whole);
        out.set_not_computed(t.n);
    }
}

/// What a wide kernel returns for the input rows of a tile: per row either
/// its [`WIDE_ROWS`] cells already rounded (`finished`, the values in
/// `rounded`: the chunk was the rows' only one and every cell's sum fit and
/// rounded to a normal binary32 — the value [`ExactAcc::finish`] gives the
/// cell), or its
/// [`ChunkSums`] per group (`sums[group][input row]`, not computed for a
/// finished row).
pub(crate) struct WideTileOut<const N: usize> {
    pub sums: [[ChunkSums; N]; WIDE_GROUPS],
    pub finished: [bool; N],
    pub rounded: [[F32; WIDE_ROWS]; N],
}

impl<const N: usize> WideTileOut<N> {
    /// Nothing computed: every chunk summed in `i128` by the caller.
    pub const NOT_COMPUTED: Self = WideTileOut {
        sums: [[ChunkSums::NOT_COMPUTED; N]; WIDE_GROUPS],
        finished: [false; N],
        rounded: [[F32::ZERO; WIDE_ROWS]; N],
    };

    /// Marks the first `n` input rows (at most `N`) not computed.
    #[inline(always)]
    pub fn set_not_computed(&mut self, n: usize) {
        for j in 0..n.min(N) {
            self.finished[j] = false;
            for group in self.sums.iter_mut() {
                group[j] = ChunkSums::NOT_COMPUTED;
            }
        }
    }
}

/// The wide driver's working storage for one tile of input rows, set up
/// once per matrix and reused by every wide group of it ([`group_wide`]):
/// zeroing it per group cost a fifth as much as the kernel that fills it.
/// Column `j` of `cells` holds the tile's sums only where `live[j]`; a
/// column is zeroed when first added to. Where `done[j]`, the kernel
/// rounded row `j`'s cells itself (into `out.rounded[j]`, read in place:
/// that happens only where the chunk is the rows' only one, so no later
/// call overwrites them).
pub(crate) struct WideScratch<'a> {
    /// The current tile of input rows.
    tile: ActTile<'a, WIDE_TILE>,
    /// The kernel's results for the current tile.
    out: WideTileOut<WIDE_TILE>,
    /// The group's cells, `[weight row][input row]`.
    cells: [[ExactAcc; WIDE_TILE]; WIDE_ROWS],
    /// The columns of `cells` that hold the current input rows' sums.
    live: [bool; WIDE_TILE],
    /// The input rows whose cells the kernel rounded.
    done: [bool; WIDE_TILE],
}

impl WideScratch<'_> {
    /// Storage holding nothing yet.
    const EMPTY: Self = WideScratch {
        tile: ActTile::EMPTY,
        out: WideTileOut::NOT_COMPUTED,
        cells: [[ExactAcc {
            sum: 0,
            nonfinite: false,
        }; WIDE_TILE]; WIDE_ROWS],
        live: [false; WIDE_TILE],
        done: [false; WIDE_TILE],
    };

    /// Forgets the previous input rows: no column live, none done.
    #[inline(always)]
    fn start_pass(&mut self) {
        self.live = [false; WIDE_TILE];
        self.done = [false; WIDE_TILE];
    }

    /// Zeroes column `j` of the cells if it is not yet live.
    #[inline(always)]
    fn make_live(&mut self, j: usize) {
        if !self.live[j] {
            self.live[j] = true;
            for row in self.cells.iter_mut() {
                row[j] = ExactAcc::default();
            }
        }
    }

    /// Every weight row's values for input rows `0..n` into `out` (row `r`
    /// at `r·m..`, `n ≤ m`): where the kernel rounded every one of those
    /// input rows, copied from its output in one branch-free loop, else
    /// each by [`Self::value`]. Out of line: inlined into the instruction
    /// set's driver, it changed the code generated for that driver's
    /// one-input path (the output head's) and cost Gemma 3's prefill 11 %.
    #[inline(never)]
    fn write_values(&self, n: usize, out: &mut [F32], m: usize) {
        let rows = out.chunks_mut(m).take(WIDE_ROWS).enumerate();
        if self.done[..n].iter().all(|&d| d) {
            for (r, out_row) in rows {
                for (o, rounded) in out_row.iter_mut().zip(&self.out.rounded[..n]) {
                    *o = rounded[r];
                }
            }
        } else {
            for (r, out_row) in rows {
                for (j, o) in out_row.iter_mut().take(n).enumerate() {
                    *o = self.value(r, j);
                }
            }
        }
    }

    /// Weight row `r`'s value for input row `j`: its rounded cell, or its
    /// cell's sum rounded (zero if nothing was added).
    #[inline(always)]
    fn value(&self, r: usize, j: usize) -> F32 {
        match (self.done[j], self.live[j]) {
            (true, _) => self.out.rounded[j][r],
            (false, true) => self.cells[r][j].finish(),
            (false, false) => ExactAcc::default().finish(),
        }
    }
}

/// No fused kernel (the portable build).
#[derive(Clone, Copy)]
pub(crate) enum NoFusedKernel {}

impl FusedChunkKernel for NoFusedKernel {
    fn one_input(
        self,
        _: &[u8],
        _: usize,
        _: usize,
        _: usize,
        _: &[i8],
        _: &[ActScale],
        _: &ChunkScale,
    ) -> ChunkSums {
        match self {}
    }
    fn tile(
        self,
        _: &[u8],
        _: usize,
        _: usize,
        _: usize,
        _: &ActTile<'_>,
    ) -> [ChunkSums; ACT_TILE] {
        match self {}
    }
}

/// Every whole group of weight rows `r0..` against the input rows of `x`,
/// into `out` (rows, M); returns the rows done and, of those, the rows a
/// wide kernel did ([`blocked_rows`]). A build of [`blocked_rows`]
/// (or, for one input row, [`groups_single_input`]) with fused kernels
/// built in.
pub(crate) type BlockedRowsFn =
    fn(w: &QMatrix<'_>, r0: usize, x: &QActs<'_>, out: &mut [F32]) -> (usize, usize);

/// How a group's chunks are computed.
#[derive(Clone, Copy)]
pub(crate) enum GroupKernel<K> {
    /// Scales decoded once per chunk ([`WeightChunkScales::decode`]), then
    /// the chunk kernel per input row.
    Split(ChunkFn),
    /// A fused kernel (scales decoded inside it).
    #[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
    Fused(K),
}

/// The portable split kernel for `ty`, if the blocked kernel handles it.
fn split_kernel(ty: GgmlType) -> Option<ChunkFn> {
    match ty {
        GgmlType::Q4_1 => Some(chunk_q4_1),
        GgmlType::Q8_0 => Some(chunk_q8_0),
        GgmlType::Q5_0 => Some(chunk_q5_0),
        _ => None,
    }
}

/// Cells of weight rows `r0..` into `out` (rows, M), best available path.
pub fn rows_kernel(w: &QMatrix<'_>, r0: usize, x: &QActs<'_>, out: &mut [F32]) {
    rows_kernel_with(w, r0, x, out, KernelPath::Auto);
}

/// [`rows_kernel`] on a chosen [`KernelPath`] (tests and benches compare
/// them); reports what ran.
pub fn rows_kernel_with(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    path: KernelPath,
) -> RowsRun {
    let m = x.rows().max(1);
    let (blocked_rows, build, tiled_rows) = match dispatch::plan(w.ty, path, crate::simd::level()) {
        Plan::Reference => (0, Level::Portable, 0),
        Plan::KQuant(kernels) => kquant_rows(w, r0, x, out, kernels),
        Plan::Fused(f, level) => {
            let (done, wide) = f(w, r0, x, out);
            (done, level, wide)
        }
        Plan::Split(f) => {
            let k = GroupKernel::<NoFusedKernel>::Split(f);
            (blocked_rows(w, r0, x, out, k).0, Level::Portable, 0)
        }
    };
    for (i, cells) in out.chunks_mut(m).enumerate().skip(blocked_rows) {
        let row = w.row(r0 + i);
        for (j, c) in cells.iter_mut().enumerate() {
            *c = match (row, x.row(j)) {
                (Ok(data), Ok(a)) => dot_row(w.ty, data, &a, w.n_in).unwrap_or(F32::NAN),
                _ => F32::NAN,
            };
        }
    }
    let build = if blocked_rows == 0 {
        Level::Portable
    } else {
        build
    };
    RowsRun {
        blocked_rows,
        build,
        tiled_rows,
    }
}

/// Every row of a Q4_K / Q5_K / Q6_K matrix through the [`kquant`] row
/// kernel `row` (cells whose rows do not have the expected lengths through
/// [`dot_row`], which reports them), whole tiles of [`kquant::TILE`] weight
/// rows first through the tile kernel where there is one and several input
/// rows ([`kquant_tiles`]); returns `(rows done, build, rows done by the
/// tile kernel)`. The build is the row kernel's, or [`Level::Avx512Vnni`]
/// when the VNNI tile did a tile.
fn kquant_rows(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    KQuantKernels {
        row: f,
        build,
        tile,
    }: KQuantKernels,
) -> (usize, Level, usize) {
    let m = x.rows().max(1);
    let mut build = build;
    // One input row (decode) measured faster per row kernel.
    let (done, tiled) = match tile {
        Some(t) if m > 1 => {
            let (done, tiled, ran) = kquant_tiles(w, r0, x, out, t);
            if ran && matches!(t, KTile::Wide(_)) {
                build = Level::Avx512Vnni;
            }
            (done, tiled)
        }
        _ => (0, 0),
    };
    for (i, cells) in out.chunks_mut(m).enumerate().skip(done) {
        let row = w.row(r0 + i);
        for (j, c) in cells.iter_mut().enumerate() {
            *c = match (row, x.row(j)) {
                (Ok(data), Ok(a)) if kquant_act_fits(w, &a) => f(data, &a).finish(),
                (Ok(data), Ok(a)) => dot_row(w.ty, data, &a, w.n_in).unwrap_or(F32::NAN),
                _ => F32::NAN,
            };
        }
    }
    (out.len() / m, build, tiled)
}

/// Whether the K-quant kernels take input row `a` for `w`.
fn kquant_act_fits(w: &QMatrix<'_>, a: &ActRow<'_>) -> bool {
    a.qs.len() == w.n_in && a.sc.len() == w.n_in / QK
}

/// Whole tiles of [`kquant::TILE`] weight rows `r0..` (while every row of
/// the tile is present) through the tile kernel `t`, into `out` (rows, M);
/// returns `(rows done, rows tiled, whether `t` computed a cell)`: a tile
/// with an input row that is not well-formed sends that row's cells
/// through [`dot_row`] and counts as not tiled. A wide kernel takes
/// [`kquant::WIDE_GROUPS`] tiles at a time while they are all present.
fn kquant_tiles(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    t: KTile,
) -> (usize, usize, bool) {
    const G: usize = kquant::WIDE_GROUPS;
    let m = x.rows().max(1);
    let n_rows = out.len() / m;
    let (mut done, mut tiled, mut ran) = (0, 0, false);
    // The tile kernels' cells, reused by every call (each call sets those
    // it reads back).
    let mut accs = [[[ExactAcc::default(); kquant::WIDE_ACT_TILE]; kquant::TILE]; G];
    while done + kquant::TILE <= n_rows {
        // Four tiles at a time on a wide kernel while they are all present,
        // else one.
        let group = match t {
            KTile::Wide(_) if done + G * kquant::TILE <= n_rows => {
                kquant_tile_rows::<G>(w, r0 + done)
            }
            _ => None,
        };
        let rows = match group {
            Some(rows) => TileRows::Group(rows),
            None => match kquant_tile_rows::<1>(w, r0 + done) {
                Some(rows) => TileRows::One(rows),
                None => break,
            },
        };
        let step = match rows {
            TileRows::Group(_) => G * kquant::TILE,
            TileRows::One(_) => kquant::TILE,
        };
        let cells = &mut out[done * m..(done + step) * m];
        let mut all_fit = true;
        let per_tile = balanced_tile(m, kquant::WIDE_ACT_TILE);
        for j0 in (0..m).step_by(per_tile) {
            let cols = j0..(j0 + per_tile).min(m);
            let fit = match rows {
                TileRows::Group(rows) => {
                    let out = (&mut *cells, &mut accs);
                    kquant_act_tile(w, r0 + done, x, cols, rows, t, out)
                }
                TileRows::One(rows) => {
                    let out = (&mut *cells, core::array::from_mut(&mut accs[0]));
                    kquant_act_tile(w, r0 + done, x, cols, rows, t, out)
                }
            };
            all_fit &= fit.all;
            ran |= fit.any;
        }
        done += step;
        if all_fit {
            tiled += step;
        }
    }
    (done, tiled, ran)
}

/// The weight rows of one [`kquant_tiles`] step: [`kquant::WIDE_GROUPS`]
/// tiles (a wide kernel) or one.
#[derive(Clone, Copy)]
enum TileRows<'w> {
    Group([[&'w [u8]; kquant::TILE]; kquant::WIDE_GROUPS]),
    One([[&'w [u8]; kquant::TILE]; 1]),
}

/// Weight rows `rw..rw + G·TILE` of `w` as `G` tiles, if every one is
/// present.
fn kquant_tile_rows<'w, const G: usize>(
    w: &QMatrix<'w>,
    rw: usize,
) -> Option<[[&'w [u8]; kquant::TILE]; G]> {
    let mut rows = [[&[][..]; kquant::TILE]; G];
    for (g, tile) in rows.iter_mut().enumerate() {
        for (k, row) in tile.iter_mut().enumerate() {
            *row = w.row(rw + g * kquant::TILE + k).ok()?;
        }
    }
    Some(rows)
}

/// Which input rows of a [`kquant_act_tile`] call the tile kernel took.
struct TileFit {
    /// Every one (none went through [`dot_row`]).
    all: bool,
    /// At least one.
    any: bool,
}

/// The cells of input row `j` (of `m`) against weight rows `rw..rw + TILE`
/// of `w` through [`dot_row`] (an input row the K-quant kernels do not
/// take: `dot_row` reports it, the cell is NaN), into the tile's `cells`.
fn kquant_column_by_dot_row(
    w: &QMatrix<'_>,
    rw: usize,
    x: &QActs<'_>,
    j: usize,
    m: usize,
    cells: &mut [F32],
) {
    for k in 0..kquant::TILE {
        cells[k * m + j] = match (w.row(rw + k), x.row(j)) {
            (Ok(data), Ok(a)) => dot_row(w.ty, data, &a, w.n_in).unwrap_or(F32::NAN),
            _ => F32::NAN,
        };
    }
}

/// Input rows `cols` (at most [`kquant::WIDE_ACT_TILE`]) against the `G`
/// tiles of weight rows `rows` (`rw..rw + G·TILE` of `w`; `G` is 1 or
/// [`kquant::WIDE_GROUPS`], and `t` is a wide kernel if `G` is not 1) into
/// the cells `cells` (G·TILE, M): the well-formed input rows through `t`
/// (its sums in `accs`, whose earlier contents are not read), any other by
/// [`kquant_column_by_dot_row`].
fn kquant_act_tile<const G: usize>(
    w: &QMatrix<'_>,
    rw: usize,
    x: &QActs<'_>,
    cols: core::ops::Range<usize>,
    rows: [[&[u8]; kquant::TILE]; G],
    t: KTile,
    (cells, accs): (&mut [F32], &mut [kquant::TileCells; G]),
) -> TileFit {
    const W: usize = kquant::WIDE_ACT_TILE;
    let m = x.rows().max(1);
    let mut acts = [ActRow {
        qs: &[],
        sc: &[],
        ch: &[],
        flags: 0,
        h: &[],
        f: &[],
    }; W];
    let mut at = [0usize; W];
    let (mut n, mut all) = (0, true);
    for j in cols {
        match x.row(j) {
            Ok(a) if kquant_act_fits(w, &a) && n < W => {
                (acts[n], at[n]) = (a, j);
                n += 1;
            }
            _ => {
                all = false;
                for g in 0..G {
                    let rg = g * kquant::TILE;
                    kquant_column_by_dot_row(w, rw + rg, x, j, m, &mut cells[rg * m..]);
                }
            }
        }
    }
    let acts = &acts[..n];
    match t {
        _ if n == 0 => {}
        KTile::One(t) => {
            for (tile, acc) in rows.iter().zip(accs.iter_mut()) {
                for (j, a) in acts.iter().enumerate() {
                    for (k, c) in t(*tile, a).into_iter().enumerate() {
                        acc[k][j] = c;
                    }
                }
            }
        }
        KTile::Wide((one, wide)) => {
            let (r, c) = (rows.as_slice(), accs.as_mut_slice());
            if let (Ok(r), Ok(c)) = (r.try_into(), <&mut [_; 1]>::try_from(&mut *c)) {
                one(r, acts, c);
            } else if let (Ok(r), Ok(c)) = (r.try_into(), c.try_into()) {
                wide(r, acts, c);
            }
        }
    }
    if n > 0 {
        for (g, tile) in accs.iter().enumerate() {
            for (k, row) in tile.iter().enumerate() {
                for (acc, &j) in row.iter().zip(&at[..n]) {
                    cells[(g * kquant::TILE + k) * m + j] = acc.finish();
                }
            }
        }
    }
    TileFit { all, any: n > 0 }
}

/// What the blocked kernel needs to know of a weight format.
#[derive(Clone, Copy)]
struct BlockedFormat {
    /// Bytes per block.
    block_bytes: usize,
    /// Q4_1: a min term per block.
    has_m: bool,
    /// [`LIM_Q4_1_D`], [`LIM_Q5_0_D`] or [`LIM_Q8_0_D`].
    lim_d: u32,
    /// [`LIM_Q4_1_M`] (no limit for Q8_0).
    lim_m: u32,
    /// The input row's flags that make a cell NaN.
    act_flags: u8,
}

impl BlockedFormat {
    /// Q4_1, Q5_0 or Q8_0; `None` for the formats the blocked kernel leaves to
    /// [`dot_row`].
    #[inline(always)]
    fn of(ty: GgmlType) -> Option<BlockedFormat> {
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
            _ => None,
        }
    }
}

/// Every whole group of weight rows `r0..` against the input rows of `x`
/// with `kernel`, into `out` (rows, M); returns the rows done (the caller
/// computes the rest per cell) and, of those, the rows of the wide groups
/// (four groups at a time, where the kernel has a wide build and there are
/// several input rows) whose wide kernel ran on a tile (it does on the
/// first tile of every pass when `M ≥` [`WIDE_MIN_ROWS`]: the same
/// groups in every pass). Input rows are fetched and checked once per
/// [`ACT_ROWS_PER_PASS`] of them, not once per group; every group runs on
/// each batch of rows.
#[inline(always)]
pub(crate) fn blocked_rows<K: FusedChunkKernel>(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    kernel: GroupKernel<K>,
) -> (usize, usize) {
    let m = x.rows().max(1);
    let n_rows = out.len() / m;
    let mut wide_rows = 0;
    let mut wc = WeightChunkScales::ZERO;
    let mut buf: [Option<ActRow<'_>>; ACT_ROWS_PER_PASS] = [None; ACT_ROWS_PER_PASS];
    let mut groups = n_rows / ROW_GROUP;
    let mut scratch: Option<WideScratch<'_>> = None;
    let per_pass = balanced_tile(m, ACT_ROWS_PER_PASS);
    for s0 in (0..m).step_by(per_pass) {
        let sl = per_pass.min(m - s0);
        for (j, a) in buf.iter_mut().enumerate().take(sl) {
            *a = x.row(s0 + j).ok().filter(|r| act_row_fits(w, r));
        }
        if buf[..sl].iter().any(Option::is_none) {
            return (0, 0);
        }
        let mut g = 0;
        while g < groups {
            let (rg, acts) = (r0 + g * ROW_GROUP, &buf[..sl]);
            let wide = match kernel {
                GroupKernel::Fused(k)
                    if K::HAS_WIDE && sl >= WIDE_MIN_ROWS && g + WIDE_GROUPS <= groups =>
                {
                    Some(k)
                }
                _ => None,
            };
            let step = if wide.is_some() { WIDE_GROUPS } else { 1 };
            let cells = &mut out[g * ROW_GROUP * m..(g + step) * ROW_GROUP * m];
            let ok = match wide {
                Some(k) => {
                    let scratch = scratch.get_or_insert(WideScratch::EMPTY);
                    group_wide(w, rg, acts, s0, m, cells, k, &mut wc, scratch).map(|ran| {
                        if ran && s0 == 0 {
                            wide_rows += WIDE_ROWS;
                        }
                    })
                }
                None if m == 1 => group::<1, K>(w, rg, acts, s0, m, cells, kernel, &mut wc),
                None => group::<ACT_ROWS_PER_DECODE, K>(w, rg, acts, s0, m, cells, kernel, &mut wc),
            };
            if ok.is_none() {
                groups = g;
                break;
            }
            g += step;
        }
    }
    (groups * ROW_GROUP, wide_rows.min(groups * ROW_GROUP))
}

/// Every whole group of weight rows `r0..` against the single input row of
/// `x` (a matrix-vector product), with a fused kernel, into `out`; returns
/// the rows done (`None`, with nothing written, if the input is not what
/// the kernel expects).
#[inline(always)]
#[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
pub(crate) fn groups_single_input<K: FusedChunkKernel>(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    k: K,
) -> Option<usize> {
    let a = x.row(0).ok()?;
    let nb = w.n_in / QK;
    let fmt = BlockedFormat::of(w.ty)?;
    if !act_row_fits(w, &a) {
        return None;
    }
    let act_bad = a.flags & fmt.act_flags != 0;
    let rb = w.row_bytes();
    let n_groups = out.len() / ROW_GROUP;
    let start = r0.checked_mul(rb)?;
    let data = w.data.get(start..start + n_groups * ROW_GROUP * rb)?;
    for (gi, (group_bytes, cells_out)) in data
        .chunks_exact(ROW_GROUP * rb)
        .zip(out.chunks_exact_mut(ROW_GROUP))
        .enumerate()
    {
        let mut cells = [ExactAcc::default(); ROW_GROUP];
        for (c, b0) in (0..nb).step_by(CHUNK_BLOCKS).enumerate() {
            let cn = CHUNK_BLOCKS.min(nb - b0);
            let (qs, sc) = (&a.qs[b0 * QK..(b0 + cn) * QK], &a.sc[b0..b0 + cn]);
            let res = k.one_input(group_bytes, rb, b0, cn, qs, sc, &a.ch[c]);
            for (r, cell) in cells.iter_mut().enumerate() {
                if !res.add_to(r, fmt.has_m, act_bad, cell) {
                    let row = w.row(r0 + gi * ROW_GROUP + r).ok()?;
                    chunk_in_i128(w.ty, row, b0, cn, qs, sc, cell);
                }
            }
        }
        for (o, c) in cells_out.iter_mut().zip(cells) {
            *o = c.finish();
        }
    }
    Some(n_groups * ROW_GROUP)
}

/// Input rows the blocked kernels take per pass over all weight groups.
const ACT_ROWS_PER_PASS: usize = 64;

/// The tile length that splits `n` input rows into as few tiles of at most
/// `max` rows as there can be, all of about the same length (37 rows in
/// tiles of 32: 19 and 18, not 32 and 5): a short last tile would leave a
/// wide kernel's weight decoding to serve few rows, or send them to the
/// slower group kernel. At least 1. Which rows share a tile changes no sum.
#[inline(always)]
fn balanced_tile(n: usize, max: usize) -> usize {
    let max = max.max(1);
    n.div_ceil(n.div_ceil(max).max(1)).clamp(1, max)
}

/// Whether the blocked kernels can take input row `a` for `w`.
#[inline(always)]
fn act_row_fits(w: &QMatrix<'_>, a: &ActRow<'_>) -> bool {
    let nb = w.n_in / QK;
    a.qs.len() == w.n_in && a.sc.len() == nb && a.ch.len() == nb.div_ceil(CHUNK_BLOCKS)
}

/// Blocks `b0..b0 + nb` of chunk `index` (of [`CHUNK_BLOCKS`] blocks).
#[derive(Clone, Copy)]
struct Chunk {
    index: usize,
    b0: usize,
    nb: usize,
}

impl Chunk {
    /// Input row `a`'s quantized values, block scales and chunk range for
    /// this chunk (`None` if `a` is shorter).
    #[inline(always)]
    fn of<'a>(&self, a: &ActRow<'a>) -> Option<(&'a [i8], &'a [ActScale], ChunkScale)> {
        let qs = a.qs.get(self.b0 * QK..(self.b0 + self.nb) * QK)?;
        let sc = a.sc.get(self.b0..self.b0 + self.nb)?;
        Some((qs, sc, *a.ch.get(self.index)?))
    }
}

/// One group of [`ROW_GROUP`] weight rows × the input rows `all` (columns
/// `col0..` of `m`, all checked by [`act_row_fits`]) into `out`
/// (ROW_GROUP, m), `MT` input rows at a time, chunk by chunk. `None`
/// (nothing written) if the weight rows are not what the kernel expects.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn group<const MT: usize, K: FusedChunkKernel>(
    w: &QMatrix<'_>,
    r0: usize,
    all: &[Option<ActRow<'_>>],
    col0: usize,
    m: usize,
    out: &mut [F32],
    kernel: GroupKernel<K>,
    wc: &mut WeightChunkScales,
) -> Option<()> {
    let rb = w.row_bytes();
    let group_bytes = w.data.get(r0 * rb..(r0 + ROW_GROUP) * rb)?;
    let rows: [&[u8]; ROW_GROUP] = [
        w.row(r0).ok()?,
        w.row(r0 + 1).ok()?,
        w.row(r0 + 2).ok()?,
        w.row(r0 + 3).ok()?,
    ];
    let nb = w.n_in / QK;
    let fmt = BlockedFormat::of(w.ty)?;
    if out.len() < ROW_GROUP * m || col0 + all.len() > m {
        return None;
    }
    let per_tile = balanced_tile(all.len(), MT);
    for m0 in (0..all.len()).step_by(per_tile) {
        let mt = per_tile.min(all.len() - m0);
        let acts = &all[m0..m0 + mt];
        let mut cells = [[ExactAcc::default(); MT]; ROW_GROUP];
        for (index, b0) in (0..nb).step_by(CHUNK_BLOCKS).enumerate() {
            let ch = Chunk {
                index,
                b0,
                nb: CHUNK_BLOCKS.min(nb - b0),
            };
            match kernel {
                GroupKernel::Split(f) => {
                    wc.decode(&rows, fmt.block_bytes, ch.b0, ch.nb, fmt.has_m);
                    chunk_split(w.ty, fmt, &rows, ch, acts, f, wc, &mut cells)?;
                }
                GroupKernel::Fused(k) => {
                    chunk_fused(w.ty, fmt, (group_bytes, rb), &rows, ch, acts, k, &mut cells)?;
                }
            }
        }
        for r in 0..ROW_GROUP {
            for j in 0..mt {
                out[r * m + col0 + m0 + j] = cells[r][j].finish();
            }
        }
    }
    Some(())
}

/// One chunk of a group with a split kernel: for each input row, the
/// chunk kernel `f` over the decoded scales `wc` if the spreads fit the
/// `i64` limits, else [`chunk_in_i128`]; added to the row's `cells`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn chunk_split<const MT: usize>(
    ty: GgmlType,
    fmt: BlockedFormat,
    rows: &[&[u8]; ROW_GROUP],
    ch: Chunk,
    acts: &[Option<ActRow<'_>>],
    f: ChunkFn,
    wc: &WeightChunkScales,
    cells: &mut [[ExactAcc; MT]; ROW_GROUP],
) -> Option<()> {
    for (j, a) in acts.iter().enumerate().take(MT) {
        let Some(a) = a else { continue };
        let (qs, sc, acs) = ch.of(a)?;
        let fits = (0..ROW_GROUP).all(|r| {
            wc.d_spread[r] + acs.dspread <= fmt.lim_d
                && (!fmt.has_m || wc.m_spread[r] + acs.sspread <= fmt.lim_m)
        });
        if fits {
            let (ad, am) = f(rows, ch.b0, ch.nb, wc, qs, sc);
            for r in 0..ROW_GROUP {
                let cell = &mut cells[r][j];
                cell.add_shifted(ad[r], wc.d_base[r] + acs.dbase);
                if fmt.has_m {
                    cell.add_shifted(am[r], wc.m_base[r] + acs.sbase);
                }
            }
        } else {
            for r in 0..ROW_GROUP {
                chunk_in_i128(ty, rows[r], ch.b0, ch.nb, qs, sc, &mut cells[r][j]);
            }
        }
        for (cr, &bad) in cells.iter_mut().zip(&wc.nonfinite) {
            cr[j].nonfinite |= bad || a.flags & fmt.act_flags != 0;
        }
    }
    Some(())
}

/// One chunk of a group with a fused kernel: the input rows `acts` in
/// tiles of [`ACT_TILE`] (one row: the single-row kernel), each row's sums
/// added to its `cells`, or the chunk summed by [`chunk_in_i128`] where
/// they do not fit `i64`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn chunk_fused<const MT: usize, K: FusedChunkKernel>(
    ty: GgmlType,
    fmt: BlockedFormat,
    (group_bytes, rb): (&[u8], usize),
    rows: &[&[u8]; ROW_GROUP],
    ch: Chunk,
    acts: &[Option<ActRow<'_>>],
    k: K,
    cells: &mut [[ExactAcc; MT]; ROW_GROUP],
) -> Option<()> {
    let mt = acts.len().min(MT);
    let mut j0 = 0;
    while j0 < mt {
        let n = ACT_TILE.min(mt - j0);
        let mut tile = ActTile::EMPTY;
        fill_act_tile(&mut tile, &acts[j0..j0 + n], ch)?;
        let results = match n {
            2.. => k.tile(group_bytes, rb, ch.b0, ch.nb, &tile),
            _ => {
                let mut one = [ChunkSums::NOT_COMPUTED; ACT_TILE];
                let (qs, sc, acs) = (tile.qs[0], tile.sc[0], &tile.ch[0]);
                one[0] = k.one_input(group_bytes, rb, ch.b0, ch.nb, qs, sc, acs);
                one
            }
        };
        let group = GroupSums {
            rows,
            results: &results[..n],
        };
        group.add_to_cells(
            ty,
            fmt,
            ch,
            &acts[j0..j0 + n],
            (&tile.qs, &tile.sc),
            j0,
            cells,
        );
        j0 += n;
    }
    Some(())
}

/// The tile of input rows `acts` (at most `T`) for chunk `ch`, written
/// over `tile` in place (a tile is kilobytes: returned by value it was
/// copied twice per kernel call). `None` if a row is missing or shorter.
#[inline(always)]
fn fill_act_tile<'a, const T: usize>(
    tile: &mut ActTile<'a, T>,
    acts: &[Option<ActRow<'a>>],
    ch: Chunk,
) -> Option<()> {
    tile.n = acts.len().min(T);
    for (t, a) in acts.iter().take(T).enumerate() {
        (tile.qs[t], tile.sc[t], tile.ch[t]) = ch.of(a.as_ref()?)?;
    }
    Some(())
}

impl<const T: usize> ActTile<'_, T> {
    /// A tile holding no input row.
    const EMPTY: Self = ActTile {
        n: 0,
        qs: [&[]; T],
        sc: [&[]; T],
        ch: [ChunkScale {
            dbase: 0,
            dspread: 0,
            sbase: 0,
            sspread: 0,
        }; T],
    };
}

/// Weight rows of a wide group.
pub(crate) const WIDE_ROWS: usize = WIDE_GROUPS * ROW_GROUP;

/// [`group`] for [`WIDE_GROUPS`] consecutive groups at once with a fused
/// kernel that has a wide build: the input rows in tiles of balanced
/// lengths ([`balanced_tile`]), each of at least [`WIDE_MIN_ROWS`]
/// input rows through [`FusedChunkKernel::tile_wide`], a smaller one
/// through [`group`] per group. `out` is
/// ([`WIDE_GROUPS`]·[`ROW_GROUP`], m). Returns whether the wide kernel ran
/// (`None`, with nothing written, as for [`group`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn group_wide<'a, K: FusedChunkKernel>(
    w: &QMatrix<'_>,
    r0: usize,
    all: &[Option<ActRow<'a>>],
    col0: usize,
    m: usize,
    out: &mut [F32],
    k: K,
    wc: &mut WeightChunkScales,
    scratch: &mut WideScratch<'a>,
) -> Option<bool> {
    let rb = w.row_bytes();
    let bytes = w.data.get(r0 * rb..(r0 + WIDE_ROWS) * rb)?;
    let mut ran = false;
    let mut rows: [&[u8]; WIDE_ROWS] = [&[]; WIDE_ROWS];
    for (i, row) in rows.iter_mut().enumerate() {
        *row = w.row(r0 + i).ok()?;
    }
    let nb = w.n_in / QK;
    let fmt = BlockedFormat::of(w.ty)?;
    if out.len() < WIDE_ROWS * m || col0 + all.len() > m {
        return None;
    }
    let per_tile = balanced_tile(all.len(), WIDE_TILE);
    for m0 in (0..all.len()).step_by(per_tile) {
        let mt = per_tile.min(all.len() - m0);
        let acts = &all[m0..m0 + mt];
        if mt < WIDE_MIN_ROWS {
            for g in 0..WIDE_GROUPS {
                let (rg, o) = (r0 + g * ROW_GROUP, g * ROW_GROUP * m);
                let cells = out.get_mut(o..o + ROW_GROUP * m)?;
                let kernel = GroupKernel::Fused(k);
                group::<ACT_ROWS_PER_DECODE, K>(w, rg, acts, col0 + m0, m, cells, kernel, wc)?;
            }
            continue;
        }
        scratch.start_pass();
        for (index, b0) in (0..nb).step_by(CHUNK_BLOCKS).enumerate() {
            let ch = Chunk {
                index,
                b0,
                nb: CHUNK_BLOCKS.min(nb - b0),
            };
            chunk_wide(w.ty, fmt, (bytes, rb), &rows, (ch, nb), acts, k, scratch)?;
            ran = true;
        }
        scratch.write_values(mt, &mut out[col0 + m0..], m);
    }
    Some(ran)
}

/// One chunk of a wide group: the input rows `acts` (at most
/// [`WIDE_TILE`]) as one tile through the wide kernel, each row's sums
/// added to its cells in `scratch`, or the chunk summed by
/// [`chunk_in_i128`] where they do not fit `i64`. Where the chunk is the
/// rows' only one (`nb` blocks in all), an input row (of finite scales)
/// whose cells the kernel rounded is marked done instead.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn chunk_wide<'a, K: FusedChunkKernel>(
    ty: GgmlType,
    fmt: BlockedFormat,
    (bytes, rb): (&[u8], usize),
    rows: &[&[u8]; WIDE_ROWS],
    (ch, nb): (Chunk, usize),
    acts: &[Option<ActRow<'a>>],
    k: K,
    scratch: &mut WideScratch<'a>,
) -> Option<()> {
    let n = acts.len().min(WIDE_TILE);
    let acts = &acts[..n];
    let whole = ch.b0 == 0 && ch.nb == nb;
    fill_act_tile(&mut scratch.tile, acts, ch)?;
    k.tile_wide(
        bytes,
        rb,
        (ch.b0, ch.nb, whole),
        &scratch.tile,
        &mut scratch.out,
    );
    let mut pending = n;
    for (t, a) in acts.iter().enumerate() {
        let finite = a.is_some_and(|a| a.flags & fmt.act_flags == 0);
        scratch.done[t] = scratch.out.finished[t] && finite;
        if scratch.done[t] {
            pending -= 1;
        } else {
            scratch.make_live(t);
        }
    }
    if pending == 0 {
        return Some(());
    }
    for (t, &done) in scratch.done[..n].iter().enumerate() {
        // A done row has nothing to add to its cells (not live: unread). A
        // row the kernel rounded but whose scales are not finite has its
        // sums unset (they may be an earlier tile's): not computed, as the
        // kernel returns them.
        let sums = match (done, scratch.out.finished[t]) {
            (true, _) => ChunkSums::ZERO,
            (false, true) => ChunkSums::NOT_COMPUTED,
            (false, false) => continue,
        };
        for group in scratch.out.sums.iter_mut() {
            group[t] = sums;
        }
    }
    for (g, group_results) in scratch.out.sums.iter().enumerate() {
        let at = g * ROW_GROUP;
        let group = GroupSums {
            rows: rows[at..at + ROW_GROUP].try_into().ok()?,
            results: &group_results[..n],
        };
        let group_cells = &mut scratch.cells[at..at + ROW_GROUP];
        let tile = (&scratch.tile.qs[..], &scratch.tile.sc[..]);
        group.add_to_cells(ty, fmt, ch, acts, tile, 0, group_cells);
    }
    Some(())
}

/// A fused kernel's chunk sums for one row group: its weight rows and,
/// per input row of a tile, the [`ChunkSums`].
struct GroupSums<'r, 'w> {
    rows: &'r [&'w [u8]; ROW_GROUP],
    results: &'r [ChunkSums],
}

impl GroupSums<'_, '_> {
    /// Adds each input row's sums (`acts`, columns `j0..` of the group's
    /// `cells`) to its cells, or, where they do not fit `i64`, sums the chunk
    /// in `i128` from the tile's values and scales `(qs, sc)`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn add_to_cells<const MT: usize>(
        &self,
        ty: GgmlType,
        fmt: BlockedFormat,
        ch: Chunk,
        acts: &[Option<ActRow<'_>>],
        (qs, sc): (&[&[i8]], &[&[ActScale]]),
        j0: usize,
        cells: &mut [[ExactAcc; MT]],
    ) {
        for (t, (res, a)) in self.results.iter().zip(acts).enumerate() {
            let Some(a) = a else { continue };
            let act_bad = a.flags & fmt.act_flags != 0;
            for (r, (row, cell_row)) in self.rows.iter().zip(cells.iter_mut()).enumerate() {
                let cell = &mut cell_row[j0 + t];
                if !res.add_to(r, fmt.has_m, act_bad, cell) {
                    chunk_in_i128(ty, row, ch.b0, ch.nb, qs[t], sc[t], cell);
                }
            }
        }
    }
}
