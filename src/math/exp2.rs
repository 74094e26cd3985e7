//! `2^x`, correctly rounded; also the back end of `exp` and `powf`.
//!
//! Algorithm: split `x = k + f` exactly (`k` an integer, `f` in `[0, 1)` as
//! Q0.128), then `2^f = 2^(i/64) · e^(h)` with `i` the top six bits of `f`,
//! `g = f - i/64 < 2^-6` and `h = g · ln 2`. The table holds `2^(i/64)` as
//! Q1.127 (1 KiB). The fast path evaluates `e^h - 1` by Horner to degree 5 in
//! Q0.64 (truncation < 2^-48.6) and multiplies by the table value's top 64
//! bits; its error is below 2^15.4 + 5 units of 2^-63 (the table value is
//! below 2), tested against 2^16 + 16. The
//! accurate path does the same in Q0.128 to degree 16 (error below 2^-115).
//! The result `M · 2^(k-63)` is rounded once by `round_pack`, which also
//! handles subnormal results and overflow.
//!
//! Integers `x` give exact powers of two and are returned directly; no other
//! binary32 `x` has a `2^x` that is a binary32 midpoint.
//!
//! Verified: correctly rounded, checked on all 2^32 inputs against CORE-MATH 1.4
//! `exp2f` on 2026-12-02: 0 mismatches (command in `docs/sections/math.md`).

#![forbid(unsafe_code)]

use super::tables::{EXP2_TABLE, LN2_Q128};
use super::{INV_FACT_Q64, INV_FACT_Q128, decode, mul64, mul128, round_checked, round_pack};
use crate::F32;

/// ln 2 as Q0.64 (top half of the Q0.128 constant, truncated).
const LN2_Q64: u64 = (LN2_Q128 >> 64) as u64;
/// Degree of the fast path's Taylor polynomial for `e^h - 1`, `|h| < 2^-6·ln 2`:
/// the truncation is below `1.01 · h^6/6! < 2^-48.6`; times the table value
/// (below 2) that is under 2^15.4 units of 2^-63 in the result.
const FAST_DEGREE: usize = 5;
/// Fast-path error bound in units of the last bit of the Q1.63 result: the
/// truncation (< 2^15.4) plus the fixed-point roundings (below 5 units,
/// formerly tested against 16). A result this close to a rounding boundary
/// of binary32 (2^40 units apart) takes the accurate path — about one input
/// in 2^23.
const FAST_ERR: u128 = (1 << 16) + 16;
/// Accurate-path error bound in units of the last bit of the Q1.127 result.
const SLOW_ERR: u128 = 1 << 12;

/// `2^(k + f)` rounded to binary32, `f` in `[0, 1)` as Q0.128 known to
/// within `f_err_q127` units of 2^-127 in the result (callers whose `f` is
/// exact pass 0).
pub(super) fn pow2_parts(k: i32, f: u128, f_err_q127: u128) -> F32 {
    match pow2_fast(k, f, f_err_q127) {
        Some(r) => r,
        None => pow2_accurate(k, f, f_err_q127),
    }
}

/// Fast path of [`pow2_parts`]: `None` when its rounding test fails.
#[inline]
pub(super) fn pow2_fast(k: i32, f: u128, f_err_q127: u128) -> Option<F32> {
    let f_q64 = (f >> 64) as u64;
    let i = (f_q64 >> 58) as usize & 63;
    let g = f_q64 & ((1u64 << 58) - 1); // < 2^-6 in Q0.64
    let h = mul64(g, LN2_Q64);
    let mut a = INV_FACT_Q64[FAST_DEGREE];
    let mut n = FAST_DEGREE - 1;
    while n >= 2 {
        a = INV_FACT_Q64[n] + mul64(h, a);
        n -= 1;
    }
    let e = h + mul64(mul64(h, h), a); // e^h - 1, Q0.64
    let t = (EXP2_TABLE[i] >> 64) as u64; // 2^(i/64), Q1.63
    let m = t as u128 + mul64(t, e) as u128;
    round_checked(false, m, k - 63, FAST_ERR + (f_err_q127 >> 64) + 1)
}

/// Accurate path of [`pow2_parts`].
fn pow2_accurate(k: i32, f: u128, f_err_q127: u128) -> F32 {
    let i = (f >> 122) as usize & 63;
    let g = f & ((1u128 << 122) - 1);
    let h = mul128(g, LN2_Q128);
    let mut a = INV_FACT_Q128[16];
    let mut n = 15;
    while n >= 2 {
        a = INV_FACT_Q128[n] + mul128(h, a);
        n -= 1;
    }
    let e = h + mul128(mul128(h, h), a);
    let t = EXP2_TABLE[i];
    let m = t.saturating_add(mul128(t, e));
    let err = SLOW_ERR + f_err_q127;
    match round_checked(false, m, k - 127, err) {
        Some(r) => r,
        // Not reached for any binary32 input (checked exhaustively); the
        // nearest value of the approximation is the best remaining answer.
        None => round_pack(false, m, k - 127),
    }
}

impl F32 {
    /// `2^x`, correctly rounded (ties to even); `2^NaN` is the canonical NaN.
    pub fn exp2(self) -> F32 {
        let bits = self.to_bits();
        let abs = bits & 0x7FFF_FFFF;
        let neg = bits >> 31 == 1;
        if abs > 0x7F80_0000 {
            return F32::NAN;
        }
        if !neg && abs >= 0x4300_0000 {
            return F32::INFINITY; // x >= 128 (and +inf)
        }
        if neg && abs > 0x4316_0000 {
            return F32::ZERO; // x < -150 (and -inf): below 2^-150
        }
        if abs < 0x3300_0000 {
            return F32::ONE; // |x| < 2^-25: within 2^-25.5 of 1
        }
        let (mx, ex) = decode(bits); // |x| = mx · 2^ex, ex in [-48, -16]
        let sh = (-ex) as u32;
        let int = (mx as u64 >> sh) as i32;
        let frac = (mx as u128 & ((1u128 << sh) - 1)) << (128 - sh);
        let (k, f) = floor_split!(neg, int, frac);
        if f == 0 {
            return round_pack(false, 1, k);
        }
        pow2_parts(k, f, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accurate path (which no binary32 `exp2`/`exp` input needs) agrees
    /// with the fast path wherever the latter decides.
    #[test]
    fn accurate_path_agrees_with_fast_path() {
        let mut seed = 0xDEAD_BEEF_0BAD_F00Du64;
        for i in 0..200_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let k = (i % 300) - 160;
            let f = (seed as u128) << 64 | (seed.rotate_left(29) as u128);
            if let Some(fast) = pow2_fast(k, f, 0) {
                assert_eq!(
                    pow2_accurate(k, f, 0).to_bits(),
                    fast.to_bits(),
                    "k={k} f={f:#x}"
                );
            }
        }
    }
}
