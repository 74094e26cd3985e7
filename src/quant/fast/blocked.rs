//! The blocked driver of Q4_1 / Q5_0 / Q8_0 matrices: the input rows in
//! passes of up to [`ACT_ROWS_PER_PASS`] (fetched and checked once per
//! pass), each pass over every whole group of [`ROW_GROUP`] weight rows
//! (`super::group`), or [`WIDE_GROUPS`] groups at once where the kernel has
//! a wide build and there are enough input rows (`super::wide`); and the
//! driver of one input row (a matrix-vector product) with a fused kernel.
//! Generic over the kernel: `x86::blocked` builds these drivers per
//! instruction set with its fused kernels inlined ([`BlockedRowsFn`]);
//! [`split_rows`] is the portable build.
//!
//! Contract: every cell of the rows reported done is
//! [`crate::quant::dot::dot_row`]'s value; the caller computes the rest per
//! cell. Verified by the proptests of `tests/kernels/matmul.rs` on every
//! path (and which build ran), `tests/kernels_guarded.rs`.
#![forbid(unsafe_code)]

use super::chunk::{BlockedFormat, ChunkFn, ROW_GROUP, WeightChunkScales, chunk_in_i128};
use super::fused::{ACT_TILE, ActTile, ChunkSums, FusedChunkKernel, WIDE_GROUPS, WIDE_ROWS};
use super::group::{ACT_ROWS_PER_DECODE, GroupKernel, balanced_tile, group};
use super::wide::{WideScratch, group_wide};
use crate::F32;
use crate::quant::act::{ActRow, ActScale, CHUNK_BLOCKS, ChunkScale};
use crate::quant::block::QK;
use crate::quant::fixed::ExactAcc;
use crate::quant::{QActs, QMatrix};

/// Every whole group of weight rows `r0..` against the input rows of `x`,
/// into `out` (rows, M); returns the rows done and, of those, the rows a
/// wide kernel did ([`blocked_rows`]). A build of [`blocked_rows`]
/// (or, for one input row, [`groups_single_input`]) with fused kernels
/// built in.
pub(crate) type BlockedRowsFn =
    fn(w: &QMatrix<'_>, r0: usize, x: &QActs<'_>, out: &mut [F32]) -> (usize, usize);

/// Input rows the blocked kernels take per pass over all weight groups.
const ACT_ROWS_PER_PASS: usize = 64;

/// Whether the blocked kernels can take input row `a` for `w`.
#[inline(always)]
fn act_row_fits(w: &QMatrix<'_>, a: &ActRow<'_>) -> bool {
    let nb = w.n_in / QK;
    a.qs.len() == w.n_in && a.sc.len() == nb && a.ch.len() == nb.div_ceil(CHUNK_BLOCKS)
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

/// Every whole group of weight rows `r0..` against the input rows of `x`
/// with the portable split kernel `f`, into `out` (rows, M); returns the
/// rows done ([`blocked_rows`]).
pub(super) fn split_rows(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    f: ChunkFn,
) -> usize {
    blocked_rows(w, r0, x, out, GroupKernel::<NoFusedKernel>::Split(f)).0
}

/// Every whole group of weight rows `r0..` against the input rows of `x`
/// with `kernel`, into `out` (rows, M); returns the rows done (the caller
/// computes the rest per cell) and, of those, the rows of the wide groups
/// (four groups at a time, where the kernel has a wide build and there are
/// several input rows) whose wide kernel ran on a tile (it does on the
/// first tile of every pass when `M ≥` the kernel's
/// [`FusedChunkKernel::WIDE_MIN`]: the same
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
                    if K::HAS_WIDE && sl >= K::WIDE_MIN && g + WIDE_GROUPS <= groups =>
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
