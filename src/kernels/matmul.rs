//! W (n_out, n_in) @ x (M, n_in) -> out (M, n_out); each cell one exact dot, independent of M and threads.
//!
//! Cell `(m, o)` is [`crate::quant::dot::dot_row`] of weight row `o` with
//! activation row `m` — an exact integer sum rounded once for every quantized
//! and F16 type, a fixed-order soft dot for F32/BF16. No cell's value depends
//! on M, on the other rows of the batch, on the blocking used here or on how
//! rows are split across threads: the fast kernels compute the same integers.
//!
//! Work is split over *weight rows* so each weight row is read once for all M
//! inputs. With M > 1 the cells are produced weight-row-major into `scratch`
//! `(n_out, M)` and transposed into `out` `(M, n_out)` at the end.

// `deny`, not `forbid`: the multiversion macro allows its own `unsafe`
// (the target-feature calls); this file writes none.
#![deny(unsafe_code)]

use crate::quant::{ActKind, QActs, QMatrix, fast};
use crate::{Error, F32, Parallel, Result};

/// `scratch` elements [`matmul`] needs for `m` input rows (0 when `m ≤ 1`).
pub const fn matmul_scratch_len(m: usize, n_out: usize) -> usize {
    if m <= 1 { 0 } else { m.saturating_mul(n_out) }
}

/// Weight rows per parallel chunk: a multiple of the kernels' row group
/// (of the wide kernels' four groups where they run, from
/// [`fast::WIDE_MIN_ROWS`] input rows). One input row (decode) takes one
/// contiguous share per thread (each streams its weight rows in order;
/// eight claimed chunks measured 2–5 % slower at 2 threads); more rows take
/// four chunks per thread, claimed as threads come free (a static split
/// measured 3–7 % slower at 8 rows).
fn rows_per_chunk(threads: usize, n_out: usize, m: usize) -> usize {
    if threads <= 1 {
        return n_out.max(1);
    }
    let chunks = if m <= 1 { threads } else { threads * 4 };
    let unit = if m >= fast::WIDE_MIN_ROWS {
        fast::ROW_GROUP * fast::WIDE_GROUPS
    } else {
        fast::ROW_GROUP
    };
    n_out.div_ceil(chunks).next_multiple_of(unit).max(unit)
}

/// `out (M, n_out) = x (M, n_in) · Wᵀ`; `M = x.rows()`.
///
/// Errors (nothing written): `x` of the wrong [`ActKind`] or row length,
/// `out.len() != M·n_out`, `scratch` shorter than [`matmul_scratch_len`].
pub fn matmul<P: Parallel>(
    par: &P,
    w: &QMatrix<'_>,
    x: &QActs<'_>,
    out: &mut [F32],
    scratch: &mut [F32],
) -> Result<()> {
    if x.kind() != ActKind::for_weight(w.ty) {
        return Err(Error::UnsupportedType {
            ggml_type: w.ty as u32,
        });
    }
    super::check_len(w.n_in, x.n_in())?;
    let m = x.rows();
    let cells = m.checked_mul(w.n_out).ok_or(Error::SizeOverflow)?;
    super::check_len(cells, out.len())?;
    if cells == 0 {
        return Ok(());
    }
    let rows = rows_per_chunk(par.threads(), w.n_out, m);
    if m == 1 {
        par.for_each_chunk(out, rows, &|ci, chunk| {
            fast::rows_kernel(w, ci * rows, x, chunk);
        });
        return Ok(());
    }
    let need = matmul_scratch_len(m, w.n_out);
    let available = scratch.len();
    let scratch = scratch.get_mut(..need).ok_or(Error::BufferTooSmall {
        needed: need,
        available,
    })?;
    par.for_each_chunk(scratch, rows * m, &|ci, chunk| {
        fast::rows_kernel(w, ci * rows, x, chunk);
    });
    // (n_out, M) -> (M, n_out), output rows split over the workers.
    let scratch = &*scratch;
    let rows_per = m.div_ceil(par.threads().max(1)).max(1);
    par.for_each_chunk(out, rows_per * w.n_out, &|ci, rows_out| {
        transpose_rows(scratch, m, ci * rows_per, rows_out, w.n_out);
    });
    Ok(())
}

/// Side of the square tiles [`transpose_rows`] copies: 16 `F32`, one cache
/// line of a scratch column and of an output row.
const TILE: usize = 16;

/// Output rows `r0..` of `out` (rows of `n_out`) from the scratch `src`
/// laid out `(n_out, m)`: `out[i][o] = src[o·m + r0 + i]`. Tile by tile
/// through a local square, so that both sides are read and written a cache
/// line at a time, and each output line is written whole before the next
/// (writing a column of a tile touched sixteen output lines at once, which
/// share a cache set where a row is a multiple of 4 KiB).
fn transpose_rows(src: &[F32], m: usize, r0: usize, out: &mut [F32], n_out: usize) {
    transpose_builds::best(src, m, r0, out, n_out);
}

crate::simd::multiversion! {
    /// Builds of [`transpose_body`] (wider loads and stores per tile line).
    mod transpose_builds = transpose_body(src: &[F32], m: usize, r0: usize, out: &mut [F32], n_out: usize);
}

/// The portable body of [`transpose_rows`].
#[inline(always)]
fn transpose_body(src: &[F32], m: usize, r0: usize, out: &mut [F32], n_out: usize) {
    let n_rows = out.len() / n_out.max(1);
    let mut tile = [[F32::ZERO; TILE]; TILE];
    for ob in (0..n_out).step_by(TILE) {
        let oe = (ob + TILE).min(n_out);
        for ib in (0..n_rows).step_by(TILE) {
            let ie = (ib + TILE).min(n_rows);
            for (o, t) in (ob..oe).zip(tile.iter_mut()) {
                let col = &src[o * m + r0 + ib..o * m + r0 + ie];
                t[..col.len()].copy_from_slice(col);
            }
            for (i, row) in (ib..ie).zip(out[ib * n_out..].chunks_mut(n_out)) {
                for (v, t) in row[ob..oe].iter_mut().zip(&tile) {
                    *v = t[i - ib];
                }
            }
        }
    }
}

/// One thread's rows of every output of [`fused_matvecs`]: entry `k` is its
/// share of matrix `k`'s output, `None` where that matrix has no rows left
/// for it.
pub type ThreadShares<'a, const N: usize> = [Option<&'a mut [F32]>; N];

/// Most threads [`fused_matvecs`] splits over (more take the plain path).
pub const MAX_FUSED_THREADS: usize = 64;

/// One input row `x` against `N` weight matrices in a single parallel
/// region: `outs[k] (n_out_k) = W_k · x`, each thread taking one contiguous
/// share of every matrix's rows (the shares of [`matmul`] for one row), then
/// `epilogue(shares)` on its shares of the outputs (matrices of equal `n_out`
/// get the same row ranges, so an elementwise epilogue such as SwiGLU sees
/// matching gate and up rows). Fewer barriers than `N` calls of [`matmul`],
/// the same cells.
///
/// Errors, checked before anything is written: [`Error::ShapeMismatch`] if
/// `x` has other than one row or a matrix's `n_in` / an output's length is
/// wrong, [`Error::UnsupportedType`] if `x` is not the [`ActKind`] a matrix
/// reads, [`Error::TooManyThreads`] above [`MAX_FUSED_THREADS`]. An error of
/// `epilogue` is returned as it is (the lowest failing share's, see
/// [`Parallel::try_for_each_chunk`]), the outputs then written as far as
/// the kernels and `epilogue` got.
pub fn fused_matvecs<P: Parallel, const N: usize>(
    par: &P,
    x: &QActs<'_>,
    ws: [&QMatrix<'_>; N],
    outs: [&mut [F32]; N],
    epilogue: &(dyn Fn(&mut ThreadShares<'_, N>) -> Result<()> + Sync),
) -> Result<()> {
    let threads = par.threads().max(1);
    super::check_len(1, x.rows())?;
    if threads > MAX_FUSED_THREADS {
        return Err(Error::TooManyThreads {
            threads,
            max: MAX_FUSED_THREADS,
        });
    }
    for (w, out) in ws.iter().zip(&outs) {
        if x.kind() != ActKind::for_weight(w.ty) {
            return Err(Error::UnsupportedType {
                ggml_type: w.ty as u32,
            });
        }
        super::check_len(w.n_in, x.n_in())?;
        super::check_len(w.n_out, out.len())?;
    }
    let rows: [usize; N] = core::array::from_fn(|k| rows_per_chunk(threads, ws[k].n_out, 1));
    // Job i: the i-th share of every output (`None` past its end).
    let mut k = 0;
    let mut iters = outs.map(|o| {
        let it = o.chunks_mut(rows[k]);
        k += 1;
        it
    });
    let mut jobs: [ThreadShares<'_, N>; MAX_FUSED_THREADS] =
        core::array::from_fn(|_| core::array::from_fn(|k| iters[k].next()));
    let n_jobs = (0..N)
        .map(|k| ws[k].n_out.div_ceil(rows[k]))
        .max()
        .unwrap_or(0);
    par.try_for_each_chunk(&mut jobs[..n_jobs], 1, &|i, job| {
        for shares in job.iter_mut() {
            for (k, out) in shares.iter_mut().enumerate() {
                if let Some(out) = out {
                    fast::rows_kernel(ws[k], i * rows[k], x, out);
                }
            }
            epilogue(shares)?;
        }
        Ok(())
    })
}
