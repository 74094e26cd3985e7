//! `e^x`, correctly rounded.
//!
//! Algorithm: `e^x = 2^(x · log2 e)`. The product `t = x · log2 e` is formed
//! exactly from the 24-bit significand and a 104-bit constant (relative error
//! 2^-104, so `t` is known to 2^-96 absolute for |x| < 104), split into an
//! integer `k` and a Q0.128 fraction `f`, and handed to
//! [`pow2_parts`] (fast path with ~60 bits, a
//! rounding test, accurate path with ~96 bits). `e^x` is never a binary32
//! midpoint for a binary32 `x`, so the accurate path decides every case.
//!
//! Ranges: x > 0x42B17217 (88.7228) overflows to +inf; x < -104 underflows
//! below 2^-150 and rounds to +0; |x| < 2^-25 rounds to 1.
//!
//! Verified: correctly rounded, checked on all 2^32 inputs against CORE-MATH 1.4
//! `expf` on 2026-12-02: 0 mismatches (command in `docs/sections/math.md`).

#![forbid(unsafe_code)]

use super::decode;
use super::exp2::pow2_parts;
use super::tables::{EXP2_TABLE_256, LN2_Q128, LOG2E_Q63, LOG2E_Q103};
use super::{INV_FACT_Q64, mul64};
use crate::F32;

/// Largest binary32 whose exponential is finite: 0x42B17217 = 88.72283.
const EXP_OVERFLOW_BITS: u32 = 0x42B1_7217;
/// Error of `f` from the truncated log2(e), in units of 2^-127 of the result:
/// |t| < 151 times 2^-104 relative is below 2^-96, i.e. 2^31 units; doubled.
const EXP_F_ERR: u128 = 1 << 32;

/// Error bound of [`exp_fast`]'s `m` in units of its last bit (2^-63 of the
/// value): polynomial truncation `< 1.0006 · h^4/24 · 2^64 < 2^25.3`, the
/// reduction (constant rounded to 2^-64 relative, fraction truncated to
/// 2^-64: `|δt| < 2^-57.2`, `< 2^6.3` units), the fixed-point roundings of
/// `h`, the polynomial and the table (`< 8` units); rounded up to 2^26.
const EXP_FAST_ERR: u64 = 1 << 26;

/// `e^x` for `|x|` in `[2^-25, 104]` (`bits` with the sign `neg`) when the
/// result is a normal binary32 and the approximation decides the rounding;
/// `None` sends the caller to the full path. Everything in `u64` words:
/// `t = |x| · log2 e` from a 64-bit constant (`k` integer, `f` Q0.64), then
/// `2^f = 2^(i/256) · e^h`, `h = g · ln 2 < 2^-8.5`, `e^h - 1` to degree 3.
/// About one input in 2^13 is within [`EXP_FAST_ERR`] of a rounding
/// boundary and takes the full path, which decides it.
#[inline(always)]
fn exp_fast(neg: bool, bits: u32) -> Option<F32> {
    let (mx, ex) = decode(bits); // ex in [-48, -17]
    let p = mx as u128 * LOG2E_Q63 as u128; // t = p · 2^(ex - 63)
    let n = (63 - ex) as u32; // 80..=111
    let int = (p >> n) as i32; // < 2^8
    let frac = (p >> (n - 64)) as u64; // Q0.64, truncated
    let (k, f) = floor_split!(neg, int, frac);
    if k < -126 {
        return None; // subnormal or near it
    }
    let i = (f >> 56) as usize;
    let g = f & ((1u64 << 56) - 1); // < 2^-8
    let h = mul64(g, (LN2_Q128 >> 64) as u64);
    let a = INV_FACT_Q64[2] + mul64(h, INV_FACT_Q64[3]);
    let e = h + mul64(mul64(h, h), a); // e^h - 1, Q0.64
    let t = EXP2_TABLE_256[i]; // 2^(i/256), Q1.63
    let m = t.checked_add(mul64(t, e))?; // in [2^63, 2^64)
    let rem = m & ((1u64 << 40) - 1);
    let half = 1u64 << 39;
    if rem.abs_diff(half) <= EXP_FAST_ERR {
        return None;
    }
    let q = (m >> 40) as u32 + (rem > half) as u32; // [2^23, 2^24]
    Some(F32::from_bits((((k + 126) as u32) << 23).wrapping_add(q)))
}

impl F32 {
    /// `e^x`, correctly rounded (ties to even); `e^NaN` is the canonical NaN.
    pub fn exp(self) -> F32 {
        let bits = self.to_bits();
        let abs = bits & 0x7FFF_FFFF;
        let neg = bits >> 31 == 1;
        if abs > 0x7F80_0000 {
            return F32::NAN;
        }
        if !neg && abs > EXP_OVERFLOW_BITS {
            return F32::INFINITY;
        }
        if neg && abs > 0x42D0_0000 {
            return F32::ZERO; // x < -104 (and -inf)
        }
        if abs < 0x3300_0000 {
            return F32::ONE; // |x| < 2^-25
        }
        match exp_fast(neg, bits) {
            Some(r) => r,
            None => exp_full(neg, bits),
        }
    }
}

/// `e^x` for `|x|` in `[2^-25, 104]`: the reduction to ~2^-96 and
/// [`pow2_parts`] (its own fast path, then the accurate one).
#[inline(never)]
fn exp_full(neg: bool, bits: u32) -> F32 {
    let (mx, ex) = decode(bits); // ex in [-48, -17]
    // t = p · 2^-n exactly up to the constant's error; n in [120, 151].
    let p = mx as u128 * LOG2E_Q103;
    let n = (103 - ex) as u32;
    let (int, frac) = if n >= 128 {
        (0i32, p >> (n - 128))
    } else {
        ((p >> n) as i32, p << (128 - n))
    };
    let (k, f) = floor_split!(neg, int, frac);
    pow2_parts(k, f, EXP_F_ERR)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path agrees with the full path wherever it answers, on a
    /// sample of every input it can see (the exhaustive sweep against
    /// CORE-MATH is `tests/float/exp.rs`), and declines about 1 in 2^13 of
    /// the inputs with normal results.
    #[test]
    fn fast_path_equals_full_path() {
        let (mut n, mut declined) = (0u32, 0u32);
        // |x| in [2^-25, 104], both signs: bits 0x3300_0000..=0x42D0_0000.
        for abs in (0x3300_0000u32..=0x42D0_0000).step_by(97) {
            for neg in [false, true] {
                if !neg && abs > EXP_OVERFLOW_BITS {
                    continue;
                }
                let bits = abs | (neg as u32) << 31;
                n += 1;
                match exp_fast(neg, bits) {
                    Some(r) => assert_eq!(r, exp_full(neg, bits), "{bits:#010x}"),
                    // Results below 2^-126 (x < -87.3) always decline.
                    None if abs <= 0x42AE_0000 => declined += 1,
                    None => {}
                }
            }
        }
        assert!(n > 5_000_000 && declined < n / 4096, "{declined} of {n}");
    }
}
