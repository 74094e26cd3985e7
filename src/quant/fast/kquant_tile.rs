//! The K-quant driver: every row of a Q4_K / Q5_K / Q6_K matrix through
//! the row kernel `super::dispatch` picked, whole tiles of
//! [`kquant::TILE`] weight rows first through the tile kernel where there
//! is one and several input rows (on AVX-512 VNNI [`kquant::WIDE_GROUPS`]
//! tiles at a time against up to [`kquant::WIDE_ACT_TILE`] input rows), or
//! all of them through the decode kernel where there is one and one input
//! row, or any number without a VNNI tile (blocks of weight rows against
//! calls of up to [`kquant::DECODE_ROWS`] input rows); input rows the
//! kernels do not take, and weight rows of an unexpected length, through
//! [`dot_row`], which reports them.
//!
//! Contract: every cell is `dot_row`'s value. Verified by the proptests of
//! `tests/kernels/matmul.rs` on every path (which assert the build that
//! ran and the rows the tile kernels did), `tests/kernels_guarded.rs`,
//! `tests/kernels/quant_exact.rs`.
#![forbid(unsafe_code)]

use super::group::balanced_tile;
use super::kquant::{self, KQuantKernels, KTile};
use crate::F32;
use crate::quant::act::ActRow;
use crate::quant::block::QK;
use crate::quant::dot::dot_row;
use crate::quant::fixed::ExactAcc;
use crate::quant::{QActs, QMatrix};
use crate::simd::Level;

/// Every row of a Q4_K / Q5_K / Q6_K matrix through the [`kquant`] row
/// kernel `row` (cells whose rows do not have the expected lengths through
/// [`dot_row`], which reports them), whole tiles of [`kquant::TILE`] weight
/// rows first through the tile kernel where there is one and several input
/// rows ([`kquant_tiles`]), or all rows through the decode kernel where
/// there is one and the input rows [`kquant::vnni_decode_takes`], or
/// any number without a VNNI tile
/// ([`kquant_decode`]); returns `(rows done, build, rows done by the tile
/// or decode kernel)`. The build is the row kernel's, or
/// [`Level::Avx512Vnni`] when the VNNI tile did a tile or the decode
/// kernel's VNNI build ran.
pub(super) fn kquant_rows(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    KQuantKernels {
        row: f,
        build,
        tile,
        decode,
        decode_build,
    }: KQuantKernels,
) -> (usize, Level, usize) {
    let m = x.rows().max(1);
    let mut build = build;
    // The decode kernel for a few input rows (a decode or verify step),
    // and for any number where there is no VNNI tile (which takes more
    // faster).
    let vnni = matches!(tile, Some(KTile::Wide(_)));
    let decoded = match decode {
        Some(d) if kquant::vnni_decode_takes(m, w.n_in) || !vnni => kquant_decode(w, r0, x, out, d),
        _ => None,
    };
    let (done, tiled) = match (decoded, tile) {
        (Some(n), _) => {
            if n > 0 {
                build = decode_build;
            }
            (n, n)
        }
        (None, Some(t)) if m > 1 => {
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

/// Weight bytes per decode kernel call with several input rows: each
/// block of weight rows stays in cache while every input row passes over
/// it (the kernel's passes, and the calls of [`kquant::DECODE_ROWS`]
/// input rows), read once from memory.
const DECODE_BLOCK_BYTES: usize = 64 * 1024;

/// Every row of `out` (rows, M) through the decode kernel `d`, if it
/// takes them (every input row well-formed): blocks of about
/// [`DECODE_BLOCK_BYTES`] of weight rows (all of them with up to
/// [`kquant::DECODE_PASS_ROWS`] input rows, one pass),
/// each against the input rows in calls of up to [`kquant::DECODE_ROWS`];
/// returns the rows done, a prefix (`None`: none; the caller computes
/// every row not done, so a block the kernel stopped in is redone).
fn kquant_decode(
    w: &QMatrix<'_>,
    r0: usize,
    x: &QActs<'_>,
    out: &mut [F32],
    d: kquant::DecodeFn,
) -> Option<usize> {
    let m = x.rows().max(1);
    for j in 0..m {
        x.row(j).ok().filter(|a| kquant_act_fits(w, a))?;
    }
    let n = out.len() / m;
    let rb = w.ty.row_bytes(w.n_in).ok().filter(|&rb| rb > 0)?;
    let end = r0.checked_add(n)?.checked_mul(rb)?;
    let rows = w.data.get(r0.checked_mul(rb)?..end)?;
    // Up to one pass of input rows: every weight row in one call (read
    // once anyway; the input rows' terms taken once).
    let per_block = if m <= kquant::DECODE_PASS_ROWS {
        n.max(1)
    } else {
        (DECODE_BLOCK_BYTES / rb).max(1)
    };
    let mut done = 0;
    for (blk, cells) in rows
        .chunks(per_block * rb)
        .zip(out.chunks_mut(per_block * m))
    {
        for j0 in (0..m).step_by(kquant::DECODE_ROWS) {
            if !decode_call(x, j0..m.min(j0 + kquant::DECODE_ROWS), (blk, cells), d) {
                return (done > 0).then_some(done);
            }
        }
        done += blk.len() / rb;
    }
    Some(n)
}

/// One decode kernel call: weight rows `blk` against input rows `cols`
/// (at most [`kquant::DECODE_ROWS`]) into those columns of `cells`
/// (`blk`'s rows, M); whether the kernel took them.
fn decode_call(
    x: &QActs<'_>,
    cols: core::ops::Range<usize>,
    (blk, cells): (&[u8], &mut [F32]),
    d: kquant::DecodeFn,
) -> bool {
    let empty = ActRow {
        qs: &[],
        sc: &[],
        ch: &[],
        flags: 0,
        h: &[],
        f: &[],
    };
    let mut acts = [empty; kquant::DECODE_ROWS];
    let j0 = cols.start;
    for (a, j) in acts.iter_mut().zip(cols.clone()) {
        match x.row(j) {
            Ok(r) => *a = r,
            Err(_) => return false,
        }
    }
    d(blk, &acts[..cols.len().min(kquant::DECODE_ROWS)], cells, j0)
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
