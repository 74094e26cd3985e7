//! Natural logarithm, correctly rounded.
//!
//! Algorithm: `x = m · 2^e` with `m` in `[√2/2, √2)` (so `ln m` never
//! cancels against `e · ln 2`). A table over 92 bins of width 1/128 gives a
//! 17-bit `C ≈ 1/m` and `-ln C` as Q.127 (2 KiB); `r = m·C - 1` is then exact
//! in integers with `|r| < 2^-7`, and `C = 1` exactly in the two bins around
//! 1, so `x` near 1 keeps full relative precision (`r = x - 1` exactly).
//!
//! `ln x = e·ln 2 - ln C + r·Q(r)` with `Q(r) = ln(1+r)/r = 1 - r/2 + r²/3 - …`
//! summed in Q.120. The fast path evaluates `Q` to degree 8 in Q.63
//! (truncation < 2^-66; relative error of the sum below 2^-60, tested against
//! 2^-58); the accurate path to degree 18 in Q.127 (error below 2^-89). The
//! sum is at least 2^-8 in magnitude unless `e = 0` and `C = 1`, where it is
//! `r·Q` itself, so a relative bound holds everywhere. `ln x` is a binary32
//! midpoint for no binary32 `x`, and exact only at `x = 1`.
//!
//! Specials (C99 Annex F): ln(±0) = -inf, ln(x < 0) = NaN, ln(+inf) = +inf,
//! ln(1) = +0, NaN → canonical NaN.
//!
//! Verified: correctly rounded, checked on all 2^32 inputs against CORE-MATH 1.4
//! `logf` on 2026-12-02: 0 mismatches (command in `docs/sections/math.md`).

#![forbid(unsafe_code)]

use super::tables::{LN_FIRST, LN_TABLE, LN2_Q120};
use super::{decode, mul128, round_checked, round_pack};
use crate::F32;

/// Significands above √2 · 2^23 (0xB504F3.33) are halved into `[√2/2, 1)`.
const SQRT2_SIG: u32 = 0x00B5_04F4;

/// `(-1)^k / (k + 1)` as Q.63 for k = 0..=9 (entry 0 unused).
const Q_COEF_63: [i64; 10] = {
    let mut t = [0i64; 10];
    let mut k = 1;
    while k < 10 {
        let v = ((1u64 << 63) / (k as u64 + 1)) as i64;
        t[k] = if k % 2 == 1 { -v } else { v };
        k += 1;
    }
    t
};

/// `(-1)^k / (k + 1)` as Q.127 for k = 0..=18 (entry 0 unused).
const Q_COEF_127: [i128; 19] = {
    let mut t = [0i128; 19];
    let mut k = 1;
    while k < 19 {
        let v = ((1u128 << 127) / (k as u128 + 1)) as i128;
        t[k] = if k % 2 == 1 { -v } else { v };
        k += 1;
    }
    t
};

/// `a · b / 2^63` for Q.63 values, rounded toward -inf.
#[inline(always)]
fn smul63(a: i64, b: i64) -> i64 {
    ((a as i128 * b as i128) >> 63) as i64
}

/// `a · b / 2^127` for Q.127 values (magnitude truncated).
#[inline]
fn smul127(a: i128, b: i128) -> i128 {
    let p = (mul128(a.unsigned_abs(), b.unsigned_abs()) << 1) as i128;
    if (a < 0) != (b < 0) { -p } else { p }
}

/// Reduction of a positive finite nonzero `x` (bits): `(rr, base)` with
/// `ln x = base · 2^-120 + ln(1 + rr · 2^-40)`, `|rr| < 2^33` exact and
/// `base = e·ln 2 - ln C` in Q.120 (error below 76 units).
#[inline]
fn ln_reduce(bits: u32) -> (i64, i128) {
    let (mx, ex) = decode(bits); // x = mx · 2^ex, mx in [2^23, 2^24)
    // m24 = m · 2^24 with m in [√2/2, √2).
    let (m24, e) = if mx >= SQRT2_SIG {
        (mx, ex + 24)
    } else {
        (mx << 1, ex + 23)
    };
    let (c, logc) = LN_TABLE
        .get(((m24 >> 17) - LN_FIRST) as usize)
        .copied()
        .unwrap_or((1 << 16, 0));
    // r = rr · 2^-40 exactly, |rr| < 2^33.
    let rr = m24 as i64 * c as i64 - (1i64 << 40);
    // e · ln 2 from two 64-bit halves (|e| < 2^8, so no i128 × i128).
    let e_ln2 = ((e as i64 as i128 * (LN2_Q120 >> 64)) << 64)
        + e as i64 as i128 * (LN2_Q120 & u64::MAX as i128);
    (rr, e_ln2 + (logc >> 7))
}

/// Fast path: `base + r·Q(r)` in Q.120 with `Q` to degree 8 in Q.63;
/// error below `(|result| >> 58) + 256` units.
#[inline]
fn ln_fast(rr: i64, base: i128) -> i128 {
    let r63 = rr << 23;
    let mut acc = Q_COEF_63[8];
    let mut k = 7;
    while k >= 1 {
        acc = Q_COEF_63[k] + smul63(r63, acc);
        k -= 1;
    }
    let t = smul63(r63, acc); // Q(r) - 1
    base + ((rr as i128 * ((1i128 << 63) + t as i128)) << 17) // + r·Q, Q.120
}

/// `ln x · 2^120` for a positive finite nonzero `x` (bits), by the fast
/// path; error below `(|result| >> 58) + 256` units. Used by `powf`.
pub(super) fn ln_fast_q120(bits: u32) -> i128 {
    let (rr, base) = ln_reduce(bits);
    ln_fast(rr, base)
}

/// Accurate path: `base + r·Q(r)` in Q.120 with `Q` to degree 18 in Q.127;
/// error below `(|result| >> 90) + 256` units.
fn ln_accurate(rr: i64, base: i128) -> i128 {
    let r127 = (rr as i128) << 87;
    let mut acc = Q_COEF_127[18];
    let mut k = 17;
    while k >= 1 {
        acc = Q_COEF_127[k] + smul127(r127, acc);
        k -= 1;
    }
    let t = smul127(r127, acc);
    let q = ((1i128 << 127) as u128).wrapping_add(t as u128); // Q(r), Q1.127
    let rq_mag = mul128((rr.unsigned_abs() as u128) << 94, q) >> 13; // |r·Q|, Q.120
    let rq = if rr < 0 {
        -(rq_mag as i128)
    } else {
        rq_mag as i128
    };
    base + rq
}

/// `ln x · 2^120` for a positive finite nonzero `x` (bits), by the accurate
/// path; error below `(|result| >> 90) + 256` units. Used by `powf`.
pub(super) fn ln_q120(bits: u32) -> i128 {
    let (rr, base) = ln_reduce(bits);
    ln_accurate(rr, base)
}

impl F32 {
    /// Natural logarithm, correctly rounded (ties to even).
    pub fn ln(self) -> F32 {
        let bits = self.to_bits();
        let abs = bits & 0x7FFF_FFFF;
        if abs > 0x7F80_0000 {
            return F32::NAN;
        }
        if abs == 0 {
            return F32::NEG_INFINITY;
        }
        if bits >> 31 == 1 {
            return F32::NAN;
        }
        if abs == 0x7F80_0000 {
            return F32::INFINITY;
        }
        if bits == 0x3F80_0000 {
            return F32::ZERO;
        }
        let (rr, base) = ln_reduce(bits);

        let total = ln_fast(rr, base);
        let mag = total.unsigned_abs();
        if let Some(v) = round_checked(total < 0, mag, -120, (mag >> 58) + 256) {
            return v;
        }

        // Accurate path.
        let total = ln_accurate(rr, base);
        let mag = total.unsigned_abs();
        match round_checked(total < 0, mag, -120, (mag >> 90) + 256) {
            Some(v) => v,
            // Not reached for any binary32 input (checked exhaustively).
            None => round_pack(total < 0, mag, -120),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accurate path (which no binary32 input needs: the fast rounding
    /// test decides all 2^32) rounds to the same result as `ln`.
    #[test]
    fn accurate_path_agrees_with_ln() {
        let mut seed = 0x0F0F_1234_5678_9ABCu64;
        for _ in 0..200_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let bits = (seed as u32 & 0x7FFF_FFFF).clamp(1, 0x7F7F_FFFF);
            if bits == 0x3F80_0000 {
                continue;
            }
            let total = ln_q120(bits);
            let acc = round_pack(total < 0, total.unsigned_abs(), -120);
            assert_eq!(
                acc.to_bits(),
                F32::from_bits(bits).ln().to_bits(),
                "x={bits:#010x}"
            );
        }
    }
}
