//! Multiplication.
//!
//! Fast path (both operands normal, result exponent normal): the 24×24-bit
//! significand product in a `u64` (`[2^46, 2^48)`), normalised to
//! `[2^47, 2^48)` by one conditional shift, rounded to 24 bits by adding
//! `2^23 - 1 + lsb` and dropping 24 bits (ties to even); a rounding carry
//! bumps the exponent field and `min(0x7F80_0000)` turns it into ∞.
//!
//! Everything else goes to [`mul_general`]: exact product, one
//! [`round_pack`] (subnormal and overflowing results, zeros, ∞, NaN).

use super::pack::{ABS_MASK, IMPLICIT, decode, is_nan_bits, is_normal_mag, round_pack};
use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK};
use core::ops::Mul;

/// Correctly rounded `a * b`.
#[inline]
pub(super) fn mul(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    if !(is_normal_mag(ax) & is_normal_mag(ay)) {
        return mul_general(a, b);
    }
    let sign = (x ^ y) & SIGN_MASK;
    let p = ((ax & SIG_MASK) | IMPLICIT) as u64 * ((ay & SIG_MASK) | IMPLICIT) as u64;
    let hi = (p >> 47) as u32; // product in [2, 4)
    let p = p << (1 - hi); // [2^47, 2^48)
    // Biased exponent of the result: ex + ey - 127 (+1 if the product >= 2).
    let e = (ax >> 23) + (ay >> 23) + hi;
    if e.wrapping_sub(128) >= 254 {
        return mul_general(a, b); // result exponent outside 1..=254
    }
    let m = ((p + 0x7F_FFFF + ((p >> 24) & 1)) >> 24) as u32; // [2^23, 2^24]
    let r = ((e - 128) << 23) + m;
    F32(r.min(EXP_MASK) | sign)
}

/// Every case: specials, zeros, subnormals, underflow and overflow.
#[cold]
#[inline(never)]
fn mul_general(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    let sign = (x ^ y) & SIGN_MASK;
    if ax >= EXP_MASK || ay >= EXP_MASK {
        if is_nan_bits(x) || is_nan_bits(y) {
            return F32::NAN;
        }
        // ∞ · 0 is invalid; ∞ · finite non-zero is ∞.
        if ax == 0 || ay == 0 {
            return F32::NAN;
        }
        return F32(sign | EXP_MASK);
    }
    if ax == 0 || ay == 0 {
        return F32(sign);
    }
    let (ma, ea) = decode(x);
    let (mb, eb) = decode(y);
    round_pack(sign != 0, (ma as u64 * mb as u64) as u128, ea + eb)
}

impl Mul for F32 {
    type Output = F32;
    #[inline]
    fn mul(self, rhs: F32) -> F32 {
        mul(self, rhs)
    }
}
