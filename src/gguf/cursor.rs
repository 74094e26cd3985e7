//! A bounded little-endian cursor over `&[u8]`.
//!
//! Every read checks the bytes left and fails with
//! [`GgufError::Truncated`]; nothing indexes the slice directly.

#![forbid(unsafe_code)]

use super::error::GgufError;

/// Position in a byte slice; reads advance it only when they succeed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// `usize` → `u64` (lossless on every supported target: usize ≤ 64 bits).
#[inline]
pub(crate) const fn u64_of(n: usize) -> u64 {
    n as u64
}

impl<'a> Cursor<'a> {
    /// A cursor at `pos` (callers pass `pos <= bytes.len()`; a larger `pos`
    /// just makes every read fail).
    pub(crate) const fn at(bytes: &'a [u8], pos: usize) -> Self {
        Cursor { bytes, pos }
    }

    /// Current position.
    pub(crate) const fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left after the position.
    pub(crate) const fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes, advancing past them.
    pub(crate) fn take(&mut self, n: u64) -> Result<&'a [u8], GgufError> {
        let truncated = GgufError::Truncated {
            offset: u64_of(self.pos),
            needed: n,
        };
        let n = usize::try_from(n).map_err(|_| truncated)?;
        let end = self.pos.checked_add(n).ok_or(truncated)?;
        let s = self.bytes.get(self.pos..end).ok_or(truncated)?;
        self.pos = end;
        Ok(s)
    }

    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], GgufError> {
        let s = self.take(N as u64)?;
        <[u8; N]>::try_from(s).map_err(|_| GgufError::Truncated {
            offset: u64_of(self.pos),
            needed: N as u64,
        })
    }

    /// One byte.
    pub(crate) fn u8(&mut self) -> Result<u8, GgufError> {
        Ok(self.array::<1>()?[0])
    }

    /// Little-endian u16.
    pub(crate) fn u16(&mut self) -> Result<u16, GgufError> {
        self.array().map(u16::from_le_bytes)
    }

    /// Little-endian u32.
    pub(crate) fn u32(&mut self) -> Result<u32, GgufError> {
        self.array().map(u32::from_le_bytes)
    }

    /// Little-endian u64.
    pub(crate) fn u64(&mut self) -> Result<u64, GgufError> {
        self.array().map(u64::from_le_bytes)
    }
}

/// Little-endian u32 at `i` of `s`, if in bounds.
#[inline]
pub(crate) fn le_u32_at(s: &[u8], i: usize) -> Option<u32> {
    let end = i.checked_add(4)?;
    let b = s.get(i..end)?;
    Some(u32::from_le_bytes(<[u8; 4]>::try_from(b).ok()?))
}
