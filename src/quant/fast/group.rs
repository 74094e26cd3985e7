//! One group of [`ROW_GROUP`] weight rows against a pass of input rows,
//! chunk by chunk, for the blocked driver (`super::blocked`): with the
//! portable split kernel (the weight scales decoded once per chunk, then
//! the kernel per input row, [`chunk_split`]) or a fused one (tiles of
//! [`ACT_TILE`] input rows per kernel call, [`chunk_fused`]); each input
//! row's sums added to its cells, or the chunk summed in `i128` where they
//! do not fit `i64`; the cells rounded once at the end.
//!
//! Contract: every cell written is [`crate::quant::dot::dot_row`]'s value
//! (the same exact integer, rounded once). Verified by the proptests of
//! `tests/kernels/matmul.rs` on every path (tile lengths, row counts, wild
//! scales that force the `i128` fallback), `tests/kernels_guarded.rs`
//! (reads only inside the weights and activations).
#![forbid(unsafe_code)]

use super::chunk::{BlockedFormat, ChunkFn, ROW_GROUP, WeightChunkScales, chunk_in_i128};
use super::fused::{ACT_TILE, ActTile, ChunkSums, FusedChunkKernel};
use crate::F32;
use crate::quant::GgmlType;
use crate::quant::QMatrix;
use crate::quant::act::{ActRow, ActScale, CHUNK_BLOCKS, ChunkScale};
use crate::quant::block::QK;
use crate::quant::fixed::ExactAcc;

/// Input rows whose cells one decoded weight chunk serves before the next
/// chunk is decoded (the split kernels; the fused ones take [`ACT_TILE`]).
pub(super) const ACT_ROWS_PER_DECODE: usize = 8;

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

/// The tile length that splits `n` input rows into as few tiles of at most
/// `max` rows as there can be, all of about the same length (37 rows in
/// tiles of 32: 19 and 18, not 32 and 5): a short last tile would leave a
/// wide kernel's weight decoding to serve few rows, or send them to the
/// slower group kernel. At least 1. Which rows share a tile changes no sum.
#[inline(always)]
pub(super) fn balanced_tile(n: usize, max: usize) -> usize {
    let max = max.max(1);
    n.div_ceil(n.div_ceil(max).max(1)).clamp(1, max)
}

/// Blocks `b0..b0 + nb` of chunk `index` (of [`CHUNK_BLOCKS`] blocks).
#[derive(Clone, Copy)]
pub(super) struct Chunk {
    pub(super) index: usize,
    pub(super) b0: usize,
    pub(super) nb: usize,
}

impl Chunk {
    /// Input row `a`'s quantized values, block scales and chunk range for
    /// this chunk (`None` if `a` is shorter).
    #[inline(always)]
    pub(super) fn of<'a>(&self, a: &ActRow<'a>) -> Option<(&'a [i8], &'a [ActScale], ChunkScale)> {
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
pub(super) fn group<const MT: usize, K: FusedChunkKernel>(
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
pub(super) fn fill_act_tile<'a, const T: usize>(
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

/// A fused kernel's chunk sums for one row group: its weight rows and,
/// per input row of a tile, the [`ChunkSums`].
pub(super) struct GroupSums<'r, 'w> {
    pub(super) rows: &'r [&'w [u8]; ROW_GROUP],
    pub(super) results: &'r [ChunkSums],
}

impl GroupSums<'_, '_> {
    /// Adds each input row's sums (`acts`, columns `j0..` of the group's
    /// `cells`) to its cells, or, where they do not fit `i64`, sums the chunk
    /// in `i128` from the tile's values and scales `(qs, sc)`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn add_to_cells<const MT: usize>(
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
