//! `e^x`, correctly rounded.
//!
//! Algorithm: `e^x = 2^(x · log2 e)`. The product `t = x · log2 e` is formed
//! exactly from the 24-bit significand and a 104-bit constant (relative error
//! 2^-104, so `t` is known to 2^-96 absolute for |x| < 104), split into an
//! integer `k` and a Q0.128 fraction `f`, and handed to
//! [`pow2_parts`](super::exp2::pow2_parts) (fast path with ~60 bits, a
//! rounding test, accurate path with ~96 bits). `e^x` is never a binary32
//! midpoint for a binary32 `x`, so the accurate path decides every case.
//!
//! Ranges: x > 0x42B17217 (88.7228) overflows to +inf; x < -104 underflows
//! below 2^-150 and rounds to +0; |x| < 2^-25 rounds to 1.
//!
//! Verified: correctly rounded, checked on all 2^32 inputs against CORE-MATH 1.4
//! `expf` on 2026-12-02: 0 mismatches (command in `docs/sections/math.md`).

use super::decode;
use super::exp2::pow2_parts;
use super::tables::LOG2E_Q103;
use crate::F32;

/// Largest binary32 whose exponential is finite: 0x42B17217 = 88.72283.
const EXP_OVERFLOW_BITS: u32 = 0x42B1_7217;
/// Error of `f` from the truncated log2(e), in units of 2^-127 of the result:
/// |t| < 151 times 2^-104 relative is below 2^-96, i.e. 2^31 units; doubled.
const EXP_F_ERR: u128 = 1 << 32;

impl F32 {
    /// `e^x`, correctly rounded (ties to even); `e^NaN` is the canonical NaN.
    pub fn exp(self) -> F32 {
        let bits = self.to_bits();
        let abs = bits & 0x7FFF_FFFF;
        let neg = bits >> 31 == 1;
        if abs > 0x7F80_0000 {
            return F32::NAN;
        }
        if !neg && abs > EXP_OVERFLOW_BITS {
            return F32::INFINITY;
        }
        if neg && abs > 0x42D0_0000 {
            return F32::ZERO; // x < -104 (and -inf)
        }
        if abs < 0x3300_0000 {
            return F32::ONE; // |x| < 2^-25
        }
        let (mx, ex) = decode(bits); // ex in [-48, -17]
        // t = p · 2^-n exactly up to the constant's error; n in [120, 151].
        let p = mx as u128 * LOG2E_Q103;
        let n = (103 - ex) as u32;
        let (int, frac) = if n >= 128 {
            (0i32, p >> (n - 128))
        } else {
            ((p >> n) as i32, p << (128 - n))
        };
        let (k, f) = if !neg {
            (int, frac)
        } else if frac == 0 {
            (-int, 0)
        } else {
            (-int - 1, frac.wrapping_neg())
        };
        pow2_parts(k, f, EXP_F_ERR)
    }
}
