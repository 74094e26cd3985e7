//! Tensor infos: [`TensorInfo`], the ggml type table, and the validation of
//! one info record.
//!
//! A record is `str name; u32 n_dims; i64 ne[n_dims]; i32 ggml_type;
//! u64 offset`. Its size depends only on the name length and `n_dims`, so
//! records can be skipped in O(1) (the duplicate-name scan relies on it).

#![forbid(unsafe_code)]

use super::cursor::{Cursor, u64_of};
use super::error::GgufError;
use super::value::read_str;
use crate::quant::GgmlType;

/// Longest tensor name in bytes (`GGML_MAX_NAME` = 64 including the NUL).
pub const MAX_NAME_LEN: usize = 63;
/// Most dimensions a tensor may have (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// The name llama.cpp gives ggml type id `id`, or `None` if llama.cpp does
/// not define it (never did, or removed it: 4, 5, 31-33, 36-38).
///
/// Ids 0..=38 are llama.cpp's `GGML_TYPE_COUNT` = 39 as of 2025-02; 39
/// (`MXFP4`) was added later and is listed so that newer files report
/// "unsupported" rather than "unknown".
pub const fn ggml_type_name(id: u32) -> Option<&'static str> {
    Some(match id {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        6 => "Q5_0",
        7 => "Q5_1",
        8 => "Q8_0",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        30 => "BF16",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => return None,
    })
}

/// One tensor: name, type, shape and exactly its bytes in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorInfo<'a> {
    /// The name (validated UTF-8, at most 63 bytes).
    pub name: &'a [u8],
    /// The block format.
    pub ty: GgmlType,
    /// Dimensions recorded in the file (0..=4).
    pub n_dims: u32,
    /// Shape, fastest-varying first (`ne[0]` is the row length); missing
    /// dimensions are 1. A PyTorch `(out, in)` weight has `ne = [in, out, 1, 1]`.
    pub ne: [u64; 4],
    /// Offset of the data from the start of the data section.
    pub offset: u64,
    /// The tensor's bytes, exactly `n_bytes()` long.
    pub data: &'a [u8],
}

impl<'a> TensorInfo<'a> {
    /// The name as `&str` (names are validated as UTF-8 when the file is
    /// parsed).
    pub fn name_str(&self) -> &'a str {
        core::str::from_utf8(self.name).unwrap_or("")
    }

    /// Total number of elements, `ne[0]*ne[1]*ne[2]*ne[3]` (checked to fit
    /// an `i64` when the file was parsed).
    pub fn n_elements(&self) -> u64 {
        self.ne.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }

    /// Number of rows, `ne[1]*ne[2]*ne[3]`.
    pub fn n_rows(&self) -> u64 {
        self.ne[1..].iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }

    /// Bytes of one row of `ne[0]` elements (`ne[0]` is a whole number of
    /// blocks and the product fits a `u64`: both checked at parse time).
    pub fn row_bytes(&self) -> u64 {
        (self.ne[0] / u64_of(self.ty.block_size())).saturating_mul(u64_of(self.ty.type_size()))
    }

    /// Bytes of the whole tensor (`data.len()`).
    pub fn n_bytes(&self) -> usize {
        self.data.len()
    }
}

/// A validated info record before its data is resolved.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawInfo<'a> {
    pub(crate) name: &'a [u8],
    pub(crate) ty: GgmlType,
    pub(crate) n_dims: u32,
    pub(crate) ne: [u64; 4],
    pub(crate) offset: u64,
    pub(crate) n_bytes: u64,
}

/// Read and validate tensor info `index` at the cursor: name length and
/// UTF-8, `n_dims <= 4`, `ne >= 0`, known and supported type, element count
/// within `i64`, `ne[0] % block_size == 0`, byte size within `u64`.
pub(crate) fn read_info<'a>(cur: &mut Cursor<'a>, index: u32) -> Result<RawInfo<'a>, GgufError> {
    // Every field is read before the semantic checks, so a cut file reports
    // `Truncated` wherever the cut is.
    let name = read_str(cur)?;
    if name.len() > MAX_NAME_LEN {
        return Err(GgufError::TensorNameTooLong {
            index,
            len: u64_of(name.len()),
        });
    }
    let n_dims = cur.u32()?;
    if n_dims > MAX_DIMS as u32 {
        return Err(GgufError::TooManyDims { index, n_dims });
    }
    let mut ne = [1u64; 4];
    for d in ne.iter_mut().take(n_dims as usize) {
        *d = cur.u64()?;
    }
    let type_id = cur.u32()?;
    let offset = cur.u64()?;

    if core::str::from_utf8(name).is_err() {
        return Err(GgufError::InvalidUtf8TensorName { index });
    }
    for (dim, &d) in (0u32..).zip(ne.iter()) {
        if d > i64::MAX as u64 {
            return Err(GgufError::NegativeDim { index, dim });
        }
    }
    let ty = match GgmlType::from_u32(type_id) {
        Some(ty) => ty,
        None if ggml_type_name(type_id).is_some() => {
            return Err(GgufError::UnsupportedTensorType { index, type_id });
        }
        None => return Err(GgufError::UnknownTensorType { index, type_id }),
    };
    let mut n_elements = 1u64;
    for &d in &ne {
        n_elements = n_elements
            .checked_mul(d)
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or(GgufError::ElementCountOverflow { index })?;
    }
    let block_size = u64_of(ty.block_size());
    if !ne[0].is_multiple_of(block_size) {
        return Err(GgufError::RowNotBlockMultiple {
            index,
            ne0: ne[0],
            block_size: ty.block_size() as u32,
        });
    }
    let overflow = GgufError::ByteSizeOverflow { index };
    let mut n_bytes = (ne[0] / block_size)
        .checked_mul(u64_of(ty.type_size()))
        .ok_or(overflow)?;
    for &d in &ne[1..] {
        n_bytes = n_bytes.checked_mul(d).ok_or(overflow)?;
    }
    Ok(RawInfo {
        name,
        ty,
        n_dims,
        ne,
        offset,
        n_bytes,
    })
}

/// Skip one (already validated) info record, returning its name.
pub(crate) fn skip_info<'a>(cur: &mut Cursor<'a>) -> Option<&'a [u8]> {
    let name = read_str(cur).ok()?;
    let n_dims = cur.u32().ok()?;
    // ne[n_dims] (8 each) + type (4) + offset (8)
    cur.take(u64::from(n_dims).checked_mul(8)?.checked_add(12)?)
        .ok()?;
    Some(name)
}
