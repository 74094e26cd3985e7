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

#![forbid(unsafe_code)]

use super::pack::{
    ABS_MASK, IMPLICIT, decode, finite_zero_operand, is_nan_bits, is_normal_mag, round_pack,
};
use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK};
use core::ops::{Add, Sub};

/// Correctly rounded `a + b`.
#[inline]
pub(super) fn add(a: F32, b: F32) -> F32 {
    match add_try(a, b) {
        (r, true) => r,
        _ => add_general(a, b),
    }
}

/// The fast path of `a + b` without branches: `(sum, true)` when both
/// operands are normal and the sum is a non-zero normal (it is then
/// correctly rounded), else `(unspecified, false)`. Loops over slices call
/// it for every element and redo the row with `+` if any was false, so
/// that they vectorize.
#[inline(always)]
pub fn add_try(a: F32, b: F32) -> (F32, bool) {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    let normal = is_normal_mag(ax) & is_normal_mag(ay);
    // The result has the sign of the larger magnitude.
    let big = if ax < ay { y } else { x };
    let (eb, mb, ms) = aligned(ax, ay);
    let (m_add, e_add) = add_aligned(eb, mb, ms);
    // Opposite signs: subtract, normalise left (a shift of more than one
    // bit only happens when the exponents differ by at most one, so no bit
    // was dropped). Zero and subnormal results decline.
    let diff = mb.wrapping_sub(ms);
    let lz = (diff | 1).leading_zeros().wrapping_sub(5) & 31; // top bit to 2^26
    let sub_ok = diff != 0 && lz < eb;
    let (m_sub, e_sub) = (diff << lz, eb.wrapping_sub(lz));
    let same = (x ^ y) & SIGN_MASK == 0;
    let (m, e) = if same { (m_add, e_add) } else { (m_sub, e_sub) };
    let ok = normal & (same | sub_ok);
    (round_grs_and_pack(m, e, big & SIGN_MASK), ok)
}

/// [`add_try`], also answering a zero plus a finite value: the other
/// operand (exact), and for two zeros `+0` unless both are `-0` (round to
/// nearest even) — the bits of `a + b`.
#[inline(always)]
pub fn add_zero_try(a: F32, b: F32) -> (F32, bool) {
    let (r, ok) = add_try(a, b);
    let (zero, a_zero, b_zero) = finite_zero_operand(a.0, b.0);
    let sum = match (a_zero, b_zero) {
        (true, true) => F32(a.0 & b.0),
        (true, false) => b,
        _ => a,
    };
    (if zero { sum } else { r }, ok | zero)
}

/// [`add_try`]'s same-sign half alone: `(a + b, true)` when both operands
/// are normal with the same sign (the sum is then a normal or ±∞, correctly
/// rounded, the same bits as `a + b`), else `(unspecified, false)`. About
/// half the work of [`add_try`], for chains known to add like-signed
/// values (sums of squares).
#[inline(always)]
pub fn add_same_sign_try(a: F32, b: F32) -> (F32, bool) {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    let ok = is_normal_mag(ax) & is_normal_mag(ay) & ((x ^ y) & SIGN_MASK == 0);
    let (eb, mb, ms) = aligned(ax, ay);
    let (m, e) = add_aligned(eb, mb, ms);
    (round_grs_and_pack(m, e, x & SIGN_MASK), ok)
}

/// `s = +0; s = s + t` for each term left to right: the same bits as that
/// loop of `+`. While the sum and the terms are positive normals and no term
/// exceeds the sum's binade, the sum stays unpacked (exponent field `e`,
/// significand with three extra bits `m3`): each step is an aligned add
/// and one rounding, and `e` changes only in a rarely taken branch, so the
/// chain from one step to the next is a few integer operations. Anything
/// else takes one step of `+`.
pub(crate) fn sum_left_to_right(terms: &[F32]) -> F32 {
    let pos_normal = |x: u32| is_normal_mag(x) & (x & SIGN_MASK == 0);
    let mut s = F32::ZERO;
    let mut i = 0;
    while let Some(&t) = terms.get(i) {
        if !(pos_normal(s.0) && pos_normal(t.0) && t.0 >> 23 <= s.0 >> 23) {
            s = s + t;
            i += 1;
            continue;
        }
        // s = m3 · 2^(e - 153), m3 in [2^26, 2^27) with three zero bits.
        let (mut e, mut m3) = (s.0 >> 23, ((s.0 & SIG_MASK) | IMPLICIT) << 3);
        while let Some(&t) = terms.get(i) {
            let (y, ey) = (t.0, t.0 >> 23);
            if !pos_normal(y) || ey > e {
                break;
            }
            // The term aligned to e with a sticky bit (as `aligned`).
            let my = ((y & SIG_MASK) | IMPLICIT) << 3;
            let d = (e - ey).min(31);
            let sh = my >> d;
            let sum = m3 + (sh | ((sh << d) != my) as u32); // < 2^28
            i += 1;
            if sum >> 27 != 0 {
                // A carry: one bit right, keeping the sticky bit. Both
                // addends are at most 2^27 - 8, so the rounded value stays
                // below 2^27.
                let (m, eb) = add_aligned(e, m3, sum - m3);
                (e, m3) = (eb, (m + 3 + ((m >> 3) & 1)) & !7);
                if e >= 255 {
                    break;
                }
                continue;
            }
            // Round to nearest even at bit 3; 2^27 moves up a binade.
            let r = (sum + 3 + ((sum >> 3) & 1)) & !7;
            if r >> 27 != 0 {
                (e, m3) = (e + 1, 1 << 26);
                if e >= 255 {
                    break;
                }
            } else {
                m3 = r;
            }
        }
        s = if e >= 255 {
            F32(EXP_MASK) // overflowed to +∞ (`round_grs_and_pack`)
        } else {
            F32((e << 23) | ((m3 >> 3) & SIG_MASK))
        };
    }
    s
}

/// Two normal magnitudes as `(eb, mb, ms)`: the larger one's exponent field
/// and both significands widened by three bits (guard, round, sticky), the
/// smaller shifted right to the larger's exponent with the dropped bits
/// ORed into bit 0.
#[inline(always)]
fn aligned(ax: u32, ay: u32) -> (u32, u32, u32) {
    let (abig, asmall) = if ax < ay { (ay, ax) } else { (ax, ay) };
    let eb = abig >> 23;
    let es = asmall >> 23;
    let mb = ((abig & SIG_MASK) | IMPLICIT) << 3; // [2^26, 2^27)
    let ms = ((asmall & SIG_MASK) | IMPLICIT) << 3;
    let d = eb.wrapping_sub(es).min(31);
    let shifted = ms >> d;
    (eb, mb, shifted | ((shifted << d) != ms) as u32)
}

/// Same signs: the aligned significands added, a carry normalised by one
/// bit right (keeping the sticky bit): `(m in [2^26, 2^27), e)`.
#[inline(always)]
fn add_aligned(eb: u32, mb: u32, ms: u32) -> (u32, u32) {
    let sum = mb + ms; // < 2^28
    let carry = sum >> 27;
    ((sum >> carry) | (sum & carry), eb + carry)
}

/// `m` in `[2^26, 2^27)` with three extra bits (guard, round, sticky) and
/// exponent field `e` in `1..=255`, rounded to nearest even at those bits
/// and packed with `sign`; exponent overflow gives ∞.
#[inline(always)]
fn round_grs_and_pack(m: u32, e: u32, sign: u32) -> F32 {
    let m = (m + 3 + ((m >> 3) & 1)) >> 3;
    let r = (e.wrapping_sub(1) << 23).wrapping_add(m);
    F32(r.min(EXP_MASK) | sign)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `add_same_sign_try` answers exactly for two normal operands of one
    /// sign, with the bits of `+` (checked against the general path too),
    /// and declines everything else: random bit patterns, like-signed pairs
    /// with every exponent distance (sticky and carry cases), sums that
    /// `sum_left_to_right` is the loop `s = s + t` from +0, bit for bit, on rows of
    /// squares-like terms (positive, exponents spread so that sums carry,
    /// round up into the next binade and overflow to ∞) mixed with zeros,
    /// subnormals, negatives, ∞ and NaN.
    #[test]
    fn sum_left_is_the_loop_of_add() {
        let mut next = crate::testutil::lcg(0x050A_1EF7_u64);
        for round in 0..20_000u32 {
            let n = (round % 97) as usize;
            let base = 1 + next() % 250;
            let spread = 1 + next() % 40;
            let terms: [F32; 97] = core::array::from_fn(|_| {
                let r = next();
                F32(match r % 50 {
                    0 => 0,
                    1 => r >> 9,                          // subnormal
                    2 => 0x8000_0000 | (r & 0x7FFF_FFFF), // negative
                    3 => 0x7F80_0000,
                    4 => 0x7FC0_0000 | (r >> 12),
                    5 => 0x7F7F_FFFF - (r >> 12),  // near the top
                    6 => (base << 23) | 0x7F_FFFF, // rounds up
                    _ => ((base + (r >> 8) % spread).min(254) << 23) | (r >> 9),
                })
            });
            let mut want = F32::ZERO;
            for &t in &terms[..n] {
                want = want + t;
            }
            let got = sum_left_to_right(&terms[..n]);
            let canon = |x: F32| if x.is_nan() { 0x7FC0_0000 } else { x.0 };
            assert_eq!(canon(got), canon(want), "round {round}");
        }
        // A rounding that carries into the next binade ends the run:
        // (2 - 2^-23) + 1.5·2^-24 = 2; and the largest finite doubled.
        let two = F32(0x4000_0000);
        assert_eq!(
            sum_left_to_right(&[F32(0x3FFF_FFFF), F32(0x33C0_0000)]),
            two
        );
        let max = F32(0x7F7F_FFFF);
        assert_eq!(sum_left_to_right(&[max, max]), F32::INFINITY);
    }

    /// overflow to ∞, and unlike signs, zeros, subnormals, ∞ and NaN.
    #[test]
    fn same_sign_fast_path_is_add() {
        let mut next = crate::testutil::lcg(0x0DD5_1DE5_u64);
        for i in 0..400_000u32 {
            let r = next();
            let s = next();
            let (a, b) = match i % 4 {
                0 => (r, s),
                // Same sign, exponents `d` apart (0..=40), any mantissas.
                1 => {
                    let ea = 1 + (r >> 8) % 200;
                    let eb = (ea + (s >> 8) % 41).min(254);
                    let sign = r & 0x8000_0000;
                    (
                        sign | ea << 23 | (r & 0x7F_FFFF),
                        sign | eb << 23 | (s & 0x7F_FFFF),
                    )
                }
                // Near the top: carries into ∞.
                2 => {
                    let sign = s & 0x8000_0000;
                    (
                        sign | 0x7F00_0000 | (r & 0x7F_FFFF),
                        sign | 0x7F00_0000 | (s >> 9),
                    )
                }
                // Specials and small values against anything.
                _ => {
                    let sp = [
                        0,
                        0x8000_0000,
                        1,
                        0x7F_FFFF,
                        0x7F80_0000,
                        0xFF80_0000,
                        0x7FC0_0000,
                    ];
                    (sp[(r % 7) as usize] | (r & 0x8000_0000), s)
                }
            };
            let (fa, fb) = (F32::from_bits(a), F32::from_bits(b));
            let (got, ok) = add_same_sign_try(fa, fb);
            let want_ok = is_normal_mag(a & ABS_MASK)
                && is_normal_mag(b & ABS_MASK)
                && (a ^ b) & SIGN_MASK == 0;
            assert_eq!(ok, want_ok, "{a:#010x} + {b:#010x}");
            if ok {
                assert_eq!(got.to_bits(), (fa + fb).to_bits(), "{a:#010x} + {b:#010x}");
                assert_eq!(
                    got.to_bits(),
                    add_general(fa, fb).to_bits(),
                    "{a:#010x} + {b:#010x}"
                );
            }
        }
    }
}
