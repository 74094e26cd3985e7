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
            // Keep 24 bits for a normal result; never go below the quantum
            // 2^-149. `-149 - exp` leaves i32 only for exp > i32::MAX - 149,
            // below n - 24 however it saturates: the max is then n - 24, and
            // every exp in i32 reaches the right branch below.
            let shift = (n - 24).max((-149i32).saturating_sub(exp));
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

    /// `sig · 2^exp` rounded to binary32 by a route independent of
    /// [`round_pack`]: `|sig|` cut to its top 53 bits with the bits below
    /// ORed into the last one (a sticky bit at least 29 bits below any
    /// binary32 rounding position, so it can only break a tie, as the exact
    /// value would), the exponent widened to `i64` and clamped to where the
    /// answer no longer changes (a cut `|sig|` is below 2^53: from 2^200 up
    /// it overflows, below 2^-247 it rounds to zero), the product formed
    /// exactly in f64 and rounded once by the host's f64 → f32 conversion.
    fn scaled_by_f64(neg: bool, mag: u128, exp: i32) -> u32 {
        let cut = (128 - mag.leading_zeros()).saturating_sub(53);
        let kept = (mag >> cut) | (mag & ((1u128 << cut) - 1) != 0) as u128;
        let e = (exp as i64 + cut as i64).clamp(-300, 200);
        let scale = f64::from_bits(((e + 1023) as u64) << 52);
        let v = (kept as f64 * scale) as f32;
        v.to_bits() | if neg { 0x8000_0000 } else { 0 }
    }

    /// The reference itself on values whose binary32 is known by hand:
    /// `1 · 2^exp` at the ends of the exponent range and `i32`.
    #[test]
    fn scaled_by_f64_knows_the_edges() {
        for (exp, want) in [
            (i32::MIN, 0),
            (-151, 0),
            (-150, 0), // 2^-150: a tie between 0 and 2^-149, to even
            (-149, 1),
            (-126, 0x0080_0000),
            (0, 0x3F80_0000),
            (127, 0x7F00_0000),
            (128, 0x7F80_0000),
            (i32::MAX, 0x7F80_0000),
        ] {
            assert_eq!(scaled_by_f64(false, 1, exp), want, "2^{exp}");
            assert_eq!(scaled_by_f64(true, 1, exp), want | 0x8000_0000, "-2^{exp}");
        }
        // 3 · 2^-151 = 1.5 · 2^-150 rounds up; (2^53 + 1) · 2^-202 (the
        // sticky bit) just above 2^-150, too.
        assert_eq!(scaled_by_f64(false, 3, -151), 1);
        assert_eq!(scaled_by_f64(false, (1 << 53) + 1, -203), 1);
        assert_eq!(scaled_by_f64(false, 1 << 53, -203), 0);
    }

    /// [`round_pack`], [`round_pack_u64`] and [`F32::from_i128_scaled`]
    /// give the IEEE answer (±∞, ±0, subnormal or normal, against
    /// [`scaled_by_f64`]) for exponents at both ends of `i32`, where
    /// `-149 - exp` and `exp + shift` leave `i32`, and around the edges of
    /// the binary32 range for every significand length: the leading bit at
    /// 2^-152 ..= 2^-146 (zero and the smallest subnormals), 2^-129 ..=
    /// 2^-124 (subnormal to normal) and 2^125 ..= 2^130 (overflow); every
    /// significand length from 1 to 128 bits, with patterns that tie, carry
    /// and leave sticky bits, both signs.
    #[test]
    fn round_pack_every_exponent() {
        let mut next = crate::testutil::lcg(0x0E4D_0F1E_2E4D_u64);
        let mut checked = 0u32;
        for len in 1..=128u32 {
            for pattern in 0..6u32 {
                let raw = (next() as u128) << 96
                    | (next() as u128) << 64
                    | (next() as u128) << 32
                    | next() as u128;
                let mag = match pattern {
                    0 => raw,
                    1 => u128::MAX,                  // rounds up, carries
                    2 => 1 << 127,                   // a power of two
                    3 => 1 << 127 | u128::MAX >> 25, // just below a tie
                    // 24 bits and a half below them: a tie; and with a sticky bit.
                    4 => raw & !(u128::MAX >> 24) | 1 << 103,
                    _ => raw & !(u128::MAX >> 24) | 1 << 103 | 1,
                } >> (128 - len)
                    | 1 << (len - 1);
                for neg in [false, true] {
                    // As an i128 (len 128: only i128::MIN).
                    let sig = match (len, neg) {
                        (128, true) if mag == 1 << 127 => Some(i128::MIN),
                        (128, _) => None,
                        (_, true) => Some(-(mag as i128)),
                        _ => Some(mag as i128),
                    };
                    let top = len as i32 - 1; // leading bit at 2^(top + exp)
                    let ends = (0..200).flat_map(|d| [i32::MIN + d, i32::MAX - d]);
                    let edges = [-152, -129, 125]
                        .into_iter()
                        .flat_map(|lead| (0..7).map(move |d| lead + d - top));
                    let wide = (0..8).map(|_| next() as i32);
                    for exp in ends.chain(edges).chain(wide) {
                        let want = scaled_by_f64(neg, mag, exp);
                        let got = round_pack(neg, mag, exp);
                        assert_eq!(got.0, want, "round_pack {neg} {mag} · 2^{exp}");
                        if let Some(sig) = sig {
                            let got = F32::from_i128_scaled(sig, exp);
                            assert_eq!(got.0, want, "from_i128_scaled {sig} · 2^{exp}");
                        }
                        if len <= 64 {
                            let got = round_pack_u64(neg, mag as u64, exp);
                            assert_eq!(got.0, want, "round_pack_u64 {neg} {mag} · 2^{exp}");
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 600_000, "{checked}");
    }

    /// [`from_i64_scaled_try`] equals [`F32::from_i128_scaled`] wherever it
    /// answers, and answers every zero and every normal result (all but the
    /// smallest normal reached by rounding up from below): significands
    /// of every bit length from 1 to 64 (with runs of ones and exact halves
    /// below the 24th bit, so ties and carries into the next binade show),
    /// both signs, `i64::MIN`, and exponents from past the subnormals to past
    /// overflow and at both ends of `i32`. The reference is itself checked
    /// against [`scaled_by_f64`] on every input.
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
                3 => {
                    let d = (next() % 300) as i32; // both ends of i32
                    if next().is_multiple_of(2) {
                        i32::MIN + d
                    } else {
                        i32::MAX - d
                    }
                }
                _ => (next() % 60) as i32 - 30,
            };
            let want = F32::from_i128_scaled(sig as i128, exp);
            // The reference is checked too, declined inputs included: a
            // decline is only right if the caller's redo is.
            let reference = scaled_by_f64(sig < 0, sig.unsigned_abs() as u128, exp);
            assert_eq!(want.0, reference, "sig {sig} exp {exp}");
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
