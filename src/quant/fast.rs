//! Blocked matmul kernels: several weight rows per pass over the activations.
//!
//! `rows_kernel(w, r0, x, out)` fills `out` (rows, M) with the cells of weight
//! rows `r0..r0 + rows`. For Q4_1 and Q8_0 weights it runs a blocked kernel
//! over [`ROW_GROUP`] rows at a time; every other case (other formats, tail
//! rows) is [`super::dot::dot_row`] per cell.
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
use super::dot::{dot_row, i8_dot, nib_dot};
use super::fixed::{ExactAcc, f16_fixed, f16_nonfinite};
use super::{QActs, QMatrix};
use crate::F32;

/// Weight rows the blocked kernels process together.
pub const ROW_GROUP: usize = 4;
/// Activation rows accumulated together per decoded weight chunk.
const M_TILE: usize = 8;
/// Largest relative shift of a Q4_1 `d` term in the `i64` chunk sum.
pub const LIM_Q4_1_D: u32 = 19;
/// Largest relative shift of a Q4_1 `m·s` term in the `i64` chunk sum.
pub const LIM_Q4_1_M: u32 = 35;
/// Largest relative shift of a Q8_0 term in the `i64` chunk sum.
pub const LIM_Q8_0_D: u32 = 16;

/// Which implementation computes the cells (all give the same bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
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

/// Decoded weight scales of one chunk of a row group, `[block][row]`.
pub(crate) struct WChunk {
    pub dm: [[i32; ROW_GROUP]; CHUNK_BLOCKS],
    pub drel: [[u32; ROW_GROUP]; CHUNK_BLOCKS],
    pub mm: [[i32; ROW_GROUP]; CHUNK_BLOCKS],
    pub mrel: [[u32; ROW_GROUP]; CHUNK_BLOCKS],
    pub dbase: [u32; ROW_GROUP],
    pub dspread: [u32; ROW_GROUP],
    pub mbase: [u32; ROW_GROUP],
    pub mspread: [u32; ROW_GROUP],
    pub bad: [bool; ROW_GROUP],
}

/// Smallest and largest shift of the non-zero mantissas, as (base, spread).
fn range(m: &[i32], sh: &[u32]) -> (u32, u32) {
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

impl WChunk {
    /// All zero.
    pub(crate) const ZERO: WChunk = WChunk {
        dm: [[0; ROW_GROUP]; CHUNK_BLOCKS],
        drel: [[0; ROW_GROUP]; CHUNK_BLOCKS],
        mm: [[0; ROW_GROUP]; CHUNK_BLOCKS],
        mrel: [[0; ROW_GROUP]; CHUNK_BLOCKS],
        dbase: [0; ROW_GROUP],
        dspread: [0; ROW_GROUP],
        mbase: [0; ROW_GROUP],
        mspread: [0; ROW_GROUP],
        bad: [false; ROW_GROUP],
    };

    /// Decodes blocks `b0..b0 + nb` of the group's rows (`bs` bytes per
    /// block, `d` at byte 0 and, if `has_m`, `m` at byte 2).
    fn decode(
        w: &mut WChunk,
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
            let (db, ds) = range(&dm[..nb], &dsh[..nb]);
            let (mb, ms) = range(&mm[..nb], &msh[..nb]);
            for b in 0..nb {
                w.dm[b][r] = dm[b];
                w.drel[b][r] = if dm[b] != 0 { dsh[b] - db } else { 0 };
                w.mm[b][r] = mm[b];
                w.mrel[b][r] = if mm[b] != 0 { msh[b] - mb } else { 0 };
            }
            w.dbase[r] = db;
            w.dspread[r] = ds;
            w.mbase[r] = mb;
            w.mspread[r] = ms;
            w.bad[r] = bad;
        }
    }
}

/// Fills a [`WChunk`] from blocks `b0..b0 + nb` of the group's rows.
pub(crate) type DecodeFn =
    fn(w: &mut WChunk, rows: &[&[u8]; ROW_GROUP], bs: usize, b0: usize, nb: usize, has_m: bool);

/// A chunk kernel: `(Σ d terms, Σ m terms)` per row of the group, in `i64`,
/// relative to `2^(wbase + abase)`; preconditions: spreads within the limits.
pub(crate) type ChunkFn = fn(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WChunk,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]);

/// Portable Q4_1 chunk kernel.
fn chunk_q4_1(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WChunk,
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
            let t = sumi as i64 * (w.dm[b][r] * s.dm) as i64;
            ad[r] += t << (w.drel[b][r] + s.drel);
            am[r] += ((w.mm[b][r] * s.sm) as i64) << (w.mrel[b][r] + s.srel);
        }
    }
    (ad, am)
}

/// Portable Q8_0 chunk kernel.
fn chunk_q8_0(
    rows: &[&[u8]; ROW_GROUP],
    b0: usize,
    nb: usize,
    w: &WChunk,
    qs: &[i8],
    sc: &[ActScale],
) -> ([i64; ROW_GROUP], [i64; ROW_GROUP]) {
    let mut ad = [0i64; ROW_GROUP];
    for (r, row) in rows.iter().enumerate() {
        let blocks = row.chunks_exact(34).skip(b0).take(nb);
        for (b, ((blk, y), s)) in blocks.zip(qs.chunks_exact(QK)).zip(sc).enumerate() {
            let mut q = [0i8; 32];
            for (o, &v) in q.iter_mut().zip(&blk[2..34]) {
                *o = v as i8;
            }
            let t = i8_dot(&q, y) as i64 * (w.dm[b][r] * s.dm) as i64;
            ad[r] += t << (w.drel[b][r] + s.drel);
        }
    }
    (ad, [0; ROW_GROUP])
}

/// Exact `i128` fallback for one chunk of one cell (spreads too wide).
fn chunk_wide(
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
        } else {
            let mut q = [0i8; 32];
            for (o, &v) in q.iter_mut().zip(&blk[2..34]) {
                *o = v as i8;
            }
            acc.add_shifted(i8_dot(&q, y) as i64 * (dm * s.dm) as i64, dsh + s.dsh);
        }
    }
}

/// Result of a fused chunk kernel for one row group and one input row.
#[derive(Clone, Copy)]
pub(crate) struct Fused {
    /// False when a relative shift fell outside the `i64`-exact range; the
    /// caller then sums the chunk in `i128` ([`chunk_wide`]).
    pub ok: bool,
    /// Σ d terms per row, in units of `2^dbase[r]` (×2^-48).
    pub d: [i64; ROW_GROUP],
    /// Base shift of `d` per row (weight base + activation chunk base).
    pub dbase: [u32; ROW_GROUP],
    /// Σ m·s terms per row (Q4_1), in units of `2^mbase[r]`.
    pub m: [i64; ROW_GROUP],
    /// Base shift of `m`.
    pub mbase: [u32; ROW_GROUP],
    /// A weight scale of the chunk is ±∞/NaN (valid even when `!ok`).
    pub bad: [bool; ROW_GROUP],
}

impl Fused {
    /// "Not computed": the caller sums the chunk in `i128` instead.
    #[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
    pub const NOT_OK: Fused = Fused {
        ok: false,
        d: [0; ROW_GROUP],
        dbase: [0; ROW_GROUP],
        m: [0; ROW_GROUP],
        mbase: [0; ROW_GROUP],
        bad: [false; ROW_GROUP],
    };
}

/// Input rows a multi-row fused kernel takes per pass over a weight chunk.
pub(crate) const ACT_TILE: usize = 8;

/// One chunk of up to `T` (by default [`ACT_TILE`]) input rows: quantized
/// values, block scales and chunk ranges of rows `0..n`.
pub(crate) struct ActTile<'x, const T: usize = ACT_TILE> {
    #[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
    pub n: usize,
    pub qs: [&'x [i8]; T],
    pub sc: [&'x [ActScale]; T],
    pub ch: [ChunkScale; T],
}

/// A pair of fused chunk kernels: one input row, and up to [`ACT_TILE`]
/// rows per pass over a weight chunk. Each decodes the weight scales on the
/// fly against guessed bases and reports per input row whether every shift
/// stayed in range. `group` holds the four weight rows back to back (`rb`
/// bytes each). The drivers below are generic over it so that a SIMD build
/// of them inlines the kernels and the cell rounding into one loop.
pub(crate) trait FusedKernels: Copy {
    /// The chunk sums for one input row.
    #[allow(clippy::too_many_arguments)]
    fn single(
        self,
        group: &[u8],
        rb: usize,
        b0: usize,
        nb: usize,
        qs: &[i8],
        sc: &[ActScale],
        ch: &ChunkScale,
    ) -> Fused;
    /// The chunk sums for each of the tile's input rows.
    fn multi(
        self,
        group: &[u8],
        rb: usize,
        b0: usize,
        nb: usize,
        t: &ActTile<'_>,
    ) -> [Fused; ACT_TILE];
}

/// No fused kernels (the portable build).
#[derive(Clone, Copy)]
pub(crate) enum NoFused {}

impl FusedKernels for NoFused {
    fn single(
        self,
        _: &[u8],
        _: usize,
        _: usize,
        _: usize,
        _: &[i8],
        _: &[ActScale],
        _: &ChunkScale,
    ) -> Fused {
        match self {}
    }
    fn multi(self, _: &[u8], _: usize, _: usize, _: usize, _: &ActTile<'_>) -> [Fused; ACT_TILE] {
        match self {}
    }
}

/// Every whole group of weight rows `r0..` against the input rows of `x`,
/// into `out` (rows, M); returns the rows done. A build of [`blocked_rows`]
/// (or, for one input row, [`groups_one`]) with fused kernels built in.
pub(crate) type RowsFn = fn(w: &QMatrix<'_>, r0: usize, x: &QActs<'_>, out: &mut [F32]) -> usize;

/// How a group is computed.
#[derive(Clone, Copy)]
pub(crate) enum Kernel<K> {
    Split(DecodeFn, ChunkFn),
    #[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
    Fused(K),
}

/// The SIMD drivers for `ty` on `path`, if there are any.
fn simd_rows(ty: GgmlType, path: Path) -> Option<RowsFn> {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        use super::simd_x86::{Isa, fused_rows};
        let isa = match path {
            Path::Auto => Some(Isa::Best),
            Path::Avx2 => Some(Isa::Avx2),
            Path::Reference | Path::Portable => None,
        };
        isa.and_then(|isa| fused_rows(ty, isa))
    }
    #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
    {
        let _ = (ty, path);
        None
    }
}

/// The portable split kernels for `ty`, if the blocked kernel handles it.
fn split_kernel(ty: GgmlType) -> Option<Kernel<NoFused>> {
    match ty {
        GgmlType::Q4_1 => Some(Kernel::Split(WChunk::decode, chunk_q4_1)),
        GgmlType::Q8_0 => Some(Kernel::Split(WChunk::decode, chunk_q8_0)),
        _ => None,
    }
}

/// Cells of weight rows `r0..` into `out` (rows, M), best available path.
pub fn rows_kernel(w: &QMatrix<'_>, r0: usize, x: &QActs<'_>, out: &mut [F32]) {
    rows_kernel_with(w, r0, x, out, Path::Auto);
}

/// [`rows_kernel`] on a chosen [`Path`] (tests and benches compare them).
pub fn rows_kernel_with(w: &QMatrix<'_>, r0: usize, x: &QActs<'_>, out: &mut [F32], path: Path) {
    let m = x.rows().max(1);
    let done = if path == Path::Reference {
        0
    } else if let Some(f) = simd_rows(w.ty, path) {
        f(w, r0, x, out)
    } else if let Some(k) = split_kernel(w.ty) {
        blocked_rows(w, r0, x, out, k)
    } else {
        0
    };
    for (i, cells) in out.chunks_mut(m).enumerate().skip(done) {
        let row = w.row(r0 + i);
        for (j, c) in cells.iter_mut().enumerate() {
            *c = match (row, x.row(j)) {
                (Ok(data), Ok(a)) => dot_row(w.ty, data, &a, w.n_in).unwrap_or(F32::NAN),
                _ => F32::NAN,
            };
        }
    }
}

/// Every whole group of weight rows `r0..` against the input rows of `x`
/// with `kernel`, into `out` (rows, M); returns the rows done (the caller
/// computes the rest per cell). Input rows are fetched and checked once per
/// `ACT_SUPER` of them, not once per group; every group runs on each batch
/// of rows.
#[inline(always)]
pub(crate) fn blocked_rows<K: FusedKernels>(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    kernel: Kernel<K>,
) -> usize {
    let m = x.rows().max(1);
    let n_rows = out.len() / m;
    let mut wc = WChunk::ZERO;
    let mut buf: [Option<ActRow<'_>>; ACT_SUPER] = [None; ACT_SUPER];
    let mut groups = n_rows / ROW_GROUP;
    for s0 in (0..m).step_by(ACT_SUPER) {
        let sl = ACT_SUPER.min(m - s0);
        for (j, a) in buf.iter_mut().enumerate().take(sl) {
            *a = x.row(s0 + j).ok().filter(|r| fits_kernel(w, r));
        }
        if buf[..sl].iter().any(Option::is_none) {
            return 0;
        }
        for g in 0..groups {
            let cells = &mut out[g * ROW_GROUP * m..(g + 1) * ROW_GROUP * m];
            let (rg, acts) = (r0 + g * ROW_GROUP, &buf[..sl]);
            let ok = if m == 1 {
                group::<1, K>(w, rg, acts, s0, m, cells, kernel, &mut wc)
            } else {
                group::<M_TILE, K>(w, rg, acts, s0, m, cells, kernel, &mut wc)
            };
            if ok.is_none() {
                groups = g;
                break;
            }
        }
    }
    groups * ROW_GROUP
}

/// Every whole group of weight rows `r0..` against the single input row of
/// `x`, with a fused kernel, into `out`; returns the rows done (`None`, with
/// nothing written, if the input is not what the kernel expects).
#[inline(always)]
#[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
pub(crate) fn groups_one<K: FusedKernels>(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    k: K,
) -> Option<usize> {
    let a = x.row(0).ok()?;
    let nb = w.n_in / QK;
    let act_flags = match w.ty {
        GgmlType::Q4_1 => FLAG_D_NONFINITE | FLAG_S_NONFINITE,
        GgmlType::Q8_0 => FLAG_D_NONFINITE,
        _ => return None,
    };
    let has_m = w.ty == GgmlType::Q4_1;
    if a.qs.len() != w.n_in || a.sc.len() != nb || a.ch.len() != nb.div_ceil(CHUNK_BLOCKS) {
        return None;
    }
    let act_bad = a.flags & act_flags != 0;
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
            let res = k.single(group_bytes, rb, b0, cn, qs, sc, &a.ch[c]);
            for (r, cell) in cells.iter_mut().enumerate() {
                if res.ok {
                    cell.add_shifted(res.d[r], res.dbase[r]);
                    if has_m {
                        cell.add_shifted(res.m[r], res.mbase[r]);
                    }
                } else {
                    let row = w.row(r0 + gi * ROW_GROUP + r).ok()?;
                    chunk_wide(w.ty, row, b0, cn, qs, sc, cell);
                }
                cell.nonfinite |= res.bad[r] || act_bad;
            }
        }
        for (o, c) in cells_out.iter_mut().zip(cells) {
            *o = c.finish();
        }
    }
    Some(n_groups * ROW_GROUP)
}

/// Input rows the blocked kernels take per pass over all weight groups.
const ACT_SUPER: usize = 64;

/// Whether the blocked kernels can take input row `a` for `w`.
fn fits_kernel(w: &QMatrix<'_>, a: &ActRow<'_>) -> bool {
    let nb = w.n_in / QK;
    a.qs.len() == w.n_in && a.sc.len() == nb && a.ch.len() == nb.div_ceil(CHUNK_BLOCKS)
}

/// One group of [`ROW_GROUP`] weight rows × the input rows `acts` (columns
/// `col0..` of `m`, all checked by [`fits_kernel`]) into `out` (ROW_GROUP, m).
/// `None` (nothing written) if the weight rows are not what the kernel expects.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn group<const MT: usize, K: FusedKernels>(
    w: &QMatrix<'_>,
    r0: usize,
    all: &[Option<ActRow<'_>>],
    col0: usize,
    m: usize,
    out: &mut [F32],
    kernel: Kernel<K>,
    wc: &mut WChunk,
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
    let (bs, has_m, lim_d, lim_m, act_flags) = match w.ty {
        GgmlType::Q4_1 => (
            20,
            true,
            LIM_Q4_1_D,
            LIM_Q4_1_M,
            FLAG_D_NONFINITE | FLAG_S_NONFINITE,
        ),
        GgmlType::Q8_0 => (34, false, LIM_Q8_0_D, u32::MAX, FLAG_D_NONFINITE),
        _ => return None,
    };
    if out.len() < ROW_GROUP * m || col0 + all.len() > m {
        return None;
    }
    for m0 in (0..all.len()).step_by(MT) {
        let mt = MT.min(all.len() - m0);
        let acts = &all[m0..m0 + mt];
        let mut cells = [[ExactAcc::default(); MT]; ROW_GROUP];
        for (c, b0) in (0..nb).step_by(CHUNK_BLOCKS).enumerate() {
            let cn = CHUNK_BLOCKS.min(nb - b0);
            let (decode, f) = match kernel {
                Kernel::Split(decode, f) => (decode, f),
                Kernel::Fused(k) => {
                    let mut j0 = 0;
                    while j0 < mt {
                        let n = ACT_TILE.min(mt - j0);
                        let mut tile = ActTile {
                            n,
                            qs: [&[]; ACT_TILE],
                            sc: [&[]; ACT_TILE],
                            ch: [ChunkScale::default(); ACT_TILE],
                        };
                        for (t, a) in acts[j0..j0 + n].iter().enumerate() {
                            let a = a.as_ref()?;
                            tile.ch[t] = *a.ch.get(c)?;
                            tile.qs[t] = a.qs.get(b0 * QK..(b0 + cn) * QK)?;
                            tile.sc[t] = a.sc.get(b0..b0 + cn)?;
                        }
                        let results = match n {
                            2.. => k.multi(group_bytes, rb, b0, cn, &tile),
                            _ => {
                                let mut one = [Fused::NOT_OK; ACT_TILE];
                                one[0] = k.single(
                                    group_bytes,
                                    rb,
                                    b0,
                                    cn,
                                    tile.qs[0],
                                    tile.sc[0],
                                    &tile.ch[0],
                                );
                                one
                            }
                        };
                        for (t, res) in results.iter().enumerate().take(n) {
                            let j = j0 + t;
                            let Some(a) = &acts[j] else { continue };
                            let (qs, sc) = (tile.qs[t], tile.sc[t]);
                            for r in 0..ROW_GROUP {
                                let cell = &mut cells[r][j];
                                if res.ok {
                                    cell.add_shifted(res.d[r], res.dbase[r]);
                                    if has_m {
                                        cell.add_shifted(res.m[r], res.mbase[r]);
                                    }
                                } else {
                                    chunk_wide(w.ty, rows[r], b0, cn, qs, sc, cell);
                                }
                                cell.nonfinite |= res.bad[r] || a.flags & act_flags != 0;
                            }
                        }
                        j0 += n;
                    }
                    continue;
                }
            };
            decode(wc, &rows, bs, b0, cn, has_m);
            let wc = &*wc;
            for (j, a) in acts.iter().enumerate().take(mt) {
                let Some(a) = a else { continue };
                let ch: ChunkScale = *a.ch.get(c)?;
                let qs = a.qs.get(b0 * QK..(b0 + cn) * QK)?;
                let sc = a.sc.get(b0..b0 + cn)?;
                let fits = (0..ROW_GROUP).all(|r| {
                    wc.dspread[r] + ch.dspread <= lim_d
                        && (!has_m || wc.mspread[r] + ch.sspread <= lim_m)
                });
                if fits {
                    let (ad, am) = f(&rows, b0, cn, wc, qs, sc);
                    for r in 0..ROW_GROUP {
                        let cell = &mut cells[r][j];
                        cell.add_shifted(ad[r], wc.dbase[r] + ch.dbase);
                        if has_m {
                            cell.add_shifted(am[r], wc.mbase[r] + ch.sbase);
                        }
                    }
                } else {
                    for r in 0..ROW_GROUP {
                        chunk_wide(w.ty, rows[r], b0, cn, qs, sc, &mut cells[r][j]);
                    }
                }
                for (cr, &bad) in cells.iter_mut().zip(&wc.bad) {
                    cr[j].nonfinite |= bad || a.flags & act_flags != 0;
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
