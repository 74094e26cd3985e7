//! [`RowStore`]: the element storage of a cache, rows of `kv_dim` elements.
//!
//! One job: keep rows in the cache's element type, convert F32 rows on write
//! (binary16: round to nearest, ties to even), copy and zero row ranges. The
//! caches decide which row index holds what.

#![forbid(unsafe_code)]

use super::{KvSlice, KvType};
use crate::{Arena, Error, F32, Result};

/// Storage in the element type.
enum Elems<'a> {
    F16(&'a mut [u16]),
    F32(&'a mut [F32]),
}

/// `n_rows` rows of `kv_dim` elements, carved from an arena.
pub(crate) struct RowStore<'a> {
    elems: Elems<'a>, // (n_rows, kv_dim)
    kv_dim: usize,
}

/// Shared read access to a [`RowStore`], `Copy` so views can hold it.
#[derive(Clone, Copy)]
pub(crate) enum RowsRef<'s> {
    F16(&'s [u16]),
    F32(&'s [F32]),
}

impl<'s> RowsRef<'s> {
    /// Row `r` (empty when out of range).
    #[inline]
    pub(crate) fn row(self, r: usize, kv_dim: usize) -> KvSlice<'s> {
        let range = r
            .checked_mul(kv_dim)
            .and_then(|start| Some(start..start.checked_add(kv_dim)?));
        match self {
            RowsRef::F16(s) => KvSlice::F16(range.and_then(|rg| s.get(rg)).unwrap_or(&[])),
            RowsRef::F32(s) => KvSlice::F32(range.and_then(|rg| s.get(rg)).unwrap_or(&[])),
        }
    }

    /// An empty row of this element type.
    #[inline]
    pub(crate) fn empty(self) -> KvSlice<'s> {
        match self {
            RowsRef::F16(_) => KvSlice::F16(&[]),
            RowsRef::F32(_) => KvSlice::F32(&[]),
        }
    }
}

/// Element range of rows `[r, r + n)`, `None` on overflow.
fn span(r: usize, n: usize, kv_dim: usize) -> Option<core::ops::Range<usize>> {
    let start = r.checked_mul(kv_dim)?;
    let end = r.checked_add(n)?.checked_mul(kv_dim)?;
    Some(start..end)
}

impl<'a> RowStore<'a> {
    /// Exact worst-case arena bytes for `n_rows` rows.
    pub(crate) fn bytes_required(elem: KvType, kv_dim: usize, n_rows: usize) -> Option<usize> {
        let n = n_rows.checked_mul(kv_dim)?;
        match elem {
            KvType::F16 => Arena::bytes_for::<u16>(n),
            KvType::F32 => Arena::bytes_for::<F32>(n),
        }
    }

    /// Zeroed storage for `n_rows` rows.
    pub(crate) fn new(
        arena: &mut Arena<'a>,
        elem: KvType,
        kv_dim: usize,
        n_rows: usize,
    ) -> Result<Self> {
        let n = n_rows.checked_mul(kv_dim).ok_or(Error::SizeOverflow)?;
        let elems = match elem {
            KvType::F16 => Elems::F16(arena.alloc::<u16>(n)?),
            KvType::F32 => Elems::F32(arena.alloc::<F32>(n)?),
        };
        Ok(RowStore { elems, kv_dim })
    }

    /// Shared read access.
    pub(crate) fn rows(&self) -> RowsRef<'_> {
        match &self.elems {
            Elems::F16(s) => RowsRef::F16(s),
            Elems::F32(s) => RowsRef::F32(s),
        }
    }

    /// Stores `src` (`kv_dim` values) as row `r`, converting to the element type.
    pub(crate) fn write(&mut self, r: usize, src: &[F32]) -> Result<()> {
        if src.len() != self.kv_dim {
            return Err(Error::ShapeMismatch {
                expected: self.kv_dim,
                found: src.len(),
            });
        }
        let rg = span(r, 1, self.kv_dim).ok_or(Error::SizeOverflow)?;
        let len = self.elem_len();
        let out_of_range = Error::BufferTooSmall {
            needed: rg.end,
            available: len,
        };
        match &mut self.elems {
            Elems::F16(s) => {
                let dst = s.get_mut(rg).ok_or(out_of_range)?;
                for (d, x) in dst.iter_mut().zip(src) {
                    *d = x.to_f16_bits();
                }
            }
            Elems::F32(s) => s.get_mut(rg).ok_or(out_of_range)?.copy_from_slice(src),
        }
        Ok(())
    }

    /// Copies rows `[src, src + n)` onto rows `[dst, dst + n)` (ranges must not overlap).
    pub(crate) fn copy(&mut self, src: usize, dst: usize, n: usize) -> Result<()> {
        let s = span(src, n, self.kv_dim).ok_or(Error::SizeOverflow)?;
        let d = span(dst, n, self.kv_dim).ok_or(Error::SizeOverflow)?;
        let len = self.elem_len();
        let end = s.end.max(d.end);
        if end > len {
            return Err(Error::BufferTooSmall {
                needed: end,
                available: len,
            });
        }
        match &mut self.elems {
            Elems::F16(x) => x.copy_within(s, d.start),
            Elems::F32(x) => x.copy_within(s, d.start),
        }
        Ok(())
    }

    /// Sets rows `[r, r + n)` to zero.
    pub(crate) fn zero(&mut self, r: usize, n: usize) -> Result<()> {
        let rg = span(r, n, self.kv_dim).ok_or(Error::SizeOverflow)?;
        let len = self.elem_len();
        let out_of_range = Error::BufferTooSmall {
            needed: rg.end,
            available: len,
        };
        match &mut self.elems {
            Elems::F16(x) => x.get_mut(rg).ok_or(out_of_range)?.fill(0),
            Elems::F32(x) => x.get_mut(rg).ok_or(out_of_range)?.fill(F32::ZERO),
        }
        Ok(())
    }

    fn elem_len(&self) -> usize {
        match &self.elems {
            Elems::F16(s) => s.len(),
            Elems::F32(s) => s.len(),
        }
    }
}
