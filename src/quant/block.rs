//! GGUF block structs, byte-exact and zero-copy.
//!
//! Every struct is `#[repr(C)]` over byte arrays only (alignment 1), so a
//! `&[u8]` of whole blocks casts to `&[Block…]` without copying on every
//! host. Multi-byte fields are kept as `[u8; N]` and decoded explicitly as
//! little-endian by the accessor methods, so a big-endian host reads the same
//! values. Field names follow `ggml-common.h`.

#![forbid(unsafe_code)]

use crate::{Error, Result};
use bytemuck::{Pod, Zeroable};
use core::mem::size_of;

/// Elements in every 32-block format (`QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK8_1`).
pub const QK: usize = 32;
/// Elements in a K-quant super-block (`QK_K`).
pub const QK_K: usize = 256;

/// `Q4_0`: `y = ((q & 15) - 8) · d`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4_0 {
    /// Scale, f16 bits (LE).
    pub d: [u8; 2],
    /// Nibbles: low nibble of `qs[j]` is element `j`, high nibble element `j + 16`.
    pub qs: [u8; 16],
}

/// `Q4_1`: `y = (q · d) + m`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4_1 {
    /// Scale, f16 bits (LE).
    pub d: [u8; 2],
    /// Minimum, f16 bits (LE).
    pub m: [u8; 2],
    /// Nibbles, as in [`BlockQ4_0`].
    pub qs: [u8; 16],
}

/// `Q5_0`: `y = ((nib | hi << 4) - 16) · d`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5_0 {
    /// Scale, f16 bits (LE).
    pub d: [u8; 2],
    /// Fifth bits, a LE `u32`: bit `j` belongs to element `j`.
    pub qh: [u8; 4],
    /// Low nibbles, as in [`BlockQ4_0`].
    pub qs: [u8; 16],
}

/// `Q5_1`: `y = ((nib | hi << 4) · d) + m`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5_1 {
    /// Scale, f16 bits (LE).
    pub d: [u8; 2],
    /// Minimum, f16 bits (LE).
    pub m: [u8; 2],
    /// Fifth bits, a LE `u32`.
    pub qh: [u8; 4],
    /// Low nibbles.
    pub qs: [u8; 16],
}

/// `Q8_0`: `y = q · d`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_0 {
    /// Scale, f16 bits (LE).
    pub d: [u8; 2],
    /// Quants.
    pub qs: [i8; 32],
}

/// `Q8_1` (activations): `Q8_0` plus `s = f16(d · Σ qs)`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_1 {
    /// Scale, f16 bits (LE).
    pub d: [u8; 2],
    /// `d · Σ qs` rounded to f16 (with the unrounded f32 `d`), f16 bits (LE).
    pub s: [u8; 2],
    /// Quants.
    pub qs: [i8; 32],
}

/// `Q4_K`: 8 sub-blocks of 32 with 6-bit scales and mins.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4_K {
    /// Super-block scale for the scales, f16 bits (LE).
    pub d: [u8; 2],
    /// Super-block scale for the mins, f16 bits (LE).
    pub dmin: [u8; 2],
    /// Packed 6-bit scales and mins (`get_scale_min_k4`).
    pub scales: [u8; 12],
    /// Nibbles: chunk `c` (64 elements) is `qs[32c..32c+32]`, low nibbles first.
    pub qs: [u8; 128],
}

/// `Q5_K`: [`BlockQ4_K`] with a fifth bit per element.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5_K {
    /// Super-block scale for the scales, f16 bits (LE).
    pub d: [u8; 2],
    /// Super-block scale for the mins, f16 bits (LE).
    pub dmin: [u8; 2],
    /// Packed 6-bit scales and mins (`get_scale_min_k4`).
    pub scales: [u8; 12],
    /// Fifth bits: bit `j` of `qh[l]` belongs to element `32j + l`.
    pub qh: [u8; 32],
    /// Low nibbles, laid out as in [`BlockQ4_K`].
    pub qs: [u8; 128],
}

/// `Q6_K`: 16 groups of 16 with `i8` scales.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ6_K {
    /// Low 4 bits of the quants.
    pub ql: [u8; 128],
    /// High 2 bits of the quants.
    pub qh: [u8; 64],
    /// Scale of group `i / 16` of element `i`.
    pub scales: [i8; 16],
    /// Super-block scale, f16 bits (LE).
    pub d: [u8; 2],
}

const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ4_1>() == 20);
const _: () = assert!(size_of::<BlockQ5_0>() == 22);
const _: () = assert!(size_of::<BlockQ5_1>() == 24);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ8_1>() == 36);
const _: () = assert!(size_of::<BlockQ4_K>() == 144);
const _: () = assert!(size_of::<BlockQ5_K>() == 176);
const _: () = assert!(size_of::<BlockQ6_K>() == 210);

/// Little-endian `u16` from two bytes.
#[inline(always)]
pub const fn le16(b: [u8; 2]) -> u16 {
    u16::from_le_bytes(b)
}

impl BlockQ4_0 {
    /// Scale (f16 bits).
    #[inline(always)]
    pub const fn d(&self) -> u16 {
        le16(self.d)
    }
}
impl BlockQ4_1 {
    /// Scale (f16 bits).
    #[inline(always)]
    pub const fn d(&self) -> u16 {
        le16(self.d)
    }
    /// Minimum (f16 bits).
    #[inline(always)]
    pub const fn m(&self) -> u16 {
        le16(self.m)
    }
}
impl BlockQ5_0 {
    /// Scale (f16 bits).
    #[inline(always)]
    pub const fn d(&self) -> u16 {
        le16(self.d)
    }
    /// The 32 fifth bits.
    #[inline(always)]
    pub const fn qh(&self) -> u32 {
        u32::from_le_bytes(self.qh)
    }
}
impl BlockQ5_1 {
    /// Scale (f16 bits).
    #[inline(always)]
    pub const fn d(&self) -> u16 {
        le16(self.d)
    }
    /// Minimum (f16 bits).
    #[inline(always)]
    pub const fn m(&self) -> u16 {
        le16(self.m)
    }
    /// The 32 fifth bits.
    #[inline(always)]
    pub const fn qh(&self) -> u32 {
        u32::from_le_bytes(self.qh)
    }
}
impl BlockQ8_0 {
    /// Scale (f16 bits).
    #[inline(always)]
    pub const fn d(&self) -> u16 {
        le16(self.d)
    }
}
impl BlockQ8_1 {
    /// Scale (f16 bits).
    #[inline(always)]
    pub const fn d(&self) -> u16 {
        le16(self.d)
    }
    /// `d · Σ qs` (f16 bits).
    #[inline(always)]
    pub const fn s(&self) -> u16 {
        le16(self.s)
    }
}
impl BlockQ4_K {
    /// Scale of the scales (f16 bits).
    #[inline(always)]
    pub const fn d(&self) -> u16 {
        le16(self.d)
    }
    /// Scale of the mins (f16 bits).
    #[inline(always)]
    pub const fn dmin(&self) -> u16 {
        le16(self.dmin)
    }
    /// `(scale, min)` of sub-block `j` (0..8), 6 bits each (`get_scale_min_k4`).
    #[inline(always)]
    pub const fn scale_min(&self, j: usize) -> (u8, u8) {
        k_scale_min(&self.scales, j)
    }
    /// Quant of element `i` (0..256), 0..=15.
    #[inline(always)]
    pub const fn q(&self, i: usize) -> u8 {
        let b = self.qs[32 * (i / 64) + i % 32];
        if (i / 32) & 1 == 0 { b & 15 } else { b >> 4 }
    }
}
impl BlockQ5_K {
    /// Scale of the scales (f16 bits).
    #[inline(always)]
    pub const fn d(&self) -> u16 {
        le16(self.d)
    }
    /// Scale of the mins (f16 bits).
    #[inline(always)]
    pub const fn dmin(&self) -> u16 {
        le16(self.dmin)
    }
    /// `(scale, min)` of sub-block `j` (0..8), as [`BlockQ4_K::scale_min`].
    #[inline(always)]
    pub const fn scale_min(&self, j: usize) -> (u8, u8) {
        k_scale_min(&self.scales, j)
    }
    /// Quant of element `i` (0..256), 0..=31: the [`BlockQ4_K`] nibble plus
    /// 16 if bit `i / 32` of `qh[i % 32]` is set.
    #[inline(always)]
    pub const fn q(&self, i: usize) -> u8 {
        let b = self.qs[32 * (i / 64) + i % 32];
        let nib = if (i / 32) & 1 == 0 { b & 15 } else { b >> 4 };
        nib | (((self.qh[i % 32] >> (i / 32)) & 1) << 4)
    }
}

/// `(scale, min)` of sub-block `j` (0..8) of a Q4_K / Q5_K super-block from
/// its 12 packed bytes, 6 bits each (`get_scale_min_k4`).
#[inline(always)]
pub const fn k_scale_min(s: &[u8; 12], j: usize) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

impl BlockQ6_K {
    /// Super-block scale (f16 bits).
    #[inline(always)]
    pub const fn d(&self) -> u16 {
        le16(self.d)
    }
    /// Quant of element `i` (0..256), -32..=31.
    #[inline(always)]
    pub const fn q(&self, i: usize) -> i8 {
        let h = i / 128; // half
        let r = i % 128;
        let l = r % 32;
        let quarter = r / 32; // 0..4
        let ql = self.ql[64 * h + l + 32 * (quarter % 2)];
        let low = if quarter < 2 { ql & 15 } else { ql >> 4 };
        let high = (self.qh[32 * h + l] >> (2 * quarter)) & 3;
        (low | (high << 4)) as i8 - 32
    }
}

/// `data` viewed as whole blocks of `B` (zero-copy).
pub fn blocks<B: Pod>(data: &[u8]) -> Result<&[B]> {
    let size = size_of::<B>();
    if !data.len().is_multiple_of(size) {
        return Err(Error::ShapeMismatch {
            expected: data.len().next_multiple_of(size),
            found: data.len(),
        });
    }
    bytemuck::try_cast_slice(data).map_err(|_| Error::SizeOverflow)
}
