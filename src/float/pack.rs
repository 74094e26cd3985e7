//! Decoding of operands and the final rounding shared by every operation
//! that produces a binary32.

#![forbid(unsafe_code)]

use super::{EXP_MASK, F32, SIG_MASK};

/// Implicit leading significand bit of a normal number (2^23).
pub(super) const IMPLICIT: u32 = 0x0080_0000;
/// Magnitude mask (everything but the sign bit).
pub(super) const ABS_MASK: u32 = 0x7FFF_FFFF;
/// `ax.wrapping_sub(MIN_NORMAL) < NORMAL_SPAN` iff `ax` is a normal magnitude.
pub(super) const MIN_NORMAL: u32 = 0x0080_0000;
/// Width of the range of normal magnitudes, `0x7F80_0000 - 0x0080_0000`.
pub(super) const NORMAL_SPAN: u32 = 0x7F00_0000;

/// True when the magnitude `ax` (sign cleared) is a normal number.
#[inline(always)]
pub(super) fn is_normal_mag(ax: u32) -> bool {
    ax.wrapping_sub(MIN_NORMAL) < NORMAL_SPAN
}

/// True for every NaN pattern.
#[inline(always)]
pub(super) fn is_nan_bits(b: u32) -> bool {
    b & ABS_MASK > EXP_MASK
}

/// A finite non-zero value as `sig · 2^exp` with `sig < 2^24`.
#[inline]
pub(super) fn decode(bits: u32) -> (u32, i32) {
    let e = ((bits & EXP_MASK) >> 23) as i32;
    let m = bits & SIG_MASK;
    if e == 0 {
        (m, -149)
    } else {
        (m | IMPLICIT, e - 150)
    }
}

/// Same as [`decode`] but with the significand normalised to `[2^23, 2^24)`.
#[inline]
pub(super) fn decode_norm(bits: u32) -> (u32, i32) {
    let (m, e) = decode(bits);
    let s = m.leading_zeros().saturating_sub(8);
    (m << s, e - s as i32)
}

/// Defines a rounding function for one significand width (the same steps
/// in `u64` are cheaper than in `u128` on 64-bit hosts).
macro_rules! round_pack_fn {
    ($(#[$doc:meta])* $name:ident, $t:ty) => {
        $(#[$doc])*
        #[inline]
        pub fn $name(neg: bool, sig: $t, exp: i32) -> F32 {
            let sign = if neg { 0x8000_0000u32 } else { 0 };
            if sig == 0 {
                return F32(sign);
            }
            // Bit length of sig; the value's leading bit sits at 2^(n - 1 + exp).
            let n = <$t>::BITS as i32 - sig.leading_zeros() as i32;
            // Keep 24 bits for a normal result; never go below the quantum 2^-149.
            let shift = if (n - 24) > (-149 - exp) {
                n - 24
            } else {
                -149 - exp
            };
            let (q, lsb_exp) = if shift <= 0 {
                // Exact: fewer bits than the result holds. lsb_exp >= -149 here.
                (sig << (-shift) as u32, exp.saturating_add(shift))
            } else if shift > n {
                // Below half the smallest quantum: rounds to zero.
                return F32(sign);
            } else {
                let s = shift as u32;
                let (q, rem) = if s == <$t>::BITS {
                    (0, sig)
                } else {
                    (sig >> s, sig & (((1 as $t) << s) - 1))
                };
                let half: $t = 1 << (s - 1);
                let up = rem > half || (rem == half && q & 1 == 1);
                (q + up as $t, exp.saturating_add(shift))
            };
            // Overflow before encoding (q < 2^25 when lsb_exp is in range).
            if lsb_exp > 104 {
                return F32(sign | 0x7F80_0000);
            }
            // q in [2^23, 2^24] for normals, [0, 2^23] for subnormals; adding q to
            // (biased_exp - 1) << 23 lets a rounding carry bump the exponent.
            let bits = (((lsb_exp + 149) as u32) << 23).wrapping_add(q as u32);
            if bits >= 0x7F80_0000 {
                F32(sign | 0x7F80_0000)
            } else {
                F32(sign | bits)
            }
        }
    };
}

round_pack_fn!(
    /// Rounds `(-1)^neg · sig · 2^exp` to the nearest binary32, ties to even.
    ///
    /// Handles every range: zero, subnormal, normal and overflow to ±∞. A caller
    /// with bits below `sig` that it dropped should append a sticky bit first
    /// (`(sig << 1) | sticky`, `exp - 1`); a sticky bit below the rounding
    /// position changes only the tie decision, which it must.
    round_pack,
    u128
);

round_pack_fn!(
    /// [`round_pack`] for a significand below 2^64.
    round_pack_u64,
    u64
);

/// For the zero-aware fast paths ([`super::mul_zero_try`],
/// [`super::add_zero_try`]): whether `x` and `y` (bits) are both finite and
/// at least one is a zero, and which are zeros.
#[inline(always)]
pub(super) fn finite_zero_operand(x: u32, y: u32) -> (bool, bool, bool) {
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    let (x_zero, y_zero) = (ax == 0, ay == 0);
    let finite = (ax < EXP_MASK) & (ay < EXP_MASK);
    ((x_zero | y_zero) & finite, x_zero, y_zero)
}
