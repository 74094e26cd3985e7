//! The wide driver: [`WIDE_GROUPS`] groups of weight rows (sixteen) at
//! once through a fused kernel's wide build ([`FusedChunkKernel::tile_wide`],
//! the VNNI build's), for tiles of at least [`WIDE_MIN_ROWS`] input rows
//! (a shorter tile: `super::group` per group). Its working storage
//! ([`WideScratch`]) is set up once per matrix and reused by every wide
//! group; a row the kernel rounded itself is read from the kernel's output
//! in place.
//!
//! Contract: every cell written is [`crate::quant::dot::dot_row`]'s value.
//! Verified by the proptests of `tests/kernels/matmul.rs` (which assert the
//! wide kernel ran where the CPU has it: `RowsRun::tiled_rows`) and
//! `tests/kernels_guarded.rs` (four and five row groups); on a CPU without
//! AVX-512 VNNI no kernel has a wide build and this driver does not run.
#![forbid(unsafe_code)]

use super::chunk::{BlockedFormat, ROW_GROUP, WeightChunkScales};
use super::fused::ActTile;
use super::fused::{ChunkSums, FusedChunkKernel, WIDE_GROUPS, WIDE_ROWS, WIDE_TILE, WideTileOut};
use super::group::{
    ACT_ROWS_PER_DECODE, Chunk, GroupKernel, GroupSums, balanced_tile, fill_act_tile, group,
};
use crate::F32;
use crate::quant::act::{ActRow, CHUNK_BLOCKS};
use crate::quant::block::QK;
use crate::quant::fixed::ExactAcc;
use crate::quant::{GgmlType, QMatrix};

/// Fewest input rows in a tile for which the drivers run a wide kernel
/// (fewer: the group kernel per group, whose weight decoding costs less
/// where it serves few rows).
pub const WIDE_MIN_ROWS: usize = 12;

/// Fewest input rows in a tile for which the AVX2 build runs its wide
/// kernel (`x86::batch`) on Q5_0 weights: from two, each block's weight
/// decoding serves several input rows, eight weight rows at a time with no
/// horizontal reduction (Q4_1 and Q8_0 stay on the group kernel).
pub const AVX2_WIDE_MIN_ROWS: usize = 2;

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
    pub(super) const EMPTY: Self = WideScratch {
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

/// [`group`] for [`WIDE_GROUPS`] consecutive groups at once with a fused
/// kernel that has a wide build: the input rows in tiles of balanced
/// lengths ([`balanced_tile`]), each of at least [`WIDE_MIN_ROWS`]
/// input rows through [`FusedChunkKernel::tile_wide`], a smaller one
/// through [`group`] per group. `out` is
/// ([`WIDE_GROUPS`]·[`ROW_GROUP`], m). Returns whether the wide kernel ran
/// (`None`, with nothing written, as for [`group`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn group_wide<'a, K: FusedChunkKernel>(
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
        if mt < K::WIDE_MIN {
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
