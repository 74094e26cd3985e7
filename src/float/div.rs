//! Division.
//!
//! Fast path (both operands normal, result exponent normal): one `u64`
//! division `(ma << 26) / mb` of the 24-bit significands gives a 26- or
//! 27-bit quotient; a non-zero remainder becomes a sticky bit, the quotient
//! is normalised to 26 bits (24 kept, a half bit and the sticky bit) and
//! rounded to nearest even by adding `1 + lsb` and dropping two bits.
//!
//! Everything else goes to [`div_general`]: a 40-bit quotient with sticky
//! bit and one [`round_pack`] (subnormal and overflowing results, zeros, ∞,
//! NaN).

#![forbid(unsafe_code)]

use super::pack::{ABS_MASK, IMPLICIT, decode_norm, is_nan_bits, is_normal_mag, round_pack};
use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK};
use core::ops::Div;

/// Correctly rounded `a / b`.
#[inline]
pub(super) fn div(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    if !(is_normal_mag(ax) & is_normal_mag(ay)) {
        return div_general(a, b);
    }
    let sign = (x ^ y) & SIGN_MASK;
    let num = (((ax & SIG_MASK) | IMPLICIT) as u64) << 26; // [2^49, 2^50)
    let den = ((ay & SIG_MASK) | IMPLICIT) as u64; // [2^23, 2^24)
    let q = num / den; // (2^25, 2^27)
    let sticky = (q * den != num) as u64;
    let hi = (q >> 26) as u32; // quotient of the significands >= 1
    let q = q | sticky;
    let q = (q >> hi) | (q & hi as u64); // [2^25, 2^26), bit 0 sticky
    // Biased result exponent + 127: ex - ey + 127 (-1 if the quotient < 1).
    let e = (ax >> 23) + 253 - (ay >> 23) + hi;
    if e.wrapping_sub(128) >= 254 {
        return div_general(a, b); // result exponent outside 1..=254
    }
    let m = ((q + 1 + ((q >> 2) & 1)) >> 2) as u32; // [2^23, 2^24]
    let r = ((e - 128) << 23) + m;
    F32(r.min(EXP_MASK) | sign)
}

/// Every case: specials, zeros, subnormals, underflow and overflow.
#[cold]
#[inline(never)]
fn div_general(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    let sign = (x ^ y) & SIGN_MASK;
    if is_nan_bits(x) || is_nan_bits(y) {
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

impl Div for F32 {
    type Output = F32;
    #[inline]
    fn div(self, rhs: F32) -> F32 {
        div(self, rhs)
    }
}
