//! Binary16 scales as exact fixed-point integers, and the `i128` accumulator.
//!
//! A finite binary16 value is `mant · 2^(sh - 24)` with `|mant| < 2^11` and
//! `sh` in `0..=29`:
//!
//! * normal (`e = 1..=30`): `mant = 1024 | frac`, `sh = e - 1`;
//! * subnormal (`e = 0`): `mant = frac`, `sh = 0`.
//!
//! A product of two such values is `ma · mb · 2^(sha + shb - 48)`, an integer
//! multiple of 2^[`QUANTUM_EXP`] = 2^-48. Every exact dot product in this crate
//! accumulates its terms as integers in units of 2^-48 in an `i128` and rounds
//! once with [`F32::from_i128_scaled`]. See `docs/ARITHMETIC.md` for the bound.

#![forbid(unsafe_code)]

use crate::F32;

/// Binary exponent of the accumulator's unit: sums are in units of 2^-48.
pub const QUANTUM_EXP: i32 = -48;

/// Exponent field of binary16.
pub const F16_EXP_MASK: u16 = 0x7C00;
/// Fraction field of binary16.
pub const F16_FRAC_MASK: u16 = 0x03FF;
/// Sign bit of binary16.
pub const F16_SIGN: u16 = 0x8000;

/// True for binary16 ±∞ and NaN.
#[inline(always)]
pub const fn f16_nonfinite(h: u16) -> bool {
    h & F16_EXP_MASK == F16_EXP_MASK
}

/// `(mant, sh)` with `h = mant · 2^(sh - 24)`, sign in `mant`. For ±∞/NaN the
/// result is meaningless; callers test [`f16_nonfinite`] separately.
#[inline(always)]
pub const fn f16_fixed(h: u16) -> (i32, u32) {
    let e = ((h >> 10) & 0x1F) as u32;
    let frac = (h & F16_FRAC_MASK) as i32;
    let (mant, sh) = if e == 0 {
        (frac, 0)
    } else {
        (frac | 0x400, e - 1)
    };
    (if h & F16_SIGN != 0 { -mant } else { mant }, sh)
}

/// `out_i = ExactAcc { sum: sums_i, nonfinite }.finish_scaled(sh)` for a
/// row of `i64` sums (equal lengths): the same bits, the normal results
/// rounded in one branch-free loop that vectorizes
/// ([`crate::float::from_i64_scaled_try`]); a row with any other result
/// (zero aside) or with `nonfinite` is finished again one sum at a time.
#[inline(always)]
pub(crate) fn finish_i64_row(sums: &[i64], sh: u32, nonfinite: bool, out: &mut [F32]) {
    let exp = QUANTUM_EXP + sh as i32;
    let mut ok = !nonfinite;
    for (o, &t) in out.iter_mut().zip(sums) {
        let (r, k) = crate::float::from_i64_scaled_try(t, exp);
        *o = r;
        ok &= k;
    }
    if !ok {
        for (o, &t) in out.iter_mut().zip(sums) {
            let acc = ExactAcc {
                sum: t as i128,
                nonfinite,
            };
            *o = acc.finish_scaled(sh);
        }
    }
}

/// Exact sum in units of 2^-48, plus a flag for a non-finite input scale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExactAcc {
    /// The sum, in units of 2^-48.
    pub sum: i128,
    /// Set when any scale was ±∞ or NaN; the result is then NaN.
    pub nonfinite: bool,
}

impl ExactAcc {
    /// Adds `t · 2^sh` (units of 2^-48).
    #[inline(always)]
    pub fn add_shifted(&mut self, t: i64, sh: u32) {
        self.sum += (t as i128) << sh;
    }

    /// The sum rounded once to binary32 (RNE); NaN if any scale was non-finite.
    #[inline]
    pub fn finish(self) -> F32 {
        if self.nonfinite {
            F32::NAN
        } else {
            F32::from_i128_scaled(self.sum, QUANTUM_EXP)
        }
    }

    /// [`Self::finish`] of `sum · 2^sh` (the sum kept unshifted).
    #[inline]
    pub fn finish_scaled(self, sh: u32) -> F32 {
        if self.nonfinite {
            F32::NAN
        } else {
            F32::from_i128_scaled(self.sum, QUANTUM_EXP + sh as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`finish_i64_row`] equals [`ExactAcc::finish_scaled`] sum by sum:
    /// rows of moderate sums, rows with one sum that rounds to a subnormal
    /// or overflows (the row is redone), zeros, `i64::MIN`, and non-finite
    /// rows (all NaN), at shifts from 0 to 200.
    #[test]
    fn finish_i64_row_equals_finish_scaled() {
        let mut next = crate::testutil::lcg(0xF1_4154_0064);
        for round in 0..3_000u32 {
            let n = 1 + round as usize % 40;
            let sh = next() % 201;
            let mut sums = [0i64; 40];
            for s in &mut sums[..n] {
                let raw = ((next() as u64) << 32 | next() as u64) as i64;
                *s = match next() % 16 {
                    0 => 0,
                    1 if round % 4 == 0 => 1, // 2^(sh − 48): subnormal for small sh
                    2 if round % 7 == 0 => i64::MIN,
                    _ => raw >> (next() % 64),
                };
            }
            let nonfinite = round % 11 == 0;
            let mut got = [F32::ZERO; 40];
            finish_i64_row(&sums[..n], sh, nonfinite, &mut got[..n]);
            for (&s, g) in sums[..n].iter().zip(&got[..n]) {
                let want = ExactAcc {
                    sum: s as i128,
                    nonfinite,
                }
                .finish_scaled(sh);
                assert_eq!(g.to_bits(), want.to_bits(), "sum {s} sh {sh}");
            }
        }
    }
}
