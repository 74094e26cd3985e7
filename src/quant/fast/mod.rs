//! The fast matmul path: several weight rows per pass over the
//! activations, every cell the same bits as [`super::dot::dot_row`].
//!
//! `rows_kernel(w, r0, x, out)` fills `out` (rows, M) with the cells of weight
//! rows `r0..r0 + rows`. A weight matrix's path reads forward through the
//! files of this folder:
//!
//! ```text
//! kernels::matmul ─► rows_kernel (here) ─► dispatch::plan (the build)
//!   Q4_1/Q5_0/Q8_0 ─► blocked ─► group / wide ─► chunk (portable kernels)
//!                                             or x86::blocked (fused kernels)
//!   Q4_K/Q5_K/Q6_K ─► kquant_tile ─► kquant (portable row kernels)
//!                                  or x86::kquant
//!   tail rows, other formats ─► dot_row per cell
//! ```
//!
//! * `dispatch` — given the format, the [`KernelPath`] and the CPU's
//!   [`Level`], which driver runs with which kernels (its header has the
//!   table per format and path); the only module that names `x86`.
//! * `blocked` — the Q4_1 / Q5_0 / Q8_0 driver: input rows in passes, each
//!   pass over every group of [`ROW_GROUP`] weight rows (`group`) or, on a
//!   kernel with a wide build and enough input rows, [`WIDE_GROUPS`]
//!   groups at once (`wide`); the one-input-row driver.
//! * `chunk` — the formats' exactness bounds and the portable chunk kernels;
//!   `fused` — the interface of the fused (SIMD) chunk kernels.
//! * `kquant_tile` — the K-quant driver: tiles of [`kquant::TILE`] weight
//!   rows through a tile kernel, the rest through the row kernel;
//!   [`kquant`] — the portable K-quant row kernels and the kernel types.
//! * `x86/` — the CPU builds (leaves: they import only the portable side).
//!
//! [`rows_kernel_with`] reports which of them ran ([`RowsRun`], with the rows
//! the tile kernels did); `tests/kernels/matmul.rs` asserts it and that all
//! paths give the same bits as `dot_row` (proptest, every format),
//! `tests/kernels_guarded.rs` that every path reads only its inputs,
//! `tests/kernels/quant_exact.rs` extreme blocks.

use super::dot::dot_row;
use super::{QActs, QMatrix};
use crate::F32;
use crate::simd::Level;
use dispatch::Plan;

mod blocked;
mod chunk;
mod dispatch;
mod fused;
mod group;
pub mod kquant;
mod kquant_tile;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm32;
mod wide;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod x86;

pub use chunk::{LIM_Q4_0_D, LIM_Q4_1_D, LIM_Q4_1_M, LIM_Q5_0_D, LIM_Q8_0_D, ROW_GROUP};
pub use dispatch::KernelPath;
pub use fused::WIDE_GROUPS;
pub use wide::{AVX2_WIDE_MIN_ROWS, WIDE_MIN_ROWS};

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
    /// row well-formed), or by the x86 Q4_K / Q5_K / Q6_K decode kernel (one
    /// input row, well-formed: every row), or the Q4_1 / Q5_0 / Q8_0 rows done by the VNNI build's
    /// wide kernel, [`WIDE_GROUPS`]·[`ROW_GROUP`] at a time (at least
    /// [`WIDE_MIN_ROWS`] input rows); 0 elsewhere.
    pub tiled_rows: usize,
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
        Plan::KQuant(kernels) => kquant_tile::kquant_rows(w, r0, x, out, kernels),
        Plan::Fused(f, level) => {
            let (done, wide) = f(w, r0, x, out);
            (done, level, wide)
        }
        Plan::Split(f) => (blocked::split_rows(w, r0, x, out, f), Level::Portable, 0),
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
