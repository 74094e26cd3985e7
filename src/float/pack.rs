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

/// `sig · 2^exp` rounded to nearest, ties to even, and whether that is the
/// answer: the bits of [`F32::from_i128_scaled`] wherever `sig = 0` (`+0`)
/// or `|sig| · 2^exp` is at least the smallest normal and its result is
/// not ∞; every other input is declined (the caller redoes
/// those), a value rounding up to the smallest normal among them. Branch-free, so
/// a loop over it vectorizes: `|sig|` is cut to 24 bits at its leading
/// one, the bits below decide the rounding, and a carry out of the 24 bits
/// moves into the exponent field.
#[inline(always)]
pub(crate) fn from_i64_scaled_try(sig: i64, exp: i32) -> (F32, bool) {
    let mag = sig.unsigned_abs();
    let bits_in = 64 - mag.leading_zeros() as i32;
    let cut = bits_in - 24; // -24 ..= 40
    let right = cut.max(0) as u32;
    let left = (-cut).max(0) as u32;
    let q = mag >> right;
    let rem = mag - (q << right);
    let half = (1u64 << right) >> 1;
    let tie_up = (rem == half) & (q & 1 == 1) & (right > 0);
    let q = (q + ((rem > half) | tie_up) as u64) << left; // [2^23, 2^24]
    // q's leading bit lands in the exponent field: biased exponent field + 1.
    // Wrapping cannot land in 0..=254 (|cut + 149| < 2^8): a huge |exp| is
    // declined as subnormal or ∞.
    let field = exp.wrapping_add(cut).wrapping_add(149);
    let bits = ((field as i64) << 23).wrapping_add(q as i64);
    let normal = (field >= 0) & (bits < 0x7F80_0000);
    let bits = bits as u32;
    let sign = ((sig < 0) as u32) << 31;
    let zero = mag == 0;
    let r = if zero { 0 } else { bits | sign };
    (F32(r), zero | normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`from_i64_scaled_try`] equals [`F32::from_i128_scaled`] wherever it
    /// answers, and answers every zero and every normal result (all but the
    /// smallest normal reached by rounding up from below): significands
    /// of every bit length from 1 to 64 (with runs of ones and exact halves
    /// below the 24th bit, so ties and carries into the next binade show),
    /// both signs, `i64::MIN`, and exponents from past the subnormals to past
    /// overflow and at both ends of `i32`.
    #[test]
    fn from_i64_scaled_try_equals_from_i128_scaled() {
        let mut next = crate::testutil::lcg(0x5CA1_ED00_7E57_u64);
        let mut answered = 0u32;
        for round in 0..400_000u32 {
            let len = 1 + round % 64;
            let raw = (next() as u64) << 32 | next() as u64;
            let mag = match round % 4 {
                0 => raw,
                1 => u64::MAX, // all ones: every rounding carries
                2 => (raw | 1) << 40 >> 40 | 1 << 39, // ties and halves below bit 24
                _ => raw & !0xFF_FFFF | 0x80_0000,
            } >> (64 - len);
            let sig = if round % 3 == 0 {
                (mag as i64).wrapping_neg()
            } else {
                mag as i64
            };
            let sig = if round % 9973 == 0 { i64::MIN } else { sig };
            let exp = match round % 5 {
                0 => (next() % 400) as i32 - 250,
                1 => (next() % 80) as i32 - 190 - len as i32 + 24, // around the smallest normal
                2 => (next() % 40) as i32 + 100 - len as i32,      // around overflow
                3 => [i32::MIN, i32::MIN + 200, i32::MAX - 200, i32::MAX][(next() % 4) as usize],
                _ => (next() % 60) as i32 - 30,
            };
            let want = F32::from_i128_scaled(sig as i128, exp);
            let (got, ok) = from_i64_scaled_try(sig, exp);
            let normal = is_normal_mag(want.0 & ABS_MASK);
            if ok {
                answered += 1;
                assert_eq!(got.0, want.0, "sig {sig} exp {exp}");
            }
            // Declined normals: only the smallest, reached by rounding a
            // value below it up (its rounding quantum is the subnormals').
            let rounded_up_to_normal = want.0 & ABS_MASK == MIN_NORMAL;
            let must_answer = sig == 0 || (normal && !rounded_up_to_normal);
            assert!(ok || !must_answer, "declined: sig {sig} exp {exp}");
            assert!(!ok || sig == 0 || normal, "answered: sig {sig} exp {exp}");
        }
        assert!(answered > 200_000, "{answered}");
    }
}
