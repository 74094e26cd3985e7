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

#![forbid(unsafe_code)]

use super::pack::{
    ABS_MASK, IMPLICIT, decode, finite_zero_operand, is_nan_bits, is_normal_mag, round_pack,
};
use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK};
use core::ops::Mul;

/// Correctly rounded `a * b`.
#[inline]
pub(super) fn mul(a: F32, b: F32) -> F32 {
    match mul_try(a, b) {
        (r, true) => r,
        _ => mul_general(a, b),
    }
}

/// The fast path of `a * b` without branches: `(product, true)` when both
/// operands are normal and the result exponent is normal (the product is
/// then correctly rounded), else `(unspecified, false)`. Loops over slices
/// call it for every element and redo the row with `*` if any was false,
/// so that they vectorize.
#[inline(always)]
pub fn mul_try(a: F32, b: F32) -> (F32, bool) {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    let normal = is_normal_mag(ax) & is_normal_mag(ay);
    let sign = (x ^ y) & SIGN_MASK;
    let p = ((ax & SIG_MASK) | IMPLICIT) as u64 * ((ay & SIG_MASK) | IMPLICIT) as u64;
    let hi = (p >> 47) as u32 & 1; // product in [2, 4)
    let p = p << (1 - hi); // [2^47, 2^48)
    // Biased exponent of the result: ex + ey - 127 (+1 if the product >= 2).
    let e = (ax >> 23) + (ay >> 23) + hi;
    let ok = normal & (e.wrapping_sub(128) < 254); // result exponent in 1..=254
    let m = ((p + 0x7F_FFFF + ((p >> 24) & 1)) >> 24) as u32; // [2^23, 2^24]
    let r = (e.wrapping_sub(128) << 23).wrapping_add(m);
    (F32(r.min(EXP_MASK) | sign), ok)
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

/// [`mul_try`], also answering a zero times a finite value: the zero
/// with the sign `sign(a) ^ sign(b)` (the bits of `a * b`), so that rows
/// holding exact zeros (RoPE's Q and K, `sin = 0` at position 0) keep the
/// fast path.
#[inline(always)]
pub fn mul_zero_try(a: F32, b: F32) -> (F32, bool) {
    let (r, ok) = mul_try(a, b);
    let (zero, _, _) = finite_zero_operand(a.0, b.0);
    let signed_zero = F32((a.0 ^ b.0) & SIGN_MASK);
    (if zero { signed_zero } else { r }, ok | zero)
}

impl Mul for F32 {
    type Output = F32;
    #[inline]
    fn mul(self, rhs: F32) -> F32 {
        mul(self, rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wherever [`mul_try`] answers, it is the exact product rounded once
    /// ([`mul_general`], separate code); it declines every pair with a zero,
    /// subnormal, ∞ or NaN operand, and with normal operands only where the
    /// result is zero, subnormal, ∞ or at the edge of the normal range.
    /// Operands cover every exponent, with extra weight at the underflow
    /// and overflow boundaries.
    #[test]
    fn fast_path_is_exact_where_it_answers() {
        let mut next = crate::testutil::lcg(0x9E37_79B9_7F4A_7C15u64);
        let (mut answered, mut declined) = (0u32, 0u32);
        for i in 0..2_000_000u32 {
            let a = next();
            let ea = (a >> 23) & 0xFF;
            // Exponent sums near the underflow (128) and overflow (381) edges.
            let edge = |target: u32, r: u32| (target + r % 5).wrapping_sub(ea) & 0xFF;
            let b = match i % 3 {
                0 => (next() & 0x807F_FFFF) | edge(126, next()) << 23,
                1 => (next() & 0x807F_FFFF) | edge(379, next()) << 23,
                _ => next(),
            };
            let (fa, fb) = (F32(a), F32(b));
            let want = mul_general(fa, fb);
            let (got, ok) = mul_try(fa, fb);
            let normal_in = is_normal_mag(a & ABS_MASK) & is_normal_mag(b & ABS_MASK);
            let wa = want.0 & ABS_MASK;
            if ok {
                answered += 1;
                assert_eq!(got.0, want.0, "{a:#010x} * {b:#010x}");
                assert!(normal_in);
            } else {
                declined += 1;
                assert!(
                    !normal_in || !(0x0100_0000..0x7F00_0000).contains(&wa),
                    "{a:#010x} * {b:#010x}"
                );
            }
        }
        assert!(
            answered > 800_000 && declined > 100_000,
            "{answered} / {declined}"
        );
    }
}
