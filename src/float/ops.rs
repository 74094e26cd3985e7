//! Add, sub, mul, div and sqrt, each exact in integers and then rounded once
//! by [`round_pack`].

use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK, round_pack};
use core::ops::{Add, Div, Mul, Neg, Sub};

/// A finite non-zero value as `sig · 2^exp` with `sig < 2^24`.
#[inline]
fn decode(bits: u32) -> (u32, i32) {
    let e = ((bits & EXP_MASK) >> 23) as i32;
    let m = bits & SIG_MASK;
    if e == 0 {
        (m, -149)
    } else {
        (m | 0x0080_0000, e - 150)
    }
}

/// Same as [`decode`] but with the significand normalised to `[2^23, 2^24)`.
#[inline]
fn decode_norm(bits: u32) -> (u32, i32) {
    let (m, e) = decode(bits);
    let s = m.leading_zeros() - 8;
    (m << s, e - s as i32)
}

#[inline]
fn is_nan(b: u32) -> bool {
    b & 0x7FFF_FFFF > EXP_MASK
}

pub(super) fn add(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & 0x7FFF_FFFF, y & 0x7FFF_FFFF);
    // Detect NaN and infinity.
    if ax >= EXP_MASK || ay >= EXP_MASK {
        if is_nan(x) || is_nan(y) {
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
    // Detect zeros.
    if ay == 0 {
        return if ax == 0 { F32(x & y) } else { a };
    }
    if ax == 0 {
        return b;
    }
    // Order by magnitude: |big| >= |small|.
    let (big, small) = if ax >= ay { (x, y) } else { (y, x) };
    let neg = big & SIGN_MASK != 0;
    let subtract = (x ^ y) & SIGN_MASK != 0;
    let (sb, eb) = decode(big);
    let (ss, es) = decode(small);
    let d = (eb - es) as u32;
    if d > 100 {
        // `small` is far below half an ulp of `big`: it only acts as a sticky bit.
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
    // Exact cancellation gives +0 in round-to-nearest.
    if sum == 0 {
        return F32::ZERO;
    }
    round_pack(neg, sum, es)
}

pub(super) fn mul(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & 0x7FFF_FFFF, y & 0x7FFF_FFFF);
    let sign = (x ^ y) & SIGN_MASK;
    if ax >= EXP_MASK || ay >= EXP_MASK {
        if is_nan(x) || is_nan(y) {
            return F32::NAN;
        }
        // inf * 0 is invalid; inf * finite non-zero is inf.
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

pub(super) fn div(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & 0x7FFF_FFFF, y & 0x7FFF_FFFF);
    let sign = (x ^ y) & SIGN_MASK;
    if is_nan(x) || is_nan(y) {
        return F32::NAN;
    }
    if ax == EXP_MASK {
        return if ay == EXP_MASK {
            F32::NAN
        } else {
            F32(sign | EXP_MASK)
        };
    }
    if ay == EXP_MASK {
        return F32(sign);
    }
    if ay == 0 {
        return if ax == 0 {
            F32::NAN
        } else {
            F32(sign | EXP_MASK)
        };
    }
    if ax == 0 {
        return F32(sign);
    }
    let (ma, ea) = decode_norm(x);
    let (mb, eb) = decode_norm(y);
    // ma << 40 < 2^64; the quotient has at least 39 bits, plenty for rounding.
    let num = (ma as u64) << 40;
    let q = num / mb as u64;
    let r = num % mb as u64;
    let sig = ((q as u128) << 1) | (r != 0) as u128;
    round_pack(sign != 0, sig, ea - eb - 41)
}

pub(super) fn sqrt(a: F32) -> F32 {
    let x = a.0;
    if x & 0x7FFF_FFFF == 0 {
        return a; // ±0
    }
    if is_nan(x) || x & SIGN_MASK != 0 {
        return F32::NAN;
    }
    if x == EXP_MASK {
        return a;
    }
    let (m, e) = decode_norm(x);
    // Make the exponent even, then widen so the root has 26+ bits.
    let (m, e) = if e & 1 != 0 {
        ((m as u64) << 1, e - 1)
    } else {
        (m as u64, e)
    };
    let wide = m << 28; // < 2^53
    let r = isqrt_u64(wide);
    let exact = r * r == wide;
    let sig = ((r as u128) << 1) | (!exact) as u128;
    round_pack(false, sig, (e - 28) / 2 - 1)
}

/// floor(sqrt(v)) for v < 2^62, bit by bit.
#[inline]
fn isqrt_u64(v: u64) -> u64 {
    let mut rem = v;
    let mut res = 0u64;
    let mut bit = 1u64 << 62;
    while bit > v {
        bit >>= 2;
    }
    while bit != 0 {
        if rem >= res + bit {
            rem -= res + bit;
            res = (res >> 1) + bit;
        } else {
            res >>= 1;
        }
        bit >>= 2;
    }
    res
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

impl Mul for F32 {
    type Output = F32;
    #[inline]
    fn mul(self, rhs: F32) -> F32 {
        mul(self, rhs)
    }
}

impl Div for F32 {
    type Output = F32;
    #[inline]
    fn div(self, rhs: F32) -> F32 {
        div(self, rhs)
    }
}

impl Neg for F32 {
    type Output = F32;
    #[inline]
    fn neg(self) -> F32 {
        F32::neg(self)
    }
}

impl F32 {
    /// Square root, correctly rounded; `sqrt(-0) = -0`, negative input gives NaN.
    #[inline]
    pub fn sqrt(self) -> F32 {
        sqrt(self)
    }
}
