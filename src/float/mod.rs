//! Soft IEEE-754 binary32: [`F32`].
//!
//! Every value is its bit pattern in a `u32`; every operation is integer code.
//! Results are correctly rounded (round to nearest, ties to even), subnormals
//! are honoured, and every NaN result is the canonical quiet NaN
//! `0x7FC0_0000`.

#![forbid(unsafe_code)]

mod add;
mod cmp;
mod convert;
mod div;
mod fmt;
mod mul;
mod pack;
mod sqrt;

pub(crate) use add::{add_same_sign_try, add_try, add_zero_try, sum_left_to_right};
pub(crate) use convert::to_f16_bits_try;
pub use convert::{BF16_NAN, F16_NAN};
pub(crate) use div::div_try;
pub(crate) use mul::{mul_try, mul_zero_try};
pub(crate) use pack::from_i64_scaled_try;
pub use pack::round_pack;

/// IEEE-754 binary32 stored as its bit pattern.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct F32(pub(crate) u32);

/// Number of explicit significand bits.
pub const SIG_BITS: u32 = 23;
/// Mask of the exponent field.
pub const EXP_MASK: u32 = 0x7F80_0000;
/// Mask of the significand field.
pub const SIG_MASK: u32 = 0x007F_FFFF;
/// The sign bit.
pub const SIGN_MASK: u32 = 0x8000_0000;
/// Exponent bias.
pub const EXP_BIAS: i32 = 127;

impl F32 {
    /// +0.0
    pub const ZERO: F32 = F32(0x0000_0000);
    /// -0.0
    pub const NEG_ZERO: F32 = F32(0x8000_0000);
    /// 1.0
    pub const ONE: F32 = F32(0x3F80_0000);
    /// -1.0
    pub const NEG_ONE: F32 = F32(0xBF80_0000);
    /// 2.0
    pub const TWO: F32 = F32(0x4000_0000);
    /// 0.5
    pub const HALF: F32 = F32(0x3F00_0000);
    /// +∞
    pub const INFINITY: F32 = F32(0x7F80_0000);
    /// -∞
    pub const NEG_INFINITY: F32 = F32(0xFF80_0000);
    /// The canonical quiet NaN, the only NaN any operation returns.
    pub const NAN: F32 = F32(0x7FC0_0000);
    /// Smallest positive normal number, 2^-126.
    pub const MIN_POSITIVE: F32 = F32(0x0080_0000);
    /// Smallest positive subnormal number, 2^-149.
    pub const MIN_POSITIVE_SUBNORMAL: F32 = F32(0x0000_0001);
    /// Machine epsilon, 2^-23.
    pub const EPSILON: F32 = F32(0x3400_0000);
    /// Largest finite number.
    pub const MAX: F32 = F32(0x7F7F_FFFF);
    /// Most negative finite number.
    pub const MIN: F32 = F32(0xFF7F_FFFF);

    /// The value with this bit pattern.
    #[inline]
    pub const fn from_bits(bits: u32) -> F32 {
        F32(bits)
    }

    /// The bit pattern.
    #[inline]
    pub const fn to_bits(self) -> u32 {
        self.0
    }

    /// True for every NaN pattern.
    #[inline]
    pub const fn is_nan(self) -> bool {
        self.0 & 0x7FFF_FFFF > EXP_MASK
    }

    /// True for ±∞.
    #[inline]
    pub const fn is_infinite(self) -> bool {
        self.0 & 0x7FFF_FFFF == EXP_MASK
    }

    /// True for everything but ±∞ and NaN.
    #[inline]
    pub const fn is_finite(self) -> bool {
        self.0 & EXP_MASK != EXP_MASK
    }

    /// True for ±0.
    #[inline]
    pub const fn is_zero(self) -> bool {
        self.0 & 0x7FFF_FFFF == 0
    }

    /// True when the sign bit is set (NaN and -0 included).
    #[inline]
    pub const fn is_sign_negative(self) -> bool {
        self.0 & SIGN_MASK != 0
    }

    /// Magnitude (clears the sign bit; NaN stays the NaN it was).
    #[inline]
    pub const fn abs(self) -> F32 {
        F32(self.0 & 0x7FFF_FFFF)
    }

    /// `self` with the sign of `sign`.
    #[inline]
    pub const fn copysign(self, sign: F32) -> F32 {
        F32((self.0 & 0x7FFF_FFFF) | (sign.0 & SIGN_MASK))
    }

    /// Negation: flips the sign bit (IEEE `negate`, a bit operation).
    #[inline]
    pub const fn neg(self) -> F32 {
        F32(self.0 ^ SIGN_MASK)
    }

    /// The value `sig · 2^exp` rounded to nearest, ties to even.
    ///
    /// Exact integer input, one rounding: the tool every exact accumulator
    /// uses to leave fixed point.
    #[inline]
    pub fn from_i128_scaled(sig: i128, exp: i32) -> F32 {
        let a = sig.unsigned_abs();
        match u64::try_from(a) {
            Ok(a) => pack::round_pack_u64(sig < 0, a, exp),
            Err(_) => round_pack(sig < 0, a, exp),
        }
    }

    /// `v` rounded to nearest, ties to even.
    #[inline]
    pub fn from_i32(v: i32) -> F32 {
        pack::round_pack_u64(v < 0, v.unsigned_abs() as u64, 0)
    }

    /// `v` rounded to nearest, ties to even.
    #[inline]
    pub fn from_u32(v: u32) -> F32 {
        pack::round_pack_u64(false, v as u64, 0)
    }

    /// `v` rounded to nearest, ties to even.
    #[inline]
    pub fn from_i64(v: i64) -> F32 {
        pack::round_pack_u64(v < 0, v.unsigned_abs(), 0)
    }
}

impl core::ops::Neg for F32 {
    type Output = F32;
    #[inline]
    fn neg(self) -> F32 {
        F32::neg(self)
    }
}
