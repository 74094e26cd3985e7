//! Binary16 scales as exact fixed-point integers, and the `i128` accumulator.
//!
//! A finite binary16 value is `mant · 2^(sh - 24)` with `|mant| < 2^11` and
//! `sh` in `0..=29`:
//!
//! * normal (`e = 1..=30`): `mant = 1024 | frac`, `sh = e - 1`;
//! * subnormal (`e = 0`): `mant = frac`, `sh = 0`.
//!
//! A product of two such values is `ma · mb · 2^(sha + shb - 48)`, an integer
//! multiple of 2^[`QUANTUM_EXP`] = 2^-48. Every exact dot product in this crate
//! accumulates its terms as integers in units of 2^-48 in an `i128` and rounds
//! once with [`F32::from_i128_scaled`]. See `docs/ARITHMETIC.md` for the bound.

#![forbid(unsafe_code)]

use crate::F32;

/// Binary exponent of the accumulator's unit: sums are in units of 2^-48.
pub const QUANTUM_EXP: i32 = -48;

/// Exponent field of binary16.
pub const F16_EXP_MASK: u16 = 0x7C00;
/// Fraction field of binary16.
pub const F16_FRAC_MASK: u16 = 0x03FF;
/// Sign bit of binary16.
pub const F16_SIGN: u16 = 0x8000;

/// True for binary16 ±∞ and NaN.
#[inline(always)]
pub const fn f16_nonfinite(h: u16) -> bool {
    h & F16_EXP_MASK == F16_EXP_MASK
}

/// `(mant, sh)` with `h = mant · 2^(sh - 24)`, sign in `mant`. For ±∞/NaN the
/// result is meaningless; callers test [`f16_nonfinite`] separately.
#[inline(always)]
pub const fn f16_fixed(h: u16) -> (i32, u32) {
    let e = ((h >> 10) & 0x1F) as u32;
    let frac = (h & F16_FRAC_MASK) as i32;
    let (mant, sh) = if e == 0 {
        (frac, 0)
    } else {
        (frac | 0x400, e - 1)
    };
    (if h & F16_SIGN != 0 { -mant } else { mant }, sh)
}

/// Exact sum in units of 2^-48, plus a flag for a non-finite input scale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExactAcc {
    /// The sum, in units of 2^-48.
    pub sum: i128,
    /// Set when any scale was ±∞ or NaN; the result is then NaN.
    pub nonfinite: bool,
}

impl ExactAcc {
    /// Adds `t · 2^sh` (units of 2^-48).
    #[inline(always)]
    pub fn add_shifted(&mut self, t: i64, sh: u32) {
        self.sum += (t as i128) << sh;
    }

    /// The sum rounded once to binary32 (RNE); NaN if any scale was non-finite.
    #[inline]
    pub fn finish(self) -> F32 {
        if self.nonfinite {
            F32::NAN
        } else {
            F32::from_i128_scaled(self.sum, QUANTUM_EXP)
        }
    }

    /// [`Self::finish`] of `sum · 2^sh` (the sum kept unshifted).
    #[inline]
    pub fn finish_scaled(self, sh: u32) -> F32 {
        if self.nonfinite {
            F32::NAN
        } else {
            F32::from_i128_scaled(self.sum, QUANTUM_EXP + sh as i32)
        }
    }
}
