//! Conversions: binary16, bfloat16 and integers.

#![forbid(unsafe_code)]

use super::{EXP_MASK, F32, SIGN_MASK, round_pack};

/// The canonical binary16 NaN every conversion to f16 returns for a NaN.
pub const F16_NAN: u16 = 0x7E00;
/// The canonical bfloat16 NaN every conversion to bf16 returns for a NaN.
pub const BF16_NAN: u16 = 0x7FC0;

impl F32 {
    /// Exact conversion from IEEE binary16 bits; NaN gives [`F32::NAN`].
    #[inline]
    pub fn from_f16_bits(h: u16) -> F32 {
        let sign = ((h as u32) & 0x8000) << 16;
        let e = ((h >> 10) & 0x1F) as u32;
        let m = (h & 0x3FF) as u32;
        if e == 0x1F {
            return if m == 0 {
                F32(sign | EXP_MASK)
            } else {
                F32::NAN
            };
        }
        if e == 0 {
            if m == 0 {
                return F32(sign);
            }
            // Subnormal half: m · 2^-24, normal as a binary32.
            let s = m.leading_zeros() - 21; // shift that puts the top bit at 2^10
            let m = (m << s) & 0x3FF;
            let e32 = 127 - 15 + 1 - s;
            return F32(sign | (e32 << 23) | (m << 13));
        }
        F32(sign | ((e + 127 - 15) << 23) | (m << 13))
    }

    /// Round to IEEE binary16 (nearest, ties to even). Overflow gives ±∞,
    /// subnormal halves are produced, NaN gives [`F16_NAN`] (`0x7E00`).
    #[inline]
    pub fn to_f16_bits(self) -> u16 {
        let x = self.0;
        let sign = ((x & SIGN_MASK) >> 16) as u16;
        let ax = x & 0x7FFF_FFFF;
        // Normal half range, |x| in [2^-14, 2^16): rebias the exponent and
        // round the 13 dropped bits to nearest even in one add; a carry
        // moves into the exponent, and up to ∞ (0x7C00) for |x| ≥ 65520.
        if ax.wrapping_sub(0x3880_0000) < 0x4780_0000 - 0x3880_0000 {
            let r = (ax - 0x3800_0000 + 0x0FFF + ((ax >> 13) & 1)) >> 13;
            return sign | r as u16;
        }
        // Subnormal half range, |x| in [2^-25, 2^-14): the significand
        // shifted to units of 2^-24 (by 14..=24 bits), rounded to nearest
        // even; rounding up to 2^-14 gives its encoding 0x0400 as well.
        if ax.wrapping_sub(0x3300_0000) < 0x3880_0000 - 0x3300_0000 {
            let sig = (ax & 0x7F_FFFF) | 0x80_0000;
            let sh = 126 - (ax >> 23);
            let q = sig >> sh;
            let rem = sig & ((1 << sh) - 1);
            let half = 1 << (sh - 1);
            let up = (rem > half || (rem == half && q & 1 == 1)) as u32;
            return sign | (q + up) as u16;
        }
        if ax > EXP_MASK {
            return F16_NAN;
        }
        if ax == EXP_MASK {
            return sign | 0x7C00;
        }
        let e = (ax >> 23) as i32;
        let (sig, exp) = if e == 0 {
            (ax, -149)
        } else {
            ((ax & 0x7F_FFFF) | 0x80_0000, e - 150)
        };
        if sig == 0 {
            return sign;
        }
        // Quantum of the result: 2^-24 for subnormal halves, else 11 bits kept.
        let n = 32 - sig.leading_zeros() as i32;
        let shift = (n - 11).max(-24 - exp);
        let (q, lsb) = if shift <= 0 {
            (sig << (-shift) as u32, exp + shift)
        } else if shift > n {
            return sign;
        } else {
            let s = shift as u32;
            let q = if s >= 32 { 0 } else { sig >> s };
            let rem = sig & (((1u64 << s) - 1) as u32);
            let half = 1u32 << (s - 1);
            let up = rem > half || (rem == half && q & 1 == 1);
            (q + up as u32, exp + shift)
        };
        // Same carry trick as binary32: (biased_exp - 1) << 10 plus q.
        if lsb > 5 {
            return sign | 0x7C00;
        }
        let bits = (((lsb + 24) as u32) << 10) + q;
        if bits >= 0x7C00 {
            sign | 0x7C00
        } else {
            sign | bits as u16
        }
    }

    /// Exact conversion from bfloat16 bits; NaN gives [`F32::NAN`].
    #[inline]
    pub fn from_bf16_bits(h: u16) -> F32 {
        let v = F32((h as u32) << 16);
        if v.is_nan() { F32::NAN } else { v }
    }

    /// Round to bfloat16 (nearest, ties to even); NaN gives [`BF16_NAN`].
    #[inline]
    pub fn to_bf16_bits(self) -> u16 {
        if self.is_nan() {
            return BF16_NAN;
        }
        let u = self.0;
        (u.wrapping_add(0x7FFF + ((u >> 16) & 1)) >> 16) as u16
    }

    /// Integer part and the dropped fraction of a finite value:
    /// `(neg, int, frac_vs_half)` where the Ordering compares the fraction to ½
    /// and `inexact` says whether any fraction was dropped.
    #[inline]
    fn split_int(self) -> (bool, u128, core::cmp::Ordering, bool) {
        let x = self.0;
        let neg = x & SIGN_MASK != 0;
        let ax = x & 0x7FFF_FFFF;
        let e = (ax >> 23) as i32;
        let (sig, exp) = if e == 0 {
            (ax as u128, -149)
        } else {
            (((ax & 0x7F_FFFF) | 0x80_0000) as u128, e - 150)
        };
        if exp >= 0 {
            // |x| >= 2^23 has no fraction; cap the shift, the caller saturates.
            // The capped `int` is NOT the value for |x| >= 2^124: only the
            // saturating i32 conversions may use it (`round_ties_away`
            // returns such inputs unchanged before calling this; issue #2).
            let s = exp.min(100) as u32;
            return (neg, sig << s, core::cmp::Ordering::Less, false);
        }
        let s = (-exp) as u32;
        if s >= 64 {
            // |x| < 2^-40: integer part 0, fraction below a half unless zero.
            return (neg, 0, core::cmp::Ordering::Less, sig != 0);
        }
        let int = sig >> s;
        let frac = sig & ((1u128 << s) - 1);
        let half = 1u128 << (s - 1);
        (neg, int, frac.cmp(&half), frac != 0)
    }

    #[inline]
    fn saturate_i32(neg: bool, mag: u128) -> i32 {
        if neg {
            if mag >= 1u128 << 31 {
                i32::MIN
            } else {
                -(mag as i64) as i32
            }
        } else if mag > i32::MAX as u128 {
            i32::MAX
        } else {
            mag as i32
        }
    }

    /// Round toward zero; saturates at `i32::MIN`/`i32::MAX`; NaN gives 0.
    #[inline]
    pub fn to_i32_trunc(self) -> i32 {
        if self.is_nan() {
            return 0;
        }
        let (neg, int, _, _) = self.split_int();
        Self::saturate_i32(neg, int)
    }

    /// Round to nearest, ties away from zero (C `roundf`, llama.cpp's
    /// reference quantizers); saturating; NaN gives 0.
    #[inline]
    pub fn to_i32_round_ties_away(self) -> i32 {
        if self.is_nan() {
            return 0;
        }
        let (neg, int, frac, _) = self.split_int();
        let int = if frac != core::cmp::Ordering::Less {
            int + 1
        } else {
            int
        };
        Self::saturate_i32(neg, int)
    }

    /// Round to nearest, ties to even; saturating; NaN gives 0.
    #[inline]
    pub fn to_i32_round_ties_even(self) -> i32 {
        if self.is_nan() {
            return 0;
        }
        let (neg, int, frac, _) = self.split_int();
        let up = match frac {
            core::cmp::Ordering::Greater => true,
            core::cmp::Ordering::Equal => int & 1 == 1,
            core::cmp::Ordering::Less => false,
        };
        Self::saturate_i32(neg, int + up as u128)
    }

    /// Nearest integral value, ties away from zero (C `roundf`), as an `F32`.
    #[inline]
    pub fn round_ties_away(self) -> F32 {
        if !self.is_finite() {
            return if self.is_nan() { F32::NAN } else { self };
        }
        // |x| >= 2^23 (biased exponent >= 150) is already an integer.
        if (self.0 & EXP_MASK) >> 23 >= 150 {
            return self;
        }
        let (neg, int, frac, _) = self.split_int();
        let int = if frac != core::cmp::Ordering::Less {
            int + 1
        } else {
            int
        };
        if int == 0 {
            return F32(self.0 & SIGN_MASK);
        }
        round_pack(neg, int, 0)
    }
}

/// [`F32::to_f16_bits`] where the answer is a normal binary16 or `x` is
/// ±0, and whether it answered (`|x|` in `[2^-14, 65520)`, or zero): one
/// rebias-and-round step without branches, so that a loop over it
/// vectorizes. Every other input (subnormal halves, overflow, ∞, NaN) is
/// declined.
#[inline(always)]
pub(crate) fn to_f16_bits_try(x: F32) -> (u16, bool) {
    let sign = ((x.0 & SIGN_MASK) >> 16) as u16;
    let ax = x.0 & 0x7FFF_FFFF;
    // The same step as `to_f16_bits`' normal range (65520 and up would
    // round to ∞: excluded by the upper bound 0x4780_0000 − 2^12).
    let normal = ax.wrapping_sub(0x3880_0000) < 0x477F_F000 - 0x3880_0000;
    let r = (ax
        .wrapping_sub(0x3800_0000)
        .wrapping_add(0x0FFF + ((ax >> 13) & 1)))
        >> 13;
    let zero = ax == 0;
    (sign | if normal { r as u16 } else { 0 }, normal | zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`to_f16_bits_try`] equals [`F32::to_f16_bits`] wherever it answers
    /// and answers the zeros and the inputs whose half is normal and
    /// finite (but values below 2^-14 that round up to it), no other: every 61st binary32, and every input within 2^14 of the
    /// range's edges (2^-14, 65520) and of zero, both signs.
    #[test]
    fn to_f16_bits_try_equals_to_f16_bits() {
        let check = |b: u32| {
            let x = F32(b);
            let want = x.to_f16_bits();
            let (got, ok) = to_f16_bits_try(x);
            let normal_half = want & 0x7C00 != 0 && want & 0x7C00 != 0x7C00;
            let zero = b & 0x7FFF_FFFF == 0;
            // A value below 2^-14 rounding up to it may be declined.
            let rounded_up = want & 0x7FFF == 0x0400 && b & 0x7FFF_FFFF < 0x3880_0000;
            assert!(!ok || normal_half || zero, "answered {b:#x}");
            assert!(
                ok || !(normal_half || zero) || rounded_up,
                "declined {b:#x}"
            );
            if ok {
                assert_eq!(got, want, "{b:#x}");
            }
        };
        for b in (0..=u32::MAX).step_by(61) {
            check(b);
        }
        for edge in [0u32, 0x3880_0000, 0x477F_F000] {
            for d in 0..1u32 << 14 {
                for sign in [0, SIGN_MASK] {
                    check(sign | edge.wrapping_add(d));
                    check(sign | edge.wrapping_sub(d + 1) & 0x7FFF_FFFF);
                }
            }
        }
    }
}
