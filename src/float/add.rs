//! Addition and subtraction.
//!
//! Fast path (both operands normal): significands widened by three bits
//! (guard, round, sticky) in a `u32`, the smaller one shifted right with the
//! dropped bits ORed into the sticky bit, added or subtracted, normalised by
//! at most one bit right (carry) or by `leading_zeros` left (cancellation;
//! a shift of more than one bit only happens when the exponents differ by at
//! most one, so no bit was dropped), then rounded to nearest even by adding
//! `3 + lsb` and dropping the three bits. A rounding carry out of the
//! significand bumps the exponent field; `min(0x7F80_0000)` turns exponent
//! overflow into ∞.
//!
//! Everything else (zeros, subnormal operands or results, ∞, NaN) goes to
//! [`add_general`]: the exact sum as a `u128` and one [`round_pack`].

use super::pack::{ABS_MASK, IMPLICIT, decode, is_nan_bits, is_normal_mag, round_pack};
use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK};
use core::ops::{Add, Sub};

/// Correctly rounded `a + b`.
#[inline]
pub(super) fn add(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    if !(is_normal_mag(ax) & is_normal_mag(ay)) {
        return add_general(a, b);
    }
    // Order by magnitude: |big| >= |small|; the result has big's sign.
    let (big, abig, asmall) = if ax >= ay { (x, ax, ay) } else { (y, ay, ax) };
    let eb = abig >> 23;
    let es = asmall >> 23;
    let mb = ((abig & SIG_MASK) | IMPLICIT) << 3; // [2^26, 2^27)
    let ms = ((asmall & SIG_MASK) | IMPLICIT) << 3;
    // Align: shift right, OR the dropped bits into bit 0 (sticky).
    let d = (eb - es).min(31);
    let shifted = ms >> d;
    let ms = shifted | ((shifted << d) != ms) as u32;
    let (m, e) = if (x ^ y) & SIGN_MASK == 0 {
        let m = mb + ms; // < 2^28
        let carry = m >> 27;
        ((m >> carry) | (m & carry), eb + carry)
    } else {
        let m = mb - ms;
        if m == 0 {
            return F32::ZERO; // exact cancellation is +0 in round-to-nearest
        }
        let lz = m.leading_zeros() - 5; // moves the top bit to 2^26
        if lz >= eb {
            return add_general(a, b); // subnormal result
        }
        (m << lz, eb - lz)
    };
    // m in [2^26, 2^27), e in 1..=255: round off the three extra bits.
    let m = (m + 3 + ((m >> 3) & 1)) >> 3;
    let r = ((e - 1) << 23) + m;
    F32(r.min(EXP_MASK) | (big & SIGN_MASK))
}

/// Every case: specials, zeros and subnormals; exact in a `u128`.
#[cold]
#[inline(never)]
fn add_general(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    if ax >= EXP_MASK || ay >= EXP_MASK {
        if is_nan_bits(x) || is_nan_bits(y) {
            return F32::NAN;
        }
        if ax == EXP_MASK && ay == EXP_MASK {
            return if (x ^ y) & SIGN_MASK != 0 {
                F32::NAN
            } else {
                a
            };
        }
        return if ax == EXP_MASK { a } else { b };
    }
    if ay == 0 {
        return if ax == 0 { F32(x & y) } else { a };
    }
    if ax == 0 {
        return b;
    }
    let (big, small) = if ax >= ay { (x, y) } else { (y, x) };
    let neg = big & SIGN_MASK != 0;
    let subtract = (x ^ y) & SIGN_MASK != 0;
    let (sb, eb) = decode(big);
    let (ss, es) = decode(small);
    let d = (eb - es) as u32;
    if d > 100 {
        // `small` is far below half an ulp of `big`: only a sticky bit.
        let s = (sb as u128) << 3;
        let s = if subtract { s - 1 } else { s + 1 };
        return round_pack(neg, s, eb - 3);
    }
    let wide = (sb as u128) << d;
    let sum = if subtract {
        wide - ss as u128
    } else {
        wide + ss as u128
    };
    if sum == 0 {
        return F32::ZERO;
    }
    round_pack(neg, sum, es)
}

impl Add for F32 {
    type Output = F32;
    #[inline]
    fn add(self, rhs: F32) -> F32 {
        add(self, rhs)
    }
}

impl Sub for F32 {
    type Output = F32;
    #[inline]
    fn sub(self, rhs: F32) -> F32 {
        add(self, rhs.neg())
    }
}
