//! [`QMatrix`]: a weight `(n_out, n_in)` borrowed zero-copy from model bytes.

#![forbid(unsafe_code)]

use super::GgmlType;
use super::dequant::dequantize_row;
use crate::{Error, F32, Result};

/// Longest row any exact dot accepts: 2^24 elements. The exact accumulators
/// stay below 2^127 up to 2^27 (see `docs/ARITHMETIC.md`); 2^24 leaves margin.
pub const MAX_ROW_LEN: usize = 1 << 24;

/// A weight matrix, row `o` holding the `n_in` weights of output `o`.
#[derive(Clone, Copy, Debug)]
pub struct QMatrix<'w> {
    /// Element type.
    pub ty: GgmlType,
    /// Row length (inputs).
    pub n_in: usize,
    /// Rows (outputs).
    pub n_out: usize,
    /// `n_out` rows of `ty.row_bytes(n_in)` bytes.
    pub data: &'w [u8], // (n_out, n_in)
    row_bytes: usize,
}

impl<'w> QMatrix<'w> {
    /// Borrows `data` as an `(n_out, n_in)` matrix of `ty`; its length must be
    /// exactly `n_out · row_bytes(n_in)`. `Q8_1` (activations only) and rows
    /// longer than [`MAX_ROW_LEN`] are refused.
    pub fn new(ty: GgmlType, n_in: usize, n_out: usize, data: &'w [u8]) -> Result<Self> {
        if ty == GgmlType::Q8_1 {
            return Err(Error::UnsupportedType {
                ggml_type: ty as u32,
            });
        }
        if n_in > MAX_ROW_LEN {
            return Err(Error::ShapeMismatch {
                expected: MAX_ROW_LEN,
                found: n_in,
            });
        }
        let row_bytes = ty.row_bytes(n_in)?;
        let need = row_bytes.checked_mul(n_out).ok_or(Error::SizeOverflow)?;
        if data.len() != need {
            return Err(Error::ShapeMismatch {
                expected: need,
                found: data.len(),
            });
        }
        Ok(QMatrix {
            ty,
            n_in,
            n_out,
            data,
            row_bytes,
        })
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// The bytes of row `i`.
    pub fn row(&self, i: usize) -> Result<&'w [u8]> {
        let start = i.checked_mul(self.row_bytes).ok_or(Error::SizeOverflow)?;
        self.data
            .get(start..start + self.row_bytes)
            .ok_or(Error::ShapeMismatch {
                expected: self.n_out,
                found: i,
            })
    }

    /// Row `i` dequantized into `out` (`n_in`), e.g. an embedding lookup.
    pub fn dequantize_row(&self, i: usize, out: &mut [F32]) -> Result<()> {
        if out.len() != self.n_in {
            return Err(Error::ShapeMismatch {
                expected: self.n_in,
                found: out.len(),
            });
        }
        dequantize_row(self.ty, self.row(i)?, out)
    }
}
